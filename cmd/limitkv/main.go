// Command limitkv runs the limitkv server: a Redis-protocol server with
// native rate-limit commands.
//
// Flags take Redis's configuration names (--port 6380, --requirepass s);
// a redis.conf-style file, named first (limitkv /etc/limitkv.conf) or by
// --config, is read first, and flags given on the command line win over
// it.
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/limitkv/limitkv/commands"
	"github.com/limitkv/limitkv/engine"
	"github.com/limitkv/limitkv/metrics"
	"github.com/limitkv/limitkv/persist"
)

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

// workerFlag, as the only argument, makes the binary a snapshot worker:
// the process that owns the Pebble database and writes the snapshots the
// server sends it (persist/worker.go). It is not a setting.
const workerFlag = "--snapshot-worker"

func run(args []string, stdout, stderr io.Writer) int {
	if len(args) == 1 && args[0] == workerFlag {
		return persist.ServeWorker(os.Stdin, os.Stdout, nil)
	}
	cfg := commands.NewConfig()
	// As redis-server's: only the first argument asks for the version or
	// the help.
	if len(args) > 0 {
		switch args[0] {
		case "-v", "--version", "-version":
			fmt.Fprintf(stdout, "limitkv %s (Redis %s compatible)\n", commands.Version, commands.RedisVersion)
			return 0
		case "-h", "--help", "-help":
			cfg.WriteHelp(stdout)
			return 0
		}
	}
	cmdline, err := cfg.ParseArgs(args, stderr)
	if err != nil {
		return 2
	}
	if cmdline.File != "" {
		if err := cfg.LoadFile(cmdline.File); err != nil {
			fmt.Fprintf(stderr, "limitkv: %v\n", err)
			return 1
		}
	}
	if err := cfg.LoadEnv(os.LookupEnv); err != nil {
		fmt.Fprintf(stderr, "limitkv: %v\n", err)
		return 2
	}
	for _, kv := range cmdline.Sets {
		if err := cfg.Set([][2]string{kv}, true); err != nil {
			fmt.Fprintf(stderr, "limitkv: --%s: %v\n", kv[0], err)
			return 2
		}
	}

	logOut := stderr
	if path := cfg.Get("logfile"); path != "" {
		f, err := os.OpenFile(path, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
		if err != nil {
			fmt.Fprintf(stderr, "limitkv: %v\n", err)
			return 1
		}
		defer f.Close()
		logOut = f
	}
	level := new(slog.LevelVar)
	cfg.OnLogLevel(func(name string) { level.Set(slogLevel(name)) })
	log := slog.New(slog.NewTextHandler(logOut, &slog.HandlerOptions{Level: level}))

	databases, _ := strconv.Atoi(cfg.Get("databases"))
	// A cluster node shards and indexes its keys by hash slot.
	eng := engine.New(engine.Config{Databases: databases, Slots: cfg.Get("cluster-enabled") == "yes"})
	srv := commands.New(eng, cfg, log)
	if err := srv.LoadUsers(); err != nil {
		log.Error("cannot load the ACL users", "err", err)
		return 1
	}

	var store *persist.Store
	if cfg.Get("persistence") == "yes" {
		var err error
		store, err = openStore(srv, cfg, log)
		if err != nil {
			log.Error("cannot use the data directory", "dir", cfg.Get("dir"), "err", err)
			return 1
		}
		wireStore(srv, store, cfg)
		if _, _, replica := cfg.ReplicaOf(); replica {
			// A replica restarted from its snapshot asks its master to
			// continue from there. A master does not: its snapshot may
			// lag what its replicas received before it stopped.
			if id, off := store.Position(); id != "" {
				srv.Repl.Restore(id, off)
				log.Info("replication position restored from the snapshot", "replid", id, "offset", off)
			}
		}
	} else {
		log.Warn("persistence is off: the keyspace lives in memory only")
	}

	// The policies file, after the snapshot: its definitions replace
	// those of the same names, the snapshot's others stay. One bad line
	// and the server does not start.
	if path := cfg.Get("rl-policies"); path != "" {
		n, err := srv.LoadPolicyFile(path)
		if err != nil {
			log.Error("cannot load the rate-limit policies (rl-policies)", "err", err)
			if logOut != stderr {
				fmt.Fprintf(stderr, "limitkv: rl-policies: %v\n", err)
			}
			if store != nil {
				store.Close()
			}
			return 1
		}
		log.Info("rate-limit policies loaded", "file", path, "policies", n)
	}

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var bg sync.WaitGroup
	bg.Add(1)
	go func() {
		defer bg.Done()
		srv.Run(ctx)
	}()
	bg.Add(1)
	go func() {
		defer bg.Done()
		srv.Repl.Run(ctx)
	}()
	if store != nil {
		// Not waited for at shutdown: a snapshot it runs then is waited for
		// by the final one, within that one's bound.
		go store.Run(ctx, func() time.Duration { return time.Duration(cfg.Int("snapshot-interval")) })
	}

	// Port 0 means no plain listener, as in Redis (a TLS-only server).
	// The plain listeners serve once the server is ready; TLS ones at once.
	plain := &listenerSet{kind: "plain", serve: srv.Net.Serve, log: log, bind: cfg.Get("bind")}
	tlsLn := &listenerSet{kind: "TLS", log: log, bind: cfg.Get("bind"), serving: true,
		serve: func(ln net.Listener) error { return srv.Net.ServeTLS(ln, srv.Cfg.TLSServerConfig) }}
	// Before any client can CONFIG SET.
	srv.Hooks.ListenTLS = tlsLn.listen
	srv.Hooks.Listen = plain.listen
	srv.Hooks.Bind = func(bind string) error {
		if err := rebindAll(plain, tlsLn, bind); err != nil {
			return err
		}
		// Once CONFIG SET is done: the warning reads the configuration,
		// which CONFIG SET holds meanwhile.
		go warnIfOpen(append(plain.addrs(), tlsLn.addrs()...), cfg, srv.DefaultUserNoPass(), log)
		return nil
	}
	err = cfg.ConfigureTLS()
	if err != nil {
		log.Error("Failed to configure TLS. Check logs for more info.", "err", err)
	}
	if err == nil && cfg.Int("port") != 0 {
		if err = plain.listen(int(cfg.Int("port"))); err != nil {
			log.Error("cannot listen", "err", err)
		}
	}
	if err == nil && cfg.Int("tls-port") != 0 {
		if err = tlsLn.listen(int(cfg.Int("tls-port"))); err != nil {
			log.Error("Failed listening on port "+cfg.Get("tls-port")+" (TLS), aborting.", "err", err)
		}
	}
	if err == nil && len(plain.addrs()) == 0 && len(tlsLn.addrs()) == 0 {
		err = errors.New("no listener")
		log.Error("Configured to not listen anywhere, exiting.")
	}
	if err != nil {
		plain.close()
		tlsLn.close()
		if store != nil {
			store.Close()
		}
		return 1
	}
	warnIfOpen(append(plain.addrs(), tlsLn.addrs()...), cfg, srv.DefaultUserNoPass(), log)
	// The cluster bus, once the keyspace is loaded and TLS configured:
	// nodes.conf names the node, and a damaged one stops start-up rather
	// than making a stranger of it.
	if err := srv.StartCluster(); err != nil {
		log.Error("cannot start the cluster", "err", err)
		if logOut != stderr {
			fmt.Fprintf(stderr, "limitkv: %v\n", err)
		}
		plain.close()
		tlsLn.close()
		if store != nil {
			store.Close()
		}
		return 1
	}
	defer srv.StopCluster()
	if addr := cfg.Get("metrics-addr"); addr != "" {
		ep, err := serveMetrics(addr, srv, log)
		if err != nil {
			log.Error("cannot listen for metrics", "addr", addr, "err", err)
			plain.close()
			tlsLn.close()
			if store != nil {
				store.Close()
			}
			return 1
		}
		defer func() {
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
			defer cancel()
			ep.Shutdown(ctx)
		}()
	}
	plain.start()

	// SHUTDOWN saves first (unless NOSAVE) and refuses to stop when that
	// fails (unless FORCE), as Redis does; the final snapshot after the
	// connections have drained then catches what ran meanwhile.
	stop := make(chan bool, 1) // true: take a final snapshot
	srv.Hooks.Shutdown = func(save *bool, force bool) error {
		wantSave := store != nil && (save == nil || *save)
		if store != nil && !wantSave {
			store.Seal() // no periodic snapshot between here and the exit
		}
		if wantSave {
			// While a full sync replaces the keyspace nothing is saved, as
			// Redis does not save while it loads: the data directory keeps
			// the dataset from before the sync.
			if err := store.Snapshot(); err != nil && !force && !errors.Is(err, persist.ErrRebuilding) {
				log.Error("SHUTDOWN refused: the snapshot failed", "err", err)
				return err
			}
		}
		select {
		case stop <- wantSave:
		default:
		}
		return nil
	}
	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, syscall.SIGINT, syscall.SIGTERM)
	var addrs []string
	for _, a := range plain.addrs() {
		addrs = append(addrs, a.String())
	}
	for _, a := range tlsLn.addrs() {
		addrs = append(addrs, a.String()+" (TLS)")
	}
	log.Info("limitkv ready", "version", commands.Version, "addr", strings.Join(addrs, " "), "pid", os.Getpid())
	if host, port, ok := cfg.ReplicaOf(); ok {
		srv.Repl.ReplicaOf(host, port)
	}

	why, save := "", store != nil
	select {
	case sig := <-sigs:
		why = sig.String()
	case save = <-stop:
		why = "SHUTDOWN command"
	}
	log.Info("shutting down", "reason", why)
	// A second signal ends the drain and the final snapshot at once.
	hurry, hurried := context.WithCancel(context.Background())
	defer hurried()
	go func() {
		select {
		case <-sigs:
			log.Warn("second signal: stopping without waiting")
			hurried()
		case <-hurry.Done():
		}
	}()
	shutCtx, shutCancel := context.WithTimeout(hurry, 10*time.Second)
	defer shutCancel()
	if err := srv.Net.Shutdown(shutCtx); err != nil {
		log.Warn("connections did not close in time", "err", err)
	}
	cancel()
	bg.Wait()
	code := 0
	if store != nil {
		if save && !finalSnapshot(hurry, store, log) {
			code = 1
		}
		if err := store.Close(); err != nil {
			log.Warn("closing the snapshot database", "err", err)
		}
	}
	log.Info("limitkv stopped", "exit_code", code)
	return code
}

// finalSnapshotBound is the time SIGTERM, SIGINT or SHUTDOWN give the
// final snapshot: a supervisor expects the process to end within seconds.
const finalSnapshotBound = 10 * time.Second

// finalSnapshot saves before exit, within finalSnapshotBound. If it
// cannot, it says loudly what is lost, and the process exits non-zero.
func finalSnapshot(ctx context.Context, store *persist.Store, log *slog.Logger) bool {
	ctx, cancel := context.WithTimeout(ctx, finalSnapshotBound)
	defer cancel()
	err := store.SnapshotContext(ctx)
	if err == nil {
		return true
	}
	if errors.Is(err, persist.ErrRebuilding) {
		log.Warn("final snapshot skipped", "reason", err)
		return true
	}
	last := "never"
	if t := store.Stats().LastSuccess; !t.IsZero() {
		last = t.Format(time.RFC3339)
	}
	log.Error("final snapshot failed: the changes since the last successful snapshot are lost",
		"last_successful_snapshot", last, "err", err)
	return false
}

// openStore opens the data directory and loads its snapshot.
func openStore(srv *commands.Server, cfg *commands.Config, log *slog.Logger) (*persist.Store, error) {
	eng := srv.Eng
	// /proc/self/exe is this very binary even when the file was replaced
	// or deleted since (an upgrade): a worker always speaks the server's
	// protocol.
	exe := "/proc/self/exe"
	if _, err := os.Stat(exe); err != nil {
		if exe, err = os.Executable(); err != nil {
			return nil, fmt.Errorf("finding this binary to start the snapshot worker: %w", err)
		}
	}
	store, err := persist.Open(eng, persist.Options{
		Position: srv.Repl.Position,
		Dir:      cfg.Get("dir"),
		Log:      log,
		Worker:   &persist.WorkerCommand{Path: exe, Args: []string{workerFlag}},
		Limits: func() engine.Limits {
			he, hv, ze, zv := cfg.ListpackLimits()
			return engine.Limits{
				Hash: engine.HashLimits{Entries: he, Value: hv},
				ZSet: engine.ZSetLimits{Entries: ze, Value: zv},
				Set:  cfg.SetLimits(),
			}
		},
		Functions: srv.FunctionsPayload,
		Policies:  srv.PoliciesPayload,
	})
	if err != nil {
		return nil, err
	}
	start := time.Now()
	n, err := store.Load(eng.Now())
	if err != nil {
		store.Close()
		return nil, err
	}
	// The function libraries are loaded before the server serves, as
	// Redis loads them from its RDB file.
	if libs := store.Functions(); libs != nil {
		if err := srv.RestoreFunctions(libs); err != nil {
			store.Close()
			return nil, fmt.Errorf("loading the function libraries of the snapshot: %w", err)
		}
	}
	if pols := store.Policies(); pols != nil {
		if err := srv.RestorePolicies(pols); err != nil {
			store.Close()
			return nil, fmt.Errorf("loading the rate-limit policies of the snapshot: %w", err)
		}
	}
	log.Info("snapshot loaded", "dir", cfg.Get("dir"), "keys", n, "took", time.Since(start).Round(time.Millisecond))
	return store, nil
}

// wireStore connects SAVE, BGSAVE, LASTSAVE and INFO to the store.
func wireStore(srv *commands.Server, store *persist.Store, cfg *commands.Config) {
	srv.Hooks.Save = store.Snapshot
	srv.Hooks.Sync = store.Sync
	srv.Hooks.Seal = store.Seal
	var scheduled atomic.Bool
	srv.Hooks.BgSave = func(schedule bool) (string, error) {
		if store.Busy() {
			if !schedule {
				return "", errors.New("Background save already in progress")
			}
			if !scheduled.Swap(true) {
				go func() {
					store.Snapshot() // waits for the running one, then runs
					scheduled.Store(false)
				}()
			}
			return "Background saving scheduled", nil
		}
		go store.Snapshot()
		return "Background saving started", nil
	}
	srv.Hooks.LastSave = func() int64 { return store.Stats().LastSuccess.Unix() }
	store.OnPause(func(d time.Duration) { srv.LatencyEvent("snapshot", d) })
	srv.Hooks.Persistence = func() commands.PersistenceInfo {
		st := store.Stats()
		return commands.PersistenceInfo{
			LastSave: st.LastSuccess.Unix(), LastOK: st.LastOK, InProgress: st.InProgress,
			LastDuration: st.LastDuration.Seconds(), LastKeys: st.LastKeys, LastBytes: st.LastBytes,
			Errors: st.Errors, LastError: st.LastError, Snapshots: st.Snapshots,
			Loaded: st.Loaded, LoadSeconds: st.LoadDuration.Seconds(),
			Interval:  cfg.Get("snapshot-interval"),
			LastPause: st.LastPause.Seconds(), SavedChanges: st.SavedChanges,
		}
	}
}

// serveMetrics starts the Prometheus endpoint (--metrics-addr) on its own
// listener.
func serveMetrics(addr string, srv *commands.Server, log *slog.Logger) (*metrics.Endpoint, error) {
	ep, err := metrics.Listen(addr, srv, log)
	if err != nil {
		return nil, err
	}
	go func() {
		if err := ep.Serve(); err != nil {
			log.Error("metrics endpoint", "err", err)
		}
	}()
	log.Info("serving metrics", "url", "http://"+ep.Addr().String()+"/metrics")
	return ep, nil
}

// warnIfOpen says at start-up what a server reachable from other machines
// without a password for the default user (nopass) will do: refuse them
// (protected mode, as Redis does with no warning at all) or, with
// protected mode off, serve anyone.
func warnIfOpen(addrs []net.Addr, cfg *commands.Config, nopass bool, log *slog.Logger) {
	if !nopass {
		return
	}
	var exposed []string
	for _, addr := range addrs {
		if a, ok := addr.(*net.TCPAddr); ok && !a.IP.IsLoopback() {
			exposed = append(exposed, a.String())
		}
	}
	if len(exposed) == 0 {
		return
	}
	if cfg.Get("protected-mode") == "yes" {
		log.Warn("protected mode: no password is set, so clients from other machines get DENIED; "+
			"set requirepass (LIMITKV_REQUIREPASS in Docker) or, on a trusted network, protected-mode no",
			"addr", strings.Join(exposed, " "))
		return
	}
	log.Warn("no password and protected mode off: anyone who can reach these addresses can read and change every key",
		"addr", strings.Join(exposed, " "))
}

// slogLevel maps Redis's log levels onto slog's.
func slogLevel(name string) slog.Level {
	switch name {
	case "debug":
		return slog.LevelDebug
	case "verbose":
		return slog.LevelDebug + 2
	case "warning":
		return slog.LevelWarn
	case "nothing":
		return slog.LevelError + 100
	}
	return slog.LevelInfo
}
