package commands

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"github.com/limitkv/limitkv/cluster"
	"github.com/limitkv/limitkv/cmdspec"
	"github.com/limitkv/limitkv/config"
	"github.com/limitkv/limitkv/resp"
)

// The node's part in a Redis Cluster: starting its bus from nodes.conf,
// and routing each request to the node that serves its keys' slot. The
// CLUSTER command is cluster.go's.

// StartCluster starts the cluster bus when cluster-enabled is on: the node
// takes up its id, epochs, slots and peers from nodes.conf in dir, or
// starts as a new node and writes one. A nodes.conf that cannot be read
// stops start-up: a node that silently took a new identity would join
// its own cluster as a stranger.
func (s *Server) StartCluster() error {
	if s.Cfg.Get("cluster-enabled") != "yes" {
		return nil
	}
	if _, _, replica := s.Cfg.ReplicaOf(); replica {
		return errors.New("replicaof directive not allowed in cluster mode")
	}
	path := s.nodesConfPath()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	conf, err := cluster.LoadNodesConf(path)
	if err != nil {
		return fmt.Errorf("unrecoverable error: corrupted cluster config file: %w", err)
	}
	timeout := s.Cfg.Int("cluster-node-timeout")
	var st *cluster.State
	if conf != nil {
		if st, err = cluster.FromNodesConf(conf, timeout, s.Eng.Now()); err != nil {
			return fmt.Errorf("unrecoverable error: corrupted cluster config file %s: %w", path, err)
		}
	}
	port := s.Cfg.Int("port")
	if p := s.Cfg.Int("cluster-announce-port"); p != 0 {
		port = p
	}
	bus, err := cluster.NewBus(cluster.BusConfig{
		IP:          s.Cfg.Get("cluster-announce-ip"),
		Port:        uint16(port),
		BusPort:     uint16(s.Cfg.Int("cluster-port")),
		Hostname:    s.Cfg.Get("cluster-announce-hostname"),
		NodeTimeout: timeout,
		State:       st,
		Save:        func(st *cluster.State) { s.saveNodesConf(path, st) },
		Logger:      s.Log,
	})
	if err != nil {
		return fmt.Errorf("cluster bus: %w", err)
	}
	s.Cluster = bus
	bus.Do(func(st *cluster.State) {
		st.RequireFullCoverage = s.Cfg.Get("cluster-require-full-coverage") == "yes"
		st.AllowReplicaMigration = s.Cfg.Get("cluster-allow-replica-migration") == "yes"
	})
	// A new node writes its identity at once, as Redis does, so that a
	// restart before any change keeps it.
	bus.Do(func(st *cluster.State) { s.saveNodesConf(path, st) })
	s.Log.Info("cluster bus ready", "node", bus.ID(), "addr", bus.Addr().String(), "config", path)
	return nil
}

// clusterEffects wires the cluster settings that change a running node;
// StartCluster reads the others once.
func (c *Config) clusterEffects() map[string]config.Effect {
	onState := func(f func(st *cluster.State, n int64)) config.Effect {
		return config.Effect{Apply: func(_ string, n int64) {
			if c.srv != nil && c.srv.Cluster != nil {
				c.srv.Cluster.Do(func(st *cluster.State) { f(st, n) })
			}
		}}
	}
	return map[string]config.Effect{
		"cluster-allow-reads-when-down": {Apply: func(_ string, n int64) { c.clusterReadsWhenDown.Store(n != 0) }},
		"cluster-node-timeout":          onState(func(st *cluster.State, n int64) { st.NodeTimeout = n }),
		"cluster-require-full-coverage": onState(func(st *cluster.State, n int64) { st.RequireFullCoverage = n != 0 }),
		"cluster-allow-replica-migration": onState(func(st *cluster.State, n int64) {
			st.AllowReplicaMigration = n != 0
		}),
	}
}

// StopCluster closes the cluster bus, if any.
func (s *Server) StopCluster() {
	if s.Cluster != nil {
		s.Cluster.Close()
	}
}

func (s *Server) nodesConfPath() string {
	name := s.Cfg.Get("cluster-config-file")
	if filepath.IsAbs(name) {
		return name
	}
	return filepath.Join(s.Cfg.Get("dir"), name)
}

// saveNodesConf writes nodes.conf, on the bus's goroutine. A failure is
// logged and the bus goes on: Redis exits instead, but a node that
// cannot write its file still serves correctly until it restarts.
func (s *Server) saveNodesConf(path string, st *cluster.State) {
	if err := st.NodesConf().WriteFile(path); err != nil {
		s.Log.Error("cannot save the cluster configuration", "file", path, "err", err)
	}
}

// clusterRedirect routes a request as Redis's processCommand does in
// cluster mode, returning the redirection or error to answer instead of
// running it, "" to run it here. A command without key arguments runs
// anywhere; EXEC routes the keys of every command it queued; the master
// of a replica is obeyed whatever it sends.
func (s *Server) clusterRedirect(cl *Client, spec *cmdspec.Spec, flags cmdspec.Flag, args [][]byte) string {
	isExec := spec.Name == "exec"
	if cl.master || (!isExec && !routed(spec)) {
		return ""
	}
	q := &cl.route
	q.Reset()
	if isExec {
		if !cl.multi {
			return ""
		}
		for i := range cl.queued {
			qc := &cl.queued[i]
			addKeys(q, qc.spec, qc.args)
			if qc.flags&cmdspec.Write != 0 {
				q.Write = true
			}
		}
	} else {
		addKeys(q, spec, args)
		q.Write = flags&cmdspec.Write != 0
	}
	if q.Keys() == 0 {
		return ""
	}
	q.Asking = cl.asking || flags&cmdspec.Asking != 0
	q.ReadOnly = cl.readOnly
	q.PubSubShard = isShardPubSub(spec)
	q.Migrate = spec.Name == "migrate"
	q.AllowReadsWhenDown = s.Cfg.clusterReadsWhenDown.Load()
	q.Exists = s.existsInDB0
	d, slot, n := s.Cluster.Routing().Route(q)
	if d == cluster.Here {
		return ""
	}
	return d.Error(slot, n, !cl.conn.IsTLS() && s.Cfg.Get("tls-cluster") == "yes")
}

// routed reports whether a command is routed by its keys: Redis routes
// every command that declares key specs (channels of the shard pub/sub
// commands included) or finds its keys itself.
func routed(spec *cmdspec.Spec) bool {
	return len(spec.KeySpecs()) > 0 || spec.Flags&cmdspec.Movable != 0
}

// addKeys adds a command's keys to q: those its key specs find, or, for
// a command whose key specs name only channels (SPUBLISH), the legacy
// key range, as Redis's getKeysFromCommand takes it.
func addKeys(q *cluster.Query, spec *cmdspec.Spec, args [][]byte) {
	var pos [8]int
	keys := spec.KeyPositions(args, pos[:0])
	if len(keys) == 0 && !spec.HasKeys() {
		keys = legacyKeyRange(spec, len(args), keys)
	}
	for _, i := range keys {
		q.Key(args[i])
	}
}

// legacyKeyRange lists the arguments in a spec's first/last/step range.
func legacyKeyRange(spec *cmdspec.Spec, argc int, out []int) []int {
	first, last, step := spec.KeyRange()
	if first <= 0 || step <= 0 {
		return out
	}
	if last < 0 {
		last += argc
	}
	for i := first; i <= last && i < argc; i += step {
		out = append(out, i)
	}
	return out
}

func isShardPubSub(spec *cmdspec.Spec) bool {
	switch spec.Name {
	case "spublish", "ssubscribe", "sunsubscribe":
		return true
	}
	return false
}

// existsInDB0 reports whether key is in DB 0, the only one a cluster
// node uses, under its shard's lock.
func (s *Server) existsInDB0(key []byte) bool {
	m := s.Eng.Add(0, key)
	s.Eng.Lock(m)
	defer s.Eng.Unlock(m)
	return s.Eng.ShardFor(key).Exists(0, key, s.Eng.Now())
}

// clusterRefuse answers a request that clusterRedirect sent elsewhere:
// inside MULTI the transaction is flagged, and an EXEC discards it and
// answers the redirection itself, not EXECABORT, as Redis does.
func (s *Server) clusterRefuse(cl *Client, w *resp.Writer, spec *cmdspec.Spec, msg string) {
	s.cmd(spec).reject.Add(1)
	if spec.Name == "exec" {
		cl.discardTx()
		cl.unwatchAll()
	} else {
		cl.flagTx()
	}
	w.Error(msg)
}
