package commands

import (
	"errors"
	"sync"
	"sync/atomic"
	"time"

	"github.com/limitkv/limitkv/acl"
	"github.com/limitkv/limitkv/config"
	"github.com/limitkv/limitkv/engine"
	"github.com/limitkv/limitkv/replication"
	"github.com/limitkv/limitkv/resp"
	"github.com/limitkv/limitkv/tlsconf"
)

// Config is the server's settings (package config: their values, the
// file, CONFIG GET, SET and REWRITE) with what they do to the server:
// the effects NewConfig wires, and the values commands read on hot paths,
// which those effects store.
type Config struct {
	*config.Config
	srv *Server

	// Settings read on hot paths.
	maxClients atomic.Int64
	// protectedMode: see Server.Open.
	protectedMode atomic.Bool
	reqPass       atomic.Pointer[string]
	debug         atomic.Bool
	hz            atomic.Int64
	busyMs        atomic.Int64
	loginKeep     atomic.Int64
	// trackingMaxKeys: tracking-table-max-keys (0: no limit).
	trackingMaxKeys atomic.Int64
	logLevel        atomic.Pointer[string]
	onLevel         func(string)
	maxMemory       atomic.Int64
	// Eviction settings (maxmemory.go): what the engine is told.
	evictPolicy   atomic.Int64 // an engine.Policy
	evictSamples  atomic.Int64
	lfuLogFactor  atomic.Int64
	lfuDecayTime  atomic.Int64
	evictTenacity atomic.Int64
	listpack      [4]atomic.Int64 // hash entries, hash value, zset entries, zset value
	intsetEntries atomic.Int64    // set-max-intset-entries
	hllSparseMax  atomic.Int64    // hll-sparse-max-bytes (hll.go)
	streamNode    [2]atomic.Int64 // stream-node-max-bytes, -entries (streams.go)
	aclLogMax     atomic.Int64
	// users are the config file's "user" lines (Server.LoadUsers).
	usersMu sync.Mutex
	users   []acl.ConfigUser

	// Observability, read by every command (Server.account).
	slowlogSlower    atomic.Int64 // µs; negative: no slow log
	slowlogMaxLen    atomic.Int64
	latencyThreshold atomic.Int64 // ms; 0: no latency monitor
	latencyTracking  atomic.Bool
	percentiles      atomic.Pointer[[]float64]

	// TLS (see tls.go): the configurations in use, and tls-auth-clients.
	tlsSet  atomic.Pointer[tlsconf.Set]
	tlsAuth atomic.Int32

	// clusterReadsWhenDown is cluster-allow-reads-when-down, read by
	// routing (clusternode.go).
	clusterReadsWhenDown atomic.Bool

	// repl holds the replication settings the replication node reads.
	repl *replication.Settings
}

// Indexes into Config.listpack.
const (
	lpHashEntries = iota
	lpHashValue
	lpZSetEntries
	lpZSetValue
)

// NewConfig returns the default configuration.
func NewConfig() *Config {
	c := &Config{repl: replication.NewSettings()}
	effects := c.effects()
	for _, more := range []map[string]config.Effect{c.portEffects(), c.tlsEffects(), c.replicationEffects(), c.clusterEffects()} {
		for name, e := range more {
			effects[name] = e
		}
	}
	c.Config = config.New(effects)
	c.AddDirective(config.Directive{Name: "user", Load: c.addUserLine, Rewrite: c.rewriteUsers})
	return c
}

// effects are what the settings do to the server, but for the
// listeners' (listen.go), TLS's (tls.go) and replication's
// (replication.go). An effect reaching the
// server does nothing until bind, which applies every value again.
func (c *Config) effects() map[string]config.Effect {
	store := func(a *atomic.Int64) config.Effect {
		return config.Effect{Apply: func(_ string, n int64) { a.Store(n) }}
	}
	return map[string]config.Effect{
		"requirepass": {Apply: func(v string, _ int64) {
			c.reqPass.Store(&v)
			if c.srv != nil {
				c.srv.setDefaultPassword(v)
			}
		}},
		"acllog-max-len": store(&c.aclLogMax),
		"acl-pubsub-default": {Apply: func(v string, _ int64) {
			if c.srv != nil {
				c.srv.acl.pubsubAll.Store(v == "allchannels")
			}
		}},
		"maxclients": store(&c.maxClients),
		"timeout": {Apply: func(_ string, n int64) {
			if c.srv != nil {
				c.srv.Net.SetIdleTimeout(time.Duration(n) * time.Second)
			}
		}},
		"loglevel": {Apply: func(v string, _ int64) {
			c.logLevel.Store(&v)
			if c.onLevel != nil {
				c.onLevel(v)
			}
		}},
		"proto-max-bulk-len": {Apply: func(_ string, n int64) {
			if c.srv != nil {
				c.srv.Net.Limits.MaxBulkLen.Store(n)
			}
		}},
		"client-query-buffer-limit": {Apply: func(_ string, n int64) {
			if c.srv != nil {
				c.srv.Net.Limits.QueryBufLimit.Store(n)
			}
		}},
		"client-output-buffer-limit": {Apply: func(v string, _ int64) {
			if c.srv != nil {
				l, _ := resp.ParseOutputLimits(resp.OutputLimits{}, v, config.ParseMemory)
				c.srv.Net.Limits.SetOutputLimits(l)
			}
		}},
		"hz":                   {Apply: func(_ string, n int64) { c.hz.Store(min(max(n, 1), 500)) }},
		"enable-debug-command": {Apply: func(v string, _ int64) { c.debug.Store(v != "no") }},
		"busy-reply-threshold": store(&c.busyMs),
		"maxmemory": {Apply: func(_ string, n int64) {
			c.maxMemory.Store(n)
			if c.srv != nil {
				c.srv.limits.setMemoryLimit(n)
			}
		}},
		"maxmemory-clients": {Apply: func(v string, _ int64) { c.setMaxMemoryClients(v) }},
		"maxmemory-policy": {Apply: func(v string, _ int64) {
			p, _ := engine.ParsePolicy(v)
			c.evictPolicy.Store(int64(p))
			c.applyEviction()
		}},
		"maxmemory-samples":           {Apply: func(_ string, n int64) { c.evictSamples.Store(n); c.applyEviction() }},
		"maxmemory-eviction-tenacity": store(&c.evictTenacity),
		"lfu-log-factor":              {Apply: func(_ string, n int64) { c.lfuLogFactor.Store(n); c.applyEviction() }},
		"lfu-decay-time":              {Apply: func(_ string, n int64) { c.lfuDecayTime.Store(n); c.applyEviction() }},
		"hash-max-listpack-entries":   store(&c.listpack[lpHashEntries]),
		"hash-max-listpack-value":     store(&c.listpack[lpHashValue]),
		"zset-max-listpack-entries":   store(&c.listpack[lpZSetEntries]),
		"zset-max-listpack-value":     store(&c.listpack[lpZSetValue]),
		"set-max-intset-entries":      store(&c.intsetEntries),
		"hll-sparse-max-bytes":        store(&c.hllSparseMax),
		"stream-node-max-bytes":       store(&c.streamNode[0]),
		"stream-node-max-entries":     store(&c.streamNode[1]),
		"slowlog-log-slower-than": {Apply: func(_ string, n int64) {
			c.slowlogSlower.Store(n)
			if c.srv != nil && n >= 0 {
				c.srv.slowlog.Trim(int(c.slowlogMaxLen.Load()))
			}
		}},
		"slowlog-max-len": {Apply: func(_ string, n int64) {
			c.slowlogMaxLen.Store(n)
			if c.srv != nil && c.slowlogSlower.Load() >= 0 {
				c.srv.slowlog.Trim(int(n))
			}
		}},
		"latency-monitor-threshold": store(&c.latencyThreshold),
		"latency-tracking":          {Apply: func(_ string, n int64) { c.latencyTracking.Store(n != 0) }},
		"latency-tracking-info-percentiles": {Apply: func(v string, _ int64) {
			p, _ := config.ParsePercentiles(v)
			c.percentiles.Store(&p)
		}},
		"protected-mode":          {Apply: func(_ string, n int64) { c.protectedMode.Store(n != 0) }},
		"rl-login-keep":           store(&c.loginKeep),
		"tracking-table-max-keys": store(&c.trackingMaxKeys),
		"notify-keyspace-events": {Apply: func(v string, _ int64) {
			if c.srv != nil {
				c.srv.setNotify(parseNotifyClasses(v))
			}
		}},
	}
}

// bind connects the config to the server whose settings it drives.
func (c *Config) bind(s *Server) {
	c.Do(func(config.Values) { c.srv = s })
	c.SetLogger(s.Log)
	c.Reapply()
}

// applyEviction hands the eviction settings to the engine.
func (c *Config) applyEviction() {
	if c.srv == nil {
		return
	}
	c.srv.Eng.SetEviction(engine.Eviction{
		Policy:       engine.Policy(c.evictPolicy.Load()),
		Samples:      int(c.evictSamples.Load()),
		LFULogFactor: int(c.lfuLogFactor.Load()),
		LFUDecayTime: int(c.lfuDecayTime.Load()),
	})
}

// addUserLine keeps a "user <name> <rules>..." line for Server.LoadUsers,
// refusing a second line for the same user as Redis does.
func (c *Config) addUserLine(args []string, path string, line int) error {
	if len(args) == 0 {
		return errors.New("Error in user declaration 'user': Syntax error")
	}
	c.usersMu.Lock()
	defer c.usersMu.Unlock()
	for _, u := range c.users {
		if u.Args[0] == args[0] {
			return errors.New("Error in user declaration '" + args[0] + "': " + acl.ErrDupUser.Error())
		}
	}
	c.users = append(c.users, acl.ConfigUser{Args: args, File: path, Line: line})
	return nil
}

// rewriteUsers is the user lines CONFIG REWRITE writes: the users, unless
// they live in an aclfile, as CONFIG REWRITE does in Redis.
func (c *Config) rewriteUsers() []string {
	if c.srv == nil || c.Get("aclfile") != "" {
		return nil
	}
	return c.srv.aclLines()
}

// userLines returns the config file's user lines.
func (c *Config) userLines() []acl.ConfigUser {
	c.usersMu.Lock()
	defer c.usersMu.Unlock()
	return c.users
}

func (c *Config) debugEnabled() bool { return c.debug.Load() }

// OnLogLevel registers fn to follow the loglevel setting; it is called at
// once with the current level.
func (c *Config) OnLogLevel(fn func(level string)) {
	c.Do(func(config.Values) {
		c.onLevel = fn
		fn(*c.logLevel.Load())
	})
}

// Hz returns the active expiry frequency.
func (c *Config) Hz() int { return int(c.hz.Load()) }

// LogLevel returns the configured level name.
func (c *Config) LogLevel() string { return *c.logLevel.Load() }

// LoginKeep returns RL.LOGIN's default KEEP.
func (c *Config) LoginKeep() int64 { return c.loginKeep.Load() }

// BusyThreshold returns how long a script runs before others get BUSY.
func (c *Config) BusyThreshold() time.Duration {
	return time.Duration(c.busyMs.Load()) * time.Millisecond
}

// ListpackLimits returns the compact-encoding limits for hashes and zsets.
func (c *Config) ListpackLimits() (hashEntries, hashValue, zsetEntries, zsetValue int) {
	return int(c.listpack[0].Load()), int(c.listpack[1].Load()), int(c.listpack[2].Load()), int(c.listpack[3].Load())
}

// StreamNodeLimits returns the bounds of a stream node as configured now.
func (c *Config) StreamNodeLimits() engine.StreamNodeLimits {
	return engine.StreamNodeLimits{MaxBytes: c.streamNode[0].Load(), MaxEntries: c.streamNode[1].Load()}
}

// SetLimits returns the intset encoding's limit for sets.
func (c *Config) SetLimits() engine.SetLimits {
	return engine.SetLimits{IntsetEntries: int(min(c.intsetEntries.Load(), 1<<30))}
}
