// Command limitkv runs the limitkv server: a Redis-protocol server with
// native rate-limit commands.
//
// Flags take Redis's configuration names (--port 6380, --requirepass s);
// --config reads a redis.conf-style file first, and flags given on the
// command line win over it.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"limitkv/commands"
	"limitkv/engine"
)

func main() {
	os.Exit(run(os.Args[1:], os.Stderr))
}

func run(args []string, stderr io.Writer) int {
	cfg := commands.NewConfig()
	fs := flag.NewFlagSet("limitkv", flag.ContinueOnError)
	fs.SetOutput(stderr)
	configFile := fs.String("config", "", "read settings from this redis.conf-style file first")
	version := fs.Bool("version", false, "print the version and exit")
	for _, p := range cfg.Params() {
		fs.String(p.Name, p.Default, p.Help)
	}
	fs.Usage = func() {
		fmt.Fprintf(stderr, "Usage: limitkv [--config FILE] [--<setting> value ...]\n\n"+
			"A Redis-protocol server with native rate-limit commands.\n"+
			"Settings use Redis's names; CONFIG GET/SET see the same ones.\n\n")
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		return 2
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(stderr, "limitkv: unexpected argument %q (settings are flags: --port 6380)\n", fs.Arg(0))
		return 2
	}
	if *version {
		fmt.Fprintf(stderr, "limitkv %s (Redis %s compatible)\n", commands.Version, commands.RedisVersion)
		return 0
	}
	if *configFile != "" {
		if err := cfg.LoadFile(*configFile); err != nil {
			fmt.Fprintf(stderr, "limitkv: %v\n", err)
			return 1
		}
	}
	var flagErr error
	fs.Visit(func(f *flag.Flag) {
		if f.Name == "config" || f.Name == "version" || flagErr != nil {
			return
		}
		if err := cfg.Set([][2]string{{f.Name, f.Value.String()}}, true); err != nil {
			flagErr = fmt.Errorf("--%s: %v", f.Name, err)
		}
	})
	if flagErr != nil {
		fmt.Fprintf(stderr, "limitkv: %v\n", flagErr)
		return 2
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
	eng := engine.New(engine.Config{Databases: databases})
	srv := commands.New(eng, cfg, log)

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var bg sync.WaitGroup
	bg.Add(1)
	go func() {
		defer bg.Done()
		srv.Run(ctx)
	}()

	listeners, err := listen(cfg.Get("bind"), cfg.Get("port"), log)
	if err != nil {
		log.Error("cannot listen", "err", err)
		return 1
	}
	for _, ln := range listeners {
		go func(ln net.Listener) {
			if err := srv.Net.Serve(ln); err != nil {
				log.Error("serve", "addr", ln.Addr().String(), "err", err)
			}
		}(ln)
	}

	stop := make(chan string, 1)
	srv.Hooks.Shutdown = func(save *bool) error {
		select {
		case stop <- "SHUTDOWN command":
		default:
		}
		return nil
	}
	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, syscall.SIGINT, syscall.SIGTERM)
	var addrs []string
	for _, ln := range listeners {
		addrs = append(addrs, ln.Addr().String())
	}
	log.Info("limitkv ready", "version", commands.Version, "addr", strings.Join(addrs, " "), "pid", os.Getpid())

	var why string
	select {
	case s := <-sigs:
		why = s.String()
	case why = <-stop:
	}
	log.Info("shutting down", "reason", why)
	shutCtx, shutCancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer shutCancel()
	if err := srv.Net.Shutdown(shutCtx); err != nil {
		log.Warn("connections did not close in time", "err", err)
	}
	cancel()
	bg.Wait()
	log.Info("limitkv stopped")
	return 0
}

// listen opens a listener for every address in bind ("127.0.0.1 ::1"). An
// address written with a leading '-' is optional, as in Redis: failing to
// bind it is not an error.
func listen(bind, port string, log *slog.Logger) ([]net.Listener, error) {
	var out []net.Listener
	for _, addr := range strings.Fields(bind) {
		optional := strings.HasPrefix(addr, "-")
		addr = strings.TrimPrefix(addr, "-")
		if addr == "*" {
			addr = ""
		}
		ln, err := net.Listen("tcp", net.JoinHostPort(addr, port))
		if err != nil {
			if optional {
				log.Warn("optional bind address unavailable", "addr", addr, "err", err)
				continue
			}
			for _, l := range out {
				l.Close()
			}
			return nil, err
		}
		out = append(out, ln)
	}
	if len(out) == 0 {
		return nil, errors.New("no address to listen on (bind " + bind + ")")
	}
	return out, nil
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
