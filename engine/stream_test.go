package engine

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"math"
	"math/rand"
	"net"
	"os"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"
)

// ---------------------------------------------------------------------------
// StreamID and its parsing.

func TestStreamIDIncrDecr(t *testing.T) {
	max := uint64(math.MaxUint64)
	cases := []struct {
		id, next StreamID
		ok       bool
	}{
		{StreamID{0, 0}, StreamID{0, 1}, true},
		{StreamID{5, max}, StreamID{6, 0}, true},
		{MaxStreamID, StreamID{}, false},
	}
	for _, c := range cases {
		got, ok := c.id.Incr()
		if got != c.next || ok != c.ok {
			t.Errorf("%v.Incr() = %v, %v; want %v, %v", c.id, got, ok, c.next, c.ok)
		}
	}
	if got, ok := (StreamID{}).Decr(); got != MaxStreamID || ok {
		t.Errorf("0-0.Decr() = %v, %v", got, ok)
	}
	if got, ok := (StreamID{6, 0}).Decr(); got != (StreamID{5, max}) || !ok {
		t.Errorf("6-0.Decr() = %v, %v", got, ok)
	}
	if s := (StreamID{1732123456789, 18446744073709551615}).String(); s != "1732123456789-18446744073709551615" {
		t.Errorf("String = %q", s)
	}
	if (StreamID{1, 2}).Compare(StreamID{1, 3}) != -1 || (StreamID{2, 0}).Compare(StreamID{1, 9}) != 1 || (StreamID{1, 1}).Compare(StreamID{1, 1}) != 0 {
		t.Error("Compare")
	}
}

func TestParseStreamID(t *testing.T) {
	max := uint64(math.MaxUint64)
	type want struct {
		id StreamID
		ok bool
	}
	strict := map[string]want{
		"1-2":      {StreamID{1, 2}, true},
		"5":        {StreamID{5, 77}, true}, // missing seq
		"-":        {ok: false},
		"+":        {ok: false},
		"":         {ok: false},
		"1-":       {ok: false},
		"-1":       {ok: false}, // empty ms part
		"1-2-3":    {ok: false},
		"1--1":     {ok: false}, // string2ll takes -1, refused as negative
		"1--01":    {StreamID{1, max}, true},
		"1--0":     {StreamID{1, 0}, true},
		" 7-+3":    {StreamID{7, 3}, true}, // strtoull takes space and sign
		"007-0010": {StreamID{7, 10}, true},
		"7 -1":     {ok: false},
		"18446744073709551615-18446744073709551615": {MaxStreamID, true},
		"18446744073709551616-0":                    {ok: false},
		"1-*":                                       {ok: false}, // only XADD takes ms-*
		"1-2\x00junk":                               {StreamID{1, 2}, true},
		"0x10-1":                                    {ok: false},
		strings.Repeat("0", 127) + "1":              {ok: false}, // over 127 bytes
	}
	for in, w := range strict {
		id, err := ParseStreamID([]byte(in), 77)
		if (err == nil) != w.ok || w.ok && id != w.id {
			t.Errorf("ParseStreamID(%q) = %v, %v; want %v ok=%v", in, id, err, w.id, w.ok)
		}
		if err != nil && err != ErrInvalidStreamID {
			t.Errorf("ParseStreamID(%q) error %v", in, err)
		}
	}
	if id, err := ParseStreamRangeID([]byte("-"), 0); err != nil || id != (StreamID{}) {
		t.Errorf("range - = %v %v", id, err)
	}
	if id, err := ParseStreamRangeID([]byte("+"), 0); err != nil || id != MaxStreamID {
		t.Errorf("range + = %v %v", id, err)
	}
	if id, err := ParseStreamRangeID([]byte("9"), max); err != nil || id != (StreamID{9, max}) {
		t.Errorf("range 9 = %v %v", id, err)
	}
	if id, ex, err := ParseStreamIntervalID([]byte("(5-1"), 0); err != nil || !ex || id != (StreamID{5, 1}) {
		t.Errorf("interval (5-1 = %v %v %v", id, ex, err)
	}
	if _, _, err := ParseStreamIntervalID([]byte("(-"), 0); err == nil {
		t.Error("interval (- accepted")
	}
	if id, ex, err := ParseStreamIntervalID([]byte("("), 0); err == nil || ex {
		t.Errorf("interval ( = %v %v %v", id, ex, err)
	}
	for in, w := range map[string]struct {
		id   StreamID
		form XAddIDForm
		ok   bool
	}{
		"*":      {StreamID{}, XAddAuto, true},
		"5-*":    {StreamID{5, 0}, XAddAutoSeq, true},
		"5":      {StreamID{5, 0}, XAddExplicit, true},
		"5-3":    {StreamID{5, 3}, XAddExplicit, true},
		"*-1":    {ok: false},
		"-":      {ok: false},
		"5-**":   {ok: false},
		"0-0":    {StreamID{}, XAddExplicit, true},
		"*\x00x": {StreamID{}, XAddAuto, true},
	} {
		id, form, err := ParseXAddID([]byte(in))
		if (err == nil) != w.ok || w.ok && (id != w.id || form != w.form) {
			t.Errorf("ParseXAddID(%q) = %v %v %v", in, id, form, err)
		}
	}
}

// ---------------------------------------------------------------------------
// Listpack bytes.

// lpBuild writes a listpack by hand from Redis's documented encodings, as
// the reference the codec is checked against.
func lpBuild(elems ...[]byte) []byte {
	var body []byte
	for _, e := range elems {
		body = append(body, e...)
	}
	lp := make([]byte, 6, 7+len(body))
	lp = append(lp, body...)
	lp = append(lp, 0xFF)
	binary.LittleEndian.PutUint32(lp, uint32(len(lp)))
	binary.LittleEndian.PutUint16(lp[4:], uint16(len(elems)))
	return lp
}

// lpU7 is a 7-bit unsigned element with its backlen.
func lpU7(v byte) []byte { return []byte{v, 1} }

// lpStr6 is a short string element with its backlen.
func lpStr6(s string) []byte {
	return append(append([]byte{0x80 | byte(len(s))}, s...), byte(1+len(s)))
}

func TestListpackCodec(t *testing.T) {
	lp := newListpack(0)
	for _, s := range []string{"0", "127", "128", "-1", "-4096", "4095", "4096", "-32768", "32767", "32768",
		"-8388608", "8388607", "8388608", "-2147483648", "2147483647", "2147483648",
		"9223372036854775807", "-9223372036854775808", "9223372036854775808", "-0", "01", "+1", " 1", "",
		strings.Repeat("x", 63), strings.Repeat("y", 64), strings.Repeat("z", 4095), strings.Repeat("w", 4096)} {
		lp = lp.appendString([]byte(s))
	}
	want := [][]byte{
		{0x00}, {0x7F}, {0xC0, 0x80}, {0xDF, 0xFF}, {0xD0, 0x00}, {0xCF, 0xFF}, {0xF1, 0x00, 0x10},
		{0xF1, 0x00, 0x80}, {0xF1, 0xFF, 0x7F}, {0xF2, 0x00, 0x80, 0x00},
		{0xF2, 0x00, 0x00, 0x80}, {0xF2, 0xFF, 0xFF, 0x7F}, {0xF3, 0x00, 0x00, 0x80, 0x00},
		{0xF3, 0x00, 0x00, 0x00, 0x80}, {0xF3, 0xFF, 0xFF, 0xFF, 0x7F}, {0xF4, 0, 0, 0, 0x80, 0, 0, 0, 0},
		{0xF4, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0x7F}, {0xF4, 0, 0, 0, 0, 0, 0, 0, 0x80},
	}
	var ref [][]byte
	for _, w := range want {
		ref = append(ref, append(slices.Clone(w), byte(len(w))))
	}
	for _, s := range []string{"9223372036854775808", "-0", "01", "+1", " 1", "", strings.Repeat("x", 63)} {
		ref = append(ref, lpStr6(s))
	}
	y := append([]byte{0xE0, 64}, strings.Repeat("y", 64)...)
	ref = append(ref, append(y, 66))
	z := append([]byte{0xEF, 0xFF}, strings.Repeat("z", 4095)...)
	ref = append(ref, append(z, 4097>>7, 0x80|4097&127))
	w := append([]byte{0xF0, 0x00, 0x10, 0, 0}, strings.Repeat("w", 4096)...)
	ref = append(ref, append(w, 4101>>7, 0x80|4101&127))
	if exp := lpBuild(ref...); !bytes.Equal(lp, exp) {
		t.Fatalf("listpack bytes differ:\n got %x\nwant %x", lp[:min(len(lp), 200)], exp[:min(len(exp), 200)])
	}
	if !lp.validate() {
		t.Fatal("validate refused a good listpack")
	}
	// Walk both ways and read back.
	var fwd []int
	for p := lp.first(); p < lp.end(); p = lp.next(p) {
		fwd = append(fwd, p)
	}
	var back []int
	for p := lp.prev(lp.end()); p >= 0; p = lp.prev(p) {
		back = append(back, p)
	}
	slices.Reverse(back)
	if !slices.Equal(fwd, back) || len(fwd) != len(ref) {
		t.Fatalf("walks differ: %d forward, %d backward, %d elements", len(fwd), len(back), len(ref))
	}
	if got := string(lp.appendTo(nil, fwd[17])); got != "-9223372036854775808" {
		t.Errorf("element 17 = %q", got)
	}
	// replaceInt across encodings keeps the listpack well-formed.
	for _, v := range []int64{127, 128, 5000, -1, 1 << 40, 0} {
		lp = lp.replaceInt(lp.first(), v)
		if !lp.validate() || lp.getInt(lp.first()) != v {
			t.Fatalf("replaceInt(%d) broke the listpack", v)
		}
	}
	bad := slices.Clone(lp)
	bad[len(bad)-2] ^= 1
	if bad.validate() {
		t.Error("validate took a corrupt backlen")
	}
}

// TestListpackCountSaturates checks the header count stops at 65535 as
// lpInsert leaves it.
func TestListpackCountSaturates(t *testing.T) {
	lp := newListpack(0)
	for i := 0; i < 70000; i++ {
		lp = lp.appendInt(1)
	}
	if c := binary.LittleEndian.Uint16(lp[4:]); c != 65535 {
		t.Errorf("count = %d", c)
	}
	if !lp.validate() {
		t.Error("saturated listpack refused")
	}
}

// TestStreamNodeBytesByHand builds small streams and compares their node
// with one written by hand from t_stream.c's layout.
func TestStreamNodeBytesByHand(t *testing.T) {
	s := NewStream()
	add := func(id StreamID, fv ...string) {
		t.Helper()
		var b [][]byte
		for _, x := range fv {
			b = append(b, []byte(x))
		}
		if _, err := s.Add(id, XAddExplicit, b, DefaultStreamNodeLimits, 0); err != nil {
			t.Fatal(err)
		}
	}
	add(StreamID{1000, 1}, "name", "ann", "age", "42")
	add(StreamID{1000, 5}, "name", "bob", "age", "7")
	add(StreamID{1003, 0}, "city", "x")
	want := lpBuild(
		// master: count 3, deleted 0, 2 fields, "name", "age", terminator
		lpU7(3), lpU7(0), lpU7(2), lpStr6("name"), lpStr6("age"), lpU7(0),
		// 1000-1: SAMEFIELDS, diffs 0 0, values, lp-count 2+3
		lpU7(2), lpU7(0), lpU7(0), lpStr6("ann"), lpU7(42), lpU7(5),
		// 1000-5: SAMEFIELDS, diffs 0 4
		lpU7(2), lpU7(0), lpU7(4), lpStr6("bob"), lpU7(7), lpU7(5),
		// 1003-0: own fields, diffs 3 and -1 (0-1 as int64), 1 field, lp-count 1+3+1+1
		lpU7(0), lpU7(3), []byte{0xDF, 0xFF, 2}, lpU7(1), lpStr6("city"), lpStr6("x"), lpU7(6),
	)
	var got []byte
	n := 0
	s.ForEachNode(func(master StreamID, lp []byte) bool {
		if master != (StreamID{1000, 1}) {
			t.Errorf("master %v", master)
		}
		got = lp
		n++
		return true
	})
	if n != 1 || !bytes.Equal(got, want) {
		t.Fatalf("node:\n got %x\nwant %x", got, want)
	}
	// XDEL flags the entry and moves it from count to deleted.
	if s.Delete([]StreamID{{1000, 5}}) != 1 {
		t.Fatal("delete")
	}
	want[6] = 2 // count
	want[8] = 1 // deleted
	// header, master (3 counters, "name", "age", 0), first entry
	p := 6 + (2 + 2 + 2 + 6 + 5 + 2) + (2 + 2 + 2 + 5 + 2 + 2)
	want[p] = 3 // flags SAMEFIELDS|DELETED
	s.ForEachNode(func(_ StreamID, lp []byte) bool { got = lp; return true })
	if !bytes.Equal(got, want) {
		t.Fatalf("after XDEL:\n got %x\nwant %x", got, want)
	}
}

// ---------------------------------------------------------------------------
// A shim that runs stream commands on Streams, replying as Redis does, so
// that scenarios can be replayed against both and compared.

type respErr string

func (e respErr) Error() string { return string(e) }

type streamShim struct {
	keys   map[string]*Stream
	limits StreamNodeLimits
	now    int64
}

func newStreamShim() *streamShim {
	return &streamShim{keys: map[string]*Stream{}, limits: DefaultStreamNodeLimits, now: 1}
}

func bs(args []string) [][]byte {
	out := make([][]byte, len(args))
	for i, a := range args {
		out[i] = []byte(a)
	}
	return out
}

func errReply(err error) any { return respErr(err.Error()) }

func entryReply(id StreamID, fv [][]byte) any {
	pairs := make([]any, len(fv))
	for i, b := range fv {
		pairs[i] = string(b)
	}
	return []any{id.String(), pairs}
}

// parseTrim parses MAXLEN/MINID [~|=] x [LIMIT n] from args[i:] and
// returns the index after the options.
func (sh *streamShim) parseTrim(args []string, i int, xadd bool) (StreamTrimArgs, int, error) {
	var a StreamTrimArgs
	limitGiven := false
	for ; i < len(args); i++ {
		opt := strings.ToUpper(args[i])
		switch {
		case xadd && (opt == "*" || opt != "MAXLEN" && opt != "MINID" && opt != "LIMIT" && opt != "NOMKSTREAM"):
			goto done
		case opt == "MAXLEN" || opt == "MINID":
			if args[i+1] == "~" {
				a.Approx = true
				i++
			} else if args[i+1] == "=" {
				i++
			}
			if opt == "MAXLEN" {
				a.Strategy = StreamTrimMaxLen
				a.MaxLen, _ = strconv.ParseInt(args[i+1], 10, 64)
			} else {
				a.Strategy = StreamTrimMinID
				id, err := ParseStreamID([]byte(args[i+1]), 0)
				if err != nil {
					return a, 0, err
				}
				a.MinID = id
			}
			i++
		case opt == "LIMIT":
			a.Limit, _ = strconv.ParseInt(args[i+1], 10, 64)
			limitGiven = true
			i++
		case opt == "NOMKSTREAM":
		}
	}
done:
	if !limitGiven && a.Approx {
		a.Limit = sh.limits.ApproxTrimLimit()
	}
	return a, i, nil
}

func (sh *streamShim) do(args ...string) any {
	cmd := strings.ToUpper(args[0])
	switch cmd {
	case "CONFIG":
		v, _ := strconv.ParseInt(args[3], 10, 64)
		if args[2] == "stream-node-max-entries" {
			sh.limits.MaxEntries = v
		} else {
			sh.limits.MaxBytes = v
		}
		return "OK"
	case "DEL":
		_, ok := sh.keys[args[1]]
		delete(sh.keys, args[1])
		return int64(map[bool]int{true: 1}[ok])
	}
	s := sh.keys[args[1]]
	switch cmd {
	case "XADD":
		trim, i, err := sh.parseTrim(args, 2, true)
		if err != nil {
			return errReply(err)
		}
		id, form, err := ParseXAddID([]byte(args[i]))
		if err != nil {
			return errReply(err)
		}
		if form == XAddExplicit && id.IsZero() {
			return errReply(ErrXAddIDZero)
		}
		if s == nil {
			s = NewStream()
			sh.keys[args[1]] = s
		}
		got, err := s.Add(id, form, bs(args[i+1:]), sh.limits, sh.now)
		if err != nil {
			return errReply(err)
		}
		s.Trim(trim)
		return got.String()
	case "XDEL":
		if s == nil {
			return int64(0)
		}
		var ids []StreamID
		for _, a := range args[2:] {
			id, err := ParseStreamID([]byte(a), 0)
			if err != nil {
				return errReply(err)
			}
			ids = append(ids, id)
		}
		return int64(s.Delete(ids))
	case "XTRIM":
		trim, _, err := sh.parseTrim(args, 2, false)
		if err != nil {
			return errReply(err)
		}
		if s == nil {
			return int64(0)
		}
		return s.Trim(trim)
	case "XLEN":
		if s == nil {
			return int64(0)
		}
		return int64(s.Len())
	case "XSETID":
		id, err := ParseStreamID([]byte(args[2]), 0)
		if err != nil {
			return errReply(err)
		}
		added, maxDel := int64(-1), StreamID{}
		for i := 3; i < len(args); i += 2 {
			if strings.EqualFold(args[i], "ENTRIESADDED") {
				added, _ = strconv.ParseInt(args[i+1], 10, 64)
			} else if maxDel, err = ParseStreamID([]byte(args[i+1]), 0); err != nil {
				return errReply(err)
			}
		}
		if err := CheckXSetIDArgs(id, maxDel); err != nil {
			return errReply(err)
		}
		if s == nil {
			return respErr("ERR no such key")
		}
		if err := s.SetID(id, added, maxDel); err != nil {
			return errReply(err)
		}
		return "OK"
	case "XRANGE", "XREVRANGE":
		rev := cmd == "XREVRANGE"
		startArg, endArg := args[2], args[3]
		if rev {
			startArg, endArg = endArg, startArg
		}
		start, ex, err := ParseStreamIntervalID([]byte(startArg), 0)
		if err != nil {
			return errReply(err)
		}
		if ex {
			var ok bool
			if start, ok = start.Incr(); !ok {
				return respErr("ERR invalid start ID for the interval")
			}
		}
		end, ex, err := ParseStreamIntervalID([]byte(endArg), math.MaxUint64)
		if err != nil {
			return errReply(err)
		}
		if ex {
			var ok bool
			if end, ok = end.Decr(); !ok {
				return respErr("ERR invalid end ID for the interval")
			}
		}
		count := -1
		if len(args) > 5 {
			count, _ = strconv.Atoi(args[5])
			count = max(count, 0)
		}
		if s == nil {
			return []any{}
		}
		if count == 0 {
			return nil
		}
		out := []any{}
		s.Range(start, end, max(count, 0), rev, func(id StreamID, fv [][]byte) bool {
			out = append(out, entryReply(id, fv))
			return true
		})
		return out
	case "XGROUP":
		return sh.xgroup(args)
	case "XREADGROUP":
		return sh.xreadgroup(args)
	case "XACK":
		if s == nil || s.Group([]byte(args[2])) == nil {
			return int64(0)
		}
		var ids []StreamID
		for _, a := range args[3:] {
			id, err := ParseStreamID([]byte(a), 0)
			if err != nil {
				return errReply(err)
			}
			ids = append(ids, id)
		}
		return int64(s.Group([]byte(args[2])).Ack(ids))
	case "XCLAIM":
		return sh.xclaim(args)
	case "XAUTOCLAIM":
		return sh.xautoclaim(args)
	case "XPENDING":
		return sh.xpending(args)
	case "XINFO":
		return sh.xinfo(args)
	}
	panic("shim: unknown command " + cmd)
}

func (sh *streamShim) xgroup(args []string) any {
	sub := strings.ToUpper(args[1])
	s := sh.keys[args[2]]
	entriesRead := int64(-1)
	mkstream := false
	for i := 5; i < len(args); i++ {
		if strings.EqualFold(args[i], "ENTRIESREAD") {
			entriesRead, _ = strconv.ParseInt(args[i+1], 10, 64)
			i++
		} else {
			mkstream = true
		}
	}
	if s == nil && !mkstream {
		return respErr("ERR The XGROUP subcommand requires the key to exist. Note that for CREATE you may want to use the MKSTREAM option to create an empty stream automatically.")
	}
	var g *StreamGroup
	if s != nil {
		g = s.Group([]byte(args[3]))
	}
	if g == nil && sub != "CREATE" && sub != "DESTROY" {
		return respErr(fmt.Sprintf("NOGROUP No such consumer group '%s' for key name '%s'", args[3], args[2]))
	}
	parseID := func(a string, strict bool) (StreamID, error) {
		if a == "$" {
			if s == nil {
				return StreamID{}, nil
			}
			return s.LastID(), nil
		}
		if strict {
			return ParseStreamID([]byte(a), 0)
		}
		return ParseStreamRangeID([]byte(a), 0)
	}
	switch sub {
	case "CREATE":
		id, err := parseID(args[4], true)
		if err != nil {
			return errReply(err)
		}
		if s == nil {
			s = NewStream()
			sh.keys[args[2]] = s
		}
		if _, err := s.CreateGroup([]byte(args[3]), id, entriesRead); err != nil {
			return errReply(err)
		}
		return "OK"
	case "SETID":
		id, err := parseID(args[4], false)
		if err != nil {
			return errReply(err)
		}
		g.SetLastID(id, entriesRead)
		return "OK"
	case "DESTROY":
		return int64(map[bool]int{true: 1}[s.DestroyGroup([]byte(args[3]))])
	case "CREATECONSUMER":
		return int64(map[bool]int{true: 1}[g.CreateConsumer([]byte(args[4]), sh.now)])
	case "DELCONSUMER":
		n, _ := g.DeleteConsumer([]byte(args[4]))
		return int64(n)
	}
	panic("shim: XGROUP " + sub)
}

// xreadgroup takes XREADGROUP GROUP g c [COUNT n] [NOACK] STREAMS key id.
func (sh *streamShim) xreadgroup(args []string) any {
	group, consumer := args[2], args[3]
	count, noack := 0, false
	i := 4
	for ; !strings.EqualFold(args[i], "STREAMS"); i++ {
		if strings.EqualFold(args[i], "COUNT") {
			count, _ = strconv.Atoi(args[i+1])
			i++
		} else {
			noack = true
		}
	}
	key, idArg := args[i+1], args[i+2]
	s := sh.keys[key]
	var g *StreamGroup
	if s != nil {
		g = s.Group([]byte(group))
	}
	if g == nil {
		return respErr(fmt.Sprintf("NOGROUP No such key '%s' or consumer group '%s' in XREADGROUP with GROUP option", key, group))
	}
	entries := []any{}
	after := MaxStreamID // ">"; Redis takes an explicit maximal ID for it too
	if idArg != ">" {
		var err error
		if after, err = ParseStreamID([]byte(idArg), 0); err != nil {
			return errReply(err)
		}
	}
	if after == MaxStreamID {
		if !s.HasNewEntriesFor(g) {
			return nil
		}
		s.ReadGroupNew(g, []byte(consumer), count, noack, sh.now, nil, func(id StreamID, fv [][]byte) {
			entries = append(entries, entryReply(id, fv))
		})
	} else {
		s.ReadGroupHistory(g, []byte(consumer), after, count, sh.now, func(id StreamID, fv [][]byte, ok bool) {
			if ok {
				entries = append(entries, entryReply(id, fv))
			} else {
				entries = append(entries, []any{id.String(), nil})
			}
		})
	}
	return []any{[]any{key, entries}}
}

func (sh *streamShim) groupFor(key, group string) (*Stream, *StreamGroup, any) {
	s := sh.keys[key]
	var g *StreamGroup
	if s != nil {
		g = s.Group([]byte(group))
	}
	if g == nil {
		return nil, nil, respErr(fmt.Sprintf("NOGROUP No such key '%s' or consumer group '%s'", key, group))
	}
	return s, g, nil
}

// xclaim takes XCLAIM key g c min-idle id... [JUSTID] [FORCE]
// [RETRYCOUNT n] [LASTID id].
func (sh *streamShim) xclaim(args []string) any {
	s, g, e := sh.groupFor(args[1], args[2])
	if e != nil {
		return e
	}
	a := StreamClaimArgs{DeliveryTime: -1, RetryCount: -1}
	a.MinIdle, _ = strconv.ParseInt(args[4], 10, 64)
	var ids []StreamID
	i := 5
	for ; i < len(args); i++ {
		id, err := ParseStreamID([]byte(args[i]), 0)
		if err != nil {
			break
		}
		ids = append(ids, id)
	}
	for ; i < len(args); i++ {
		switch strings.ToUpper(args[i]) {
		case "JUSTID":
			a.JustID = true
		case "FORCE":
			a.Force = true
		case "RETRYCOUNT":
			a.RetryCount, _ = strconv.ParseInt(args[i+1], 10, 64)
			i++
		case "LASTID":
			a.LastID, _ = ParseStreamID([]byte(args[i+1]), 0)
			i++
		}
	}
	out := []any{}
	s.Claim(g, []byte(args[3]), ids, a, sh.now, nil, func(id StreamID, fv [][]byte) {
		if fv == nil {
			out = append(out, id.String())
		} else {
			out = append(out, entryReply(id, fv))
		}
	})
	return out
}

// xautoclaim takes XAUTOCLAIM key g c min-idle start [COUNT n] [JUSTID].
func (sh *streamShim) xautoclaim(args []string) any {
	s, g, e := sh.groupFor(args[1], args[2])
	if e != nil {
		return e
	}
	minIdle, _ := strconv.ParseInt(args[4], 10, 64)
	start, ex, err := ParseStreamIntervalID([]byte(args[5]), 0)
	if err != nil {
		return errReply(err)
	}
	if ex {
		start, _ = start.Incr()
	}
	count, justID := 100, false
	for i := 6; i < len(args); i++ {
		if strings.EqualFold(args[i], "COUNT") {
			count, _ = strconv.Atoi(args[i+1])
			i++
		} else {
			justID = true
		}
	}
	claimed := []any{}
	next, deleted, _ := s.AutoClaim(g, []byte(args[3]), minIdle, start, count, justID, sh.now, nil, func(id StreamID, fv [][]byte) {
		if fv == nil {
			claimed = append(claimed, id.String())
		} else {
			claimed = append(claimed, entryReply(id, fv))
		}
	})
	del := []any{}
	for _, id := range deleted {
		del = append(del, id.String())
	}
	return []any{next.String(), claimed, del}
}

// xpending takes XPENDING key g [start end count [consumer]]; the idle
// times are left out of the reply, as they depend on the clock.
func (sh *streamShim) xpending(args []string) any {
	_, g, e := sh.groupFor(args[1], args[2])
	if e != nil {
		return e
	}
	if len(args) == 3 {
		first, last, ok := g.PendingBounds()
		if !ok {
			return []any{int64(0), nil, nil, nil}
		}
		cons := []any{}
		g.Consumers(func(c *StreamConsumer) bool {
			if c.PendingCount() > 0 {
				cons = append(cons, []any{c.Name(), strconv.Itoa(c.PendingCount())})
			}
			return true
		})
		return []any{int64(g.PendingCount()), first.String(), last.String(), cons}
	}
	start, _ := ParseStreamRangeID([]byte(args[3]), 0)
	end, _ := ParseStreamRangeID([]byte(args[4]), math.MaxUint64)
	count, _ := strconv.Atoi(args[5])
	var c *StreamConsumer
	if len(args) > 6 {
		if c = g.Consumer([]byte(args[6])); c == nil {
			return []any{}
		}
	}
	out := []any{}
	g.PendingRange(start, end, max(count, 0), c, 0, sh.now, func(p StreamPending) {
		out = append(out, []any{p.ID.String(), p.Consumer, int64(p.DeliveryCount)})
	})
	return out
}

// xinfo takes XINFO STREAM key and XINFO GROUPS key, keeping the fields
// that do not depend on the clock or on the radix tree's shape.
func (sh *streamShim) xinfo(args []string) any {
	s := sh.keys[args[2]]
	if s == nil {
		return respErr("ERR no such key")
	}
	if strings.EqualFold(args[1], "STREAM") {
		first, last := any(nil), any(nil)
		s.FirstEntry(func(id StreamID, fv [][]byte) { first = entryReply(id, fv) })
		s.LastEntry(func(id StreamID, fv [][]byte) { last = entryReply(id, fv) })
		return []any{int64(s.Len()), int64(s.NodeCount()), s.LastID().String(), s.MaxDeletedID().String(),
			int64(s.EntriesAdded()), s.FirstID().String(), int64(s.GroupCount()), first, last}
	}
	out := []any{}
	s.Groups(func(g *StreamGroup) bool {
		var read, lag any
		if r := g.EntriesRead(); r != -1 {
			read = r
		}
		if l, ok := s.GroupLag(g); ok {
			lag = l
		}
		out = append(out, []any{g.Name(), int64(g.ConsumerCount()), int64(g.PendingCount()), g.LastID().String(), read, lag})
		return true
	})
	return out
}

// ---------------------------------------------------------------------------
// A minimal RESP client, and reshaping of Redis's replies to the shim's.

type respClient struct {
	conn net.Conn
	r    *bufio.Reader
}

func dialRedis(addr string) (*respClient, error) {
	c, err := net.DialTimeout("tcp", addr, time.Second)
	if err != nil {
		return nil, err
	}
	return &respClient{conn: c, r: bufio.NewReader(c)}, nil
}

func (c *respClient) do(args ...string) any {
	var b []byte
	b = fmt.Appendf(b, "*%d\r\n", len(args))
	for _, a := range args {
		b = fmt.Appendf(b, "$%d\r\n%s\r\n", len(a), a)
	}
	if _, err := c.conn.Write(b); err != nil {
		panic(err)
	}
	return c.read()
}

func (c *respClient) read() any {
	line, err := c.r.ReadString('\n')
	if err != nil {
		panic(err)
	}
	line = strings.TrimSuffix(line, "\r\n")
	switch line[0] {
	case '+':
		return line[1:]
	case '-':
		return respErr(line[1:])
	case ':':
		n, _ := strconv.ParseInt(line[1:], 10, 64)
		return n
	case '$':
		n, _ := strconv.Atoi(line[1:])
		if n < 0 {
			return nil
		}
		buf := make([]byte, n+2)
		if _, err := ioReadFull(c.r, buf); err != nil {
			panic(err)
		}
		return string(buf[:n])
	case '*':
		n, _ := strconv.Atoi(line[1:])
		if n < 0 {
			return nil
		}
		out := make([]any, n)
		for i := range out {
			out[i] = c.read()
		}
		return out
	}
	panic("resp: " + line)
}

func ioReadFull(r *bufio.Reader, b []byte) (int, error) {
	n := 0
	for n < len(b) {
		m, err := r.Read(b[n:])
		n += m
		if err != nil {
			return n, err
		}
	}
	return n, nil
}

// reshapeRedisReply turns Redis's reply to the commands the shim answers
// differently (XPENDING's idle times, XINFO's maps) into the shim's shape.
func reshapeRedisReply(args []string, r any) any {
	cmd := strings.ToUpper(args[0])
	arr, _ := r.([]any)
	switch {
	case cmd == "XPENDING" && len(args) > 3 && arr != nil:
		out := []any{}
		for _, e := range arr {
			e := e.([]any)
			out = append(out, []any{e[0], e[1], e[3]})
		}
		return out
	case cmd == "XINFO" && strings.EqualFold(args[1], "STREAM") && arr != nil:
		m := map[string]any{}
		for i := 0; i < len(arr); i += 2 {
			m[arr[i].(string)] = arr[i+1]
		}
		return []any{m["length"], m["radix-tree-keys"], m["last-generated-id"], m["max-deleted-entry-id"],
			m["entries-added"], m["recorded-first-entry-id"], m["groups"], m["first-entry"], m["last-entry"]}
	case cmd == "XINFO" && arr != nil:
		out := []any{}
		for _, g := range arr {
			ga := g.([]any)
			m := map[string]any{}
			for i := 0; i < len(ga); i += 2 {
				m[ga[i].(string)] = ga[i+1]
			}
			out = append(out, []any{m["name"], m["consumers"], m["pending"], m["last-delivered-id"], m["entries-read"], m["lag"]})
		}
		return out
	}
	return r
}

// ---------------------------------------------------------------------------
// DUMP payloads (RDB_TYPE_STREAM_LISTPACKS_2, written without compression)
// and their comparison with a Stream.

type dumpedNACK struct {
	id    StreamID
	count uint64
}

type dumpedGroup struct {
	name        string
	lastID      StreamID
	entriesRead int64
	pel         []dumpedNACK
	consumers   map[string][]StreamID
}

type dumpedStream struct {
	masters      []StreamID
	nodes        [][]byte
	length       uint64
	lastID       StreamID
	firstID      StreamID
	maxDeletedID StreamID
	entriesAdded uint64
	groups       []dumpedGroup
}

type rdbReader struct {
	b []byte
	p int
}

func (r *rdbReader) byte1() byte { r.p++; return r.b[r.p-1] }

func (r *rdbReader) length() uint64 {
	b := r.byte1()
	switch b >> 6 {
	case 0:
		return uint64(b & 0x3F)
	case 1:
		return uint64(b&0x3F)<<8 | uint64(r.byte1())
	}
	switch b {
	case 0x80:
		r.p += 4
		return uint64(binary.BigEndian.Uint32(r.b[r.p-4:]))
	case 0x81:
		r.p += 8
		return binary.BigEndian.Uint64(r.b[r.p-8:])
	}
	panic(fmt.Sprintf("rdb: length encoding %#x (compressed?)", b))
}

func (r *rdbReader) str() []byte {
	n := int(r.length())
	r.p += n
	return r.b[r.p-n : r.p]
}

func (r *rdbReader) id() StreamID {
	return StreamID{r.length(), r.length()}
}

func parseStreamDump(t *testing.T, payload []byte) dumpedStream {
	t.Helper()
	r := &rdbReader{b: payload}
	if typ := r.byte1(); typ != 19 {
		t.Fatalf("DUMP type %d, want 19 (RDB_TYPE_STREAM_LISTPACKS_2)", typ)
	}
	var d dumpedStream
	for n := r.length(); n > 0; n-- {
		key := r.str()
		d.masters = append(d.masters, StreamID{binary.BigEndian.Uint64(key), binary.BigEndian.Uint64(key[8:])})
		d.nodes = append(d.nodes, slices.Clone(r.str()))
	}
	d.length = r.length()
	d.lastID = r.id()
	d.firstID = r.id()
	d.maxDeletedID = r.id()
	d.entriesAdded = r.length()
	for n := r.length(); n > 0; n-- {
		g := dumpedGroup{name: string(r.str()), lastID: r.id(), consumers: map[string][]StreamID{}}
		g.entriesRead = int64(r.length())
		for k := r.length(); k > 0; k-- {
			raw := r.b[r.p : r.p+16]
			r.p += 16 + 8 // ID, delivery time
			g.pel = append(g.pel, dumpedNACK{StreamID{binary.BigEndian.Uint64(raw), binary.BigEndian.Uint64(raw[8:])}, r.length()})
		}
		for k := r.length(); k > 0; k-- {
			name := string(r.str())
			r.p += 8 // seen time
			ids := []StreamID{}
			for m := r.length(); m > 0; m-- {
				raw := r.b[r.p : r.p+16]
				r.p += 16
				ids = append(ids, StreamID{binary.BigEndian.Uint64(raw), binary.BigEndian.Uint64(raw[8:])})
			}
			g.consumers[name] = ids
		}
		d.groups = append(d.groups, g)
	}
	if r.p+10 != len(payload) {
		t.Fatalf("DUMP: %d bytes left after the stream, want 10 (version, CRC)", len(payload)-r.p)
	}
	return d
}

// compareWithDump reports how s differs from what Redis dumped.
func compareWithDump(s *Stream, d dumpedStream) error {
	var masters []StreamID
	var nodes [][]byte
	s.ForEachNode(func(m StreamID, lp []byte) bool {
		masters = append(masters, m)
		nodes = append(nodes, lp)
		return true
	})
	if len(nodes) != len(d.nodes) {
		return fmt.Errorf("%d nodes, Redis has %d", len(nodes), len(d.nodes))
	}
	for i := range nodes {
		if masters[i] != d.masters[i] {
			return fmt.Errorf("node %d: master %v, Redis %v", i, masters[i], d.masters[i])
		}
		if !bytes.Equal(nodes[i], d.nodes[i]) {
			return fmt.Errorf("node %d bytes:\n ours  %x\n redis %x", i, nodes[i], d.nodes[i])
		}
	}
	if s.Len() != d.length || s.LastID() != d.lastID || s.FirstID() != d.firstID ||
		s.MaxDeletedID() != d.maxDeletedID || s.EntriesAdded() != d.entriesAdded {
		return fmt.Errorf("metadata: len %d last %v first %v maxdel %v added %d; Redis %d %v %v %v %d",
			s.Len(), s.LastID(), s.FirstID(), s.MaxDeletedID(), s.EntriesAdded(),
			d.length, d.lastID, d.firstID, d.maxDeletedID, d.entriesAdded)
	}
	if s.GroupCount() != len(d.groups) {
		return fmt.Errorf("%d groups, Redis %d", s.GroupCount(), len(d.groups))
	}
	i := 0
	var err error
	s.Groups(func(g *StreamGroup) bool {
		dg := d.groups[i]
		i++
		if g.Name() != dg.name || g.LastID() != dg.lastID || g.EntriesRead() != dg.entriesRead {
			err = fmt.Errorf("group %q last %v read %d; Redis %q %v %d", g.Name(), g.LastID(), g.EntriesRead(), dg.name, dg.lastID, dg.entriesRead)
			return false
		}
		var pel []dumpedNACK
		g.PendingRange(StreamID{}, MaxStreamID, math.MaxInt, nil, 0, 0, func(p StreamPending) {
			pel = append(pel, dumpedNACK{p.ID, p.DeliveryCount})
		})
		if !slices.Equal(pel, dg.pel) && !(len(pel) == 0 && len(dg.pel) == 0) {
			err = fmt.Errorf("group %q PEL %v; Redis %v", g.Name(), pel, dg.pel)
			return false
		}
		cons := map[string][]StreamID{}
		g.Consumers(func(c *StreamConsumer) bool {
			ids := []StreamID{}
			g.ConsumerPending(c, func(p StreamPending) bool { ids = append(ids, p.ID); return true })
			cons[c.Name()] = ids
			return true
		})
		if !reflect.DeepEqual(cons, dg.consumers) {
			err = fmt.Errorf("group %q consumers %v; Redis %v", g.Name(), cons, dg.consumers)
			return false
		}
		return true
	})
	return err
}

// streamScenarios are command sequences whose DUMP from redis-server
// 7.0.15 (run with --rdbcompression no) is in redisStreamDumps.
var streamScenarios = map[string][][]string{
	"encodings": {
		{"XADD", "s", "1-1", "f", "v"},
		{"XADD", "s", "1-2", "f", "123"},
		{"XADD", "s", "2-0", "a", "1", "b", "-2"},
		{"XADD", "s", "3-5", "f", "-5000"},
		{"XADD", "s", "3-6", "f", "9223372036854775807", "g", "-9223372036854775808"},
		{"XADD", "s", "3-7", "f", "9223372036854775808"},
		{"XADD", "s", "3-8", "f", "", "01", "-0"},
		{"XADD", "s", "4-0", "f", strings.Repeat("v", 64)},
		{"XADD", "s", "5-*", "12", strings.Repeat("w", 4096)},
		{"XADD", "s", "5-*", "f", "+1"},
		{"XADD", "s", "18446744073709551615-3", "f", "far"},
	},
	"splits": {
		{"CONFIG", "SET", "stream-node-max-entries", "3"},
		{"XADD", "s", "1-0", "f", "1"}, {"XADD", "s", "2-0", "f", "2"}, {"XADD", "s", "3-0", "g", "3"},
		{"XADD", "s", "4-0", "f", "4"}, {"XADD", "s", "5-0", "f", "5"}, {"XADD", "s", "6-0", "f", "6"},
		{"XADD", "s", "7-0", "f", "7"}, {"XADD", "s", "8-0", "f", "8"}, {"XADD", "s", "9-0", "f", "9"},
		{"XADD", "s", "10-0", "f", "10"}, {"XADD", "s", "11-0", "f", "11"},
		{"XDEL", "s", "5-0"},
		{"XDEL", "s", "7-0", "8-0", "9-0"},
		{"XTRIM", "s", "MAXLEN", "6"},
		{"XADD", "s", "12-0", "f", "12"},
		{"XDEL", "s", "1-0", "99-0"},
		{"CONFIG", "SET", "stream-node-max-entries", "100"},
	},
	"tombstone-tail": {
		{"CONFIG", "SET", "stream-node-max-entries", "4"},
		{"XADD", "s", "1-0", "f", "a"}, {"XADD", "s", "2-0", "f", "b"}, {"XADD", "s", "3-0", "f", "c"},
		{"XADD", "s", "4-0", "f", "d"}, {"XADD", "s", "5-0", "f", "e"}, {"XADD", "s", "6-0", "f", "f"},
		{"XDEL", "s", "4-0"},
		// The first node's last entry is a tombstone at MINID: exact
		// trimming flags all of its live entries and leaves it empty.
		{"XTRIM", "s", "MINID", "4-0"},
		{"XADD", "s", "7-0", "f", "g"},
		{"CONFIG", "SET", "stream-node-max-entries", "100"},
	},
	"bytes-limit": {
		{"CONFIG", "SET", "stream-node-max-bytes", "60"},
		{"XADD", "s", "1-0", "field", "value-1"}, {"XADD", "s", "1-1", "field", "value-2"},
		{"XADD", "s", "1-2", "field", "value-3"}, {"XADD", "s", "1-3", "other", "x"},
		{"XADD", "s", "1-4", "field", "value-5"},
		{"XTRIM", "s", "MAXLEN", "~", "2"},
		{"CONFIG", "SET", "stream-node-max-bytes", "4096"},
	},
	"count-past-127": append(func() [][]string {
		var c [][]string
		c = append(c, []string{"CONFIG", "SET", "stream-node-max-entries", "200"})
		for i := 1; i <= 150; i++ {
			c = append(c, []string{"XADD", "s", fmt.Sprintf("%d-%d", 1+i/40, i), "k", strconv.Itoa(i * 1000)})
		}
		return c
	}(), []string{"XDEL", "s", "1-1", "1-2", "2-40"}, []string{"XTRIM", "s", "MAXLEN", "120"},
		[]string{"XSETID", "s", "50-0", "ENTRIESADDED", "500", "MAXDELETEDID", "40-0"},
		[]string{"CONFIG", "SET", "stream-node-max-entries", "100"}),
	"groups": {
		{"XADD", "s", "1-0", "f", "1"}, {"XADD", "s", "2-0", "f", "2"}, {"XADD", "s", "3-0", "f", "3"},
		{"XADD", "s", "4-0", "f", "4"}, {"XADD", "s", "5-0", "f", "5"},
		{"XGROUP", "CREATE", "s", "g1", "0"},
		{"XGROUP", "CREATE", "s", "g0", "$", "ENTRIESREAD", "5"},
		{"XREADGROUP", "GROUP", "g1", "alice", "COUNT", "2", "STREAMS", "s", ">"},
		{"XREADGROUP", "GROUP", "g1", "bob", "STREAMS", "s", ">"},
		{"XDEL", "s", "4-0"},
		{"XREADGROUP", "GROUP", "g1", "bob", "STREAMS", "s", "0"},
		{"XACK", "s", "g1", "1-0", "9-9"},
		{"XCLAIM", "s", "g1", "carol", "0", "2-0", "4-0", "RETRYCOUNT", "7"},
		{"XGROUP", "SETID", "s", "g1", "0"},
		{"XREADGROUP", "GROUP", "g1", "dave", "COUNT", "1", "STREAMS", "s", ">"},
		{"XGROUP", "CREATECONSUMER", "s", "g1", "erin"},
		{"XADD", "s", "6-0", "f", "6"},
		{"XREADGROUP", "GROUP", "g0", "zed", "NOACK", "STREAMS", "s", ">"},
	},
}

// redisStreamDumps are hex DUMP payloads from redis-server 7.0.15 after
// each scenario. Regenerate with
//
//	redis-server --port 16399 --save '' --appendonly no --rdbcompression no &
//	LIMITKV_STREAM_REDIS=127.0.0.1:16399 go test ./engine -run TestStreamDumpsMatchRedis -v
var redisStreamDumps = map[string]string{
	"bytes-limit":    "130210000000000000000100000000000000023b3b0000001100020100010101856669656c640600010201000100018776616c75652d330804010001000101010101856f74686572068178020601ff100000000000000001000000000000000427270000000a00010100010101856669656c640600010201000100018776616c75652d35080401ff0301040102000005000a00fcca5a7624cf25b6",
	"count-past-127": "1301100000000000000001000000000000000147a2a2070000f30278011e010101816b020001030100010001c3e8020401030100010101c7d0020401030100010201cbb8020401030100010301cfa0020401030100010401f18813030401030100010501f17017030401030100010601f1581b030401030100010701f1401f030401030100010801f12823030401030100010901f11027030401030100010a01f1f82a030401030100010b01f1e02e030401030100010c01f1c832030401030100010d01f1b036030401030100010e01f1983a030401030100010f01f1803e030401030100011001f16842030401030100011101f15046030401030100011201f1384a030401030100011301f1204e030401030100011401f10852030401030100011501f1f055030401030100011601f1d859030401030100011701f1c05d030401030100011801f1a861030401030100011901f19065030401030100011a01f17869030401030100011b01f1606d030401030100011c01f14871030401020100011d01f13075030401020100011e01f11879030401020100011f01f1007d030401020100012001f2e88000040401020100012101f2d08400040401020100012201f2b88800040401020100012301f2a08c00040401020100012401f2889000040401020100012501f2709400040401020100012601f2589800040401030101012701f2409c00040401020101012801f228a000040401020101012901f210a400040401020101012a01f2f8a700040401020101012b01f2e0ab00040401020101012c01f2c8af00040401020101012d01f2b0b300040401020101012e01f298b700040401020101012f01f280bb00040401020101013001f268bf00040401020101013101f250c300040401020101013201f238c700040401020101013301f220cb00040401020101013401f208cf00040401020101013501f2f0d200040401020101013601f2d8d600040401020101013701f2c0da00040401020101013801f2a8de00040401020101013901f290e200040401020101013a01f278e600040401020101013b01f260ea00040401020101013c01f248ee00040401020101013d01f230f200040401020101013e01f218f600040401020101013f01f200fa00040401020101014001f2e8fd00040401020101014101f2d00101040401020101014201f2b80501040401020101014301f2a00901040401020101014401f2880d01040401020101014501f2701101040401020101014601f2581501040401020101014701f2401901040401020101014801f2281d01040401020101014901f2102101040401020101014a01f2f82401040401020101014b01f2e02801040401020101014c01f2c82c01040401020101014d01f2b03001040401020101014e01f2983401040401020102014f01f2803801040401020102015001f2683c01040401020102015101f2504001040401020102015201f2384401040401020102015301f2204801040401020102015401f2084c01040401020102015501f2f04f01040401020102015601f2d85301040401020102015701f2c05701040401020102015801f2a85b01040401020102015901f2905f01040401020102015a01f2786301040401020102015b01f2606701040401020102015c01f2486b01040401020102015d01f2306f01040401020102015e01f2187301040401020102015f01f2007701040401020102016001f2e87a01040401020102016101f2d07e01040401020102016201f2b88201040401020102016301f2a08601040401020102016401f2888a01040401020102016501f2708e01040401020102016601f2589201040401020102016701f2409601040401020102016801f2289a01040401020102016901f2109e01040401020102016a01f2f8a101040401020102016b01f2e0a501040401020102016c01f2c8a901040401020102016d01f2b0ad01040401020102016e01f298b101040401020102016f01f280b501040401020102017001f268b901040401020102017101f250bd01040401020102017201f238c101040401020102017301f220c501040401020102017401f208c901040401020102017501f2f0cc01040401020102017601f2d8d001040401020103017701f2c0d401040401020103017801f2a8d801040401020103017901f290dc01040401020103017a01f278e001040401020103017b01f260e401040401020103017c01f248e801040401020103017d01f230ec01040401020103017e01f218f001040401020103017f01f200f40104040102010301c08002f2e8f70104040102010301c08102f2d0fb0104040102010301c08202f2b8ff0104040102010301c08302f2a0030204040102010301c08402f288070204040102010301c08502f2700b0204040102010301c08602f2580f0204040102010301c08702f240130204040102010301c08802f228170204040102010301c08902f2101b0204040102010301c08a02f2f81e0204040102010301c08b02f2e0220204040102010301c08c02f2c8260204040102010301c08d02f2b02a0204040102010301c08e02f2982e0204040102010301c08f02f280320204040102010301c09002f268360204040102010301c09102f2503a0204040102010301c09202f2383e0204040102010301c09302f220420204040102010301c09402f208460204040102010301c09502f2f04902040401ff40783200011e280041f4000a00f6a21935779a8c97",
	"encodings":      "1303100000000000000001000000000000000140eded0000003900080100010101816602000102010001000181760204010201000101017b01040100010101dfff0202018161020101816202dffe020801020102010401f178ec0304010001020105010201816602f4ffffffffffffff7f09816702f4000000000000008009080102010201060193393232333337323033363835343737353830381404010001020107010201816602800182303103822d3003080102010301dfff02e04076767676767676767676767676767676767676767676767676767676767676767676767676767676767676767676767676767676767676767676767676767676420401ff10000000000000000500000000000000005020201000000a000101000101010c010001020100010001f0001000007777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777720850401ff10000000000000000500000000000000012c2c0000000f000201000101018166020001020100010001822b310304010201dffa02020183666172040401ff0b81ffffffffffffffff03010100000b000a007f5d49764a29948e",
	"groups":         "13011000000000000000010000000000000000404e4e00000023000501010101018166020001020100010001010104010201010100010201040102010201000103010401030103010001040104010201040100010501040102010501000106010401ff0506000100040006020267300600060001037a65647759f025a201000000026731010081ffffffffffffffff04000000000000000100000000000000007759f025a201000001000000000000000200000000000000007759f025a201000007000000000000000300000000000000007659f025a201000002000000000000000500000000000000007659f025a2010000020505616c6963657659f025a20100000003626f627659f025a2010000020000000000000003000000000000000000000000000000050000000000000000056361726f6c7759f025a2010000010000000000000002000000000000000004646176657759f025a20100000100000000000000010000000000000000046572696e7759f025a2010000000a00c00b4d28755e2de5",
	"splits":         "130310000000000000000100000000000000003535000000160002010101010181660200010301000100010101040102010101000102010401000102010001010181670203010601ff1000000000000000040000000000000000303000000014000201010101018166020001020100010001040104010301010100010501040102010201000106010401ff10000000000000000a00000000000000003030000000140003010001010181660200010201000100010a0104010201010100010b0104010201020100010c010401ff070c00020009000c000a00f43fb75ebcfb9d39",
	"tombstone-tail": "130210000000000000000100000000000000003e3e000000190000010401010181660200010301000100018161020401030101010001816202040103010201000181630204010301030100018164020401ff1000000000000000050000000000000000333300000014000301000101018166020001020100010001816502040102010101000181660204010201020100018167020401ff0307000500040007000a001ae635069c1e1e85",
}

// TestStreamDumpsMatchRedis replays each scenario and compares the nodes
// (master IDs and listpack bytes), the metadata and the groups with the
// DUMP redis-server gave for it. With LIMITKV_STREAM_REDIS set it takes
// the DUMPs from that server and prints them for redisStreamDumps.
func TestStreamDumpsMatchRedis(t *testing.T) {
	addr := os.Getenv("LIMITKV_STREAM_REDIS")
	var rc *respClient
	if addr != "" {
		var err error
		if rc, err = dialRedis(addr); err != nil {
			t.Fatal(err)
		}
	}
	names := make([]string, 0, len(streamScenarios))
	for name := range streamScenarios {
		names = append(names, name)
	}
	slices.Sort(names)
	for _, name := range names {
		t.Run(name, func(t *testing.T) {
			sh := newStreamShim()
			if rc != nil {
				rc.do("DEL", "s")
			}
			for _, cmd := range streamScenarios[name] {
				ours := sh.do(cmd...)
				if rc != nil {
					theirs := reshapeRedisReply(cmd, rc.do(cmd...))
					if !reflect.DeepEqual(ours, theirs) {
						t.Errorf("%v:\n ours  %#v\n redis %#v", cmd, ours, theirs)
					}
				}
			}
			var payload []byte
			if rc != nil {
				payload = []byte(rc.do("DUMP", "s").(string))
				fmt.Printf("\t%q: %q,\n", name, hex.EncodeToString(payload))
			} else {
				h, ok := redisStreamDumps[name]
				if !ok {
					t.Skip("no DUMP recorded")
				}
				payload, _ = hex.DecodeString(h)
			}
			if err := compareWithDump(sh.keys["s"], parseStreamDump(t, payload)); err != nil {
				t.Error(err)
			}
			checkStreamNodes(t, sh.keys["s"])
		})
	}
}

// ---------------------------------------------------------------------------
// Structure checks.

// decodedEntry is an entry read back from the nodes.
type decodedEntry struct {
	id      StreamID
	fv      []string
	deleted bool
}

// checkStreamNodes validates every node as streamValidateListpackIntegrity
// does, plus what Redis assumes without checking (IDs ascending within and
// across nodes, the master ID being the first entry's, counters adding up)
// and returns the entries, deleted ones included.
func checkStreamNodes(t *testing.T, s *Stream) []decodedEntry {
	t.Helper()
	var all []decodedEntry
	var live uint64
	var lpHeld int64
	prev := StreamID{}
	for ni, n := range s.nodes {
		lp := n.lp
		lpHeld += allocSize(cap(lp))
		if !lp.validate() {
			t.Fatalf("node %d: bad listpack framing", ni)
		}
		for p := lp.first(); p < lp.end(); p = lp.next(p) {
			if _, _, isInt := lp.get(p); !isInt && p < lp.first()+3 {
				t.Fatalf("node %d: master counter not an integer", ni)
			}
		}
		cnt, del, mf, fieldsAt, p := lp.masterLayout()
		if lp.getInt(lp.prev(p)) != 0 {
			t.Fatalf("node %d: master entry not terminated by 0", ni)
		}
		var master []string
		for q, k := fieldsAt, int64(0); k < mf; k, q = k+1, lp.next(q) {
			master = append(master, string(lp.appendTo(nil, q)))
		}
		var nLive, nDel int64
		for k := 0; p < lp.end(); k++ {
			h := lp.entryAt(p, n.master, mf)
			if k == 0 && h.id != n.master {
				t.Fatalf("node %d: first entry %v, master %v", ni, h.id, n.master)
			}
			if (ni > 0 || k > 0) && !prev.Less(h.id) {
				t.Fatalf("node %d: entry %v not after %v", ni, h.id, prev)
			}
			prev = h.id
			e := decodedEntry{id: h.id, deleted: h.flags&streamFlagDeleted != 0}
			q := h.body
			extra := int64(3)
			for f := int64(0); f < h.nfields; f++ {
				if h.flags&streamFlagSameFields != 0 {
					e.fv = append(e.fv, master[f])
				} else {
					e.fv = append(e.fv, string(lp.appendTo(nil, q)))
					q = lp.next(q)
				}
				e.fv = append(e.fv, string(lp.appendTo(nil, q)))
				q = lp.next(q)
			}
			if h.flags&streamFlagSameFields == 0 {
				extra += h.nfields + 1
				if h.nfields == mf && slices.Equal(e.fv[0:len(e.fv):len(e.fv)], interleave(master, e.fv)) {
					t.Fatalf("node %d entry %v: master's fields without SAMEFIELDS", ni, h.id)
				}
			}
			if got := lp.getInt(q); got != h.nfields+extra {
				t.Fatalf("node %d entry %v: lp-count %d, want %d", ni, h.id, got, h.nfields+extra)
			}
			if lp.next(q) != h.end {
				t.Fatalf("node %d entry %v: end", ni, h.id)
			}
			if e.deleted {
				nDel++
			} else {
				nLive++
			}
			all = append(all, e)
			p = h.end
		}
		if nLive != cnt || nDel != del {
			t.Fatalf("node %d: master says %d live %d deleted, entries say %d %d", ni, cnt, del, nLive, nDel)
		}
		if cnt+del == 0 {
			t.Fatalf("node %d has no entries", ni)
		}
		live += uint64(cnt)
	}
	if live != s.length {
		t.Fatalf("nodes hold %d live entries, length %d", live, s.length)
	}
	if lpHeld != s.lpHeld {
		t.Fatalf("lpHeld %d, nodes hold %d", s.lpHeld, lpHeld)
	}
	if s.nodeSlots < len(s.nodes) {
		t.Fatalf("nodeSlots %d < %d nodes", s.nodeSlots, len(s.nodes))
	}
	return all
}

// interleave pairs master fields with fv's values, to tell whether an
// entry had the master's fields.
func interleave(master []string, fv []string) []string {
	out := make([]string, 0, len(fv))
	for i, f := range master {
		if 2*i+1 >= len(fv) {
			return nil
		}
		out = append(out, f, fv[2*i+1])
	}
	return out
}

// ---------------------------------------------------------------------------
// Property test against a model: a sorted slice of the live entries.

type streamModelEntry struct {
	id StreamID
	fv []string
}

type streamModel struct {
	entries      []streamModelEntry
	lastID       StreamID
	maxDeletedID StreamID
	added        uint64
}

func (m *streamModel) firstID() StreamID {
	if len(m.entries) == 0 {
		return StreamID{}
	}
	return m.entries[0].id
}

func (m *streamModel) find(id StreamID) (int, bool) {
	return slices.BinarySearchFunc(m.entries, id, func(e streamModelEntry, id StreamID) int { return e.id.Compare(id) })
}

// add applies XADD's ID rules.
func (m *streamModel) add(id StreamID, form XAddIDForm, fv []string, now int64) (StreamID, error) {
	if form == XAddExplicit && id.IsZero() {
		return StreamID{}, ErrXAddIDZero
	}
	if m.lastID == MaxStreamID {
		return StreamID{}, ErrStreamExhausted
	}
	switch form {
	case XAddAuto:
		if now > 0 && uint64(now) > m.lastID.Ms {
			id = StreamID{uint64(now), 0}
		} else {
			id, _ = m.lastID.Incr()
		}
	case XAddAutoSeq:
		if id.Ms == m.lastID.Ms {
			if m.lastID.Seq == math.MaxUint64 {
				return StreamID{}, ErrXAddSeqExhausted
			}
			id.Seq = m.lastID.Seq + 1
		}
	}
	if id.Compare(m.lastID) <= 0 {
		return StreamID{}, ErrXAddIDTooSmall
	}
	m.entries = append(m.entries, streamModelEntry{id, fv})
	m.lastID = id
	m.added++
	return id, nil
}

// streamNodeSummary is what approximate trimming looks at in a node.
type streamNodeSummary struct {
	live   []StreamID
	lastID StreamID // deleted or not
}

func summarizeNodes(s *Stream) []streamNodeSummary {
	var out []streamNodeSummary
	for _, n := range s.nodes {
		lp := n.lp
		_, _, mf, _, p := lp.masterLayout()
		var sum streamNodeSummary
		for p < lp.end() {
			h := lp.entryAt(p, n.master, mf)
			if h.flags&streamFlagDeleted == 0 {
				sum.live = append(sum.live, h.id)
			}
			sum.lastID = h.id
			p = h.end
		}
		out = append(out, sum)
	}
	return out
}

var streamFieldSets = [][]string{{"f"}, {"f"}, {"a", "b"}, {"name", "age", "city"}, {"1", "-2"}, {""}}

func randomStreamValue(r *rand.Rand) string {
	switch r.Intn(6) {
	case 0:
		return strconv.FormatInt(r.Int63n(200)-100, 10)
	case 1:
		return strconv.FormatInt(r.Int63()-r.Int63(), 10)
	case 2:
		return ""
	case 3:
		return strings.Repeat("x", r.Intn(100))
	case 4:
		return "0" + strconv.Itoa(r.Intn(10))
	}
	return strconv.FormatUint(r.Uint64(), 10)
}

func nearID(r *rand.Rand, base StreamID) StreamID {
	switch r.Intn(8) {
	case 0:
		return StreamID{r.Uint64() >> uint(r.Intn(64)), r.Uint64() >> uint(r.Intn(64))}
	case 1:
		return StreamID{math.MaxUint64 - uint64(r.Intn(2)), math.MaxUint64 - uint64(r.Intn(3))}
	case 2:
		return StreamID{base.Ms, math.MaxUint64 - uint64(r.Intn(2))}
	}
	id := base
	for k := r.Intn(4); k > 0; k-- {
		if r.Intn(3) == 0 {
			id, _ = id.Decr()
		} else {
			id.Ms += uint64(r.Intn(3))
			id.Seq += uint64(r.Intn(3))
		}
	}
	return id
}

func TestStreamModel(t *testing.T) {
	runs, steps := 300, 400
	if testing.Short() {
		runs = 40
	}
	for run := 0; run < runs; run++ {
		seed := int64(run)*7919 + 1
		r := rand.New(rand.NewSource(seed))
		s := NewStream()
		m := &streamModel{}
		limits := DefaultStreamNodeLimits
		now := int64(1000)
		for step := 0; step < steps; step++ {
			desc := streamModelStep(t, r, s, m, &limits, &now)
			if t.Failed() {
				t.Fatalf("seed %d step %d (%s)", seed, step, desc)
			}
			checkStreamAgainstModel(t, r, s, m)
			if t.Failed() {
				t.Fatalf("seed %d step %d (%s)", seed, step, desc)
			}
		}
	}
}

func streamModelStep(t *testing.T, r *rand.Rand, s *Stream, m *streamModel, limits *StreamNodeLimits, now *int64) string {
	t.Helper()
	switch op := r.Intn(20); {
	case op == 0:
		limits.MaxBytes = []int64{0, 60, 150, 4096}[r.Intn(4)]
		limits.MaxEntries = []int64{0, 1, 3, 5, 100}[r.Intn(5)]
		return fmt.Sprintf("limits %+v", *limits)
	case op < 11:
		fields := streamFieldSets[r.Intn(len(streamFieldSets))]
		var fv []string
		for _, f := range fields {
			fv = append(fv, f, randomStreamValue(r))
		}
		*now += int64(r.Intn(5)) - 1 // the clock may go back
		if r.Intn(50) == 0 {
			*now = math.MaxInt64 - int64(r.Intn(2))
		}
		var id StreamID
		form := XAddIDForm(r.Intn(3))
		switch form {
		case XAddAutoSeq:
			id = StreamID{m.lastID.Ms + uint64(r.Intn(3)) - 1, 0}
		case XAddExplicit:
			id = nearID(r, m.lastID)
			if r.Intn(40) == 0 {
				id = StreamID{}
			}
		}
		want, wantErr := m.add(id, form, fv, *now)
		got, err := s.Add(id, form, bs(fv), *limits, *now)
		if err != wantErr || got != want {
			t.Errorf("Add(%v, %d) = %v, %v; model %v, %v", id, form, got, err, want, wantErr)
		}
		return fmt.Sprintf("add %v form %d -> %v %v", id, form, got, err)
	case op < 14:
		var ids []StreamID
		for k := r.Intn(4); k >= 0; k-- {
			if len(m.entries) > 0 && r.Intn(4) != 0 {
				ids = append(ids, m.entries[r.Intn(len(m.entries))].id)
			} else {
				ids = append(ids, nearID(r, m.firstID()))
			}
		}
		want := 0
		for _, id := range ids {
			if i, ok := m.find(id); ok {
				m.entries = slices.Delete(m.entries, i, i+1)
				want++
				if m.maxDeletedID.Less(id) {
					m.maxDeletedID = id
				}
			}
		}
		if got := s.Delete(ids); got != want {
			t.Errorf("Delete(%v) = %d, want %d", ids, got, want)
		}
		return fmt.Sprintf("delete %v", ids)
	case op < 18:
		a := StreamTrimArgs{Strategy: StreamTrimMaxLen, Approx: r.Intn(2) == 0}
		if r.Intn(2) == 0 {
			a.Strategy = StreamTrimMinID
			if len(m.entries) > 0 && r.Intn(3) != 0 {
				a.MinID = m.entries[r.Intn(len(m.entries))].id
				if r.Intn(2) == 0 {
					a.MinID, _ = a.MinID.Incr()
				}
			} else {
				a.MinID = nearID(r, m.firstID())
			}
		} else {
			a.MaxLen = int64(r.Intn(len(m.entries) + 2))
		}
		if a.Approx {
			a.Limit = []int64{0, int64(r.Intn(12)), limits.ApproxTrimLimit()}[r.Intn(3)]
		}
		nodes := summarizeNodes(s)
		before := slices.Clone(m.entries)
		got := s.Trim(a)
		if a.Approx {
			checkApproxTrim(t, a, nodes, before, s, m, got)
		} else {
			n := 0
			if a.Strategy == StreamTrimMaxLen {
				n = max(len(m.entries)-int(a.MaxLen), 0)
			} else {
				for n < len(m.entries) && m.entries[n].id.Less(a.MinID) {
					n++
				}
			}
			m.entries = m.entries[n:]
			if got != int64(n) {
				t.Errorf("Trim(%+v) = %d, want %d", a, got, n)
			}
		}
		return fmt.Sprintf("trim %+v -> %d", a, got)
	default:
		id := nearID(r, m.lastID)
		if len(m.entries) > 0 && r.Intn(2) == 0 {
			id = nearID(r, m.entries[len(m.entries)-1].id)
		}
		added := int64(-1)
		if r.Intn(2) == 0 {
			added = int64(len(m.entries)) + int64(r.Intn(5)) - 2
			if added < 0 {
				added = 0
			}
		}
		maxDel := StreamID{}
		if r.Intn(2) == 0 {
			maxDel = nearID(r, id)
		}
		var wantErr error
		switch {
		case id.Less(maxDel):
			wantErr = ErrXSetIDBelowMaxDeleted
		case len(m.entries) > 0 && id.Less(m.entries[len(m.entries)-1].id):
			wantErr = ErrXSetIDTooSmall
		case len(m.entries) > 0 && added != -1 && int64(len(m.entries)) > added:
			wantErr = ErrXSetIDEntriesAdded
		case id.Less(s.EdgeID(false, false)):
			// Redis lets XSETID go below deleted entries at the end (only
			// live ones count), after which new entries follow them out
			// of order in the node; the plain sorted model cannot follow,
			// and TestStreamMatchesRedisLive covers it.
			return "setid skipped"
		default:
			m.lastID = id
			if added != -1 {
				m.added = uint64(added)
			}
			if !maxDel.IsZero() {
				m.maxDeletedID = maxDel
			}
		}
		if err := s.SetID(id, added, maxDel); err != wantErr {
			t.Errorf("SetID(%v, %d, %v) = %v, want %v", id, added, maxDel, err, wantErr)
		}
		return fmt.Sprintf("setid %v %d %v", id, added, maxDel)
	}
}

// checkApproxTrim checks "~" trimming by Redis's rules: only whole nodes
// from the front, never below the target, within the limit, and stopping
// only at a node it was not allowed to remove.
func checkApproxTrim(t *testing.T, a StreamTrimArgs, nodes []streamNodeSummary, before []streamModelEntry, s *Stream, m *streamModel, got int64) {
	t.Helper()
	length := int64(len(before))
	after := summarizeNodes(s)
	k := len(nodes) - len(after)
	if k < 0 || !slices.EqualFunc(after, nodes[k:], func(x, y streamNodeSummary) bool {
		return x.lastID == y.lastID && slices.Equal(x.live, y.live)
	}) {
		t.Errorf("~ trim changed the nodes it kept")
		return
	}
	removed := int64(0)
	for _, n := range nodes[:k] {
		removed += int64(len(n.live))
	}
	if removed != got {
		t.Errorf("~ trim removed %d nodes holding %d entries, but says %d", k, removed, got)
		return
	}
	m.entries = before[got:]
	left := length - got
	if a.Limit > 0 && got > a.Limit {
		t.Errorf("~ trim removed %d, over LIMIT %d", got, a.Limit)
	}
	if a.Strategy == StreamTrimMaxLen && left < a.MaxLen && got > 0 {
		t.Errorf("~ trim left %d entries, below MAXLEN %d", left, a.MaxLen)
	}
	for _, e := range before[:got] {
		if a.Strategy == StreamTrimMinID && !e.id.Less(a.MinID) {
			t.Errorf("~ trim removed %v, not below MINID %v", e.id, a.MinID)
		}
	}
	if k < len(nodes) {
		next := nodes[k]
		live := int64(len(next.live))
		switch {
		case a.Strategy == StreamTrimMaxLen && left <= a.MaxLen:
		case a.Limit > 0 && got+live > a.Limit:
		case a.Strategy == StreamTrimMaxLen && left-live < a.MaxLen:
		case a.Strategy == StreamTrimMinID && !next.lastID.Less(a.MinID):
		default:
			t.Errorf("~ trim stopped before node %d, which it could remove (%d live, last %v)", k, live, next.lastID)
		}
	}
}

func checkStreamAgainstModel(t *testing.T, r *rand.Rand, s *Stream, m *streamModel) {
	t.Helper()
	if s.Len() != uint64(len(m.entries)) || s.LastID() != m.lastID || s.FirstID() != m.firstID() ||
		s.MaxDeletedID() != m.maxDeletedID || s.EntriesAdded() != m.added {
		t.Errorf("metadata: len %d last %v first %v maxdel %v added %d; model %d %v %v %v %d",
			s.Len(), s.LastID(), s.FirstID(), s.MaxDeletedID(), s.EntriesAdded(),
			len(m.entries), m.lastID, m.firstID(), m.maxDeletedID, m.added)
		return
	}
	var live []streamModelEntry
	for _, e := range checkStreamNodes(t, s) {
		if !e.deleted {
			live = append(live, streamModelEntry{e.id, e.fv})
		}
	}
	if !modelEqual(live, m.entries) {
		t.Errorf("nodes decode to %v, model %v", live, m.entries)
		return
	}
	collect := func(start, end StreamID, count int, rev bool) []streamModelEntry {
		var out []streamModelEntry
		s.Range(start, end, count, rev, func(id StreamID, fv [][]byte) bool {
			e := streamModelEntry{id: id}
			for _, b := range fv {
				e.fv = append(e.fv, string(b))
			}
			out = append(out, e)
			return true
		})
		return out
	}
	if got := collect(StreamID{}, MaxStreamID, 0, false); !modelEqual(got, m.entries) {
		t.Errorf("Range all = %v", got)
	}
	rev := slices.Clone(m.entries)
	slices.Reverse(rev)
	if got := collect(StreamID{}, MaxStreamID, 0, true); !modelEqual(got, rev) {
		t.Errorf("Range all reversed = %v", got)
	}
	for k := 0; k < 3; k++ {
		start, end := nearID(r, m.firstID()), nearID(r, m.lastID)
		if len(m.entries) > 0 && r.Intn(2) == 0 {
			start = m.entries[r.Intn(len(m.entries))].id
			end = m.entries[r.Intn(len(m.entries))].id
		}
		count := r.Intn(5)
		var want []streamModelEntry
		for _, e := range m.entries {
			if !e.id.Less(start) && !end.Less(e.id) {
				want = append(want, e)
			}
		}
		fwd := want
		if count > 0 && len(fwd) > count {
			fwd = fwd[:count]
		}
		if got := collect(start, end, count, false); !modelEqual(got, fwd) {
			t.Errorf("Range(%v, %v, %d) = %v, want %v", start, end, count, got, fwd)
		}
		slices.Reverse(want)
		if count > 0 && len(want) > count {
			want = want[:count]
		}
		if got := collect(start, end, count, true); !modelEqual(got, want) {
			t.Errorf("Range(%v, %v, %d, rev) = %v, want %v", start, end, count, got, want)
		}
		_, in := m.find(start)
		if s.Exists(start) != in {
			t.Errorf("Exists(%v) = %v", start, !in)
		}
	}
	lastValid, ok := s.LastValidID()
	if ok != (len(m.entries) > 0) || ok && lastValid != m.entries[len(m.entries)-1].id {
		t.Errorf("LastValidID = %v %v", lastValid, ok)
	}
	if first := s.EdgeID(true, true); len(m.entries) > 0 && first != m.entries[0].id || len(m.entries) == 0 && first != MaxStreamID {
		t.Errorf("EdgeID(first) = %v", first)
	}
}

func modelEqual(a, b []streamModelEntry) bool {
	return slices.EqualFunc(a, b, func(x, y streamModelEntry) bool { return x.id == y.id && slices.Equal(x.fv, y.fv) })
}

// ---------------------------------------------------------------------------
// Differential test against a live redis-server.

// TestStreamMatchesRedisLive sends random stream commands (explicit IDs and
// "ms-*" only, and no idle times, so that the clock plays no part) to both
// the shim and the redis-server at LIMITKV_STREAM_REDIS, comparing every
// reply and, every few commands, the DUMP: node bytes, metadata, groups,
// PELs with delivery counts, consumers.
func TestStreamMatchesRedisLive(t *testing.T) {
	addr := os.Getenv("LIMITKV_STREAM_REDIS")
	if addr == "" {
		t.Skip("set LIMITKV_STREAM_REDIS to a redis-server 7.0.15 address (run with --rdbcompression no)")
	}
	rc, err := dialRedis(addr)
	if err != nil {
		t.Fatal(err)
	}
	runs, steps := 30, 600
	if n, err := strconv.Atoi(os.Getenv("LIMITKV_STREAM_REDIS_RUNS")); err == nil {
		runs = n
	}
	for run := 0; run < runs; run++ {
		r := rand.New(rand.NewSource(int64(run) + 42))
		sh := newStreamShim()
		rc.do("DEL", "s")
		for _, c := range [][]string{{"CONFIG", "SET", "stream-node-max-entries", "100"}, {"CONFIG", "SET", "stream-node-max-bytes", "4096"}} {
			rc.do(c...)
			sh.do(c...)
		}
		g := &liveGen{r: r, sh: sh}
		var history [][]string
		step := 0
		func() {
			defer func() {
				if e := recover(); e != nil {
					t.Fatalf("run %d step %d: %v (has redis-server crashed?)\nlast commands: %q", run, step, e, history[max(0, len(history)-30):])
				}
			}()
			for ; step < steps; step++ {
				cmd := g.next()
				history = append(history, cmd)
				ours := sh.do(cmd...)
				theirs := reshapeRedisReply(cmd, rc.do(cmd...))
				if ours == respErr(ErrXAddSeqExhausted.Error()) && theirs == respErr(ErrXAddIDTooSmall.Error()) {
					theirs = ours // Redis's text here is a stale errno's: either
				}
				if !reflect.DeepEqual(ours, theirs) {
					t.Fatalf("run %d step %d %q:\n ours  %#v\n redis %#v\nlast commands: %q", run, step, cmd, ours, theirs, history[max(0, len(history)-10):])
				}
				if step%7 == 0 || step == steps-1 {
					dump := rc.do("DUMP", "s")
					s := sh.keys["s"]
					if (dump == nil) != (s == nil) {
						t.Fatalf("run %d step %d: key exists in one only", run, step)
					}
					if s != nil {
						if err := compareWithDump(s, parseStreamDump(t, []byte(dump.(string)))); err != nil {
							t.Fatalf("run %d step %d after %q: %v\nlast commands: %q", run, step, cmd, err, history[max(0, len(history)-10):])
						}
					}
				}
			}
		}()
	}
	rc.do("CONFIG", "SET", "stream-node-max-entries", "100")
	rc.do("CONFIG", "SET", "stream-node-max-bytes", "4096")
}

type liveGen struct {
	r  *rand.Rand
	sh *streamShim
}

// id picks an ID near the stream's, in one of the forms a command takes.
func (g *liveGen) id() string {
	r := g.r
	s := g.sh.keys["s"]
	var base StreamID
	if s != nil {
		base = s.LastID()
		if r.Intn(2) == 0 {
			base = s.FirstID()
		}
		if r.Intn(3) == 0 {
			var ids []StreamID
			s.Range(StreamID{}, MaxStreamID, 0, false, func(id StreamID, _ [][]byte) bool { ids = append(ids, id); return true })
			if len(ids) > 0 {
				base = ids[r.Intn(len(ids))]
			}
		}
	}
	id := base
	switch r.Intn(10) {
	case 0:
		id.Ms = uint64(r.Intn(50))
	case 1:
		id, _ = id.Decr()
	case 2:
		id.Seq += uint64(r.Intn(3))
	case 3:
		return strconv.FormatUint(id.Ms+uint64(r.Intn(2)), 10)
	case 4:
		if r.Intn(10) == 0 {
			return "18446744073709551615-" + strconv.Itoa(r.Intn(2))
		}
	}
	return id.String()
}

func (g *liveGen) next() []string {
	r := g.r
	group := []string{"g1", "g2", "g3"}[r.Intn(3)]
	consumer := []string{"alice", "bob", "carol"}[r.Intn(3)]
	count := strconv.Itoa(r.Intn(6))
	ids := func() []string {
		var out []string
		for k := r.Intn(3); k >= 0; k-- {
			out = append(out, g.id())
		}
		return out
	}
	trim := func(xadd bool) []string {
		var a []string
		if xadd && r.Intn(3) != 0 {
			return nil
		}
		if r.Intn(2) == 0 {
			a = []string{"MAXLEN"}
		} else {
			a = []string{"MINID"}
		}
		approx := r.Intn(2) == 0
		if approx {
			a = append(a, "~")
		} else if r.Intn(2) == 0 {
			a = append(a, "=")
		}
		if a[0] == "MAXLEN" {
			a = append(a, strconv.Itoa(r.Intn(30)))
		} else {
			a = append(a, g.id())
		}
		if approx && r.Intn(2) == 0 {
			a = append(a, "LIMIT", strconv.Itoa(r.Intn(20)))
		}
		return a
	}
	switch op := r.Intn(30); {
	case op == 0:
		if r.Intn(2) == 0 {
			return []string{"CONFIG", "SET", "stream-node-max-entries", strconv.Itoa([]int{0, 1, 2, 5, 100}[r.Intn(5)])}
		}
		// Not below a few hundred bytes: Redis 7.0.15 corrupts nodes when
		// an entry outgrows a tiny stream-node-max-bytes (a DUMP crashed
		// with 40; see valkey-io/valkey#4705).
		return []string{"CONFIG", "SET", "stream-node-max-bytes", strconv.Itoa([]int{0, 300, 4096}[r.Intn(3)])}
	case op < 10:
		cmd := append([]string{"XADD", "s"}, trim(true)...)
		id := g.id()
		if r.Intn(3) == 0 {
			id, _, _ = strings.Cut(id, "-")
			id += "-*"
		}
		cmd = append(cmd, id)
		fields := streamFieldSets[r.Intn(len(streamFieldSets))]
		for _, f := range fields {
			cmd = append(cmd, f, randomStreamValue(r))
		}
		return cmd
	case op < 12:
		return append([]string{"XDEL", "s"}, ids()...)
	case op < 14:
		return append([]string{"XTRIM", "s"}, trim(false)...)
	case op == 14:
		// This may set the last ID between the last live entry and the
		// deleted ones after it, after which XADD puts entries out of
		// order; Redis and the shim must still agree byte for byte.
		id := g.id()
		cmd := []string{"XSETID", "s", id}
		if r.Intn(2) == 0 {
			cmd = append(cmd, "ENTRIESADDED", strconv.Itoa(r.Intn(40)))
		}
		if r.Intn(2) == 0 {
			cmd = append(cmd, "MAXDELETEDID", g.id())
		}
		return cmd
	case op == 15:
		cmd := []string{"XRANGE", "s", "-", "+"}
		if r.Intn(2) == 0 {
			cmd = []string{"XREVRANGE", "s", "+", "-"}
		}
		for i := 2; i < 4; i++ {
			if r.Intn(2) == 0 {
				cmd[i] = g.id()
				if r.Intn(3) == 0 {
					cmd[i] = "(" + cmd[i]
				}
			}
		}
		if r.Intn(2) == 0 {
			cmd = append(cmd, "COUNT", count)
		}
		return cmd
	case op == 16:
		switch r.Intn(5) {
		case 0, 1:
			cmd := []string{"XGROUP", "CREATE", "s", group, []string{"0", "$", g.id()}[r.Intn(3)]}
			if r.Intn(3) == 0 {
				cmd = append(cmd, "ENTRIESREAD", strconv.Itoa(r.Intn(20)))
			}
			return cmd
		case 2:
			cmd := []string{"XGROUP", "SETID", "s", group, []string{"0", "$", g.id(), "-"}[r.Intn(4)]}
			if r.Intn(2) == 0 {
				cmd = append(cmd, "ENTRIESREAD", strconv.Itoa(r.Intn(20)))
			}
			return cmd
		case 3:
			return []string{"XGROUP", []string{"CREATECONSUMER", "DELCONSUMER"}[r.Intn(2)], "s", group, consumer}
		}
		return []string{"XGROUP", "DESTROY", "s", group}
	case op < 21:
		cmd := []string{"XREADGROUP", "GROUP", group, consumer}
		if r.Intn(2) == 0 {
			cmd = append(cmd, "COUNT", count)
		}
		if r.Intn(4) == 0 {
			cmd = append(cmd, "NOACK")
		}
		id := ">"
		if r.Intn(4) == 0 {
			id = []string{"0", g.id()}[r.Intn(2)]
		}
		return append(cmd, "STREAMS", "s", id)
	case op < 23:
		return append([]string{"XACK", "s", group}, ids()...)
	case op < 25:
		cmd := append([]string{"XCLAIM", "s", group, consumer, "0"}, ids()...)
		for _, o := range []string{"JUSTID", "FORCE"} {
			if r.Intn(3) == 0 {
				cmd = append(cmd, o)
			}
		}
		if r.Intn(4) == 0 {
			cmd = append(cmd, "RETRYCOUNT", strconv.Itoa(r.Intn(5)))
		}
		if r.Intn(4) == 0 {
			cmd = append(cmd, "LASTID", g.id())
		}
		return cmd
	case op < 27:
		cmd := []string{"XAUTOCLAIM", "s", group, consumer, "0", []string{"0", "-", g.id()}[r.Intn(3)], "COUNT", strconv.Itoa(1 + r.Intn(4))}
		if r.Intn(3) == 0 {
			cmd = append(cmd, "JUSTID")
		}
		return cmd
	case op == 27:
		if r.Intn(2) == 0 {
			return []string{"XPENDING", "s", group}
		}
		cmd := []string{"XPENDING", "s", group, "-", "+", count}
		if r.Intn(2) == 0 {
			cmd = append(cmd, consumer)
		}
		return cmd
	case op == 28:
		return []string{"XINFO", "GROUPS", "s"}
	}
	return []string{"XINFO", "STREAM", "s"}
}

// restoreFromDump builds a Stream from a parsed DUMP, as the RDB loader
// will.
func restoreFromDump(t *testing.T, payload []byte) (*Stream, error) {
	t.Helper()
	d := parseStreamDump(t, payload)
	s := NewStream()
	for i := range d.nodes {
		if err := s.RestoreNode(d.masters[i], d.nodes[i]); err != nil {
			return nil, err
		}
	}
	if err := s.RestoreMeta(d.length, d.lastID, d.firstID, d.maxDeletedID, d.entriesAdded); err != nil {
		return nil, err
	}
	for _, dg := range d.groups {
		g, err := s.CreateGroup([]byte(dg.name), dg.lastID, dg.entriesRead)
		if err != nil {
			return nil, err
		}
		for _, n := range dg.pel {
			if err := g.RestorePending(n.id, 12345, n.count); err != nil {
				return nil, err
			}
		}
		for name, ids := range dg.consumers {
			c, err := g.RestoreConsumer([]byte(name), 1)
			if err != nil {
				return nil, err
			}
			for _, id := range ids {
				if err := g.RestoreConsumerPending(c, id); err != nil {
					return nil, err
				}
			}
		}
		if err := g.RestoreDone(); err != nil {
			return nil, err
		}
	}
	return s, nil
}

// TestStreamRestoreFromRedisDumps loads Redis's DUMPs through the restore
// API, checks the result, then keeps writing to it and to the stream the
// shim built, which must stay identical.
func TestStreamRestoreFromRedisDumps(t *testing.T) {
	for name, h := range redisStreamDumps {
		payload, _ := hex.DecodeString(h)
		s, err := restoreFromDump(t, payload)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if err := compareWithDump(s, parseStreamDump(t, payload)); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		sh := newStreamShim()
		for _, cmd := range streamScenarios[name] {
			sh.do(cmd...)
		}
		restored := newStreamShim()
		restored.keys["s"] = s
		for i := 0; i < 50; i++ {
			cmd := []string{"XADD", "s", "MAXLEN", "~", "20", "*", "f", strconv.Itoa(i)}
			if i%3 == 0 {
				cmd = []string{"XDEL", "s", sh.keys["s"].FirstID().String()}
			}
			sh.now, restored.now = int64(i), int64(i)
			if a, b := sh.do(cmd...), restored.do(cmd...); !reflect.DeepEqual(a, b) {
				t.Fatalf("%s: %q: %v vs %v", name, cmd, a, b)
			}
		}
		if !reflect.DeepEqual(checkStreamNodes(t, s), checkStreamNodes(t, sh.keys["s"])) || s.MemoryUsage() <= 0 {
			t.Errorf("%s: restored stream diverged", name)
		}
	}
	// Damaged nodes are refused.
	payload, _ := hex.DecodeString(redisStreamDumps["splits"])
	d := parseStreamDump(t, payload)
	for _, damage := range []func(lp []byte) []byte{
		func(lp []byte) []byte { lp[len(lp)-2]++; return lp },      // backlen or lp-count
		func(lp []byte) []byte { lp[6] = 0x7f; return lp },         // live count
		func(lp []byte) []byte { return lp[:len(lp)-1] },           // no terminator
		func(lp []byte) []byte { lp[5] = 0; lp[4] = 1; return lp }, // element count
		func(lp []byte) []byte { lp[15] = 5; return lp },           // master terminator
	} {
		lp := damage(slices.Clone(d.nodes[0]))
		if err := NewStream().RestoreNode(d.masters[0], lp); err == nil {
			t.Errorf("damaged node %x accepted", lp)
		}
	}
	s := NewStream()
	if s.RestoreNode(d.masters[1], d.nodes[1]) != nil || s.RestoreNode(d.masters[0], d.nodes[0]) == nil {
		t.Error("nodes out of order accepted")
	}
	if s.RestoreMeta(d.length, d.lastID, d.firstID, d.maxDeletedID, d.entriesAdded) == nil {
		t.Error("a length the nodes do not hold accepted")
	}
}

// TestStreamNodeLimitsBoundary checks where a node fills up: when its
// bytes plus the new entry's data reach max-bytes, or its entries (live
// and deleted) reach max-entries.
func TestStreamNodeLimitsBoundary(t *testing.T) {
	fv := [][]byte{[]byte("field"), []byte("value")}
	for _, extra := range []int64{0, 1} {
		s := NewStream()
		s.Add(StreamID{1, 0}, XAddExplicit, fv, DefaultStreamNodeLimits, 0)
		limit := StreamNodeLimits{MaxBytes: int64(len(s.nodes[0].lp)+10) + extra}
		s.Add(StreamID{2, 0}, XAddExplicit, fv, limit, 0)
		if want := map[int64]int{0: 2, 1: 1}[extra]; s.NodeCount() != want {
			t.Errorf("max-bytes at node+data%+d: %d nodes, want %d", extra, s.NodeCount(), want)
		}
	}
	s := NewStream()
	limit := StreamNodeLimits{MaxEntries: 3}
	for i := uint64(1); i <= 3; i++ {
		s.Add(StreamID{i, 0}, XAddExplicit, fv, limit, 0)
	}
	s.Delete([]StreamID{{2, 0}})
	s.Add(StreamID{4, 0}, XAddExplicit, fv, limit, 0)
	if s.NodeCount() != 2 {
		t.Errorf("max-entries counts deleted entries: %d nodes", s.NodeCount())
	}
}
