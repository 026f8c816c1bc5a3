package config

import (
	"math"
	"time"

	"github.com/limitkv/limitkv/resp"
)

// The settings, in the order CONFIG GET * lists them and CONFIG REWRITE
// appends them: Redis's name (and old name), kind, default, bounds or
// values, and what it is for. What a setting does to the running server
// is its owner's to say (New's effects: commands wires most); a row with
// no effect is read at start-up (dir, persistence) or accepted for
// compatibility.
func table() []*param {
	t := serverParams()
	t = append(t, tlsParams()...)
	t = append(t, replicationParams()...)
	return append(t, clusterParams()...)
}

func serverParams() []*param {
	return []*param{
		{name: "bind", def: "127.0.0.1", merge: mergeBind,
			help: "addresses to listen on, separated by spaces (* for all; empty: none); CONFIG SET moves the listeners"},
		{name: "port", kind: kInt, def: "6379", min: 0, max: 65535,
			help: "TCP port (0: none); CONFIG SET opens the new one and closes the old"},
		{name: "dir", def: "./limitkv-data", protected: true, help: "directory of the snapshot database"},
		{name: "databases", kind: kInt, def: "16", min: 1, max: 1 << 16, immutable: true, help: "number of databases"},
		{name: "requirepass", def: "", help: "password of the default user, which clients must AUTH with (empty: none)"},
		{name: "aclfile", def: "", immutable: true, help: "file of ACL users, read at start-up and by ACL LOAD, written by ACL SAVE (empty: users come from the config file's user lines)"},
		{name: "acllog-max-len", kind: kInt, def: "128", min: 0, max: 1<<63 - 1, help: "entries ACL LOG keeps"},
		{name: "acl-pubsub-default", kind: kEnum, def: "resetchannels", enum: []string{"allchannels", "resetchannels"},
			help: "the channels new ACL users may use until rules say otherwise"},
		{name: "maxclients", kind: kInt, def: "10000", min: 1, max: 4294967295, help: "maximum connected clients"},
		{name: "timeout", kind: kInt, def: "0", min: 0, max: 2147483647, help: "close clients idle this many seconds (0: never)"},
		{name: "loglevel", kind: kEnum, def: "notice", enum: []string{"debug", "verbose", "notice", "warning", "nothing"},
			help: "log level"},
		{name: "logfile", def: "", immutable: true, help: "log file (empty: standard error)"},
		{name: "proto-max-bulk-len", kind: kMemory, def: "536870912", min: 1 << 20, max: 1<<63 - 1,
			help: "largest bulk string a request may carry"},
		{name: "client-query-buffer-limit", kind: kMemory, def: "1073741824", min: 1 << 20, max: 1<<63 - 1,
			help: "largest request a client may send"},
		{name: "client-output-buffer-limit", def: resp.DefaultOutputLimits.String(), merge: mergeOutputLimits,
			help: "close clients whose unsent output passes these limits: <class> <hard> <soft> <soft-seconds>, for the classes normal, replica and pubsub"},
		{name: "hz", kind: kInt, def: "10", min: 0, max: 2147483647, help: "active expiry ticks per second (1-500)"},
		{name: "enable-debug-command", kind: kEnum, def: "no", enum: []string{"no", "yes", "local"}, immutable: true,
			help: "allow the DEBUG command (tests only)"},
		{name: "busy-reply-threshold", alias: "lua-time-limit", kind: kInt, def: "5000", min: 0, max: 1<<63 - 1,
			help: "ms a script may run before other clients get BUSY"},
		{name: "maxmemory", kind: kMemory, def: "0", min: 0, max: 1<<63 - 1, help: "memory limit (0: none); see maxmemory-policy"},
		{name: "maxmemory-clients", def: "0", merge: mergeMaxMemoryClients,
			help: "close the clients using the most memory while all clients together use this much: bytes, or a percentage of maxmemory (0: never)"},
		{name: "maxmemory-policy", kind: kEnum, def: "noeviction",
			enum: []string{"volatile-lru", "volatile-lfu", "volatile-random", "volatile-ttl", "allkeys-lru", "allkeys-lfu", "allkeys-random", "noeviction"},
			help: "what goes past maxmemory: noeviction refuses writes; the others evict keys (allkeys-lfu suits rate limiting)"},
		{name: "maxmemory-samples", kind: kInt, def: "5", min: 1, max: 2147483647, help: "keys sampled per eviction"},
		{name: "maxmemory-eviction-tenacity", kind: kInt, def: "10", min: 0, max: 100,
			help: "how long eviction may run per command (10: 500 us; 100: no limit)"},
		{name: "lfu-log-factor", kind: kInt, def: "10", min: 0, max: 2147483647, help: "how slowly LFU counters grow"},
		{name: "lfu-decay-time", kind: kInt, def: "1", min: 0, max: 2147483647, help: "minutes for an LFU counter to lose one"},
		{name: "hash-max-listpack-entries", alias: "hash-max-ziplist-entries", kind: kInt, def: "512", min: 0, max: 1<<63 - 1,
			help: "hashes up to this many fields use the compact encoding"},
		{name: "hash-max-listpack-value", alias: "hash-max-ziplist-value", kind: kInt, def: "64", min: 0, max: 1<<63 - 1,
			help: "hashes with values up to this size use the compact encoding"},
		{name: "zset-max-listpack-entries", alias: "zset-max-ziplist-entries", kind: kInt, def: "128", min: 0, max: 1<<63 - 1,
			help: "sorted sets up to this many members use the compact encoding"},
		{name: "zset-max-listpack-value", alias: "zset-max-ziplist-value", kind: kInt, def: "64", min: 0, max: 1<<63 - 1,
			help: "sorted sets with members up to this size use the compact encoding"},
		{name: "list-max-listpack-size", alias: "list-max-ziplist-size", kind: kInt, def: "-2", min: -5, max: 1<<31 - 1,
			help: "accepted for compatibility"},
		{name: "list-compress-depth", kind: kInt, def: "0", min: 0, max: 1<<31 - 1, help: "accepted for compatibility"},
		{name: "set-max-intset-entries", kind: kInt, def: "512", min: 0, max: 1<<63 - 1,
			help: "sets of integers up to this many members use the compact encoding"},
		{name: "hll-sparse-max-bytes", kind: kMemory, def: "3000", min: 0, max: 1<<63 - 1,
			help: "a sparse HyperLogLog that would grow past this many bytes turns dense"},
		{name: "stream-node-max-bytes", kind: kMemory, def: "4096", min: 0, max: 1<<63 - 1,
			help: "a stream node takes entries until it holds this many bytes (0: no limit)"},
		{name: "stream-node-max-entries", kind: kInt, def: "100", min: 0, max: 1<<63 - 1,
			help: "a stream node takes at most this many entries (0: no limit)"},
		{name: "save", def: "", lines: true, merge: func(_, v string) (string, error) { return parseSave(v) },
			help: "accepted for compatibility (\"<seconds> <changes>\" pairs, several lines add up); snapshots follow snapshot-interval"},
		{name: "appendonly", kind: kBool, def: "no", help: "accepted for compatibility; limitkv persists by snapshots"},
		{name: "appendfsync", kind: kEnum, def: "everysec", enum: []string{"always", "everysec", "no"}, help: "accepted for compatibility"},
		{name: "slowlog-log-slower-than", kind: kInt, def: "10000", min: -1, max: 1<<63 - 1,
			help: "SLOWLOG keeps commands that took at least this many microseconds (-1: none, 0: all)"},
		{name: "slowlog-max-len", kind: kInt, def: "128", min: 0, max: 1<<63 - 1, help: "entries SLOWLOG keeps"},
		{name: "latency-monitor-threshold", kind: kInt, def: "0", min: 0, max: 1<<63 - 1,
			help: "LATENCY records events that took at least this many milliseconds (0: none)"},
		{name: "latency-tracking", kind: kBool, def: "yes", help: "keep per-command latency histograms (INFO latencystats, LATENCY HISTOGRAM, metrics)"},
		{name: "latency-tracking-info-percentiles", def: "50 99 99.9", merge: mergePercentiles, help: "percentiles INFO latencystats shows, separated by spaces"},
		{name: "tracking-table-max-keys", kind: kInt, def: "1000000", min: 0, max: 1<<63 - 1, help: "keys client-side caching remembers readers of (0: no limit); past it, keys are forgotten at random and their readers told"},
		{name: "notify-keyspace-events", def: "", merge: mergeKeyspaceEvents, show: showKeyspaceEvents, help: "keyspace notifications: the event classes published (Redis's letters, and r for the rate-limit events rl.denied and rl.ban, which A leaves out); K and/or E say to which channels"},
		{name: "tcp-keepalive", kind: kInt, def: "300", min: 0, max: 2147483647, help: "accepted for compatibility"},
		{name: "protected-mode", kind: kBool, def: "yes",
			help: "without a password, refuse clients that are not on the loopback interface"},
		{name: "daemonize", kind: kBool, def: "no", immutable: true, help: "accepted for compatibility (limitkv stays in the foreground)"},
		{name: "io-threads", kind: kInt, def: "0", min: 0, max: 128, immutable: true,
			help: "event loops serving plain TCP clients (0: one per two processors, at least one)"},
		{name: "event-loops", kind: kBool, def: "yes", immutable: true,
			help: "serve plain TCP clients on event loops, as many as io-threads says (no: a goroutine per client, as TLS clients always have)"},
		{name: "lazyfree-lazy-eviction", kind: kBool, def: "no", help: "accepted for compatibility"},
		{name: "lazyfree-lazy-expire", kind: kBool, def: "no", help: "accepted for compatibility"},
		{name: "lazyfree-lazy-server-del", kind: kBool, def: "no", help: "accepted for compatibility"},
		{name: "lazyfree-lazy-user-del", kind: kBool, def: "no", help: "accepted for compatibility"},
		{name: "lazyfree-lazy-user-flush", kind: kBool, def: "no", help: "accepted for compatibility"},
		{name: "rl-login-keep", kind: kInt, def: "32", min: 1, max: 1 << 20,
			help: "entries RL.LOGIN keeps when the command gives no KEEP"},
		{name: "rl-policies", def: "", immutable: true,
			help: "file of RL.POLICY SET lines loaded at start-up, after the snapshot: its policies replace those of the same names (empty: none)"},
		{name: "snapshot-interval", kind: kDuration, def: "1s", min: 0, max: int64(24 * time.Hour),
			help: "time between snapshots (0 with persistence no: never)"},
		{name: "persistence", kind: kBool, def: "yes", immutable: true, help: "keep the keyspace on disk under dir"},
		{name: "metrics-addr", def: "", immutable: true,
			help: "host:port to serve Prometheus metrics on, at /metrics, over plain HTTP without authentication (empty: off)"},
	}
}

// tlsParams are the tls-* settings of Redis 7.0. Those that name a file
// are volatile: setting one again to the same path reloads the file.
func tlsParams() []*param {
	file := func(name, help string) *param {
		return &param{name: name, help: help, volatile: true}
	}
	str := func(name, help string) *param {
		return &param{name: name, help: help}
	}
	boolean := func(name, def, help string) *param {
		return &param{name: name, kind: kBool, def: def, help: help}
	}
	return []*param{
		{name: "tls-port", kind: kInt, def: "0", min: 0, max: 65535,
			help: "TLS port, beside the plain one (0: none); CONFIG SET opens and closes it"},
		file("tls-cert-file", "server certificate chain (PEM); CONFIG SET, even to the same path, reloads it"),
		file("tls-key-file", "server private key (PEM)"),
		str("tls-key-file-pass", "passphrase of an encrypted tls-key-file"),
		file("tls-client-cert-file", "certificate for outgoing connections (replication); empty: tls-cert-file"),
		file("tls-client-key-file", "private key of tls-client-cert-file"),
		str("tls-client-key-file-pass", "passphrase of an encrypted tls-client-key-file"),
		file("tls-ca-cert-file", "CA certificates that client and primary certificates are checked against"),
		file("tls-ca-cert-dir", "directory of CA certificate files"),
		file("tls-dh-params-file", "accepted for compatibility and checked; Go negotiates elliptic-curve keys only"),
		{name: "tls-auth-clients", kind: kEnum, def: "yes", enum: []string{"no", "yes", "optional"},
			help: "clients must present a certificate signed by the CA (yes), may (optional), or are not asked (no)"},
		str("tls-protocols", `TLS versions, from "TLSv1 TLSv1.1 TLSv1.2 TLSv1.3" (empty: TLSv1.2 and TLSv1.3)`),
		str("tls-ciphers", "TLS 1.2 cipher suites, in OpenSSL's names and keywords (DEFAULT:!MEDIUM); empty: Go's default"),
		str("tls-ciphersuites", "TLS 1.3 cipher suites allowed (TLS_AES_256_GCM_SHA384:...); empty: all"),
		boolean("tls-prefer-server-ciphers", "no", "accepted for compatibility; Go always chooses the cipher suite by its own order"),
		boolean("tls-session-caching", "yes", "let clients resume TLS sessions (with session tickets)"),
		{name: "tls-session-cache-size", kind: kInt, def: "20480", min: 0, max: 2147483647,
			help: "accepted for compatibility; Go's session tickets keep no server-side cache"},
		{name: "tls-session-cache-timeout", kind: kInt, def: "300", min: 0, max: 2147483647,
			help: "seconds a TLS session may be resumed"},
		boolean("tls-replication", "no", "a replica's link to its primary uses TLS"),
		boolean("tls-cluster", "no", "the cluster bus uses TLS, with the certificates of tls-*"),
	}
}

// replicationParams are the replication settings, with Redis 7.0's names,
// aliases, defaults and ranges.
func replicationParams() []*param {
	maxInt := int64(math.MaxInt32)
	return []*param{
		{name: "replicaof", alias: "slaveof", def: "", immutable: true, merge: parseReplicaOf,
			help: "\"host port\" of the master to replicate at start-up (REPLICAOF changes it at run time)"},
		{name: "masterauth", def: "", help: "password to authenticate to the master with"},
		{name: "masteruser", def: "", help: "ACL user to authenticate to the master as (empty: the default user)"},
		{name: "replica-read-only", alias: "slave-read-only", kind: kBool, def: "yes",
			help: "a replica refuses writes from its clients"},
		{name: "replica-serve-stale-data", alias: "slave-serve-stale-data", kind: kBool, def: "yes",
			help: "a replica whose link is down still answers reads (no: MASTERDOWN)"},
		{name: "replica-priority", alias: "slave-priority", kind: kInt, def: "100", min: 0, max: maxInt,
			help: "Sentinel promotes replicas of lower priority first (0: never)"},
		{name: "replica-announce-ip", alias: "slave-announce-ip", def: "", help: "address a replica tells its master (empty: the one it connects from)"},
		{name: "replica-announce-port", alias: "slave-announce-port", kind: kInt, def: "0", min: 0, max: 65535,
			help: "port a replica tells its master (0: the one it listens on)"},
		{name: "replica-announced", kind: kBool, def: "yes", help: "Sentinel announces this replica to its clients"},
		{name: "repl-backlog-size", kind: kMemory, def: "1048576", min: 1, max: math.MaxInt64,
			help: "bytes of the stream kept for replicas that reconnect"},
		{name: "repl-backlog-ttl", kind: kInt, def: "3600", min: 0, max: math.MaxInt64,
			help: "seconds without replicas after which a master frees its backlog (0: never)"},
		{name: "repl-timeout", kind: kInt, def: "60", min: 1, max: maxInt,
			help: "seconds of silence after which a link to a master or a replica is dropped"},
		{name: "repl-ping-replica-period", alias: "repl-ping-slave-period", kind: kInt, def: "10", min: 1, max: maxInt,
			help: "seconds between a master's heartbeats to its replicas"},
		{name: "min-replicas-to-write", alias: "min-slaves-to-write", kind: kInt, def: "0", min: 0, max: maxInt,
			help: "refuse writes (NOREPLICAS) unless this many replicas are in sync (0: off)"},
		{name: "min-replicas-max-lag", alias: "min-slaves-max-lag", kind: kInt, def: "10", min: 0, max: maxInt,
			help: "seconds since its last acknowledgement for a replica to count as in sync"},
		{name: "repl-disable-tcp-nodelay", kind: kBool, def: "no", help: "accepted for compatibility"},
		{name: "repl-diskless-sync", kind: kBool, def: "yes", help: "accepted for compatibility: limitkv's full syncs never touch the disk"},
		{name: "repl-diskless-sync-delay", kind: kInt, def: "5", min: 0, max: maxInt, help: "accepted for compatibility"},
		{name: "repl-diskless-sync-max-replicas", kind: kInt, def: "0", min: 0, max: maxInt, help: "accepted for compatibility"},
		{name: "repl-diskless-load", kind: kEnum, def: "disabled", enum: []string{"disabled", "on-empty-db", "swapdb"},
			help: "where a replica puts its master's copy while it arrives: disabled, a file in dir (memory: one dataset); swapdb, a second dataset in memory (memory: two at the peak); on-empty-db, the keyspace itself when it is empty, else as disabled"},
		{name: "replica-lazy-flush", alias: "slave-lazy-flush", kind: kBool, def: "no", help: "accepted for compatibility"},
		{name: "replica-ignore-maxmemory", alias: "slave-ignore-maxmemory", kind: kBool, def: "yes",
			help: "a replica evicts nothing by itself: its master's evictions reach it as deletions"},
	}
}

// clusterParams are Redis Cluster's settings, with Redis 7.0's names,
// defaults, ranges and mutability.
func clusterParams() []*param {
	maxInt := int64(math.MaxInt32)
	port := func(name, help string) *param {
		return &param{name: name, kind: kInt, def: "0", min: 0, max: 65535, help: help}
	}
	return []*param{
		{name: "cluster-enabled", kind: kBool, def: "no", immutable: true,
			help: "run as a Redis Cluster node: the cluster bus, slots, MOVED and ASK redirections"},
		{name: "cluster-config-file", def: "nodes.conf", immutable: true,
			help: "the node's cluster state (id, epochs, slots, peers), in dir; written by the node, never by hand"},
		{name: "cluster-node-timeout", kind: kInt, def: "15000", min: 0, max: math.MaxInt64,
			help: "milliseconds a node may be unreachable before it is suspected failing"},
		{name: "cluster-port", kind: kInt, def: "0", min: 0, max: 65535, immutable: true,
			help: "the cluster bus's port (0: port+10000)"},
		{name: "cluster-announce-ip", def: "", help: "address the node gives the cluster (empty: the one others see)"},
		port("cluster-announce-port", "client port the node gives the cluster (0: port)"),
		port("cluster-announce-tls-port", "TLS client port the node gives the cluster (0: tls-port)"),
		port("cluster-announce-bus-port", "bus port the node gives the cluster (0: the bus's own)"),
		{name: "cluster-announce-hostname", def: "", help: "hostname the node gives the cluster (empty: none)"},
		{name: "cluster-preferred-endpoint-type", kind: kEnum, def: "ip", enum: []string{"ip", "hostname", "unknown-endpoint"},
			help: "what redirections and CLUSTER SLOTS name a node by"},
		{name: "cluster-require-full-coverage", kind: kBool, def: "yes",
			help: "the cluster refuses every request while any slot is unserved"},
		{name: "cluster-allow-reads-when-down", kind: kBool, def: "no",
			help: "a node of a cluster that is down still answers reads"},
		{name: "cluster-allow-pubsubshard-when-down", kind: kBool, def: "yes",
			help: "shard channels keep working while the cluster is down"},
		{name: "cluster-replica-no-failover", alias: "cluster-slave-no-failover", kind: kBool, def: "no",
			help: "this replica never fails its master over by itself"},
		{name: "cluster-replica-validity-factor", alias: "cluster-slave-validity-factor", kind: kInt, def: "10", min: 0, max: maxInt,
			help: "a replica whose link has been down longer than this many node timeouts does not fail over (0: any)"},
		{name: "cluster-migration-barrier", kind: kInt, def: "1", min: 0, max: maxInt,
			help: "replicas a master keeps before one may migrate to an orphaned master"},
		{name: "cluster-allow-replica-migration", kind: kBool, def: "yes",
			help: "replicas may migrate to orphaned masters, and a master that loses its slots follows them"},
		{name: "cluster-link-sendbuf-limit", kind: kMemory, def: "0", min: 0, max: math.MaxInt64,
			help: "close a bus link whose unsent messages pass this many bytes (0: no limit)"},
	}
}
