package cluster

import (
	"bytes"
	"encoding/binary"
	"errors"
	"io"
	"math/rand/v2"
	"reflect"
	"runtime"
	"strings"
	"testing"
	"unsafe"
)

func name(c byte) NodeName {
	return NameOf(strings.Repeat(string(c), NameLen))
}

// sampleMsgs is one message of every type, with every field the type
// carries set, and the seed corpus of FuzzDecode.
func sampleMsgs() []*Msg {
	base := func(t uint16) *Msg {
		m := &Msg{
			Type: t, Port: 7000, CurrentEpoch: 1<<40 + 3, ConfigEpoch: 7, Offset: 1<<63 + 5,
			Sender: name('a'), SlaveOf: name('b'), MyIP: IPOf("10.0.0.1"),
			PPort: 7001, CPort: 17000, Flags: NodeMaster | NodeMyself, State: StateFail,
			MFlags: [3]byte{Flag0Paused, 0, 0},
		}
		SetSlot(&m.MySlots, 0)
		SetSlot(&m.MySlots, 5)
		SetSlot(&m.MySlots, Slots-1)
		return m
	}
	var msgs []*Msg
	for _, t := range []uint16{TypePing, TypePong, TypeMeet} {
		m := base(t)
		m.Gossip = []Gossip{
			{Name: name('c'), PingSent: 1, PongReceived: 2, IP: IPOf("::1"), Port: 1, CPort: 2, Flags: NodePFail, PPort: 3},
			{Name: name('d'), IP: IPOf("192.168.100.200"), Port: 65535, CPort: 65534, Flags: NodeSlave | NodeNoFailover},
		}
		m.Exts = AppendHostnameExt(nil, "host-1.example")
		m.Exts = AppendPingExt(m.Exts, 77, []byte("future extension"))
		msgs = append(msgs, m)
	}
	bare := base(TypePing)
	bare.MFlags = [3]byte{}
	msgs = append(msgs, bare)
	f := base(TypeFail)
	f.About = name('e')
	msgs = append(msgs, f)
	for _, t := range []uint16{TypePublish, TypePublishShard} {
		p := base(t)
		p.Channel, p.Message = []byte("chan"), []byte("hello\x00world")
		msgs = append(msgs, p)
	}
	for _, t := range []uint16{TypeFailoverAuthRequest, TypeFailoverAuthAck, TypeMFStart} {
		m := base(t)
		m.MFlags[0] |= Flag0ForceAck
		msgs = append(msgs, m)
	}
	u := base(TypeUpdate)
	u.Update = &Update{ConfigEpoch: 99, Node: name('f')}
	SetSlot(&u.Update.Slots, 1234)
	msgs = append(msgs, u)
	mod := base(TypeModule)
	mod.ModuleID, mod.ModuleType, mod.Payload = 0x0102030405060708, 200, []byte("module payload")
	msgs = append(msgs, mod)
	unknown := base(42)
	unknown.Payload = []byte("a body only a newer node understands")
	msgs = append(msgs, unknown)
	return msgs
}

func TestRoundTrip(t *testing.T) {
	seen := map[uint16]bool{}
	for _, m := range sampleMsgs() {
		b := m.Append(nil)
		if len(b) != m.Len() {
			t.Errorf("%s: encoded %d bytes, Len says %d", TypeName(m.Type), len(b), m.Len())
		}
		got, err := Decode(b)
		if err != nil {
			t.Fatalf("%s: %v", TypeName(m.Type), err)
		}
		if isPing(m.Type) && len(m.Exts) > 0 {
			// Append sets the flag the extensions need.
			m.MFlags[0] |= Flag0ExtData
		}
		if !reflect.DeepEqual(got, m) {
			t.Errorf("%s: decoded\n%+v\nwant\n%+v", TypeName(m.Type), got, m)
		}
		if again := got.Append(nil); !bytes.Equal(again, b) {
			t.Errorf("%s: re-encoding differs", TypeName(m.Type))
		}
		seen[m.Type] = true
	}
	for typ := uint16(0); typ < typeCount; typ++ {
		if !seen[typ] {
			t.Errorf("no round trip for %s", TypeName(typ))
		}
	}
}

func TestGossipLayout(t *testing.T) {
	// Decoding N entries must cost no more than their N*104 wire bytes.
	if s := unsafe.Sizeof(Gossip{}); s > GossipLen {
		t.Fatalf("Gossip is %d bytes in memory, more than its %d on the wire", s, GossipLen)
	}
}

// goldenPing is a PING built field by field at the offsets cluster.h
// asserts, independently of Append, with two gossip entries and the
// hostname extension.
func goldenPing() []byte {
	be := binary.BigEndian
	b := make([]byte, 2256+2*104+8+16)
	copy(b[0:], "RCmb")
	be.PutUint32(b[4:], uint32(len(b)))
	be.PutUint16(b[8:], 1)
	be.PutUint16(b[10:], 30001)
	be.PutUint16(b[12:], 0) // PING
	be.PutUint16(b[14:], 2)
	be.PutUint64(b[16:], 0x1112131415161718)
	be.PutUint64(b[24:], 0x2122232425262728)
	be.PutUint64(b[32:], 0x3132333435363738)
	copy(b[40:], strings.Repeat("a", 40))
	b[80] = 0b0000_0011      // slots 0 and 1
	b[80+2047] = 0b1000_0000 // slot 16383
	copy(b[2128:], strings.Repeat("b", 40))
	copy(b[2168:], "127.0.0.1")
	be.PutUint16(b[2214:], 1)
	be.PutUint16(b[2246:], 30002)
	be.PutUint16(b[2248:], 40001)
	be.PutUint16(b[2250:], 1|16)
	b[2252] = 0
	b[2253] = 1<<2 | 1 // EXT_DATA and PAUSED
	g := b[2256:]
	for i, e := range []struct {
		name, ip                  string
		ps, pr                    uint32
		port, cport, flags, pport uint16
	}{
		{strings.Repeat("c", 40), "10.1.2.3", 100, 200, 6379, 16379, 1, 0},
		{strings.Repeat("d", 40), "fe80::1", 300, 400, 6380, 16380, 2 | 4, 6381},
	} {
		o := g[i*104:]
		copy(o[0:], e.name)
		be.PutUint32(o[40:], e.ps)
		be.PutUint32(o[44:], e.pr)
		copy(o[48:], e.ip)
		be.PutUint16(o[94:], e.port)
		be.PutUint16(o[96:], e.cport)
		be.PutUint16(o[98:], e.flags)
		be.PutUint16(o[100:], e.pport)
		// notused1 at 102 stays zero.
	}
	x := b[2256+208:]
	be.PutUint32(x[0:], 24) // header 8 + "node-a.example\0" padded to 16
	be.PutUint16(x[4:], 0)  // hostname
	copy(x[8:], "node-a.example")
	return b
}

func TestGoldenPing(t *testing.T) {
	m := &Msg{
		Type: TypePing, Port: 30001,
		CurrentEpoch: 0x1112131415161718, ConfigEpoch: 0x2122232425262728, Offset: 0x3132333435363738,
		Sender: name('a'), SlaveOf: name('b'), MyIP: IPOf("127.0.0.1"),
		PPort: 30002, CPort: 40001, Flags: NodeMaster | NodeMyself, State: StateOK,
		MFlags: [3]byte{Flag0Paused},
		Gossip: []Gossip{
			{Name: name('c'), PingSent: 100, PongReceived: 200, IP: IPOf("10.1.2.3"), Port: 6379, CPort: 16379, Flags: NodeMaster},
			{Name: name('d'), PingSent: 300, PongReceived: 400, IP: IPOf("fe80::1"), Port: 6380, CPort: 16380, Flags: NodeSlave | NodePFail, PPort: 6381},
		},
		Exts: AppendHostnameExt(nil, "node-a.example"),
	}
	SetSlot(&m.MySlots, 0)
	SetSlot(&m.MySlots, 1)
	SetSlot(&m.MySlots, 16383)
	want := goldenPing()
	got := m.Append(nil)
	if !bytes.Equal(got, want) {
		for i := range min(len(got), len(want)) {
			if got[i] != want[i] {
				t.Fatalf("first difference at offset %d: got %#x, want %#x (lengths %d, %d)", i, got[i], want[i], len(got), len(want))
			}
		}
		t.Fatalf("lengths differ: got %d, want %d", len(got), len(want))
	}
	// The offsets cluster.h's static asserts pin, against the constants.
	for _, c := range []struct {
		name      string
		got, want int
	}{
		{"sig", offSig, 0}, {"totlen", offTotlen, 4}, {"ver", offVer, 8}, {"port", offPort, 10},
		{"type", offType, 12}, {"count", offCount, 14}, {"currentEpoch", offCurrentEpoch, 16},
		{"configEpoch", offConfigEpoch, 24}, {"offset", offOffset, 32}, {"sender", offSender, 40},
		{"myslots", offMyslots, 80}, {"slaveof", offSlaveof, 2128}, {"myip", offMyip, 2168},
		{"extensions", offExtensions, 2214}, {"notused1", offNotused1, 2216}, {"pport", offPport, 2246},
		{"cport", offCport, 2248}, {"flags", offFlags, 2250}, {"state", offState, 2252},
		{"mflags", offMflags, 2253}, {"data", offData, 2256},
		{"notused1 ends at pport", offNotused1 + 30, offPport},
		{"myslots ends at slaveof", offMyslots + SlotBytes, offSlaveof},
		{"myip ends at extensions", offMyip + IPLen, offExtensions},
	} {
		if c.got != c.want {
			t.Errorf("offset of %s is %d, cluster.h says %d", c.name, c.got, c.want)
		}
	}
	d, err := Decode(want)
	if err != nil {
		t.Fatal(err)
	}
	if h := d.Hostname(); h != "node-a.example" {
		t.Errorf("hostname %q", h)
	}
	if d.Gossip[1].IP.String() != "fe80::1" || d.MyIP.String() != "127.0.0.1" || d.Sender != name('a') {
		t.Errorf("decoded %+v", d)
	}
	for _, s := range []uint16{0, 1, 16383} {
		if !HasSlot(&d.MySlots, s) {
			t.Errorf("slot %d not set", s)
		}
	}
	if HasSlot(&d.MySlots, 2) {
		t.Error("slot 2 set")
	}
}

func TestFlagsString(t *testing.T) {
	for _, c := range []struct {
		flags uint16
		want  string
	}{
		{0, "noflags"},
		{NodeMeet | NodeMigrateTo, "noflags"},
		{NodeMyself | NodeMaster, "myself,master"},
		{NodeSlave | NodePFail | NodeFail | NodeHandshake | NodeNoAddr | NodeNoFailover, "slave,fail?,fail,handshake,noaddr,nofailover"},
	} {
		if got := FlagsString(c.flags); got != c.want {
			t.Errorf("FlagsString(%#x) = %q, want %q", c.flags, got, c.want)
		}
	}
}

func TestDecodeRejects(t *testing.T) {
	be := binary.BigEndian
	ping := goldenPing()
	mutate := func(b []byte, f func([]byte) []byte) []byte {
		return f(bytes.Clone(b))
	}
	withLen := func(b []byte) []byte { be.PutUint32(b[4:], uint32(len(b))); return b }
	header := func(typ uint16) []byte {
		b := make([]byte, HeaderLen)
		copy(b, "RCmb")
		be.PutUint16(b[8:], 1)
		be.PutUint16(b[12:], typ)
		return withLen(b)
	}
	for _, c := range []struct {
		name string
		b    []byte
		want error
	}{
		{"empty", nil, ErrShort},
		{"prefix only", ping[:7], ErrShort},
		{"signature", mutate(ping, func(b []byte) []byte { b[0] = 'X'; return b }), ErrSignature},
		{"totlen below header", mutate(ping[:100], withLen), ErrLength},
		{"totlen above data", mutate(ping, func(b []byte) []byte { be.PutUint32(b[4:], uint32(len(b)+1)); return b }), ErrLength},
		{"totlen below data", mutate(ping, func(b []byte) []byte { be.PutUint32(b[4:], uint32(len(b)-8)); return b }), ErrLength},
		{"version", mutate(ping, func(b []byte) []byte { be.PutUint16(b[8:], 2); return b }), ErrVersion},
		{"count too large", mutate(ping, func(b []byte) []byte { be.PutUint16(b[14:], 0xffff); return b }), ErrLength},
		{"count too small", mutate(ping, func(b []byte) []byte { be.PutUint16(b[14:], 1); return b }), ErrExtension},
		{"trailing bytes", mutate(ping, func(b []byte) []byte { return withLen(append(b, make([]byte, 8)...)) }), ErrLength},
		{"extensions without flag", mutate(ping, func(b []byte) []byte { b[2253] &^= Flag0ExtData; return b }), ErrExtension},
		{"more extensions than sent", mutate(ping, func(b []byte) []byte { be.PutUint16(b[2214:], 2); return b }), ErrExtension},
		{"fewer extensions than sent", mutate(ping, func(b []byte) []byte { be.PutUint16(b[2214:], 0); return b }), ErrLength},
		{"extension unpadded", mutate(ping, func(b []byte) []byte { be.PutUint32(b[2464:], 20); return b }), ErrExtension},
		{"extension too long", mutate(ping, func(b []byte) []byte { be.PutUint32(b[2464:], 32); return b }), ErrExtension},
		{"extension huge", mutate(ping, func(b []byte) []byte { be.PutUint32(b[2464:], 0x10018); return b }), ErrExtension},
		{"extension empty", mutate(ping, func(b []byte) []byte { be.PutUint32(b[2464:], 0); return b }), ErrExtension},
		{"hostname without NUL", mutate(ping, func(b []byte) []byte { copy(b[2472:], "0123456789abcdef"); return b }), ErrExtension},
		{"fail short", withLen(append(header(TypeFail), make([]byte, 39)...)), ErrLength},
		{"update short", withLen(append(header(TypeUpdate), make([]byte, 8+40+2047)...)), ErrLength},
		{"mfstart with body", withLen(append(header(TypeMFStart), 0)), ErrLength},
		{"publish without lengths", withLen(append(header(TypePublish), 0, 0, 0)), ErrLength},
		{"publish lengths wrap", mutate(header(TypePublish), func(b []byte) []byte {
			// 8 + 0xffffffff + 1 wraps to 8 in 32 bits.
			b = append(b, 0xff, 0xff, 0xff, 0xff, 0, 0, 0, 1)
			return withLen(b)
		}), ErrLength},
		{"module lengths wrap", mutate(header(TypeModule), func(b []byte) []byte {
			b = append(b, make([]byte, 8)...)
			b = append(b, 0xff, 0xff, 0xff, 0xff, 7)
			return withLen(b)
		}), ErrLength},
		{"module short", withLen(append(header(TypeModule), make([]byte, 12)...)), ErrLength},
	} {
		m, err := Decode(c.b)
		if !errors.Is(err, c.want) {
			t.Errorf("%s: got %v, %v; want %v", c.name, m, err, c.want)
		}
	}
}

func TestDecodeAllocations(t *testing.T) {
	// A packet's variable parts cost at most the packet itself; only the
	// Msg itself (its fixed header fields) comes on top.
	fixed := uint64(unsafe.Sizeof(Msg{}) + unsafe.Sizeof(Update{}))
	var big []*Msg
	m := sampleMsgs()[0]
	m.Gossip = make([]Gossip, 500)
	big = append(big, m)
	p := sampleMsgs()[5]
	p.Message = make([]byte, 1<<20)
	big = append(big, p)
	for _, m := range append(sampleMsgs(), big...) {
		b := m.Append(nil)
		var before, after runtime.MemStats
		runtime.GC()
		runtime.ReadMemStats(&before)
		for range 10 {
			if _, err := Decode(b); err != nil {
				t.Fatal(err)
			}
		}
		runtime.ReadMemStats(&after)
		per := (after.TotalAlloc - before.TotalAlloc) / 10
		// Size classes round each allocation up by at most 1/8 or so.
		if limit := (uint64(len(b))+fixed)*9/8 + 64; per > limit {
			t.Errorf("%s of %d bytes: Decode allocated %d, limit %d", TypeName(m.Type), len(b), per, limit)
		}
	}
}

func TestReadMsg(t *testing.T) {
	var stream []byte
	msgs := sampleMsgs()
	for _, m := range msgs {
		stream = m.Append(stream)
	}
	r := bytes.NewReader(stream)
	for _, m := range msgs {
		got, err := ReadMsg(r, 1<<20)
		if err != nil {
			t.Fatal(err)
		}
		if got.Type != m.Type || !bytes.Equal(got.Append(nil), m.Append(nil)) {
			t.Fatalf("read %s, want %s", TypeName(got.Type), TypeName(m.Type))
		}
	}
	if _, err := ReadMsg(r, 1<<20); err != io.EOF {
		t.Fatalf("at the end: %v", err)
	}

	ping := goldenPing()
	if _, err := ReadMsg(bytes.NewReader(ping), len(ping)-1); !errors.Is(err, ErrLength) {
		t.Errorf("over the limit: %v", err)
	}
	if _, err := ReadMsg(bytes.NewReader(ping[:len(ping)-1]), 1<<20); err != io.ErrUnexpectedEOF {
		t.Errorf("truncated: %v", err)
	}
	if _, err := ReadMsg(bytes.NewReader(ping[:5]), 1<<20); err != io.ErrUnexpectedEOF {
		t.Errorf("truncated prefix: %v", err)
	}
	bad := bytes.Clone(ping)
	bad[3] = 'x'
	if _, err := ReadMsg(bytes.NewReader(bad), 1<<20); err != ErrSignature {
		t.Errorf("signature: %v", err)
	}
	// A totlen below the header is refused before anything more is read,
	// as Redis's read handler refuses it.
	short := []byte("RCmb\x00\x00\x00\x10")
	if _, err := ReadMsg(io.MultiReader(bytes.NewReader(short), failReader{t}), 1<<20); !errors.Is(err, ErrLength) {
		t.Errorf("short totlen: %v", err)
	}
}

type failReader struct{ t *testing.T }

func (f failReader) Read([]byte) (int, error) {
	f.t.Error("read past a refused prefix")
	return 0, io.EOF
}

func FuzzDecode(f *testing.F) {
	for _, m := range sampleMsgs() {
		f.Add(m.Append(nil))
	}
	f.Add(goldenPing())
	f.Fuzz(func(t *testing.T, b []byte) {
		m, err := Decode(b)
		if err != nil {
			return
		}
		enc := m.Append(nil)
		again, err := Decode(enc)
		if err != nil {
			t.Fatalf("re-encoding of a decoded message does not decode: %v", err)
		}
		if !reflect.DeepEqual(again, m) {
			t.Fatalf("re-encoding decodes to\n%+v\nnot\n%+v", again, m)
		}
	})
}

// TestDecodeMutations runs FuzzDecode's property over many mutations of
// the seeds in one process: on a loaded machine the fuzzing engine's
// coordination gets few executions per second, and this keeps the
// property exercised on every test run. Mutations keep totlen right
// half of the time, so that most get past the framing checks to the
// type-specific ones.
func TestDecodeMutations(t *testing.T) {
	seeds := [][]byte{goldenPing()}
	for _, m := range sampleMsgs() {
		seeds = append(seeds, m.Append(nil))
	}
	rng := rand.New(rand.NewPCG(3, 4))
	// Fields whose values steer the checks, so mutated more often.
	hot := []int{offTotlen, offVer, offType, offCount, offExtensions, offMflags,
		offData, offData + 4, offData + 8, offData + 2*GossipLen, offData + 2*GossipLen + 4}
	n := 20000
	if testing.Short() {
		n = 2000
	}
	accepted := 0
	for i := range n {
		b := bytes.Clone(seeds[rng.IntN(len(seeds))])
		for range 1 + rng.IntN(4) {
			switch rng.IntN(5) {
			case 0:
				b[rng.IntN(len(b))] = byte(rng.Uint32())
			case 1:
				if o := hot[rng.IntN(len(hot))] + rng.IntN(4); o < len(b) {
					b[o] = byte(rng.Uint32())
				}
			case 2:
				b = b[:rng.IntN(len(b)+1)]
			case 3:
				b = append(b, make([]byte, rng.IntN(64))...)
			case 4:
				if o := offType; o+2 <= len(b) {
					binary.BigEndian.PutUint16(b[o:], uint16(rng.IntN(typeCount+2)))
				}
			}
			if len(b) < 8 {
				b = append(b, make([]byte, 8-len(b))...)
			}
		}
		if rng.IntN(2) == 0 {
			binary.BigEndian.PutUint32(b[offTotlen:], uint32(len(b)))
		}
		m, err := Decode(b)
		if err != nil {
			continue
		}
		accepted++
		again, err := Decode(m.Append(nil))
		if err != nil {
			t.Fatalf("mutation %d: re-encoding does not decode: %v\n%x", i, err, b)
		}
		if !reflect.DeepEqual(again, m) {
			t.Fatalf("mutation %d: re-encoding decodes differently\n%x", i, b)
		}
	}
	t.Logf("%d of %d mutations decoded", accepted, n)
}
