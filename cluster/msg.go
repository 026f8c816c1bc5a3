package cluster

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"iter"
)

// The cluster bus message layout of Redis 7.0 (cluster.h's clusterMsg):
// a fixed header, then a body whose shape the type decides. Every
// multi-byte integer is big-endian (Redis's htons, htonl and htonu64).
const (
	NameLen          = 40        // CLUSTER_NAMELEN: a node name, 40 hex digits
	IPLen            = 46        // NET_IP_STR_LEN: an IP text, NUL-padded
	SlotBytes        = Slots / 8 // a slot bitmap
	HeaderLen        = 2256      // CLUSTERMSG_MIN_LEN: the header before the body
	GossipLen        = 104       // one clusterMsgDataGossip
	ProtoVer         = 1         // CLUSTER_PROTO_VER
	BusPortOffset    = 10000     // CLUSTER_PORT_INCR: the default bus port is the client port plus this
	pingExtHeaderLen = 8         // clusterMsgPingExt before its body
	failBodyLen      = NameLen
	updateBodyLen    = 8 + NameLen + SlotBytes
	publishHeadLen   = 8  // channel_len and message_len
	moduleHeadLen    = 13 // module_id, len and type
)

// The header's field offsets, which cluster.h pins with static asserts.
const (
	offSig          = 0
	offTotlen       = 4
	offVer          = 8
	offPort         = 10
	offType         = 12
	offCount        = 14
	offCurrentEpoch = 16
	offConfigEpoch  = 24
	offOffset       = 32
	offSender       = 40
	offMyslots      = 80
	offSlaveof      = 2128
	offMyip         = 2168
	offExtensions   = 2214
	offNotused1     = 2216
	offPport        = 2246
	offCport        = 2248
	offFlags        = 2250
	offState        = 2252
	offMflags       = 2253
	offData         = 2256
)

// Message types (CLUSTERMSG_TYPE_*).
const (
	TypePing                uint16 = 0
	TypePong                uint16 = 1
	TypeMeet                uint16 = 2
	TypeFail                uint16 = 3
	TypePublish             uint16 = 4
	TypeFailoverAuthRequest uint16 = 5
	TypeFailoverAuthAck     uint16 = 6
	TypeUpdate              uint16 = 7
	TypeMFStart             uint16 = 8
	TypeModule              uint16 = 9
	TypePublishShard        uint16 = 10
	typeCount                      = 11
)

var typeNames = [typeCount]string{
	"ping", "pong", "meet", "fail", "publish", "auth-req", "auth-ack",
	"update", "mfstart", "module", "publishshard",
}

// TypeName is the name Redis logs and CLUSTER INFO counts a type under.
func TypeName(t uint16) string {
	if t < typeCount {
		return typeNames[t]
	}
	return "unknown"
}

// Message flags, the first byte of mflags (CLUSTERMSG_FLAG0_*).
const (
	Flag0Paused   = 1 << 0 // a master paused for a manual failover
	Flag0ForceAck = 1 << 1 // grant the vote even though the master is up
	Flag0ExtData  = 1 << 2 // ping extensions follow the gossip entries
)

// Node flags (CLUSTER_NODE_*), as the header, gossip entries and
// nodes.conf carry them.
const (
	NodeMaster     = 1
	NodeSlave      = 2
	NodePFail      = 4
	NodeFail       = 8
	NodeMyself     = 16
	NodeHandshake  = 32
	NodeNoAddr     = 64
	NodeMeet       = 128
	NodeMigrateTo  = 256
	NodeNoFailover = 512
)

// nodeFlagNames are the flags CLUSTER NODES and nodes.conf print, in
// the order Redis prints them; MEET and MIGRATE_TO are never printed.
var nodeFlagNames = []struct {
	flag uint16
	name string
}{
	{NodeMyself, "myself"},
	{NodeMaster, "master"},
	{NodeSlave, "slave"},
	{NodePFail, "fail?"},
	{NodeFail, "fail"},
	{NodeHandshake, "handshake"},
	{NodeNoAddr, "noaddr"},
	{NodeNoFailover, "nofailover"},
}

// FlagsString renders flags as CLUSTER NODES does: comma-separated
// names, or "noflags".
func FlagsString(flags uint16) string {
	var b []byte
	for _, f := range nodeFlagNames {
		if flags&f.flag != 0 {
			if len(b) > 0 {
				b = append(b, ',')
			}
			b = append(b, f.name...)
		}
	}
	if len(b) == 0 {
		return "noflags"
	}
	return string(b)
}

// Cluster states in the header's state byte.
const (
	StateOK   = 0
	StateFail = 1
)

// ExtHostname is the ping extension type carrying the sender's announced
// hostname (CLUSTERMSG_EXT_TYPE_HOSTNAME).
const ExtHostname = 0

// NodeName is a node's name as the bus carries it: 40 bytes, normally
// lowercase hex; all zeroes means none (CLUSTER_NODE_NULL_NAME).
type NodeName [NameLen]byte

// NameOf makes a NodeName of s, truncated or zero-padded to 40 bytes.
func NameOf(s string) (n NodeName) {
	copy(n[:], s)
	return n
}

func (n NodeName) String() string { return string(n[:]) }

// IsZero reports whether n is the null name.
func (n NodeName) IsZero() bool { return n == NodeName{} }

// NodeIP is an IP address's text in a fixed 46-byte field, NUL-padded;
// kept as the bytes themselves so that a message re-encodes exactly.
type NodeIP [IPLen]byte

// IPOf makes a NodeIP of s, truncated to fit with its NUL when longer.
func IPOf(s string) (ip NodeIP) {
	copy(ip[:IPLen-1], s)
	return ip
}

// String is the text up to the first NUL, as Redis reads the field.
func (ip NodeIP) String() string {
	if i := bytes.IndexByte(ip[:], 0); i >= 0 {
		return string(ip[:i])
	}
	return string(ip[:])
}

// Gossip is one gossip entry of a PING, PONG or MEET: what the sender
// knows of another node. Its Go layout is no larger than its 104 wire
// bytes, so that decoding a packet's entries costs no more than the
// packet.
type Gossip struct {
	Name         NodeName
	PingSent     uint32 // seconds
	PongReceived uint32 // seconds
	IP           NodeIP
	Port         uint16
	CPort        uint16
	Flags        uint16
	PPort        uint16
}

// Update is an UPDATE's body: a node's slots at a config epoch.
type Update struct {
	ConfigEpoch uint64
	Node        NodeName
	Slots       [SlotBytes]byte
}

// Msg is one cluster bus message. The header's totlen, ver, count and
// extensions fields are not kept: they follow from the rest, and Append
// writes them. Which body fields count depends on Type.
type Msg struct {
	Type         uint16
	Port         uint16
	CurrentEpoch uint64
	ConfigEpoch  uint64
	Offset       uint64
	Sender       NodeName
	MySlots      [SlotBytes]byte
	SlaveOf      NodeName
	MyIP         NodeIP
	PPort        uint16
	CPort        uint16
	Flags        uint16
	State        uint8
	MFlags       [3]byte

	// PING, PONG, MEET.
	Gossip []Gossip
	// Exts is the ping extensions as they are on the wire (each an 8-byte
	// header and a body padded to 8 bytes), kept whole so that
	// extensions this version does not know survive a round trip byte
	// for byte. Build it with AppendPingExt, read it with Extensions.
	Exts []byte

	// FAIL: the node the sender has seen fail.
	About NodeName

	// PUBLISH, PUBLISHSHARD.
	Channel, Message []byte

	// UPDATE.
	Update *Update

	// MODULE: ModuleID, ModuleType and Payload; for a type this version
	// does not know, Payload is the whole body.
	ModuleID   uint64
	ModuleType uint8
	Payload    []byte
}

// SetSlot and HasSlot address MySlots (and Update.Slots) as Redis's
// bitmaps are addressed: slot s is bit s%8 of byte s/8.
func SetSlot(bitmap *[SlotBytes]byte, slot uint16) { bitmap[slot>>3] |= 1 << (slot & 7) }
func HasSlot(bitmap *[SlotBytes]byte, slot uint16) bool {
	return bitmap[slot>>3]&(1<<(slot&7)) != 0
}

// AppendPingExt appends one ping extension to exts, padding its body
// with zeroes to the 8-byte multiple Redis requires.
func AppendPingExt(exts []byte, typ uint16, body []byte) []byte {
	padded := (len(body) + 7) / 8 * 8
	exts = binary.BigEndian.AppendUint32(exts, uint32(pingExtHeaderLen+padded))
	exts = binary.BigEndian.AppendUint16(exts, typ)
	exts = binary.BigEndian.AppendUint16(exts, 0)
	exts = append(exts, body...)
	return append(exts, make([]byte, padded-len(body))...)
}

// AppendHostnameExt appends the hostname extension Redis sends when
// cluster-announce-hostname is set: the name and its terminating NUL.
func AppendHostnameExt(exts []byte, hostname string) []byte {
	body := make([]byte, len(hostname)+1)
	copy(body, hostname)
	return AppendPingExt(exts, ExtHostname, body)
}

// Extensions yields each extension's type and body (padding included).
// It stops at the first malformed extension, which Decode never leaves.
func (m *Msg) Extensions() iter.Seq2[uint16, []byte] {
	return func(yield func(uint16, []byte) bool) {
		for b := m.Exts; len(b) >= pingExtHeaderLen; {
			n := binary.BigEndian.Uint32(b)
			if n < pingExtHeaderLen || uint64(n) > uint64(len(b)) {
				return
			}
			if !yield(binary.BigEndian.Uint16(b[4:]), b[pingExtHeaderLen:n]) {
				return
			}
			b = b[n:]
		}
	}
}

// Hostname is the hostname the sender announces: the last hostname
// extension's text, as Redis takes the last, or "" without one.
func (m *Msg) Hostname() string {
	var h string
	for typ, body := range m.Extensions() {
		if typ == ExtHostname {
			if i := bytes.IndexByte(body, 0); i >= 0 {
				body = body[:i]
			}
			h = string(body)
		}
	}
	return h
}

func (m *Msg) numExts() int {
	n := 0
	for range m.Extensions() {
		n++
	}
	return n
}

// isPing is whether t is one of the three types that share the
// gossip-and-extensions body.
func isPing(t uint16) bool { return t == TypePing || t == TypePong || t == TypeMeet }

// Len is the message's encoded length, its totlen.
func (m *Msg) Len() int {
	n := HeaderLen
	switch m.Type {
	case TypePing, TypePong, TypeMeet:
		n += GossipLen*len(m.Gossip) + len(m.Exts)
	case TypeFail:
		n += failBodyLen
	case TypePublish, TypePublishShard:
		n += publishHeadLen + len(m.Channel) + len(m.Message)
	case TypeFailoverAuthRequest, TypeFailoverAuthAck, TypeMFStart:
	case TypeUpdate:
		n += updateBodyLen
	case TypeModule:
		n += moduleHeadLen + len(m.Payload)
	default:
		n += len(m.Payload)
	}
	return n
}

// Append appends m's encoding to dst. A message the format cannot hold
// (more than 65535 gossip entries or extensions, or over 4 GiB) is a bug
// in the caller, and panics rather than sending a packet every receiver
// would misread.
func (m *Msg) Append(dst []byte) []byte {
	total := m.Len()
	var count, exts int
	if isPing(m.Type) {
		count, exts = len(m.Gossip), m.numExts()
	}
	if count > 0xffff || exts > 0xffff || uint64(total) > 0xffffffff {
		panic(fmt.Sprintf("cluster: %s message too large to encode", TypeName(m.Type)))
	}
	be := binary.BigEndian
	start := len(dst)
	dst = append(dst, make([]byte, HeaderLen)...)
	h := dst[start:]
	copy(h[offSig:], "RCmb")
	be.PutUint32(h[offTotlen:], uint32(total))
	be.PutUint16(h[offVer:], ProtoVer)
	be.PutUint16(h[offPort:], m.Port)
	be.PutUint16(h[offType:], m.Type)
	be.PutUint16(h[offCount:], uint16(count))
	be.PutUint64(h[offCurrentEpoch:], m.CurrentEpoch)
	be.PutUint64(h[offConfigEpoch:], m.ConfigEpoch)
	be.PutUint64(h[offOffset:], m.Offset)
	copy(h[offSender:], m.Sender[:])
	copy(h[offMyslots:], m.MySlots[:])
	copy(h[offSlaveof:], m.SlaveOf[:])
	copy(h[offMyip:], m.MyIP[:])
	be.PutUint16(h[offExtensions:], uint16(exts))
	be.PutUint16(h[offPport:], m.PPort)
	be.PutUint16(h[offCport:], m.CPort)
	be.PutUint16(h[offFlags:], m.Flags)
	h[offState] = m.State
	copy(h[offMflags:], m.MFlags[:])
	if exts > 0 {
		h[offMflags] |= Flag0ExtData
	}

	switch m.Type {
	case TypePing, TypePong, TypeMeet:
		for i := range m.Gossip {
			g := &m.Gossip[i]
			dst = append(dst, g.Name[:]...)
			dst = be.AppendUint32(dst, g.PingSent)
			dst = be.AppendUint32(dst, g.PongReceived)
			dst = append(dst, g.IP[:]...)
			dst = be.AppendUint16(dst, g.Port)
			dst = be.AppendUint16(dst, g.CPort)
			dst = be.AppendUint16(dst, g.Flags)
			dst = be.AppendUint16(dst, g.PPort)
			dst = be.AppendUint16(dst, 0)
		}
		dst = append(dst, m.Exts...)
	case TypeFail:
		dst = append(dst, m.About[:]...)
	case TypePublish, TypePublishShard:
		dst = be.AppendUint32(dst, uint32(len(m.Channel)))
		dst = be.AppendUint32(dst, uint32(len(m.Message)))
		dst = append(dst, m.Channel...)
		dst = append(dst, m.Message...)
	case TypeFailoverAuthRequest, TypeFailoverAuthAck, TypeMFStart:
	case TypeUpdate:
		u := m.Update
		if u == nil {
			u = &Update{}
		}
		dst = be.AppendUint64(dst, u.ConfigEpoch)
		dst = append(dst, u.Node[:]...)
		dst = append(dst, u.Slots[:]...)
	case TypeModule:
		dst = be.AppendUint64(dst, m.ModuleID)
		dst = be.AppendUint32(dst, uint32(len(m.Payload)))
		dst = append(dst, m.ModuleType)
		dst = append(dst, m.Payload...)
	default:
		dst = append(dst, m.Payload...)
	}
	return dst
}

// Decoding errors. Each is wrapped with the detail of what was wrong.
var (
	ErrShort     = errors.New("cluster: message shorter than its header")
	ErrSignature = errors.New("cluster: bad message signature")
	ErrLength    = errors.New("cluster: bad message length")
	ErrVersion   = errors.New("cluster: unsupported bus protocol version")
	ErrExtension = errors.New("cluster: bad ping extension")
)

// Decode decodes the one message b holds, accepting what redis-server
// 7.0.15 accepts (clusterReadHandler's and clusterProcessPacket's
// checks): the signature, a totlen of at least the header that is b's
// length, version 1, and a totlen equal to the length the type and its
// counts imply. Where Redis would read past the packet instead of
// refusing it, Decode refuses: an extension shorter than its own header
// or running past the end, extensions announced without the EXT_DATA
// flag (Redis then parses bytes past the packet), and a hostname without
// its NUL. Extension lengths are taken at their full 32 bits; 7.0.15
// checks them truncated to 16 and then steps by the full value.
//
// Nothing is allocated before the lengths are checked against len(b),
// and the result's variable parts together are no larger than b.
func Decode(b []byte) (*Msg, error) {
	if len(b) < 8 {
		return nil, ErrShort
	}
	if string(b[offSig:offSig+4]) != "RCmb" {
		return nil, ErrSignature
	}
	be := binary.BigEndian
	total := be.Uint32(b[offTotlen:])
	if total < HeaderLen {
		return nil, fmt.Errorf("%w: totlen %d is below the header's %d bytes", ErrLength, total, HeaderLen)
	}
	if uint64(total) != uint64(len(b)) {
		return nil, fmt.Errorf("%w: totlen %d but %d bytes", ErrLength, total, len(b))
	}
	if v := be.Uint16(b[offVer:]); v != ProtoVer {
		return nil, fmt.Errorf("%w: %d", ErrVersion, v)
	}
	typ := be.Uint16(b[offType:])
	body := b[offData:]

	// The length each type implies, computed in 64 bits so that the
	// 32-bit lengths a hostile sender chooses cannot wrap around.
	var want uint64
	switch typ {
	case TypePing, TypePong, TypeMeet:
		want = uint64(GossipLen) * uint64(be.Uint16(b[offCount:]))
		if want > uint64(len(body)) {
			return nil, fmt.Errorf("%w: %d gossip entries need %d bytes, %s has %d",
				ErrLength, be.Uint16(b[offCount:]), HeaderLen+want, TypeName(typ), total)
		}
		n := be.Uint16(b[offExtensions:])
		if b[offMflags]&Flag0ExtData == 0 {
			if n != 0 {
				return nil, fmt.Errorf("%w: %d extensions without the EXT_DATA flag", ErrExtension, n)
			}
			break
		}
		for i := 0; i < int(n); i++ {
			if uint64(len(body))-want < pingExtHeaderLen {
				return nil, fmt.Errorf("%w: extension %d of %d starts past the end", ErrExtension, i+1, n)
			}
			e := body[want:]
			l := be.Uint32(e)
			switch {
			case l%8 != 0:
				return nil, fmt.Errorf("%w: extension %d is %d bytes, not padded to 8", ErrExtension, i+1, l)
			case l < pingExtHeaderLen:
				return nil, fmt.Errorf("%w: extension %d is %d bytes, shorter than its header", ErrExtension, i+1, l)
			case uint64(l) > uint64(len(e)):
				return nil, fmt.Errorf("%w: extension %d of %d bytes exceeds the packet", ErrExtension, i+1, l)
			}
			if be.Uint16(e[4:]) == ExtHostname && bytes.IndexByte(e[pingExtHeaderLen:l], 0) < 0 {
				return nil, fmt.Errorf("%w: hostname extension without its NUL", ErrExtension)
			}
			want += uint64(l)
		}
	case TypeFail:
		want = failBodyLen
	case TypePublish, TypePublishShard:
		if len(body) < publishHeadLen {
			return nil, fmt.Errorf("%w: %s of %d bytes", ErrLength, TypeName(typ), total)
		}
		want = publishHeadLen + uint64(be.Uint32(body)) + uint64(be.Uint32(body[4:]))
	case TypeFailoverAuthRequest, TypeFailoverAuthAck, TypeMFStart:
		want = 0
	case TypeUpdate:
		want = updateBodyLen
	case TypeModule:
		if len(body) < moduleHeadLen {
			return nil, fmt.Errorf("%w: %s of %d bytes", ErrLength, TypeName(typ), total)
		}
		want = moduleHeadLen + uint64(be.Uint32(body[8:]))
	default:
		// Redis takes a type it does not know as well formed, so that
		// newer nodes can add types.
		want = uint64(len(body))
	}
	if want != uint64(len(body)) {
		return nil, fmt.Errorf("%w: %s of %d bytes, its contents say %d",
			ErrLength, TypeName(typ), total, HeaderLen+want)
	}

	m := &Msg{
		Type:         typ,
		Port:         be.Uint16(b[offPort:]),
		CurrentEpoch: be.Uint64(b[offCurrentEpoch:]),
		ConfigEpoch:  be.Uint64(b[offConfigEpoch:]),
		Offset:       be.Uint64(b[offOffset:]),
		PPort:        be.Uint16(b[offPport:]),
		CPort:        be.Uint16(b[offCport:]),
		Flags:        be.Uint16(b[offFlags:]),
		State:        b[offState],
	}
	copy(m.Sender[:], b[offSender:])
	copy(m.MySlots[:], b[offMyslots:])
	copy(m.SlaveOf[:], b[offSlaveof:])
	copy(m.MyIP[:], b[offMyip:])
	copy(m.MFlags[:], b[offMflags:])

	switch typ {
	case TypePing, TypePong, TypeMeet:
		count := int(be.Uint16(b[offCount:]))
		if count > 0 {
			m.Gossip = make([]Gossip, count)
		}
		for i := range m.Gossip {
			e := body[i*GossipLen:]
			g := &m.Gossip[i]
			copy(g.Name[:], e)
			g.PingSent = be.Uint32(e[40:])
			g.PongReceived = be.Uint32(e[44:])
			copy(g.IP[:], e[48:])
			g.Port = be.Uint16(e[94:])
			g.CPort = be.Uint16(e[96:])
			g.Flags = be.Uint16(e[98:])
			g.PPort = be.Uint16(e[100:])
		}
		if rest := body[count*GossipLen:]; len(rest) > 0 {
			m.Exts = bytes.Clone(rest)
		}
	case TypeFail:
		copy(m.About[:], body)
	case TypePublish, TypePublishShard:
		cl := be.Uint32(body)
		data := bytes.Clone(body[publishHeadLen:])
		m.Channel, m.Message = data[:cl:cl], data[cl:]
	case TypeUpdate:
		m.Update = &Update{ConfigEpoch: be.Uint64(body)}
		copy(m.Update.Node[:], body[8:])
		copy(m.Update.Slots[:], body[8+NameLen:])
	case TypeModule:
		m.ModuleID = be.Uint64(body)
		m.ModuleType = body[12]
		m.Payload = bytes.Clone(body[moduleHeadLen:])
	case TypeFailoverAuthRequest, TypeFailoverAuthAck, TypeMFStart:
	default:
		m.Payload = bytes.Clone(body)
	}
	return m, nil
}

// ReadMsg reads and decodes one message from r. Like Redis's read
// handler it reads the 8-byte prefix first and refuses a bad signature
// or a totlen below the header before reading on; a totlen above max is
// refused too, so that a peer cannot make it allocate what it likes.
// After an error the stream's framing is lost and r should be closed.
func ReadMsg(r io.Reader, max int) (*Msg, error) {
	var prefix [8]byte
	if _, err := io.ReadFull(r, prefix[:]); err != nil {
		return nil, err
	}
	if string(prefix[:4]) != "RCmb" {
		return nil, ErrSignature
	}
	total := binary.BigEndian.Uint32(prefix[4:])
	if total < HeaderLen {
		return nil, fmt.Errorf("%w: totlen %d is below the header's %d bytes", ErrLength, total, HeaderLen)
	}
	if uint64(total) > uint64(max) {
		return nil, fmt.Errorf("%w: totlen %d exceeds the limit of %d", ErrLength, total, max)
	}
	buf := make([]byte, total)
	copy(buf, prefix[:])
	if _, err := io.ReadFull(r, buf[8:]); err != nil {
		if err == io.EOF {
			err = io.ErrUnexpectedEOF
		}
		return nil, err
	}
	return Decode(buf)
}
