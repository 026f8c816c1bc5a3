package engine

import (
	"bytes"
	"strconv"
	"testing"
)

// A stream goes through the value codec whole: nodes, metadata, groups,
// pending entries and consumers come back the same (re-encoded to the same
// bytes), an empty stream stays a key, and damaged values are refused
// without touching the key.
func TestStreamValueRoundTrip(t *testing.T) {
	e := New(Config{Databases: 1})
	s := e.Shard(0)
	s.Lock()
	defer s.Unlock()
	st := NewStream()
	for i := 0; i < 250; i++ {
		fv := [][]byte{[]byte("f"), []byte(strconv.Itoa(i))}
		if i%7 == 0 {
			fv = append(fv, []byte("other"), []byte("x"))
		}
		if _, err := st.Add(StreamID{}, XAddAuto, fv, DefaultStreamNodeLimits, 1_700_000_000_000+int64(i/3)); err != nil {
			t.Fatal(err)
		}
	}
	st.Delete([]StreamID{{Ms: 1_700_000_000_010, Seq: 1}})
	g, err := st.CreateGroup([]byte("g1"), StreamID{}, 0)
	if err != nil {
		t.Fatal(err)
	}
	st.ReadGroupNew(g, []byte("alice"), 20, false, 1_700_000_001_000, nil, func(StreamID, [][]byte) {})
	st.ReadGroupNew(g, []byte("bob"), 5, false, 1_700_000_002_000, nil, func(StreamID, [][]byte) {})
	if _, err := st.CreateGroup([]byte("g0"), st.LastID(), -1); err != nil {
		t.Fatal(err)
	}
	s.SetObject(0, []byte("s"), KindStream, st, 0)
	en, _ := s.Raw(0, []byte("s"))
	v, err := AppendValue(nil, s, en)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.StoreValue(0, []byte("copy"), v, DefaultLimits); err != nil {
		t.Fatal(err)
	}
	ec, _ := s.Raw(0, []byte("copy"))
	again, _ := AppendValue(nil, s, ec)
	if !bytes.Equal(v, again) {
		t.Fatal("the stream re-encodes differently after a round trip")
	}
	cp := s.Object(ec).(*Stream)
	if cp.Len() != 249 || cp.GroupCount() != 2 || cp.Group([]byte("g1")).PendingCount() != 25 {
		t.Fatalf("copy: len %d, groups %d", cp.Len(), cp.GroupCount())
	}
	if cp.MemoryUsage() != st.MemoryUsage() {
		t.Logf("memory: copy %d, original %d", cp.MemoryUsage(), st.MemoryUsage())
	}

	empty := NewStream()
	s.SetObject(0, []byte("e"), KindStream, empty, 0)
	ee, _ := s.Raw(0, []byte("e"))
	ev, _ := AppendValue(nil, s, ee)
	if err := s.StoreValue(0, []byte("e2"), ev, DefaultLimits); err != nil {
		t.Fatal(err)
	}
	if _, ok := s.Raw(0, []byte("e2")); !ok {
		t.Fatal("an empty stream did not come back as a key")
	}

	for cut := 3; cut < len(v); cut += len(v) / 50 {
		if err := s.StoreValue(0, []byte("bad"), v[:cut], DefaultLimits); err == nil {
			t.Fatalf("a value cut at %d of %d was taken", cut, len(v))
		}
	}
	if _, ok := s.Raw(0, []byte("bad")); ok {
		t.Fatal("a refused value left a key")
	}
}
