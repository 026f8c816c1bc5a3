// Package metrics serves limitkv's Prometheus metrics: a collector that
// reads the server's own counters when Prometheus scrapes (nothing is
// updated on the request path for it) and an HTTP endpoint on a listener
// of its own. It uses the official client, prometheus/client_golang, for
// the registry and the exposition format.
//
// Every label takes its values from a bounded set, whatever the traffic:
// command (the command table, plus "(unknown)" for every request naming
// no command), code (error codes, which the server caps at 128),
// decision (allowed, denied, shadow_denied), db (the databases, at most
// the databases setting), role (master, replica) and policy (the named
// rate-limit policies, at most 10000). No label ever holds a key.
package metrics

import (
	"strconv"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/limitkv/limitkv/commands"
)

// UnknownCommand is the command label of requests that named no command.
const UnknownCommand = "(unknown)"

// DurationBuckets are the upper bounds of the command duration histograms:
// powers of four from 1.024 µs to 17.2 s, each a bucket boundary of the
// server's own histograms, so that every count is exact.
var DurationBuckets = func() []time.Duration {
	var b []time.Duration
	for d := time.Duration(1024); d <= 1<<34; d *= 4 {
		b = append(b, d)
	}
	return b
}()

// Collector reads a server's counters at each scrape.
type Collector struct {
	srv   *commands.Server
	names []string

	commands, failed, rejected, duration             *prometheus.Desc
	rlDecisions, errors, errorReplies                *prometheus.Desc
	policyDecisions                                  *prometheus.Desc
	clients, maxClients, connections, rejectedConns  *prometheus.Desc
	processed, netIn, netOut, uptime, info           *prometheus.Desc
	memUsed, memPeak, memRSS, memDataset, memMax     *prometheus.Desc
	keys, expiring, expired, evicted, hits, misses   *prometheus.Desc
	slowlogLen                                       *prometheus.Desc
	persistence, snapshots, snapErrors, snapRunning  *prometheus.Desc
	snapDuration, snapPause, snapLastOK, snapSuccess *prometheus.Desc
	snapAge, snapPending                             *prometheus.Desc
	replRole, replicas, replLag, replOffset          *prometheus.Desc
}

// NewCollector returns a collector of srv's metrics.
func NewCollector(srv *commands.Server) *Collector {
	var names []string
	d := func(name, help string, labels ...string) *prometheus.Desc {
		names = append(names, "limitkv_"+name)
		return prometheus.NewDesc("limitkv_"+name, help, labels, nil)
	}
	c := &Collector{
		srv:             srv,
		commands:        d("commands_total", "Calls of each command (INFO commandstats calls), subcommands as container|sub.", "command"),
		failed:          d("commands_failed_total", "Calls that ran and replied with an error (failed_calls).", "command"),
		rejected:        d("commands_rejected_total", "Requests refused before running: wrong arity, NOAUTH, BUSY... (rejected_calls); \"(unknown)\" counts unknown commands.", "command"),
		duration:        d("command_duration_seconds", "Time each command took, from dispatch to its reply written (waits for shard locks included), while latency-tracking is on.", "command"),
		rlDecisions:     d("ratelimit_decisions_total", "Rate-limit decisions by command and outcome (requests that only look, such as PEEK, are not counted).", "command", "decision"),
		policyDecisions: d("ratelimit_policy_decisions_total", "RL.CHECK decisions by named policy and outcome (PEEK not counted); a policy replaced by RL.POLICY SET keeps its counts, a deleted one loses them.", "policy", "decision"),
		errors:          d("errors_total", "Error replies by code (INFO errorstats; at most 128 codes, then ERRORSTATS_DISABLED).", "code"),
		errorReplies:    d("error_replies_total", "Error replies sent (total_error_replies)."),
		clients:         d("connected_clients", "Client connections open."),
		maxClients:      d("max_clients", "The maxclients setting."),
		connections:     d("connections_received_total", "Connections accepted."),
		rejectedConns:   d("rejected_connections_total", "Connections refused (maxclients, protected mode)."),
		processed:       d("commands_processed_total", "Commands executed (total_commands_processed)."),
		netIn:           d("net_input_bytes_total", "Bytes read from clients."),
		netOut:          d("net_output_bytes_total", "Bytes written to clients."),
		uptime:          d("uptime_seconds", "Time since the server started."),
		info:            d("build_info", "The server's version and the Redis version it is compatible with; always 1.", "version", "redis_version"),
		memUsed:         d("memory_used_bytes", "Bytes the server holds for its data, clients and scripts, by its own count (INFO used_memory), which maxmemory limits."),
		memPeak:         d("memory_peak_bytes", "The highest used memory seen (used_memory_peak)."),
		memRSS:          d("memory_rss_bytes", "Resident set size of the process."),
		memDataset:      d("memory_dataset_bytes", "Bytes the keyspace's values and keys take (used_memory_dataset)."),
		memMax:          d("memory_max_bytes", "The maxmemory setting (0: no limit)."),
		keys:            d("keys", "Keys in each database that holds any.", "db"),
		expiring:        d("keys_expiring", "Keys with a time to live in each database that holds any.", "db"),
		expired:         d("expired_keys_total", "Keys deleted because their time to live ran out."),
		evicted:         d("evicted_keys_total", "Keys evicted to stay under maxmemory."),
		hits:            d("keyspace_hits_total", "Lookups that found their key."),
		misses:          d("keyspace_misses_total", "Lookups that did not find their key."),
		slowlogLen:      d("slowlog_length", "Entries in the slow log."),
		persistence:     d("persistence_enabled", "1 when snapshots keep the keyspace on disk."),
		snapshots:       d("snapshots_total", "Snapshots attempted."),
		snapErrors:      d("snapshot_errors_total", "Snapshots that failed."),
		snapRunning:     d("snapshot_in_progress", "1 while a snapshot runs."),
		snapDuration:    d("snapshot_last_duration_seconds", "How long the last snapshot took."),
		snapPause:       d("snapshot_last_pause_seconds", "The longest time the last snapshot held one shard, delaying the commands on it."),
		snapLastOK:      d("snapshot_last_ok", "1 when the last snapshot succeeded."),
		snapSuccess:     d("snapshot_last_success_timestamp_seconds", "Unix time of the last successful snapshot (or of the load at start-up)."),
		snapAge:         d("snapshot_last_success_age_seconds", "Time since the last successful snapshot: the changes a crash would lose are at most this old."),
		snapPending:     d("snapshot_pending_changes", "Keys changed since the last snapshot."),
		replRole:        d("replication_role", "The server's replication role; always 1.", "role"),
		replicas:        d("replication_connected_replicas", "Replicas connected to this server."),
		replLag:         d("replication_lag_seconds", "On a replica, the time since its master was last heard from; on a master, the largest lag of its replicas."),
		replOffset:      d("replication_offset", "The replication offset."),
	}
	c.names = names
	return c
}

// Names lists the names of the metrics the collector exports.
func (c *Collector) Names() []string { return c.names }

// Describe sends the descriptors of every metric.
func (c *Collector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{
		c.commands, c.failed, c.rejected, c.duration, c.rlDecisions, c.policyDecisions, c.errors, c.errorReplies,
		c.clients, c.maxClients, c.connections, c.rejectedConns, c.processed, c.netIn, c.netOut, c.uptime, c.info,
		c.memUsed, c.memPeak, c.memRSS, c.memDataset, c.memMax,
		c.keys, c.expiring, c.expired, c.evicted, c.hits, c.misses, c.slowlogLen,
		c.persistence, c.snapshots, c.snapErrors, c.snapRunning, c.snapDuration, c.snapPause, c.snapLastOK,
		c.snapSuccess, c.snapAge, c.snapPending,
		c.replRole, c.replicas, c.replLag, c.replOffset,
	} {
		ch <- d
	}
}

// Collect reads the server's counters.
func (c *Collector) Collect(ch chan<- prometheus.Metric) {
	counter := func(d *prometheus.Desc, v float64, labels ...string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.CounterValue, v, labels...)
	}
	gauge := func(d *prometheus.Desc, v float64, labels ...string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, v, labels...)
	}
	b2f := func(b bool) float64 {
		if b {
			return 1
		}
		return 0
	}
	srv := c.srv

	for _, st := range srv.CommandStats(DurationBuckets) {
		counter(c.commands, float64(st.Calls), st.Name)
		counter(c.failed, float64(st.Failed), st.Name)
		counter(c.rejected, float64(st.Rejected), st.Name)
		if st.Below == nil {
			continue
		}
		buckets := make(map[float64]uint64, len(DurationBuckets))
		for i, b := range DurationBuckets {
			buckets[b.Seconds()] = st.Below[i]
		}
		ch <- prometheus.MustNewConstHistogram(c.duration, st.Timed, st.TimedSum.Seconds(), buckets, st.Name)
	}
	counter(c.rejected, float64(srv.UnknownCommands()), UnknownCommand)
	for _, rl := range srv.RateLimitStats() {
		counter(c.rlDecisions, float64(rl.Allowed), rl.Command, "allowed")
		counter(c.rlDecisions, float64(rl.Denied), rl.Command, "denied")
		if rl.Shadows {
			counter(c.rlDecisions, float64(rl.ShadowDenied), rl.Command, "shadow_denied")
		}
	}
	for _, p := range srv.PolicyStats() {
		counter(c.policyDecisions, float64(p.Allowed), p.Policy, "allowed")
		counter(c.policyDecisions, float64(p.Denied), p.Policy, "denied")
		counter(c.policyDecisions, float64(p.ShadowDenied), p.Policy, "shadow_denied")
	}
	total, byCode := srv.ErrorStats()
	counter(c.errorReplies, float64(total))
	for _, e := range byCode {
		counter(c.errors, float64(e.Count), e.Code)
	}

	st := srv.Stats()
	gauge(c.clients, float64(st.ConnectedClients))
	gauge(c.maxClients, float64(st.MaxClients))
	counter(c.connections, float64(st.ConnectionsReceived))
	counter(c.rejectedConns, float64(st.RejectedConnections))
	counter(c.processed, float64(st.CommandsProcessed))
	counter(c.netIn, float64(st.NetInputBytes))
	counter(c.netOut, float64(st.NetOutBytes))
	gauge(c.uptime, st.Uptime.Seconds())
	gauge(c.info, 1, commands.Version, commands.RedisVersion)
	gauge(c.memUsed, float64(st.UsedMemory))
	gauge(c.memPeak, float64(st.PeakMemory))
	gauge(c.memRSS, float64(st.RSS))
	gauge(c.memDataset, float64(st.DatasetBytes))
	gauge(c.memMax, float64(st.MaxMemory))
	for _, k := range st.Keys {
		db := strconv.Itoa(k.DB)
		gauge(c.keys, float64(k.Keys), db)
		gauge(c.expiring, float64(k.Expires), db)
	}
	counter(c.expired, float64(st.ExpiredKeys))
	counter(c.evicted, float64(st.EvictedKeys))
	counter(c.hits, float64(st.KeyspaceHits))
	counter(c.misses, float64(st.Misses))
	gauge(c.slowlogLen, float64(st.SlowlogLen))

	p, on := srv.Persistence()
	gauge(c.persistence, b2f(on))
	if on {
		counter(c.snapshots, float64(p.Snapshots))
		counter(c.snapErrors, float64(p.Errors))
		gauge(c.snapRunning, b2f(p.InProgress))
		gauge(c.snapDuration, p.LastDuration)
		gauge(c.snapPause, p.LastPause)
		gauge(c.snapLastOK, b2f(p.LastOK))
		if p.LastSave > 0 {
			gauge(c.snapSuccess, float64(p.LastSave))
			gauge(c.snapAge, max(0, time.Since(time.Unix(p.LastSave, 0)).Seconds()))
		}
		gauge(c.snapPending, float64(p.PendingChanges))
	}

	r := srv.Replication()
	gauge(c.replRole, 1, r.Role)
	gauge(c.replicas, float64(r.ConnectedReplicas))
	gauge(c.replLag, r.Lag.Seconds())
	gauge(c.replOffset, float64(r.Offset))
}
