package cluster

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// NodesConf is a node's nodes.conf in Redis 7.0's format: one line per
// known node, as CLUSTER NODES prints it, then the epochs line
//
//	vars currentEpoch <n> lastVoteEpoch <n>
//
// Fields are kept as the file has them, so that a file Redis wrote
// renders back byte for byte.
type NodesConf struct {
	Nodes         []ConfNode
	CurrentEpoch  uint64
	LastVoteEpoch uint64
}

// Epochs are what of c must outlive a crash of the machine, not only of
// the process: the epochs and the vote, and myself's config epoch. A
// node that came back with older ones could vote twice in an epoch, or
// claim slots under an epoch the cluster has given someone else.
func (c *NodesConf) Epochs() [3]uint64 {
	e := [3]uint64{c.CurrentEpoch, c.LastVoteEpoch}
	for i := range c.Nodes {
		if c.Nodes[i].Flags&NodeMyself != 0 {
			e[2] = c.Nodes[i].ConfigEpoch
		}
	}
	return e
}

// ConfNode is one node's line:
//
//	<id> <ip>:<port>@<cport>[,<hostname>] <flags> <master-id|-> <ping-sent> <pong-recv> <config-epoch> <connected|disconnected> [<slot>|<first>-<last>|[<slot>->-<id>]|[<slot>-<-<id>]]...
type ConfNode struct {
	ID          string
	IP          string
	Port        uint16
	CPort       uint16
	Hostname    string
	Flags       uint16 // NodeMyself, NodeMaster, ...
	Master      string // the master's ID, "" for none ("-")
	PingSent    int64  // milliseconds; Redis keeps only whether it is 0
	PongRecv    int64
	ConfigEpoch uint64
	Connected   bool
	Slots       []SlotRange
	// Moves are the slots in migration, which Redis writes on its own
	// line only.
	Moves []SlotMove
}

// SlotRange is First to Last inclusive, written "n" when they are equal.
type SlotRange struct{ First, Last uint16 }

// SlotMove is a slot being migrated to Node ("[slot->-node]") or, when
// Importing, imported from it ("[slot-<-node]").
type SlotMove struct {
	Slot      uint16
	Importing bool
	Node      string
}

// ValidNodeID is Redis's verifyClusterNodeId: 40 bytes of [a-z0-9].
func ValidNodeID(id string) bool {
	if len(id) != NameLen {
		return false
	}
	for i := 0; i < len(id); i++ {
		if c := id[i]; !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9') {
			return false
		}
	}
	return true
}

// ConfError is why a nodes.conf cannot be loaded: a node refuses to
// start on it, as Redis does on a corrupted cluster config file.
type ConfError struct {
	Line int // 1-based; 0 when the file as a whole is at fault
	Msg  string
}

func (e *ConfError) Error() string {
	if e.Line == 0 {
		return "nodes.conf: " + e.Msg
	}
	return fmt.Sprintf("nodes.conf line %d: %s", e.Line, e.Msg)
}

// ParseNodesConf parses a nodes.conf. It refuses what Redis 7.0 refuses
// (fewer than 8 fields, a bad node ID, an address without ':', an
// unknown flag, two lines flagged myself, a slot out of range, a vars
// line with a variable and no value, no line flagged myself), and
// besides what Redis reads leniently with atoi and strtoull: a port,
// epoch or time that is not a number in range, a link state other than
// connected or disconnected, a slot range whose first slot is after its
// last, and a migration entry in neither direction. Blank lines are
// skipped and unknown vars ignored, as Redis does.
func ParseNodesConf(data []byte) (*NodesConf, error) {
	c := &NodesConf{}
	myself := 0
	for n, line := range bytes.Split(data, []byte("\n")) {
		lineNo := n + 1
		fail := func(format string, args ...any) error {
			return &ConfError{Line: lineNo, Msg: fmt.Sprintf(format, args...)}
		}
		if bytes.ContainsAny(line, "\"'") {
			return nil, fail("quoted fields are not supported")
		}
		f := strings.Fields(string(line))
		if len(f) == 0 {
			continue
		}
		if strings.EqualFold(f[0], "vars") {
			if len(f)%2 == 0 {
				return nil, fail("vars: variable %q has no value", f[len(f)-1])
			}
			for j := 1; j < len(f); j += 2 {
				var dst *uint64
				switch {
				case strings.EqualFold(f[j], "currentEpoch"):
					dst = &c.CurrentEpoch
				case strings.EqualFold(f[j], "lastVoteEpoch"):
					dst = &c.LastVoteEpoch
				default:
					continue
				}
				v, err := strconv.ParseUint(f[j+1], 10, 64)
				if err != nil {
					return nil, fail("vars: %s %q is not an epoch", f[j], f[j+1])
				}
				*dst = v
			}
			continue
		}
		if len(f) < 8 {
			return nil, fail("%d fields, a node line has at least 8", len(f))
		}
		node, err := parseConfNode(f)
		if err != nil {
			return nil, fail("%v", err)
		}
		if node.Flags&NodeMyself != 0 {
			if myself != 0 {
				return nil, fail("a second node flagged myself (the first is on line %d)", myself)
			}
			myself = lineNo
		}
		c.Nodes = append(c.Nodes, node)
	}
	if myself == 0 {
		return nil, &ConfError{Msg: "no node is flagged myself"}
	}
	return c, nil
}

func parseConfNode(f []string) (ConfNode, error) {
	n := ConfNode{ID: f[0]}
	if !ValidNodeID(n.ID) {
		return n, fmt.Errorf("node ID %q is not 40 characters of a-z and 0-9", n.ID)
	}

	addr := f[1]
	if i := strings.IndexByte(addr, ','); i >= 0 {
		addr, n.Hostname = addr[:i], addr[i+1:]
	}
	colon := strings.LastIndexByte(addr, ':')
	if colon < 0 {
		return n, fmt.Errorf("address %q has no ':'", f[1])
	}
	n.IP = addr[:colon]
	if len(n.IP) >= IPLen {
		return n, fmt.Errorf("IP %q is longer than %d bytes", n.IP, IPLen-1)
	}
	ports := addr[colon+1:]
	cport := ""
	if at := strings.IndexByte(ports, '@'); at >= 0 {
		ports, cport = ports[:at], ports[at+1:]
	}
	p, err := strconv.ParseUint(ports, 10, 16)
	if err != nil {
		return n, fmt.Errorf("port %q in %q is not a port number", ports, f[1])
	}
	n.Port = uint16(p)
	if cport == "" {
		// Files older than Redis 4 have no bus port: the default applies.
		n.CPort = n.Port + BusPortOffset
	} else {
		cp, err := strconv.ParseUint(cport, 10, 16)
		if err != nil {
			return n, fmt.Errorf("bus port %q in %q is not a port number", cport, f[1])
		}
		n.CPort = uint16(cp)
	}

	for _, name := range strings.Split(f[2], ",") {
		flag, ok := uint16(0), false
		for _, fn := range nodeFlagNames {
			if strings.EqualFold(name, fn.name) {
				flag, ok = fn.flag, true
				break
			}
		}
		if !ok && !strings.EqualFold(name, "noflags") {
			return n, fmt.Errorf("unknown flag %q in %q", name, f[2])
		}
		n.Flags |= flag
	}

	if !strings.HasPrefix(f[3], "-") {
		if !ValidNodeID(f[3]) {
			return n, fmt.Errorf("master ID %q is not 40 characters of a-z and 0-9", f[3])
		}
		n.Master = f[3]
	}
	if n.PingSent, err = strconv.ParseInt(f[4], 10, 64); err != nil {
		return n, fmt.Errorf("ping-sent %q is not a number", f[4])
	}
	if n.PongRecv, err = strconv.ParseInt(f[5], 10, 64); err != nil {
		return n, fmt.Errorf("pong-recv %q is not a number", f[5])
	}
	if n.ConfigEpoch, err = strconv.ParseUint(f[6], 10, 64); err != nil {
		return n, fmt.Errorf("config epoch %q is not a number", f[6])
	}
	switch f[7] {
	case "connected":
		n.Connected = true
	case "disconnected":
	default:
		return n, fmt.Errorf("link state %q is neither connected nor disconnected", f[7])
	}

	for _, s := range f[8:] {
		if strings.HasPrefix(s, "[") {
			mv, err := parseSlotMove(s)
			if err != nil {
				return n, err
			}
			n.Moves = append(n.Moves, mv)
			continue
		}
		first, last, isRange := strings.Cut(s, "-")
		a, err1 := parseSlot(first)
		b := a
		var err2 error
		if isRange {
			b, err2 = parseSlot(last)
		}
		if err1 != nil || err2 != nil {
			return n, fmt.Errorf("slots %q: not a slot or a range of slots from 0 to %d", s, Slots-1)
		}
		if a > b {
			return n, fmt.Errorf("slots %q: the range ends before it starts", s)
		}
		n.Slots = append(n.Slots, SlotRange{a, b})
	}
	return n, nil
}

func parseSlot(s string) (uint16, error) {
	v, err := strconv.ParseUint(s, 10, 16)
	if err != nil || v >= Slots {
		return 0, errors.New("bad slot")
	}
	return uint16(v), nil
}

func parseSlotMove(s string) (SlotMove, error) {
	var mv SlotMove
	inner, ok := strings.CutSuffix(s[1:], "]")
	if !ok {
		return mv, fmt.Errorf("migration %q has no closing ']'", s)
	}
	slot, id, ok := strings.Cut(inner, "->-")
	if !ok {
		slot, id, ok = strings.Cut(inner, "-<-")
		mv.Importing = true
	}
	if !ok {
		return mv, fmt.Errorf("migration %q is neither [slot->-id] nor [slot-<-id]", s)
	}
	v, err := parseSlot(slot)
	if err != nil {
		return mv, fmt.Errorf("migration %q: slot %q is not from 0 to %d", s, slot, Slots-1)
	}
	if !ValidNodeID(id) {
		return mv, fmt.Errorf("migration %q: node ID %q is not 40 characters of a-z and 0-9", s, id)
	}
	mv.Slot, mv.Node = v, id
	return mv, nil
}

// AppendLine appends n's line, without its newline, as
// clusterGenNodeDescription writes it.
func (n *ConfNode) AppendLine(b []byte) []byte {
	b = append(b, n.ID...)
	b = append(b, ' ')
	b = append(b, n.IP...)
	b = append(b, ':')
	b = strconv.AppendUint(b, uint64(n.Port), 10)
	b = append(b, '@')
	b = strconv.AppendUint(b, uint64(n.CPort), 10)
	if n.Hostname != "" {
		b = append(b, ',')
		b = append(b, n.Hostname...)
	}
	b = append(b, ' ')
	b = append(b, FlagsString(n.Flags)...)
	b = append(b, ' ')
	if n.Master != "" {
		b = append(b, n.Master...)
	} else {
		b = append(b, '-')
	}
	b = append(b, ' ')
	b = strconv.AppendInt(b, n.PingSent, 10)
	b = append(b, ' ')
	b = strconv.AppendInt(b, n.PongRecv, 10)
	b = append(b, ' ')
	b = strconv.AppendUint(b, n.ConfigEpoch, 10)
	if n.Connected {
		b = append(b, " connected"...)
	} else {
		b = append(b, " disconnected"...)
	}
	for _, r := range n.Slots {
		b = append(b, ' ')
		b = strconv.AppendUint(b, uint64(r.First), 10)
		if r.Last != r.First {
			b = append(b, '-')
			b = strconv.AppendUint(b, uint64(r.Last), 10)
		}
	}
	for _, mv := range n.Moves {
		b = append(b, " ["...)
		b = strconv.AppendUint(b, uint64(mv.Slot), 10)
		if mv.Importing {
			b = append(b, "-<-"...)
		} else {
			b = append(b, "->-"...)
		}
		b = append(b, mv.Node...)
		b = append(b, ']')
	}
	return b
}

// Append appends the whole file as clusterSaveConfig writes it.
func (c *NodesConf) Append(b []byte) []byte {
	for i := range c.Nodes {
		b = c.Nodes[i].AppendLine(b)
		b = append(b, '\n')
	}
	b = append(b, "vars currentEpoch "...)
	b = strconv.AppendUint(b, c.CurrentEpoch, 10)
	b = append(b, " lastVoteEpoch "...)
	b = strconv.AppendUint(b, c.LastVoteEpoch, 10)
	return append(b, '\n')
}

// LoadNodesConf reads and parses the file at path. A missing or empty
// file is no configuration, (nil, nil): Redis then starts a new node and
// writes one.
func LoadNodesConf(path string) (*NodesConf, error) {
	data, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) || err == nil && len(data) == 0 {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	c, err := ParseNodesConf(data)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return c, nil
}

// WriteFile replaces the file at path with c, so that a crash at any
// point leaves either the old file or the new one whole: the new
// contents go to a temporary file in the same directory and are renamed
// over path.
//
// sync: the file and its directory are synced before it returns, so that
// it outlives a crash of the machine; without it, the file is replaced
// as whole but stays in the page cache a while, which only a crash of
// the process, not of the machine, leaves safe.
func (c *NodesConf) WriteFile(path string, sync bool) (err error) {
	dir := filepath.Dir(path)
	tmp, err := os.CreateTemp(dir, "."+filepath.Base(path)+".tmp-*")
	if err != nil {
		return err
	}
	defer func() {
		if err != nil {
			tmp.Close()
			os.Remove(tmp.Name())
		}
	}()
	if _, err = tmp.Write(c.Append(nil)); err != nil {
		return err
	}
	// Redis creates nodes.conf 0644; CreateTemp's 0600 would change that.
	if err = tmp.Chmod(0o644); err != nil {
		return err
	}
	if sync {
		if err = tmp.Sync(); err != nil {
			return err
		}
	}
	if err = tmp.Close(); err != nil {
		return err
	}
	if err = os.Rename(tmp.Name(), path); err != nil {
		return err
	}
	if !sync {
		return nil
	}
	// The rename itself survives a power loss once the directory is.
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	return d.Sync()
}
