package config

import (
	"strconv"
	"strings"
)

// How --help presents the parameters: in sections as redis.conf has
// them, each with its type, its unit and its default. Kept apart from the
// parameter table so that a parameter's line there says what it does, and
// this file how it is shown.

// paramGroups are the sections, in the order --help prints them. Every
// parameter is in exactly one (TestParamGroups).
var paramGroups = []struct {
	title string
	names []string
}{
	{"Network", []string{"bind", "port", "protected-mode", "timeout", "tcp-keepalive", "event-loops", "io-threads"}},
	{"TLS", []string{"tls-port", "tls-cert-file", "tls-key-file", "tls-key-file-pass", "tls-client-cert-file",
		"tls-client-key-file", "tls-client-key-file-pass", "tls-ca-cert-file", "tls-ca-cert-dir", "tls-auth-clients",
		"tls-replication", "tls-protocols", "tls-ciphers", "tls-ciphersuites", "tls-prefer-server-ciphers",
		"tls-session-caching", "tls-session-cache-size", "tls-session-cache-timeout", "tls-dh-params-file"}},
	{"General", []string{"databases", "loglevel", "logfile", "daemonize", "hz", "enable-debug-command"}},
	{"Security", []string{"requirepass", "aclfile", "acllog-max-len", "acl-pubsub-default"}},
	{"Limits: clients and memory", []string{"maxclients", "maxmemory", "maxmemory-clients", "maxmemory-policy", "maxmemory-samples",
		"maxmemory-eviction-tenacity", "lfu-log-factor", "lfu-decay-time", "proto-max-bulk-len",
		"client-query-buffer-limit", "client-output-buffer-limit", "busy-reply-threshold", "tracking-table-max-keys"}},
	{"Persistence", []string{"persistence", "dir", "snapshot-interval", "save", "appendonly", "appendfsync"}},
	{"Replication", []string{"replicaof", "masterauth", "masteruser", "replica-read-only", "replica-serve-stale-data",
		"replica-priority", "replica-announce-ip", "replica-announce-port", "replica-announced",
		"replica-ignore-maxmemory", "replica-lazy-flush", "repl-backlog-size", "repl-backlog-ttl", "repl-timeout",
		"repl-ping-replica-period", "min-replicas-to-write", "min-replicas-max-lag", "repl-diskless-load",
		"repl-diskless-sync", "repl-diskless-sync-delay", "repl-diskless-sync-max-replicas", "repl-disable-tcp-nodelay"}},
	{"Cluster", []string{"cluster-enabled", "cluster-config-file", "cluster-node-timeout", "cluster-port",
		"cluster-announce-ip", "cluster-announce-port", "cluster-announce-tls-port", "cluster-announce-bus-port",
		"cluster-announce-hostname", "cluster-preferred-endpoint-type", "cluster-require-full-coverage",
		"cluster-allow-reads-when-down", "cluster-allow-pubsubshard-when-down", "cluster-replica-no-failover",
		"cluster-replica-validity-factor", "cluster-migration-barrier", "cluster-allow-replica-migration",
		"cluster-link-sendbuf-limit", "tls-cluster"}},
	{"Rate limiting", []string{"rl-policies", "rl-login-keep"}},
	{"Monitoring: slow log, latency, metrics", []string{"slowlog-log-slower-than", "slowlog-max-len",
		"latency-monitor-threshold", "latency-tracking", "latency-tracking-info-percentiles", "metrics-addr"}},
	{"Advanced: encodings, notifications, lazy freeing", []string{"hash-max-listpack-entries", "hash-max-listpack-value",
		"zset-max-listpack-entries", "zset-max-listpack-value", "set-max-intset-entries", "list-max-listpack-size",
		"list-compress-depth", "hll-sparse-max-bytes", "stream-node-max-bytes", "stream-node-max-entries",
		"notify-keyspace-events", "lazyfree-lazy-eviction", "lazyfree-lazy-expire", "lazyfree-lazy-server-del", "lazyfree-lazy-user-del", "lazyfree-lazy-user-flush"}},
}

// paramUnits gives the unit of the integer parameters that have one;
// memory parameters are in bytes, durations carry their own.
var paramUnits = map[string]string{
	"timeout":                         "seconds",
	"tcp-keepalive":                   "seconds",
	"hz":                              "per second",
	"maxclients":                      "clients",
	"acllog-max-len":                  "entries",
	"maxmemory-samples":               "keys",
	"lfu-decay-time":                  "minutes",
	"busy-reply-threshold":            "milliseconds",
	"repl-backlog-ttl":                "seconds",
	"repl-timeout":                    "seconds",
	"repl-ping-replica-period":        "seconds",
	"min-replicas-to-write":           "replicas",
	"min-replicas-max-lag":            "seconds",
	"repl-diskless-sync-delay":        "seconds",
	"repl-diskless-sync-max-replicas": "replicas",
	"tls-session-cache-size":          "entries",
	"tls-session-cache-timeout":       "seconds",
	"rl-login-keep":                   "entries",
	"slowlog-log-slower-than":         "microseconds",
	"cluster-node-timeout":            "milliseconds",
	"cluster-replica-validity-factor": "node timeouts",
	"cluster-migration-barrier":       "replicas",
	"slowlog-max-len":                 "entries",
	"latency-monitor-threshold":       "milliseconds",
	"hash-max-listpack-entries":       "fields",
	"hash-max-listpack-value":         "bytes",
	"zset-max-listpack-entries":       "members",
	"zset-max-listpack-value":         "bytes",
	"set-max-intset-entries":          "members",
	"stream-node-max-entries":         "entries",
}

// Group is one of --help's sections: its title, and the names of its
// parameters in the order it lists them.
type Group struct {
	Title string
	Names []string
}

// Groups returns --help's sections, in order.
func Groups() []Group {
	out := make([]Group, len(paramGroups))
	for i, g := range paramGroups {
		out[i] = Group{Title: g.title, Names: g.names}
	}
	return out
}

// groupOf returns the section of a parameter ("" when it has none).
func groupOf(name string) string {
	for _, g := range paramGroups {
		for _, n := range g.names {
			if n == name {
				return g.title
			}
		}
	}
	return ""
}

// typeOf says what a parameter's value is: its type, or its choices.
func (p *param) typeOf() string {
	switch p.kind {
	case kBool:
		return "yes|no"
	case kInt:
		return "integer"
	case kMemory:
		return "bytes"
	case kEnum:
		return strings.Join(p.enum, "|")
	case kDuration:
		return "duration"
	}
	return "string"
}

// unitOf is the unit of a parameter's value, "" when it has none or its
// type says it.
func (p *param) unitOf() string {
	return paramUnits[p.name]
}

// defaultText is the default as --help shows it: memory in the largest
// unit that divides it (512mb rather than 536870912).
func (p *param) defaultText() string {
	if p.kind != kMemory {
		return p.def
	}
	n, err := strconv.ParseInt(p.def, 10, 64)
	if err != nil || n == 0 {
		return p.def
	}
	for _, u := range []struct {
		name string
		size int64
	}{{"gb", 1 << 30}, {"mb", 1 << 20}, {"kb", 1 << 10}} {
		if n%u.size == 0 {
			return strconv.FormatInt(n/u.size, 10) + u.name
		}
	}
	return p.def
}
