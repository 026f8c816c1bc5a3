package commands

import (
	"strconv"
	"strings"

	"github.com/limitkv/limitkv/cluster"
	"github.com/limitkv/limitkv/engine"
)

// clusterCommands: CLUSTER and the connection's cluster modes.
func clusterCommands() []*command {
	const admin = "no_async_loading admin stale"
	// The views of the cluster are answered while a replica loads its
	// master's copy: redis-cli --cluster reads them right after it made
	// replicas, whose first sync may be under way.
	const view = "stale no_keyspace"
	return []*command{
		cmd("cluster", -2, "", nil).withSub(
			cmd("addslots", -3, admin, cmdClusterAddSlots),
			cmd("addslotsrange", -4, admin, cmdClusterAddSlotsRange),
			cmd("bumpepoch", 2, admin, cmdClusterBumpEpoch),
			cmd("count-failure-reports", 3, "admin stale no_keyspace", cmdClusterCountFailureReports),
			cmd("countkeysinslot", 3, "stale", cmdClusterCountKeysInSlot),
			cmd("delslots", -3, admin, cmdClusterAddSlots),
			cmd("delslotsrange", -4, admin, cmdClusterAddSlotsRange),
			cmd("failover", -2, admin, cmdClusterFailover),
			cmd("flushslots", 2, admin, cmdClusterFlushSlots),
			cmd("forget", 3, admin, cmdClusterForget),
			cmd("getkeysinslot", 4, "stale", cmdClusterGetKeysInSlot),
			cmd("help", 2, "loading stale", cmdClusterHelp),
			cmd("info", 2, view, cmdClusterInfo),
			cmd("keyslot", 3, "stale no_keyspace", cmdClusterKeySlot),
			cmd("links", 2, view, cmdClusterLinks),
			cmd("meet", -4, admin, cmdClusterMeet),
			cmd("myid", 2, view, cmdClusterMyID),
			cmd("nodes", 2, view, cmdClusterNodes),
			cmd("replicas", 3, "admin stale no_keyspace", cmdClusterReplicas),
			cmd("replicate", 3, admin, cmdClusterReplicate),
			cmd("reset", -2, "admin stale noscript", cmdClusterReset),
			cmd("saveconfig", 2, admin, cmdClusterSaveConfig),
			cmd("set-config-epoch", 3, admin, cmdClusterSetConfigEpoch),
			cmd("setslot", -4, admin, cmdClusterSetSlot),
			cmd("shards", 2, view, cmdClusterShards),
			cmd("slaves", 3, "admin stale no_keyspace", cmdClusterReplicas),
			cmd("slots", 2, view, cmdClusterSlots),
		),
		cmd("readonly", 1, "fast loading stale", cmdReadonly),
		cmd("readwrite", 1, "fast loading stale", cmdReadwrite),
		cmd("asking", 1, "fast", cmdAsking),
	}
}

// The CLUSTER subcommands, as Redis 7.0's clusterCommand: each reads or
// changes the node's cluster.State on the bus's goroutine (Server.Cluster),
// which owns it; the checks and error texts are the state's, the key
// counts the engine's per-slot index. Without cluster-enabled every
// subcommand, HELP included, and READONLY, READWRITE and ASKING answer
// that cluster support is disabled.

const msgClusterDisabled = "ERR This instance has cluster support disabled"

// clusterBus is the node's bus, or nil after replying that cluster mode
// is off.
func clusterBus(c *Ctx) *cluster.Bus {
	if c.Srv.Cluster == nil {
		c.W.Error(msgClusterDisabled)
	}
	return c.Srv.Cluster
}

// clusterReply writes the reply of an operation: OK, or its error, whose
// text is Redis's whole reply.
func clusterReply(c *Ctx, err error) {
	if err != nil {
		clusterErr(c, err)
		return
	}
	c.W.OK()
}

// clusterErr writes an error of the cluster package, whose text is the
// whole reply, code included.
func clusterErr(c *Ctx, err error) { c.W.Error(err.Error()) }

// clusterView runs f over the state, for a read between messages.
func clusterView(c *Ctx, f func(*cluster.State)) bool {
	b := clusterBus(c)
	return b != nil && b.View(f)
}

// slotArg parses a slot argument (getSlotOrReply).
func slotArg(b []byte) (uint16, error) {
	n, ok := engine.ParseInt(b)
	if !ok || n < 0 || n >= cluster.Slots {
		return 0, errReply("ERR Invalid or out of range slot")
	}
	return uint16(n), nil
}

func cmdClusterHelp(c *Ctx) {
	if clusterBus(c) != nil {
		cmdHelp(c)
	}
}

// ADDSLOTS and DELSLOTS parse every slot before checking any.
func cmdClusterAddSlots(c *Ctx) {
	b := clusterBus(c)
	if b == nil {
		return
	}
	ranges := make([]cluster.SlotRange, 0, len(c.Args)-2)
	for _, a := range c.Args[2:] {
		slot, err := slotArg(a)
		if err != nil {
			clusterErr(c, err)
			return
		}
		ranges = append(ranges, cluster.SlotRange{First: slot, Last: slot})
	}
	clusterSlots(c, b, ranges)
}

func clusterSlots(c *Ctx, b *cluster.Bus, ranges []cluster.SlotRange) {
	if strings.HasPrefix(c.Spec.Name, "del") {
		clusterReply(c, b.DelSlots(ranges))
	} else {
		clusterReply(c, b.AddSlots(ranges))
	}
}

// ADDSLOTSRANGE and DELSLOTSRANGE check each range as they read it, so
// a range's assignment error comes before a later range's parse error.
func cmdClusterAddSlotsRange(c *Ctx) {
	b := clusterBus(c)
	if b == nil {
		return
	}
	if len(c.Args)%2 == 1 {
		c.W.Error("wrong number of arguments for '" + c.Spec.FullName() + "' command")
		return
	}
	del := strings.HasPrefix(c.Spec.Name, "del")
	var ranges []cluster.SlotRange
	var bad error
	for i := 2; i < len(c.Args) && bad == nil; i += 2 {
		first, err := slotArg(c.Args[i])
		if err == nil {
			var last uint16
			last, err = slotArg(c.Args[i+1])
			if err == nil && first > last {
				err = errReply("ERR start slot number " + strconv.Itoa(int(first)) + " is greater than end slot number " + strconv.Itoa(int(last)))
			}
			if err == nil {
				ranges = append(ranges, cluster.SlotRange{First: first, Last: last})
				continue
			}
		}
		bad = err
	}
	if bad != nil {
		b.View(func(s *cluster.State) {
			if err := s.CheckSlots(ranges, del); err != nil {
				bad = err
			}
		})
		clusterErr(c, bad)
		return
	}
	clusterSlots(c, b, ranges)
}

func cmdClusterFlushSlots(c *Ctx) {
	b := clusterBus(c)
	if b == nil {
		return
	}
	if c.Srv.Eng.DBSize(0, c.held) != 0 {
		c.W.Error("ERR DB must be empty to perform CLUSTER FLUSHSLOTS.")
		return
	}
	clusterReply(c, b.FlushSlots())
}

func cmdClusterSetSlot(c *Ctx) {
	b := clusterBus(c)
	if b == nil {
		return
	}
	args := make([]string, len(c.Args)-3)
	for i, a := range c.Args[3:] {
		args[i] = string(a)
	}
	clusterReply(c, b.Admin(func(s *cluster.State) (cluster.Changes, error) {
		if s.Me().IsSlave() {
			return cluster.Changes{}, errReply("ERR Please use SETSLOT only with masters.")
		}
		slot, err := slotArg(c.Args[2])
		if err != nil {
			return cluster.Changes{}, err
		}
		return s.SetSlot(slot, args, func(slot uint16) int { return c.Srv.Eng.CountKeysInSlot(slot, c.held) })
	}))
}

func cmdClusterBumpEpoch(c *Ctx) {
	b := clusterBus(c)
	if b == nil {
		return
	}
	bumped, epoch, err := b.BumpEpoch()
	switch {
	case err != nil:
		clusterErr(c, err)
	case bumped:
		c.W.Simple("BUMPED " + strconv.FormatUint(epoch, 10))
	default:
		c.W.Simple("STILL " + strconv.FormatUint(epoch, 10))
	}
}

func cmdClusterInfo(c *Ctx) {
	var text string
	if clusterView(c, func(s *cluster.State) { text = s.ClusterInfo().String() }) {
		c.W.Verbatim("txt", text)
	}
}

func cmdClusterSaveConfig(c *Ctx) {
	if b := clusterBus(c); b != nil {
		clusterReply(c, b.SaveConfig())
	}
}

func cmdClusterKeySlot(c *Ctx) {
	if clusterBus(c) != nil {
		c.W.Int(int64(cluster.KeySlot(c.Args[2])))
	}
}

func cmdClusterCountKeysInSlot(c *Ctx) {
	if clusterBus(c) == nil {
		return
	}
	slot, ok := c.Int(2)
	if !ok {
		return
	}
	if slot < 0 || slot >= cluster.Slots {
		c.W.Error("ERR Invalid slot")
		return
	}
	c.W.Int(int64(c.Srv.Eng.CountKeysInSlot(uint16(slot), c.held)))
}

func cmdClusterGetKeysInSlot(c *Ctx) {
	if clusterBus(c) == nil {
		return
	}
	slot, ok := c.Int(2)
	if !ok {
		return
	}
	count, ok := c.Int(3)
	if !ok {
		return
	}
	if slot < 0 || slot >= cluster.Slots || count < 0 {
		c.W.Error("ERR Invalid slot or number of keys")
		return
	}
	keys := c.Srv.Eng.KeysInSlot(uint16(slot), int(min(count, 1<<31)), c.held)
	c.W.Array(len(keys))
	for _, k := range keys {
		c.W.Bulk(k)
	}
}

func cmdClusterForget(c *Ctx) {
	if b := clusterBus(c); b != nil {
		clusterReply(c, b.Forget(string(c.Args[2])))
	}
}

func cmdClusterReplicate(c *Ctx) {
	if b := clusterBus(c); b != nil {
		clusterReply(c, b.Replicate(string(c.Args[2]), c.Srv.Eng.DBSize(0, c.held) != 0))
	}
}

func cmdClusterReplicas(c *Ctx) {
	var lines []string
	var err error
	plaintext := c.Srv.clusterPlaintext(c.Client)
	if !clusterView(c, func(s *cluster.State) {
		var reps []*cluster.Node
		reps, err = s.ReplicasOf(string(c.Args[2]))
		for _, r := range reps {
			lines = append(lines, s.NodeLine(r, plaintext))
		}
	}) {
		return
	}
	if err != nil {
		clusterErr(c, err)
		return
	}
	c.W.Array(len(lines))
	for _, l := range lines {
		c.W.BulkString(l)
	}
}

func cmdClusterCountFailureReports(c *Ctx) {
	var n int
	var err error
	if !clusterView(c, func(s *cluster.State) { n, err = s.CountFailureReports(string(c.Args[2]), c.Now) }) {
		return
	}
	if err != nil {
		clusterErr(c, err)
		return
	}
	c.W.Int(int64(n))
}

func cmdClusterSetConfigEpoch(c *Ctx) {
	b := clusterBus(c)
	if b == nil {
		return
	}
	epoch, ok := c.Int(2)
	if ok {
		clusterReply(c, b.SetConfigEpoch(epoch))
	}
}

func cmdClusterReset(c *Ctx) {
	b := clusterBus(c)
	if b == nil {
		return
	}
	hard := false
	if len(c.Args) == 3 {
		switch {
		case is(c.Args[2], "HARD"):
			hard = true
		case is(c.Args[2], "SOFT"):
		default:
			c.W.Error(msgSyntax)
			return
		}
	}
	if len(c.Args) > 3 {
		c.W.Error("unknown subcommand or wrong number of arguments for '" + trunc(string(c.Args[1]), 128) + "'. Try CLUSTER HELP.")
		return
	}
	var master bool
	b.View(func(s *cluster.State) { master = s.Me().IsMaster() })
	if master && c.Srv.Eng.DBSize(c.DB, c.held) != 0 {
		c.W.Error("ERR CLUSTER RESET can't be called with master nodes containing keys")
		return
	}
	clusterReply(c, b.Reset(hard))
}

// CLUSTER FAILOVER [FORCE|TAKEOVER] starts a manual failover on a
// replica; the bus carries it out after the reply, as Redis's does.
func cmdClusterFailover(c *Ctx) {
	b := clusterBus(c)
	if b == nil {
		return
	}
	if len(c.Args) > 3 {
		c.W.Error("unknown subcommand or wrong number of arguments for '" + trunc(string(c.Args[1]), 128) + "'. Try CLUSTER HELP.")
		return
	}
	mode := cluster.FailoverDefault
	if len(c.Args) == 3 {
		switch {
		case is(c.Args[2], "FORCE"):
			mode = cluster.FailoverForce
		case is(c.Args[2], "TAKEOVER"):
			mode = cluster.FailoverTakeover
		default:
			c.W.Error(msgSyntax)
			return
		}
	}
	clusterReply(c, b.ManualFailover(mode))
}

func cmdClusterMeet(c *Ctx) {
	b := clusterBus(c)
	if b == nil {
		return
	}
	if len(c.Args) > 5 {
		c.W.Error("unknown subcommand or wrong number of arguments for '" + trunc(string(c.Args[1]), 128) + "'. Try CLUSTER HELP.")
		return
	}
	port, ok := engine.ParseInt(c.Args[3])
	if !ok {
		c.W.Error("ERR Invalid TCP base port specified: " + string(c.Args[3]))
		return
	}
	cport := port + cluster.BusPortOffset
	if len(c.Args) == 5 {
		if cport, ok = engine.ParseInt(c.Args[4]); !ok {
			c.W.Error("ERR Invalid TCP bus port specified: " + string(c.Args[4]))
			return
		}
	}
	ip, err := cluster.MeetAddress(string(c.Args[2]), string(c.Args[3]), port, cport)
	if err == nil {
		err = b.Meet(ip, uint16(port), uint16(cport))
	}
	clusterReply(c, err)
}

func cmdClusterMyID(c *Ctx) {
	var id string
	if clusterView(c, func(s *cluster.State) { id = s.Myself }) {
		c.W.BulkString(id)
	}
}

func cmdClusterNodes(c *Ctx) {
	var text string
	plaintext := c.Srv.clusterPlaintext(c.Client)
	if clusterView(c, func(s *cluster.State) { text = s.ClusterNodes(plaintext) }) {
		c.W.Verbatim("txt", text)
	}
}

// CLUSTER SLOTS: each node is its IP, port and ID, then a map of its
// other endpoints, the hostname when it has one.
func cmdClusterSlots(c *Ctx) {
	var entries []cluster.SlotsEntry
	offset := c.Srv.Replication().Offset
	if !clusterView(c, func(s *cluster.State) { entries = s.ClusterSlots(offset) }) {
		return
	}
	plaintext := c.Srv.clusterPlaintext(c.Client)
	c.W.Array(len(entries))
	for _, e := range entries {
		c.W.Array(2 + len(e.Nodes))
		c.W.Int(int64(e.First))
		c.W.Int(int64(e.Last))
		for _, n := range e.Nodes {
			port := n.Port
			if plaintext && n.PPort != 0 {
				port = n.PPort
			}
			c.W.Array(4)
			c.W.BulkString(n.IP)
			c.W.Int(int64(port))
			c.W.BulkString(n.ID)
			if n.Hostname == "" {
				c.W.Map(0)
				continue
			}
			c.W.Map(1)
			c.W.BulkString("hostname")
			c.W.BulkString(n.Hostname)
		}
	}
}

func cmdClusterShards(c *Ctx) {
	var shards []cluster.Shard
	offset := c.Srv.Replication().Offset
	tlsCluster := c.Srv.Cfg.Get("tls-cluster") == "yes"
	if !clusterView(c, func(s *cluster.State) { shards = s.ClusterShards(offset, tlsCluster) }) {
		return
	}
	c.W.Array(len(shards))
	for _, sh := range shards {
		c.W.Map(2)
		c.W.BulkString("slots")
		c.W.Array(len(sh.Slots))
		for _, j := range sh.Slots {
			c.W.Int(int64(j))
		}
		c.W.BulkString("nodes")
		c.W.Array(len(sh.Nodes))
		for _, n := range sh.Nodes {
			fields := 6
			for _, opt := range []bool{n.Port != 0, n.TLSPort != 0, n.Hostname != ""} {
				if opt {
					fields++
				}
			}
			c.W.Map(fields)
			c.W.BulkString("id")
			c.W.BulkString(n.ID)
			if n.Port != 0 {
				c.W.BulkString("port")
				c.W.Int(int64(n.Port))
			}
			if n.TLSPort != 0 {
				c.W.BulkString("tls-port")
				c.W.Int(int64(n.TLSPort))
			}
			c.W.BulkString("ip")
			c.W.BulkString(n.IP)
			c.W.BulkString("endpoint")
			c.W.BulkString(n.Endpoint)
			if n.Hostname != "" {
				c.W.BulkString("hostname")
				c.W.BulkString(n.Hostname)
			}
			c.W.BulkString("role")
			c.W.BulkString(n.Role)
			c.W.BulkString("replication-offset")
			c.W.Int(n.ReplicationOffset)
			c.W.BulkString("health")
			c.W.BulkString(n.Health)
		}
	}
}

func cmdClusterLinks(c *Ctx) {
	b := clusterBus(c)
	if b == nil {
		return
	}
	links := b.Links()
	c.W.Array(len(links))
	for _, l := range links {
		c.W.Map(6)
		c.W.BulkString("direction")
		c.W.BulkString(l.Direction)
		c.W.BulkString("node")
		c.W.BulkString(l.Node)
		c.W.BulkString("create-time")
		c.W.Int(l.CreateTime)
		c.W.BulkString("events")
		c.W.BulkString(l.Events)
		c.W.BulkString("send-buffer-allocated")
		c.W.Int(l.SendBufferAllocated)
		c.W.BulkString("send-buffer-used")
		c.W.Int(l.SendBufferUsed)
	}
}

// READONLY, READWRITE and ASKING set the client's modes, which dispatch
// reads when it routes a request (ASKING's lasts one request).
func cmdReadonly(c *Ctx) {
	if clusterBus(c) != nil {
		c.Client.readOnly = true
		c.W.OK()
	}
}

func cmdReadwrite(c *Ctx) {
	if clusterBus(c) != nil {
		c.Client.readOnly = false
		c.W.OK()
	}
}

func cmdAsking(c *Ctx) {
	if clusterBus(c) != nil {
		c.Client.asking = true
		c.W.OK()
	}
}

func infoCluster(s *Server, b *strings.Builder) {
	if s.Cluster != nil {
		b.WriteString("cluster_enabled:1\r\n")
	} else {
		b.WriteString("cluster_enabled:0\r\n")
	}
}
