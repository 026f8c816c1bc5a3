package commands

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/limitkv/limitkv/acl"
	"github.com/limitkv/limitkv/engine"
	"github.com/limitkv/limitkv/replication"
	"github.com/limitkv/limitkv/resp"
	"github.com/limitkv/limitkv/tlsconf"
)

// Config holds the server's settings. One table of parameters drives the
// command-line flags, the config file, CONFIG GET and CONFIG SET.
type Config struct {
	mu     sync.Mutex
	params []*param
	byName map[string]*param
	values map[*param]string
	srv    *Server
	file   string
	// loaded: the parameters a start-up line (file, environment, flag)
	// set already, for those whose lines add up (param.lines).
	loaded map[*param]bool

	// Settings read on hot paths.
	maxClients atomic.Int64
	// protectedMode: see Server.Open.
	protectedMode atomic.Bool
	reqPass       atomic.Pointer[string]
	debug         atomic.Bool
	hz            atomic.Int64
	busyMs        atomic.Int64
	loginKeep     atomic.Int64
	logLevel      atomic.Pointer[string]
	onLevel       func(string)
	maxMemory     atomic.Int64
	// Eviction settings (maxmemory.go): what the engine is told.
	evictPolicy   atomic.Int64 // an engine.Policy
	evictSamples  atomic.Int64
	lfuLogFactor  atomic.Int64
	lfuDecayTime  atomic.Int64
	evictTenacity atomic.Int64
	listpack      [4]atomic.Int64 // hash entries, hash value, zset entries, zset value
	intsetEntries atomic.Int64    // set-max-intset-entries
	hllSparseMax  atomic.Int64    // hll-sparse-max-bytes (hll.go)
	aclLogMax     atomic.Int64
	// users are the config file's "user" lines (Server.LoadUsers).
	users []userLine

	// Observability, read by every command (Server.account).
	slowlogSlower    atomic.Int64 // µs; negative: no slow log
	slowlogMaxLen    atomic.Int64
	latencyThreshold atomic.Int64 // ms; 0: no latency monitor
	latencyTracking  atomic.Bool
	percentiles      atomic.Pointer[[]float64]

	// TLS (see tls.go): the configurations in use, and tls-auth-clients.
	tlsSet  atomic.Pointer[tlsconf.Set]
	tlsAuth atomic.Int32

	// repl holds the replication settings the replication node reads.
	repl *replication.Settings
}

type paramKind int

const (
	pString paramKind = iota
	pBool
	pInt
	pMemory
	pEnum
	pDuration
)

type param struct {
	name      string
	alias     string
	kind      paramKind
	def       string
	min, max  int64
	enum      []string
	immutable bool
	protected bool // Redis refuses CONFIG SET for these ("protected config")
	help      string
	// apply makes a validated value take effect; it runs with the config
	// lock held.
	apply func(c *Config, v string, n int64)
	// merge, if set, validates a value against the current one and
	// returns the new one, for settings that change only what the value
	// names (client-output-buffer-limit).
	merge func(cur, v string) (string, error)
	// reconf, if set, makes the new values take effect and may fail (TLS:
	// files to load, a port to listen on). See reconfigurer.
	reconf *reconfigurer
	// volatile: the value names a file, so setting it again to the same
	// value runs reconf, which reads the file again (a renewed certificate).
	volatile bool
	// lines: at start-up the first line replaces the default and each
	// further one adds to it, as Redis's save lines do; "" empties it.
	// CONFIG SET replaces the whole value.
	lines bool
}

// reconfigurer is one of Redis's apply functions: it runs once per CONFIG
// SET, after every value is set, if a parameter that names it changed;
// when it fails, every value goes back and the reconfigurers that ran
// before it run again to undo theirs. It runs with the config lock held,
// and not at start-up, where the caller applies the whole configuration
// (ConfigureTLS). It returns the reason CONFIG SET's error gives.
type reconfigurer struct {
	apply func(c *Config) error
}

// Indexes into Config.listpack.
const (
	lpHashEntries = iota
	lpHashValue
	lpZSetEntries
	lpZSetValue
)

func configParams() []*param {
	return []*param{
		{name: "bind", def: "127.0.0.1", merge: mergeBind, reconf: reconfBind,
			help: "addresses to listen on, separated by spaces (* for all; empty: none); CONFIG SET moves the listeners"},
		{name: "port", kind: pInt, def: "6379", min: 0, max: 65535, reconf: reconfPort,
			help: "TCP port (0: none); CONFIG SET opens the new one and closes the old"},
		{name: "dir", def: "./limitkv-data", protected: true, help: "directory of the snapshot database"},
		{name: "databases", kind: pInt, def: "16", min: 1, max: 1 << 16, immutable: true, help: "number of databases"},
		{name: "requirepass", def: "", help: "password of the default user, which clients must AUTH with (empty: none)",
			apply: func(c *Config, v string, _ int64) {
				c.reqPass.Store(&v)
				if c.srv != nil {
					c.srv.setDefaultPassword(v)
				}
			}},
		{name: "aclfile", def: "", immutable: true, help: "file of ACL users, read at start-up and by ACL LOAD, written by ACL SAVE (empty: users come from the config file's user lines)"},
		{name: "acllog-max-len", kind: pInt, def: "128", min: 0, max: 1<<63 - 1, help: "entries ACL LOG keeps",
			apply: func(c *Config, _ string, n int64) { c.aclLogMax.Store(n) }},
		{name: "acl-pubsub-default", kind: pEnum, def: "resetchannels", enum: []string{"allchannels", "resetchannels"},
			help: "the channels new ACL users may use until rules say otherwise",
			apply: func(c *Config, v string, _ int64) {
				if c.srv != nil {
					c.srv.acl.pubsubAll.Store(v == "allchannels")
				}
			}},
		{name: "maxclients", kind: pInt, def: "10000", min: 1, max: 4294967295, help: "maximum connected clients",
			apply: func(c *Config, _ string, n int64) { c.maxClients.Store(n) }},
		{name: "timeout", kind: pInt, def: "0", min: 0, max: 2147483647, help: "close clients idle this many seconds (0: never)",
			apply: func(c *Config, _ string, n int64) {
				if c.srv != nil {
					c.srv.Net.SetIdleTimeout(time.Duration(n) * time.Second)
				}
			}},
		{name: "loglevel", kind: pEnum, def: "notice", enum: []string{"debug", "verbose", "notice", "warning", "nothing"},
			help: "log level", apply: func(c *Config, v string, _ int64) {
				c.logLevel.Store(&v)
				if c.onLevel != nil {
					c.onLevel(v)
				}
			}},
		{name: "logfile", def: "", immutable: true, help: "log file (empty: standard error)"},
		{name: "proto-max-bulk-len", kind: pMemory, def: "536870912", min: 1 << 20, max: 1<<63 - 1,
			help: "largest bulk string a request may carry", apply: func(c *Config, _ string, n int64) {
				if c.srv != nil {
					c.srv.Net.Limits.MaxBulkLen.Store(n)
				}
			}},
		{name: "client-query-buffer-limit", kind: pMemory, def: "1073741824", min: 1 << 20, max: 1<<63 - 1,
			help: "largest request a client may send", apply: func(c *Config, _ string, n int64) {
				if c.srv != nil {
					c.srv.Net.Limits.QueryBufLimit.Store(n)
				}
			}},
		{name: "client-output-buffer-limit", def: resp.DefaultOutputLimits.String(),
			help:  "close clients whose unsent output passes these limits: <class> <hard> <soft> <soft-seconds>, for the classes normal, replica and pubsub",
			merge: mergeOutputLimits, apply: func(c *Config, v string, _ int64) {
				if c.srv != nil {
					l, _ := resp.ParseOutputLimits(resp.OutputLimits{}, v, parseMemory)
					c.srv.Net.Limits.SetOutputLimits(l)
				}
			}},
		{name: "hz", kind: pInt, def: "10", min: 0, max: 2147483647, help: "active expiry ticks per second (1-500)",
			apply: func(c *Config, _ string, n int64) { c.hz.Store(min(max(n, 1), 500)) }},
		{name: "enable-debug-command", kind: pEnum, def: "no", enum: []string{"no", "yes", "local"}, immutable: true,
			help: "allow the DEBUG command (tests only)", apply: func(c *Config, v string, _ int64) { c.debug.Store(v != "no") }},
		{name: "busy-reply-threshold", alias: "lua-time-limit", kind: pInt, def: "5000", min: 0, max: 1<<63 - 1,
			help: "ms a script may run before other clients get BUSY", apply: func(c *Config, _ string, n int64) { c.busyMs.Store(n) }},
		{name: "maxmemory", kind: pMemory, def: "0", min: 0, max: 1<<63 - 1, help: "memory limit (0: none); see maxmemory-policy",
			apply: func(c *Config, _ string, n int64) {
				c.maxMemory.Store(n)
				if c.srv != nil {
					c.srv.limits.setMemoryLimit(n)
				}
			}},
		{name: "maxmemory-clients", def: "0", merge: mergeMaxMemoryClients,
			help:  "close the clients using the most memory while all clients together use this much: bytes, or a percentage of maxmemory (0: never)",
			apply: func(c *Config, v string, _ int64) { c.setMaxMemoryClients(v) }},
		{name: "maxmemory-policy", kind: pEnum, def: "noeviction",
			enum: []string{"volatile-lru", "volatile-lfu", "volatile-random", "volatile-ttl", "allkeys-lru", "allkeys-lfu", "allkeys-random", "noeviction"},
			help: "what goes past maxmemory: noeviction refuses writes; the others evict keys (allkeys-lfu suits rate limiting)",
			apply: func(c *Config, v string, _ int64) {
				p, _ := engine.ParsePolicy(v)
				c.evictPolicy.Store(int64(p))
				c.applyEviction()
			}},
		{name: "maxmemory-samples", kind: pInt, def: "5", min: 1, max: 2147483647, help: "keys sampled per eviction",
			apply: func(c *Config, _ string, n int64) { c.evictSamples.Store(n); c.applyEviction() }},
		{name: "maxmemory-eviction-tenacity", kind: pInt, def: "10", min: 0, max: 100,
			help:  "how long eviction may run per command (10: 500 us; 100: no limit)",
			apply: func(c *Config, _ string, n int64) { c.evictTenacity.Store(n) }},
		{name: "lfu-log-factor", kind: pInt, def: "10", min: 0, max: 2147483647, help: "how slowly LFU counters grow",
			apply: func(c *Config, _ string, n int64) { c.lfuLogFactor.Store(n); c.applyEviction() }},
		{name: "lfu-decay-time", kind: pInt, def: "1", min: 0, max: 2147483647, help: "minutes for an LFU counter to lose one",
			apply: func(c *Config, _ string, n int64) { c.lfuDecayTime.Store(n); c.applyEviction() }},
		{name: "hash-max-listpack-entries", alias: "hash-max-ziplist-entries", kind: pInt, def: "512", min: 0, max: 1<<63 - 1,
			help: "hashes up to this many fields use the compact encoding"},
		{name: "hash-max-listpack-value", alias: "hash-max-ziplist-value", kind: pInt, def: "64", min: 0, max: 1<<63 - 1,
			help: "hashes with values up to this size use the compact encoding"},
		{name: "zset-max-listpack-entries", alias: "zset-max-ziplist-entries", kind: pInt, def: "128", min: 0, max: 1<<63 - 1,
			help: "sorted sets up to this many members use the compact encoding"},
		{name: "zset-max-listpack-value", alias: "zset-max-ziplist-value", kind: pInt, def: "64", min: 0, max: 1<<63 - 1,
			help: "sorted sets with members up to this size use the compact encoding"},
		{name: "list-max-listpack-size", alias: "list-max-ziplist-size", kind: pInt, def: "-2", min: -5, max: 1<<31 - 1,
			help: "accepted for compatibility"},
		{name: "list-compress-depth", kind: pInt, def: "0", min: 0, max: 1<<31 - 1, help: "accepted for compatibility"},
		{name: "set-max-intset-entries", kind: pInt, def: "512", min: 0, max: 1<<63 - 1,
			help: "sets of integers up to this many members use the compact encoding"},
		{name: "hll-sparse-max-bytes", kind: pMemory, def: "3000", min: 0, max: 1<<63 - 1,
			help:  "a sparse HyperLogLog that would grow past this many bytes turns dense",
			apply: func(c *Config, _ string, n int64) { c.hllSparseMax.Store(n) }},
		{name: "save", def: "", lines: true, merge: func(_, v string) (string, error) { return parseSave(v) },
			help: "accepted for compatibility (\"<seconds> <changes>\" pairs, several lines add up); snapshots follow snapshot-interval"},
		{name: "appendonly", kind: pBool, def: "no", help: "accepted for compatibility; limitkv persists by snapshots"},
		{name: "appendfsync", kind: pEnum, def: "everysec", enum: []string{"always", "everysec", "no"}, help: "accepted for compatibility"},
		{name: "slowlog-log-slower-than", kind: pInt, def: "10000", min: -1, max: 1<<63 - 1,
			help: "SLOWLOG keeps commands that took at least this many microseconds (-1: none, 0: all)",
			apply: func(c *Config, _ string, n int64) {
				c.slowlogSlower.Store(n)
				if c.srv != nil && n >= 0 {
					c.srv.slowlog.Trim(int(c.slowlogMaxLen.Load()))
				}
			}},
		{name: "slowlog-max-len", kind: pInt, def: "128", min: 0, max: 1<<63 - 1, help: "entries SLOWLOG keeps",
			apply: func(c *Config, _ string, n int64) {
				c.slowlogMaxLen.Store(n)
				if c.srv != nil && c.slowlogSlower.Load() >= 0 {
					c.srv.slowlog.Trim(int(n))
				}
			}},
		{name: "latency-monitor-threshold", kind: pInt, def: "0", min: 0, max: 1<<63 - 1,
			help:  "LATENCY records events that took at least this many milliseconds (0: none)",
			apply: func(c *Config, _ string, n int64) { c.latencyThreshold.Store(n) }},
		{name: "latency-tracking", kind: pBool, def: "yes", help: "keep per-command latency histograms (INFO latencystats, LATENCY HISTOGRAM, metrics)",
			apply: func(c *Config, _ string, n int64) { c.latencyTracking.Store(n != 0) }},
		{name: "latency-tracking-info-percentiles", def: "50 99 99.9", help: "percentiles INFO latencystats shows, separated by spaces",
			merge: func(_, v string) (string, error) {
				p, err := parsePercentiles(v)
				return formatPercentiles(p), err
			},
			apply: func(c *Config, v string, _ int64) {
				p, _ := parsePercentiles(v)
				c.percentiles.Store(&p)
			}},
		{name: "notify-keyspace-events", def: "", help: "accepted for compatibility; limitkv sends no notifications",
			merge: mergeKeyspaceEvents},
		{name: "tcp-keepalive", kind: pInt, def: "300", min: 0, max: 2147483647, help: "accepted for compatibility"},
		{name: "protected-mode", kind: pBool, def: "yes",
			help:  "without a password, refuse clients that are not on the loopback interface",
			apply: func(c *Config, _ string, n int64) { c.protectedMode.Store(n != 0) }},
		{name: "daemonize", kind: pBool, def: "no", immutable: true, help: "accepted for compatibility (limitkv stays in the foreground)"},
		{name: "io-threads", kind: pInt, def: "1", min: 1, max: 128, immutable: true, help: "accepted for compatibility"},
		{name: "event-loops", kind: pBool, def: "yes", immutable: true,
			help: "serve plain TCP clients on one event loop per core (no: a goroutine per client, as TLS clients always have)"},
		{name: "lazyfree-lazy-eviction", kind: pBool, def: "no", help: "accepted for compatibility"},
		{name: "lazyfree-lazy-expire", kind: pBool, def: "no", help: "accepted for compatibility"},
		{name: "lazyfree-lazy-server-del", kind: pBool, def: "no", help: "accepted for compatibility"},
		{name: "lazyfree-lazy-user-del", kind: pBool, def: "no", help: "accepted for compatibility"},
		{name: "lazyfree-lazy-user-flush", kind: pBool, def: "no", help: "accepted for compatibility"},
		{name: "rl-login-keep", kind: pInt, def: "32", min: 1, max: 1 << 20,
			help: "entries RL.LOGIN keeps when the command gives no KEEP", apply: func(c *Config, _ string, n int64) { c.loginKeep.Store(n) }},
		{name: "rl-policies", def: "", immutable: true,
			help: "file of RL.POLICY SET lines loaded at start-up, after the snapshot: its policies replace those of the same names (empty: none)"},
		{name: "snapshot-interval", kind: pDuration, def: "1s", min: 0, max: int64(24 * time.Hour),
			help: "time between snapshots (0 with persistence no: never)"},
		{name: "persistence", kind: pBool, def: "yes", immutable: true, help: "keep the keyspace on disk under dir"},
		{name: "metrics-addr", def: "", immutable: true,
			help: "host:port to serve Prometheus metrics on, at /metrics, over plain HTTP without authentication (empty: off)"},
	}
}

// NewConfig returns the default configuration.
func NewConfig() *Config {
	c := &Config{byName: map[string]*param{}, values: map[*param]string{}, loaded: map[*param]bool{}, repl: replication.NewSettings()}
	c.params = append(append(configParams(), tlsParams()...), replicationParams()...)
	for _, p := range c.params {
		c.byName[p.name] = p
		if p.alias != "" {
			c.byName[p.alias] = p
		}
		switch p.name {
		case "hash-max-listpack-entries":
			p.apply = c.listpackSetter(lpHashEntries)
		case "hash-max-listpack-value":
			p.apply = c.listpackSetter(lpHashValue)
		case "zset-max-listpack-entries":
			p.apply = c.listpackSetter(lpZSetEntries)
		case "zset-max-listpack-value":
			p.apply = c.listpackSetter(lpZSetValue)
		case "set-max-intset-entries":
			p.apply = func(c *Config, _ string, n int64) { c.intsetEntries.Store(n) }
		}
		v, n, err := p.parse(p.def)
		if err != nil {
			panic("config default " + p.name + ": " + err.Error())
		}
		c.values[p] = v
		if p.apply != nil {
			p.apply(c, v, n)
		}
	}
	return c
}

func (c *Config) listpackSetter(i int) func(*Config, string, int64) {
	return func(_ *Config, _ string, n int64) { c.listpack[i].Store(n) }
}

// bind connects the config to the server whose settings it drives.
func (c *Config) bind(s *Server) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.srv = s
	for _, p := range c.params {
		if p.apply != nil {
			v := c.values[p]
			_, n, _ := p.parse(v)
			p.apply(c, v, n)
		}
	}
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

// userLines returns the config file's user lines.
func (c *Config) userLines() []userLine {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.users
}

func (c *Config) debugEnabled() bool { return c.debug.Load() }

// Get returns the current value of a parameter.
func (c *Config) Get(name string) string {
	c.mu.Lock()
	defer c.mu.Unlock()
	if p, ok := c.byName[strings.ToLower(name)]; ok {
		return c.values[p]
	}
	return ""
}

// Int returns a numeric parameter (memory and durations in bytes and ns).
func (c *Config) Int(name string) int64 {
	_, n, _ := c.byName[name].parse(c.Get(name))
	return n
}

// OnLogLevel registers fn to follow the loglevel setting; it is called at
// once with the current level.
func (c *Config) OnLogLevel(fn func(level string)) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.onLevel = fn
	fn(*c.logLevel.Load())
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

// SetLimits returns the intset encoding's limit for sets.
func (c *Config) SetLimits() engine.SetLimits {
	return engine.SetLimits{IntsetEntries: int(min(c.intsetEntries.Load(), 1<<30))}
}

// configError is a CONFIG SET failure in Redis's words.
type configError struct {
	name, reason string
}

func (e *configError) Error() string {
	return "ERR CONFIG SET failed (possibly related to argument '" + e.name + "') - " + e.reason
}

// parse validates v for p and returns its canonical text and number.
func (p *param) parse(v string) (string, int64, error) {
	switch p.kind {
	case pBool:
		switch strings.ToLower(v) {
		case "yes":
			return "yes", 1, nil
		case "no":
			return "no", 0, nil
		}
		return "", 0, errors.New("argument must be 'yes' or 'no'")
	case pInt:
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil {
			return "", 0, errors.New("argument couldn't be parsed into an integer")
		}
		if n < p.min || n > p.max {
			return "", 0, fmt.Errorf("argument must be between %d and %d inclusive", p.min, p.max)
		}
		return strconv.FormatInt(n, 10), n, nil
	case pMemory:
		n, ok := parseMemory(v)
		if !ok {
			return "", 0, errors.New("argument must be a memory value")
		}
		if n < p.min || n > p.max {
			return "", 0, fmt.Errorf("argument must be between %d and %d inclusive", p.min, p.max)
		}
		return strconv.FormatInt(n, 10), n, nil
	case pEnum:
		lv := strings.ToLower(v)
		for _, e := range p.enum {
			if e == lv {
				return lv, 0, nil
			}
		}
		return "", 0, errors.New("argument(s) must be one of the following: " + strings.Join(p.enum, ", "))
	case pDuration:
		d, err := parseConfigDuration(v)
		if err != nil || int64(d) < p.min || int64(d) > p.max {
			return "", 0, errors.New("argument must be a duration such as 500ms, 1s or 0")
		}
		return v, int64(d), nil
	}
	return v, 0, nil
}

func parseConfigDuration(v string) (time.Duration, error) {
	if v == "0" {
		return 0, nil
	}
	if n, err := strconv.ParseInt(v, 10, 64); err == nil {
		return time.Duration(n) * time.Millisecond, nil
	}
	return time.ParseDuration(v)
}

// parseMemory reads a memory value as Redis's memtoull does: digits with an
// optional unit b, k, kb, m, mb, g, gb (k = 1000, kb = 1024), any case.
func parseMemory(v string) (int64, bool) {
	lv := strings.ToLower(v)
	mul := int64(1)
	for _, u := range []struct {
		s string
		m int64
	}{{"gb", 1 << 30}, {"mb", 1 << 20}, {"kb", 1 << 10}, {"g", 1e9}, {"m", 1e6}, {"k", 1e3}, {"b", 1}} {
		if strings.HasSuffix(lv, u.s) {
			lv, mul = lv[:len(lv)-len(u.s)], u.m
			break
		}
	}
	if lv == "" {
		return 0, false
	}
	for _, ch := range lv {
		if ch < '0' || ch > '9' {
			return 0, false
		}
	}
	n, err := strconv.ParseInt(lv, 10, 64)
	if err != nil || n > (1<<63-1)/mul {
		return 0, false
	}
	return n * mul, true
}

// mergeOutputLimits applies a client-output-buffer-limit value, which
// names some classes, to the current limits of all of them.
func mergeOutputLimits(cur, v string) (string, error) {
	l, err := resp.ParseOutputLimits(resp.OutputLimits{}, cur, parseMemory)
	if err == nil {
		l, err = resp.ParseOutputLimits(l, v, parseMemory)
	}
	if err != nil {
		return "", err
	}
	return l.String(), nil
}

// Set changes several parameters at once, all or none, as CONFIG SET does.
// fromFile allows immutable parameters (start-up).
func (c *Config) Set(pairs [][2]string, startup bool) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	type change struct {
		p *param
		v string
		n int64
	}
	var changes []change
	seen := map[*param]bool{}
	for _, kv := range pairs {
		p, ok := c.byName[strings.ToLower(kv[0])]
		if !ok {
			return errors.New("ERR Unknown option or number of arguments for CONFIG SET - '" + kv[0] + "'")
		}
		if seen[p] {
			return &configError{kv[0], "duplicate parameter"}
		}
		seen[p] = true
		if !startup && p.immutable {
			return &configError{kv[0], "can't set immutable config"}
		}
		if !startup && p.protected {
			return &configError{kv[0], "can't set protected config"}
		}
		v, n, err := p.parse(kv[1])
		if p.merge != nil {
			v, err = p.merge(c.values[p], kv[1])
		}
		if err != nil {
			return &configError{kv[0], err.Error()}
		}
		if startup && p.lines {
			if c.loaded[p] && v != "" && c.values[p] != "" {
				v = c.values[p] + " " + v
			}
			c.loaded[p] = true
		}
		changes = append(changes, change{p, v, n})
	}
	old := make([]string, len(changes))
	for i, ch := range changes {
		old[i] = c.values[ch.p]
		c.values[ch.p] = ch.v
	}
	if !startup {
		var ran []*reconfigurer
		for i, ch := range changes {
			r := ch.p.reconf
			if r == nil || slices.Contains(ran, r) || (old[i] == ch.v && !ch.p.volatile) {
				continue
			}
			if err := r.apply(c); err != nil {
				c.warn("Failed applying new configuration. Possibly related to new " + ch.p.name + " setting. Restoring previous settings.")
				for i, ch := range changes {
					c.values[ch.p] = old[i]
				}
				for _, r := range ran {
					if err := r.apply(c); err != nil {
						c.warn("Failed applying restored failed CONFIG SET command: " + err.Error())
					}
				}
				return &configError{ch.p.name, err.Error()}
			}
			ran = append(ran, r)
		}
	}
	for _, ch := range changes {
		if ch.p.apply != nil {
			ch.p.apply(c, ch.v, ch.n)
		}
	}
	return nil
}

// warn logs a warning once the config drives a server.
func (c *Config) warn(msg string) {
	if c.srv != nil && c.srv.Log != nil {
		c.srv.Log.Warn(msg)
	}
}

// Matching returns name/value pairs of the parameters matching any of the
// patterns, each once, aliases included where they match. A name without
// glob characters is answered under the spelling it was asked with, as
// Redis does.
func (c *Config) Matching(patterns []string) [][2]string {
	c.mu.Lock()
	defer c.mu.Unlock()
	var out [][2]string
	seen := map[string]bool{}
	var globs []string
	for _, pat := range patterns {
		if strings.ContainsAny(pat, "[*?") {
			globs = append(globs, pat)
			continue
		}
		p, ok := c.byName[strings.ToLower(pat)]
		if ok && !seen[pat] {
			seen[pat] = true
			out = append(out, [2]string{pat, c.values[p]})
		}
	}
	patterns = globs
	for _, p := range c.params {
		for _, name := range []string{p.name, p.alias} {
			if name == "" || seen[name] {
				continue
			}
			for _, pat := range patterns {
				if engine.Match([]byte(pat), []byte(name), true) {
					seen[name] = true
					out = append(out, [2]string{name, c.values[p]})
					break
				}
			}
		}
	}
	return out
}

// LoadFile reads a redis.conf-style file: one "name value..." per line,
// # for comments, quoting as in inline requests. "include PATH" reads
// another file there, as Redis does: PATH relative to the working
// directory; a pattern (conf.d/*.conf) reads the files it matches, in
// order, and none if it matches none. CONFIG REWRITE writes path.
func (c *Config) LoadFile(path string) error {
	c.file = path
	return c.loadFile(path, 0)
}

// maxIncludeDepth bounds nested includes: a file that includes itself,
// directly or not, is refused rather than read forever.
const maxIncludeDepth = 16

func (c *Config) loadFile(path string, depth int) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	return c.load(f, path, depth)
}

// include reads the files an include line names.
func (c *Config) include(pattern string, depth int) error {
	if depth >= maxIncludeDepth {
		return fmt.Errorf("includes nested more than %d deep (does a file include itself?)", maxIncludeDepth)
	}
	if !strings.ContainsAny(pattern, "*?[") {
		return c.loadFile(pattern, depth+1)
	}
	paths, err := filepath.Glob(pattern)
	if err != nil {
		return err
	}
	for _, p := range paths {
		if err := c.loadFile(p, depth+1); err != nil {
			return err
		}
	}
	return nil
}

func (c *Config) load(r io.Reader, path string, depth int) error {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64*1024), 1<<20)
	line := 0
	for sc.Scan() {
		line++
		text := strings.TrimSpace(sc.Text())
		if text == "" || text[0] == '#' {
			continue
		}
		args, ok := resp.SplitArgs([]byte(text))
		if !ok {
			return fmt.Errorf("%s:%d: unbalanced quotes", path, line)
		}
		if len(args) == 0 {
			continue
		}
		name := string(args[0])
		var vals []string
		for _, a := range args[1:] {
			vals = append(vals, string(a))
		}
		if strings.EqualFold(name, "user") {
			if err := c.addUserLine(vals, path, line); err != nil {
				return fmt.Errorf("%s:%d: %v", path, line, err)
			}
			continue
		}
		if strings.EqualFold(name, "include") && len(vals) == 1 {
			if err := c.include(vals[0], depth); err != nil {
				return fmt.Errorf("%s:%d: include: %v", path, line, err)
			}
			continue
		}
		if err := c.Set([][2]string{{name, strings.Join(vals, " ")}}, true); err != nil {
			return fmt.Errorf("%s:%d: %v", path, line, err)
		}
	}
	return sc.Err()
}

// addUserLine keeps a "user <name> <rules>..." line for Server.LoadUsers,
// refusing a second line for the same user as Redis does.
func (c *Config) addUserLine(args []string, path string, line int) error {
	if len(args) == 0 {
		return errors.New("Error in user declaration 'user': Syntax error")
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, u := range c.users {
		if u.args[0] == args[0] {
			return errors.New("Error in user declaration '" + args[0] + "': " + acl.ErrDupUser.Error())
		}
	}
	c.users = append(c.users, userLine{args: args, file: path, line: line})
	return nil
}

// Params lists the parameters, for command-line flags and documentation.
func (c *Config) Params() []ParamInfo {
	var out []ParamInfo
	for _, p := range c.params {
		out = append(out, ParamInfo{Name: p.name, Default: p.def, Help: p.help,
			Group: groupOf(p.name), Type: p.typeOf(), Unit: p.unitOf(), DefaultText: p.defaultText()})
	}
	return out
}

// ParamInfo describes one parameter.
type ParamInfo struct {
	Name, Default, Help string
	// For --help: its section (ParamGroups), the type of its value
	// (integer, bytes, duration, yes|no, its choices, string), the unit of
	// an integer, and the default as it is best read (512mb).
	Group, Type, Unit, DefaultText string
}

// Rewrite writes the current settings back to the config file, as CONFIG
// REWRITE does: lines naming a parameter get its current value, comments
// and unknown lines stay, and parameters changed from their default that
// the file did not mention are appended.
func (c *Config) Rewrite() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	old, err := os.ReadFile(c.file)
	if err != nil {
		return err
	}
	written := map[*param]bool{}
	var out []string
	// Users go where the first user line was (or at the end), unless they
	// live in an aclfile, as CONFIG REWRITE does in Redis.
	var users []string
	if c.srv != nil && c.values[c.byName["aclfile"]] == "" {
		users = c.srv.aclLines()
	}
	usersDone := false
	for _, line := range strings.Split(strings.TrimRight(string(old), "\n"), "\n") {
		t := strings.TrimSpace(line)
		if t == "" || t[0] == '#' {
			out = append(out, line)
			continue
		}
		name, _, _ := strings.Cut(t, " ")
		if strings.EqualFold(name, "user") {
			if !usersDone {
				out = append(out, users...)
				usersDone = true
			}
			continue
		}
		p, ok := c.byName[strings.ToLower(name)]
		if !ok {
			out = append(out, line)
			continue
		}
		if written[p] {
			continue
		}
		written[p] = true
		if l := rewriteLine(p, c.values[p]); l != "" {
			out = append(out, l)
		}
	}
	for _, p := range c.params {
		if !written[p] && c.values[p] != p.def {
			out = append(out, rewriteLine(p, c.values[p]))
		}
	}
	if !usersDone {
		out = append(out, users...)
	}
	tmp := c.file + ".tmp"
	if err := os.WriteFile(tmp, []byte(strings.Join(out, "\n")+"\n"), 0o644); err != nil {
		return err
	}
	return os.Rename(tmp, c.file)
}

// rewriteLine is a parameter's line in a rewritten config file; replicaof
// is written as its two words, and not at all when there is no master.
func rewriteLine(p *param, v string) string {
	if p.name == "replicaof" {
		if v == "" {
			return ""
		}
		return p.name + " " + v
	}
	if p.lines && v != "" {
		// One line per pair, as Redis writes save lines.
		f := strings.Fields(v)
		var out []string
		for i := 0; i+1 < len(f); i += 2 {
			out = append(out, p.name+" "+f[i]+" "+f[i+1])
		}
		return strings.Join(out, "\n")
	}
	return p.name + " " + quoteConfig(v)
}

// parseSave checks save's "<seconds> <changes>" pairs as Redis does
// (seconds at least 1, changes at least 0) and writes them as CONFIG GET
// shows them.
func parseSave(v string) (string, error) {
	f := strings.Fields(v)
	if len(f)%2 != 0 {
		return "", errors.New("Invalid save parameters")
	}
	for i, s := range f {
		n, err := strconv.ParseInt(s, 10, 64)
		if err != nil || i%2 == 0 && n < 1 || n < 0 {
			return "", errors.New("Invalid save parameters")
		}
		f[i] = strconv.FormatInt(n, 10)
	}
	return strings.Join(f, " "), nil
}

func quoteConfig(v string) string {
	if v == "" || strings.ContainsAny(v, " \"'\\") {
		return strconv.Quote(v)
	}
	return v
}

// parsePercentiles reads latency-tracking-info-percentiles as Redis does:
// numbers from 0 to 100 separated by single spaces; "" is none.
func parsePercentiles(v string) ([]float64, error) {
	if v == "" {
		return nil, nil
	}
	var out []float64
	for _, f := range strings.Split(v, " ") {
		p, err := strconv.ParseFloat(f, 64)
		if err != nil || f == "" || math.IsNaN(p) {
			return nil, errors.New("Invalid latency-tracking-info-percentiles parameters")
		}
		if p < 0 || p > 100 {
			return nil, errors.New("latency-tracking-info-percentiles parameters should sit between [0.0,100.0]")
		}
		out = append(out, p)
	}
	return out, nil
}

func formatPercentiles(p []float64) string {
	var b strings.Builder
	for i, f := range p {
		if i > 0 {
			b.WriteByte(' ')
		}
		b.WriteString(formatPercentile(f))
	}
	return b.String()
}

// formatPercentile writes a percentile as Redis does: "%f" without its
// trailing zeros (99.9, 50, 12.345678).
func formatPercentile(f float64) string {
	s := strconv.FormatFloat(f, 'f', 6, 64)
	if strings.Contains(s, ".") {
		s = strings.TrimRight(strings.TrimRight(s, "0"), ".")
	}
	return s
}
