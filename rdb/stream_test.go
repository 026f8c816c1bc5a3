package rdb

import (
	"bytes"
	"encoding/binary"
	"encoding/hex"
	"math"
	"math/rand"
	"slices"
	"strconv"
	"testing"
)

// DUMP replies of redis-server 7.0.15 for streams.
var (
	// XADD s 1-1 f v; XADD s 1-2 f v2 a b; XGROUP CREATE s g 0;
	// XGROUP CREATE s 1 $; XREADGROUP GROUP g alice COUNT 1 STREAMS s >
	// (a group named as an integer, entries-read -1).
	redisStreamSmall = "1301100000000000000001000000000000000134340000001300020100010101816602000102010001000181760204010001000101010201816602827632038161028162020801ff020102010100000202c001010281ffffffffffffffff0000016701010101000000000000000100000000000000014707ff25a2010000010105616c6963654707ff25a201000001000000000000000100000000000000010a005c88301e04faa038"
	// XADD e MAXLEN 0 * a b: no nodes, a last ID.
	redisStreamEmpty = "13000081000001a225ff0750000000000001000a00dcc572bcf38192ce"
	// With stream-node-max-entries 4: XADD m 100-1..100-11 temperature
	// 2<i> humidity "reading number <i> of the sensor at the north gate",
	// XADD m 101-0 other field, XADD m 102-0 temperature -70000 humidity
	// 12345678901, XDEL m 100-2 100-5 100-6 100-7 100-8, XGROUP CREATE m
	// 12345 100-3, XGROUP CREATE m consumers-group 0 ENTRIESREAD 0,
	// XREADGROUP by a consumer with a 47-byte name (3) and by "7" (2),
	// XGROUP CREATECONSUMER m 12345 idle, XCLAIM m consumers-group 7 0
	// 100-3: three nodes, LZF-compressed, deleted entries, entries with
	// their own fields.
	redisStreamNodes = "13031000000000000000640000000000000001c3408e41161f160100001e000301010102018b74656d70657261747572650c8868756d6964690374790900201a000020011f1501b072656164696e67206e756d6265722031206f66207468652073656e736f0372206174600d0d6e6f727468206761746531050103203902010116e0083b0032e01a3b407702020117e0083b0033e01e3b02030118e0083b0034e0193b0101ff1000000000000000640000000000000009c3409e40f71ff70000001f000401000102018b74656d70657261747572650c8868756d69646902747909401a000020011f1d01b072656164696e67206e756d6265722039206f66207468652073656e736f0372206174600d0b6e6f7274682067617465310520560700010101c0d202b1e0063c013130e0173d0032803d030201c0d3e0093d0031e01a3d407906dff7020101856f20a50b7206856669656c64060601ff10000000000000006600000000000000003d3d0000000c000101000102018b74656d70657261747572650c8868756d6964697479090001020100010001f290eefe04f4351cdcdf02000000090501ff084066004064014064080d02c1393040640381ffffffffffffffff00010469646c65e1750126a2010000000f636f6e73756d6572732d67726f757040640a81ffffffffffffffff0500000000000000640000000000000001d0750126a20100000100000000000000640000000000000003eb750126a20100000200000000000000640000000000000004d0750126a20100000100000000000000640000000000000009d7750126a2010000010000000000000064000000000000000ad7750126a20100000102c007eb750126a20100000300000000000000640000000000000003000000000000006400000000000000090000000000000064000000000000000a2f612d636f6e73756d65722d776974682d612d7261746865722d6c6f6e672d6e616d652d616161616161616161616161d0750126a20100000200000000000000640000000000000001000000000000006400000000000000040a00184cb424c2c91b06"

	// RDB_TYPE_STREAM_LISTPACKS (15), as Redis 6.2 writes it, of XADD t
	// 5-1..5-5 f <i>, XDEL t 5-1 5-5, groups before (0, then 2 entries
	// read by c1), first (5-2), mid (5-3), last (5-5), future (9-0); and
	// redis-server 7.0.15's DUMP after it restored that: the first ID,
	// entries-added and each group's entries-read derived.
	redisStreamV1       = "0f011000000000000000050000000000000001c339404413440000001e000301020101018166020001030100200102010104201240070002a009000220198013400700042005000020050005200300ff03050505066265666f726505030200000000000000050000000000000002884a0126a20100000100000000000000050000000000000003884a0126a20100000101026331884a0126a2010000020000000000000005000000000000000200000000000000050000000000000003056669727374050200000666757475726509000000046c61737405050000036d6964050300000a00d7cd44c03be83215"
	redisStreamV1AsDump = "13011000000000000000050000000000000001c339404413440000001e000301020101018166020001030100200102010104201240070002a009000220198013400700042005000020050005200300ff030505050200000305066265666f7265050381ffffffffffffffff0200000000000000050000000000000002884a0126a20100000100000000000000050000000000000003884a0126a20100000101026331884a0126a2010000020000000000000005000000000000000200000000000000050000000000000003056669727374050201000006667574757265090081ffffffffffffffff0000046c6173740505030000036d6964050381ffffffffffffffff00000a00f6479517476d086b"
)

func unhex(t *testing.T, s string) []byte {
	t.Helper()
	b, err := hex.DecodeString(s)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func decodeStreamPayload(t *testing.T, payload []byte) *Stream {
	t.Helper()
	if _, err := Open(payload); err != nil {
		t.Fatal(err)
	}
	v, err := Decode(payload)
	if err != nil {
		t.Fatalf("Decode: %v", err)
	}
	if v.Kind != KindStream || v.Stream == nil {
		t.Fatalf("kind %d", v.Kind)
	}
	return v.Stream
}

// TestStreamRedisPayloads: Redis's stream payloads decode, and encoding
// what was decoded gives Redis's bytes back, envelope included.
func TestStreamRedisPayloads(t *testing.T) {
	for name, h := range map[string]string{"small": redisStreamSmall, "empty": redisStreamEmpty, "nodes": redisStreamNodes} {
		want := unhex(t, h)
		s := decodeStreamPayload(t, want)
		if got := Seal(AppendStream(nil, s)); !bytes.Equal(got, want) {
			t.Errorf("%s: encoded\n%x\nwant\n%x", name, got, want)
		}
	}

	s := decodeStreamPayload(t, unhex(t, redisStreamNodes))
	if len(s.Nodes) != 3 || s.Length != 8 || s.EntriesAdded != 13 ||
		s.LastID != (StreamID{102, 0}) || s.FirstID != (StreamID{100, 1}) || s.MaxDeletedID != (StreamID{100, 8}) {
		t.Fatalf("metadata: %d nodes, %+v", len(s.Nodes), *s)
	}
	if len(s.Groups) != 2 || string(s.Groups[0].Name) != "12345" || s.Groups[0].EntriesRead != -1 ||
		len(s.Groups[0].Consumers) != 1 || string(s.Groups[0].Consumers[0].Name) != "idle" {
		t.Fatalf("group 12345: %+v", s.Groups[0])
	}
	g := s.Groups[1]
	if string(g.Name) != "consumers-group" || len(g.PEL) != 5 || len(g.Consumers) != 2 {
		t.Fatalf("group consumers-group: %+v", g)
	}
	// 100-3 was claimed by 7, delivered twice.
	if g.PEL[1].ID != (StreamID{100, 3}) || g.PEL[1].DeliveryCount != 2 ||
		string(g.Consumers[0].Name) != "7" || !slices.Equal(g.Consumers[0].Pending, []StreamID{{100, 3}, {100, 9}, {100, 10}}) {
		t.Fatalf("the claimed entry: %+v, %+v", g.PEL[1], g.Consumers[0])
	}
	var ids []StreamID
	var w nodeWalker
	for _, n := range s.Nodes {
		w.walk(n.LP, n.Master, func(id StreamID, deleted bool) bool {
			if !deleted {
				ids = append(ids, id)
			}
			return true
		})
	}
	want := []StreamID{{100, 1}, {100, 3}, {100, 4}, {100, 9}, {100, 10}, {100, 11}, {101, 0}, {102, 0}}
	if !slices.Equal(ids, want) {
		t.Fatalf("live entries %v, want %v", ids, want)
	}
}

// TestStreamV1: a pre-7.0 payload gets the metadata Redis 7.0 derives for
// it: DUMP of it after RESTORE is Redis's.
func TestStreamV1(t *testing.T) {
	s := decodeStreamPayload(t, unhex(t, redisStreamV1))
	if got, want := Seal(AppendStream(nil, s)), unhex(t, redisStreamV1AsDump); !bytes.Equal(got, want) {
		t.Fatalf("encoded\n%x\nwant\n%x", got, want)
	}
	// With no live entry, the first ID is the largest there is.
	v1 := AppendLen([]byte{TypeStreamListpacks, 0, 0}, 7)
	v1 = AppendLen(v1, 3)
	v1 = append(v1, 0)
	v, err := Decode(v1)
	if err != nil {
		t.Fatal(err)
	}
	if v.Stream.FirstID != (StreamID{math.MaxUint64, math.MaxUint64}) || v.Stream.LastID != (StreamID{7, 3}) {
		t.Fatalf("empty v1 stream: %+v", *v.Stream)
	}
}

// node builds a listpack of ints and strings.
func node(elems ...any) []byte {
	lp := newListpack()
	for _, e := range elems {
		switch e := e.(type) {
		case int:
			lp.addInt(int64(e))
		case string:
			lp.add([]byte(e))
		}
	}
	return slices.Clone(lp.finish())
}

// testStream is a sound stream: two nodes, a deleted entry, an entry with
// fields of its own, a group with two consumers.
func testStream() *Stream {
	return &Stream{
		Nodes: []StreamNode{
			{StreamID{5, 1}, node(2, 1, 1, "f", 0,
				2, 0, 0, "a", 4,
				3, 0, 1, "b", 4,
				0, 1, 0, 2, "x", "y", "1", "2", 8)},
			{StreamID{9, 0}, node(1, 0, 1, "f", 0, 2, 0, 0, "c", 4)},
		},
		Length: 3, LastID: StreamID{9, 0}, FirstID: StreamID{5, 1}, MaxDeletedID: StreamID{5, 2}, EntriesAdded: 4,
		Groups: []StreamGroup{
			{Name: []byte("g"), LastID: StreamID{9, 0}, EntriesRead: 4,
				PEL: []StreamNACK{{StreamID{5, 1}, 1000, 1}, {StreamID{6, 0}, 1001, 2}, {StreamID{9, 0}, 1002, 1}},
				Consumers: []StreamConsumer{
					{Name: []byte("alice"), SeenTime: 1000, Pending: []StreamID{{5, 1}, {9, 0}}},
					{Name: []byte("bob"), SeenTime: 1001, Pending: []StreamID{{6, 0}}},
					{Name: []byte("idle"), SeenTime: 5},
				}},
			{Name: []byte("h"), EntriesRead: -1},
		},
	}
}

func clone(s *Stream) *Stream {
	c := *s
	c.Nodes = slices.Clone(s.Nodes)
	c.Groups = slices.Clone(s.Groups)
	for i := range c.Groups {
		g := &c.Groups[i]
		g.PEL = slices.Clone(g.PEL)
		g.Consumers = slices.Clone(g.Consumers)
		for j := range g.Consumers {
			g.Consumers[j].Pending = slices.Clone(g.Consumers[j].Pending)
		}
	}
	return &c
}

// TestStreamRefusals: what RESTORE refuses, Decode refuses; what Redis
// takes in another order (nodes, which its radix tree sorts) it takes.
func TestStreamRefusals(t *testing.T) {
	good := testStream()
	if _, err := Decode(AppendStream(nil, good)); err != nil {
		t.Fatalf("the sound stream: %v", err)
	}
	swapped := clone(good)
	slices.Reverse(swapped.Nodes)
	v, err := Decode(AppendStream(nil, swapped))
	if err != nil || v.Stream.Nodes[0].Master != (StreamID{5, 1}) {
		t.Fatalf("nodes out of order: %v", err)
	}

	edits := map[string]func(s *Stream){
		"node with a count off by one": func(s *Stream) {
			s.Nodes[1].LP = node(1, 0, 1, "f", 0, 2, 0, 0, "c", 5)
		},
		"node with more entries than it says": func(s *Stream) {
			s.Nodes[1].LP = node(1, 0, 1, "f", 0, 2, 0, 0, "c", 4, 2, 0, 1, "d", 4)
		},
		"node with fewer": func(s *Stream) { s.Nodes[1].LP = node(2, 0, 1, "f", 0, 2, 0, 0, "c", 4) },
		"node without its terminator": func(s *Stream) {
			s.Nodes[1].LP = node(1, 0, 1, "f", 2, 0, 0, "c", 4)
		},
		"negative deleted count": func(s *Stream) { s.Nodes[1].LP = node(1, -1, 1, "f", 0, 2, 0, 0, "c", 4) },
		"no entries":             func(s *Stream) { s.Nodes[1].LP = node(0, 0, 1, "f", 0) },
		"empty listpack":         func(s *Stream) { s.Nodes[1].LP = node() },
		"flags not an integer": func(s *Stream) {
			s.Nodes[1].LP = node(1, 0, 1, "f", 0, "x", 0, 0, "c", 4)
		},
		"first entry is not the master": func(s *Stream) {
			s.Nodes[1].LP = node(1, 0, 1, "f", 0, 2, 0, 1, "c", 4)
		},
		"listpack size wrong": func(s *Stream) {
			lp := slices.Clone(s.Nodes[1].LP)
			lp[0]--
			s.Nodes[1].LP = lp
		},
		"listpack without its end": func(s *Stream) {
			lp := slices.Clone(s.Nodes[1].LP)
			lp[len(lp)-1] = 0
			s.Nodes[1].LP = lp
		},
		"node twice":              func(s *Stream) { s.Nodes = append(s.Nodes, s.Nodes[1]) },
		"length not the entries'": func(s *Stream) { s.Length = 4 },
		"length without nodes":    func(s *Stream) { s.Nodes, s.Groups = nil, nil },
		"group twice":             func(s *Stream) { s.Groups[1].Name = []byte("g") },
		"consumer twice":          func(s *Stream) { s.Groups[0].Consumers[2].Name = []byte("bob") },
		"PEL entry twice": func(s *Stream) {
			s.Groups[0].PEL[1].ID = StreamID{5, 1}
		},
		"pending ID not in the PEL": func(s *Stream) {
			s.Groups[0].Consumers[1].Pending[0] = StreamID{7, 0}
		},
		"PEL entry without a consumer": func(s *Stream) { s.Groups[0].Consumers[1].Pending = nil },
		"entry pending for two consumers": func(s *Stream) {
			s.Groups[0].Consumers[2].Pending = []StreamID{{6, 0}}
		},
	}
	for name, edit := range edits {
		s := clone(good)
		edit(s)
		if _, err := Decode(AppendStream(nil, s)); err != ErrBadData {
			t.Errorf("%s: Decode = %v, want ErrBadData", name, err)
		}
	}

	b := AppendStream(nil, good)
	short := bytes.Replace(b, append([]byte{16}, appendRawID(nil, StreamID{9, 0})...), append([]byte{15}, appendRawID(nil, StreamID{9, 0})[1:]...), 1)
	noGroups := clone(good)
	noGroups.Groups = nil
	hugePEL := AppendStream(nil, noGroups)
	hugePEL = hugePEL[:len(hugePEL)-1] // the group count, 0
	hugePEL = append(AppendString(AppendLen(hugePEL, 1), []byte("g")), 0, 0, 0)
	hugePEL = AppendLen(hugePEL, 1e9)
	for name, p := range map[string][]byte{
		"node key of 15 bytes":  short,
		"a billion nodes":       AppendLen([]byte{TypeStreamListpacks2}, 1e9),
		"a billion PEL entries": hugePEL,
	} {
		if _, err := Decode(p); err != ErrBadData {
			t.Errorf("%s: Decode = %v, want ErrBadData", name, err)
		}
	}
	// Every byte of a stream's value is needed: any cut is refused.
	bodies := [][]byte{b}
	for _, h := range []string{redisStreamNodes, redisStreamV1} {
		p, err := Open(unhex(t, h))
		if err != nil {
			t.Fatal(err)
		}
		bodies = append(bodies, p)
	}
	for _, p := range bodies {
		for cut := 0; cut < len(p); cut++ {
			if _, err := Decode(p[:cut]); err == nil {
				t.Fatalf("a stream cut at %d of %d was taken", cut, len(p))
			}
		}
	}
}

// TestStreamDamageNeverPanics: random damage is refused or gives a stream
// that encodes and decodes again.
func TestStreamDamageNeverPanics(t *testing.T) {
	rng := rand.New(rand.NewSource(19))
	for _, h := range []string{redisStreamNodes, redisStreamSmall, redisStreamV1} {
		p, err := Open(unhex(t, h))
		if err != nil {
			t.Fatal(err)
		}
		for i := 0; i < 5000; i++ {
			d := slices.Clone(p)
			for k := rng.Intn(3) + 1; k > 0; k-- {
				d[rng.Intn(len(d))] = byte(rng.Intn(256))
			}
			v, err := Decode(d)
			if err != nil || v.Kind != KindStream {
				continue
			}
			if _, err := Decode(AppendStream(nil, v.Stream)); err != nil {
				t.Fatalf("a damaged payload was taken, and its encoding is refused: %x", d)
			}
		}
	}
}

// TestStreamBig: a stream of many nodes and a long PEL goes through.
func TestStreamBig(t *testing.T) {
	s := &Stream{Groups: []StreamGroup{{Name: []byte("g"), Consumers: []StreamConsumer{{Name: []byte("c")}}}}}
	g := &s.Groups[0]
	for n := 0; n < 300; n++ {
		master := StreamID{uint64(1000 + n), 0}
		elems := []any{100, 0, 1, "f", 0}
		for i := 0; i < 100; i++ {
			elems = append(elems, 2, 0, i, strconv.Itoa(n*100+i), 4)
			id := StreamID{master.Ms, uint64(i)}
			g.PEL = append(g.PEL, StreamNACK{id, int64(i), 1})
			g.Consumers[0].Pending = append(g.Consumers[0].Pending, id)
		}
		s.Nodes = append(s.Nodes, StreamNode{master, node(elems...)})
	}
	s.Length, s.EntriesAdded, s.LastID = 30000, 30000, StreamID{1299, 99}
	b := AppendStream(nil, s)
	v, err := Decode(b)
	if err != nil {
		t.Fatal(err)
	}
	if again := AppendStream(nil, v.Stream); !bytes.Equal(again, b) {
		t.Fatal("a big stream re-encodes differently")
	}
	// The nodes' master IDs are raw big-endian keys (after the type, the
	// node count in two bytes and the key's length).
	if k := b[4:20]; binary.BigEndian.Uint64(k) != 1000 {
		t.Fatalf("first key %x", k)
	}
}
