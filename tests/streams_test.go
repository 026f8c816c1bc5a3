package tests

import (
	"context"
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/limitkv/limitkv/resp"
)

// The stream log's commands on a replica and at a replica's end of the
// link, and the blocking stream reads seen from clients.

// xsDo runs a command on a raw connection, failing on an error reply.
func xsDo(t *testing.T, c *rawConn, args ...string) resp.Value {
	t.Helper()
	v := c.do(args...)
	if v.Type == '-' {
		t.Fatalf("%v: %s", args, v)
	}
	return v
}

// xsField is the value after name in a RESP2 map.
func xsField(v resp.Value, name string) resp.Value {
	for i := 0; i+1 < len(v.Elems); i += 2 {
		if string(v.Elems[i].Str) == name {
			return v.Elems[i+1]
		}
	}
	return resp.Value{}
}

// xsCmd is a command as the replication stream spells it.
func xsCmd(args ...string) string {
	var bs [][]byte
	for _, a := range args {
		bs = append(bs, []byte(a))
	}
	return string(resp.AppendCommand(nil, bs...))
}

// TestStreamsPropagation reads, at a replica's end of the link, what the
// stream commands send, as Redis 7.0 propagates them: XADD with the ID it
// generated ("*", "ms-*") and "~" trimming as "=" what it trimmed to, the
// same for XTRIM, nothing for what changed nothing; XREADGROUP as an
// XCLAIM ... FORCE JUSTID LASTID per entry delivered (the blocked ones
// too, after the XADD that served them), XGROUP CREATECONSUMER and SETID
// for NOACK, nothing for a read of history; never XREAD or XREADGROUP.
func TestStreamsPropagation(t *testing.T) {
	kv := startLimitkv(t, "--persistence", "no", "--stream-node-max-entries", "2")
	c := dialRaw(t, kv.Addr)
	link := openReplicaLink(t, kv.Addr)
	readUntil, stream := link.readUntil, &link.stream
	xsDo(t, c, "SET", "marker-1", "x")
	readUntil("marker-1")
	from := stream.Len()

	auto := string(xsDo(t, c, "XADD", "s", "*", "f", "v").Str)
	xsDo(t, c, "XADD", "s", "99999999999999-*", "f", "v")
	xsDo(t, c, "XADD", "s", "99999999999999-*", "f", "v")
	xsDo(t, c, "XADD", "s", "100000000000000-5", "f", "v")
	// Nodes of two entries: "~ 2" keeps the last two nodes' three entries.
	xsDo(t, c, "XADD", "s", "MAXLEN", "~", "2", "LIMIT", "100", "100000000000000-6", "f", "v")
	xsDo(t, c, "XADD", "s", "MINID", "~", "100000000000000-6", "100000000000000-7", "f", "v")
	xsDo(t, c, "XADD", "s", "MAXLEN", "=", "100", "100000000000000-8", "f", "v")
	if n := xsDo(t, c, "XTRIM", "s", "MAXLEN", "~", "100"); n.Int != 0 {
		t.Fatalf("XTRIM that trims nothing: %s", n)
	}
	if n := xsDo(t, c, "XDEL", "s", "1-1"); n.Int != 0 {
		t.Fatalf("XDEL of nothing: %s", n)
	}
	xsDo(t, c, "XTRIM", "s", "MAXLEN", "~", "1")
	xsDo(t, c, "XADD", "nokey", "NOMKSTREAM", "*", "f", "v")
	xsDo(t, c, "XREAD", "STREAMS", "s", "0")
	xsDo(t, c, "XSETID", "s", "200000000000000-0")
	if first := xsDo(t, c, "XRANGE", "s", "-", "+").String(); first != `[["100000000000000-8", ["f", "v"]]]` {
		t.Fatalf("the stream after the trims: %s", first)
	}
	xsDo(t, c, "XADD", "s", "200000000000000-1", "f", "v")
	xsDo(t, c, "XADD", "s", "200000000000000-2", "f", "v")

	xsDo(t, c, "XGROUP", "CREATE", "s", "g", "0")
	xsDo(t, c, "XREADGROUP", "GROUP", "g", "alice", "COUNT", "1", "STREAMS", "s", ">")
	xsDo(t, c, "XREADGROUP", "GROUP", "g", "bob", "NOACK", "STREAMS", "s", ">")
	xsDo(t, c, "XREADGROUP", "GROUP", "g", "carol", "STREAMS", "s", "0")
	xsDo(t, c, "XREADGROUP", "GROUP", "g", "carol", "STREAMS", "s", ">")
	// A pending entry read again: its count goes up here only.
	xsDo(t, c, "XREADGROUP", "GROUP", "g", "alice", "STREAMS", "s", "0")
	pending := xsDo(t, c, "XPENDING", "s", "g", "-", "+", "10")

	// A blocked reader is served by the XADD, and replicated after it.
	b := dialRaw(t, kv.Addr)
	b.send(resp.AppendCommand(nil, []byte("XREADGROUP"), []byte("GROUP"), []byte("g"), []byte("dave"),
		[]byte("BLOCK"), []byte("0"), []byte("STREAMS"), []byte("s"), []byte(">")))
	xsAwaitBlocked(t, c, 1)
	xsDo(t, c, "XADD", "s", "300000000000000-0", "f", "v")
	if v := b.read(); !strings.Contains(v.String(), "300000000000000-0") {
		t.Fatalf("the blocked XREADGROUP got %s", v)
	}
	xsDo(t, c, "SET", "marker-2", "x")
	readUntil("marker-2")
	got := stream.String()[from:]

	for _, bad := range []string{"$5\r\nXREAD\r\n", "$10\r\nXREADGROUP\r\n", "NOMKSTREAM", "\r\n~\r\n",
		"$1\r\n*\r\n", "LKV.SET\r\n$1\r\ns\r\n", "carol"} {
		if strings.Contains(strings.ToUpper(got), strings.ToUpper(bad)) {
			t.Fatalf("%q reached the replica: %q", bad, got)
		}
	}
	// The delivery times are the master's, which the XCLAIMs carry: that
	// of alice's entry is before her second read, dave's is now.
	if len(pending.Elems) != 1 {
		t.Fatalf("XPENDING: %s", pending)
	}
	deliveredAt := func(id string) string {
		v := xsDo(t, c, "XINFO", "STREAM", "s", "FULL")
		for _, p := range xsField(xsField(v, "groups").Elems[0], "pending").Elems {
			if string(p.Elems[0].Str) == id {
				return strconv.FormatInt(p.Elems[2].Int, 10)
			}
		}
		t.Fatalf("%s is not pending", id)
		return ""
	}
	claim := func(consumer, id, lastID, time string) string {
		return xsCmd("XCLAIM", "s", "g", consumer, "0", id, "TIME", time,
			"RETRYCOUNT", "1", "FORCE", "JUSTID", "LASTID", lastID)
	}
	want := []string{
		xsCmd("XADD", "s", auto, "f", "v"),
		xsCmd("XADD", "s", "99999999999999-0", "f", "v"),
		xsCmd("XADD", "s", "99999999999999-1", "f", "v"),
		xsCmd("XADD", "s", "100000000000000-5", "f", "v"),
		xsCmd("XADD", "s", "MAXLEN", "=", "3", "LIMIT", "100", "100000000000000-6", "f", "v"),
		xsCmd("XADD", "s", "MINID", "=", "100000000000000-6", "100000000000000-7", "f", "v"),
		xsCmd("XADD", "s", "MAXLEN", "=", "100", "100000000000000-8", "f", "v"),
		xsCmd("XTRIM", "s", "MAXLEN", "=", "1"),
		xsCmd("XSETID", "s", "200000000000000-0"),
		xsCmd("XGROUP", "CREATE", "s", "g", "0"),
		claim("alice", "100000000000000-8", "100000000000000-8", `\d+`),
		xsCmd("XGROUP", "CREATECONSUMER", "s", "g", "bob"),
		xsCmd("XGROUP", "SETID", "s", "g", "200000000000000-2", "ENTRIESREAD", "9"),
		xsCmd("XADD", "s", "300000000000000-0", "f", "v"),
		claim("dave", "300000000000000-0", "300000000000000-0", deliveredAt("300000000000000-0")),
	}
	at := 0
	for _, w := range want {
		// A delivery time given as \d+ is any number.
		re := regexp.MustCompile(strings.Replace(regexp.QuoteMeta(w), regexp.QuoteMeta("$3\r\n\\d+"), `\$\d+\r\n\d+`, 1))
		loc := re.FindStringIndex(got[at:])
		if loc == nil {
			t.Fatalf("%q not in the stream (in order) after the first %d bytes: %q", w, at, got)
		}
		at += loc[1]
	}
	if n := strings.Count(got, "alice"); n != 1 {
		t.Fatalf("alice's read of history reached the replica: %q", got)
	}
}

// xsAwaitBlocked waits until the server counts n blocked clients.
func xsAwaitBlocked(t *testing.T, c *rawConn, n int) {
	t.Helper()
	want := "blocked_clients:" + strconv.Itoa(n) + "\r\n"
	for i := 0; ; i++ {
		if strings.Contains(string(c.do("INFO", "clients").Str), want) {
			return
		}
		if i > 2000 {
			t.Fatalf("blocked_clients never reached %d", n)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// TestStreamsReplication: a replica applying the master's stream ends
// with the master's streams, entry for entry and node for node (DEBUG
// DIGEST-VALUE covers the nodes' bytes and the metadata), generated IDs
// and "~" trimming included, and with its consumer groups' pending
// entries; an XREAD blocked on the replica is served by the master's
// XADD as the replica applies it.
func TestStreamsReplication(t *testing.T) {
	ctx := context.Background()
	m := startMaster(t, "--persistence", "no", "--stream-node-max-entries", "5")
	mc := goRedis(t, m.Addr, 2)
	r := startReplicaOf(t, m, "", "--persistence", "no", "--stream-node-max-entries", "5")
	rc := goRedis(t, r.Addr, 2)
	waitInSync(t, mc, rc)

	// A reader blocked on the replica.
	read := make(chan string, 1)
	go func() {
		v, err := goRedis(t, r.Addr, 2).Do(ctx, "XREAD", "BLOCK", "0", "STREAMS", "plain", "$").Result()
		if err != nil {
			read <- err.Error()
			return
		}
		read <- toString(v)
	}()
	deadline := time.Now().Add(10 * time.Second)
	for replInfo(t, rc, "clients", "blocked_clients") != "1" {
		if time.Now().After(deadline) {
			t.Fatal("the XREAD on the replica did not block")
		}
		time.Sleep(5 * time.Millisecond)
	}

	do := func(args ...any) {
		t.Helper()
		if err := mc.Do(ctx, args...).Err(); err != nil && err != redis.Nil {
			t.Fatalf("%v: %v", args, err)
		}
	}
	for i := 0; i < 40; i++ {
		do("XADD", "plain", "*", "n", i, "payload", strings.Repeat("x", i))
		do("XADD", "seq", "5-*", "n", i)
		if i%7 == 0 {
			do("XADD", "capped", "MAXLEN", "~", 6, "*", "n", i)
			do("XADD", "minid", "MINID", "~", fmt.Sprintf("%d", i), fmt.Sprintf("%d-1", i+1), "n", i)
		} else {
			do("XADD", "capped", "*", "n", i, "other", "field")
			do("XADD", "minid", fmt.Sprintf("%d-1", i+1), "n", i)
		}
	}
	if v := <-read; !strings.HasPrefix(v, "[[plain [[") {
		t.Fatalf("the XREAD blocked on the replica got %s", v)
	}
	do("XTRIM", "plain", "MAXLEN", "~", "12")
	do("XTRIM", "plain", "MINID", "~", "0")
	do("XDEL", "seq", "5-3", "5-4", "5-39")
	do("XSETID", "seq", "9-0", "ENTRIESADDED", "100", "MAXDELETEDID", "5-39")
	do("XADD", "seq", "9-*", "n", "last")
	tx := mc.TxPipeline()
	tx.Do(ctx, "XADD", "capped", "MAXLEN", "~", "3", "*", "in", "multi")
	tx.Do(ctx, "XTRIM", "minid", "MAXLEN", "~", "10")
	if _, err := tx.Exec(ctx); err != nil {
		t.Fatal(err)
	}
	do("EVAL", "return redis.call('xadd', KEYS[1], 'MAXLEN', '~', '2', '*', 'from', 'script')", 1, "capped")

	// Groups: what XREADGROUP delivered is pending on the replica too.
	do("XGROUP", "CREATE", "plain", "g", "0")
	do("XREADGROUP", "GROUP", "g", "a", "COUNT", "3", "STREAMS", "plain", ">")
	do("XREADGROUP", "GROUP", "g", "b", "COUNT", "2", "STREAMS", "plain", ">")
	do("XREADGROUP", "GROUP", "g", "c", "NOACK", "COUNT", "2", "STREAMS", "plain", ">")
	do("XACK", "plain", "g", "0-1")

	do("SET", "marker", "1")
	waitInSync(t, mc, rc)
	mr, rr := dialRaw(t, m.Addr), dialRaw(t, r.Addr)
	for _, key := range []string{"seq", "capped", "minid"} {
		if w, g := mr.do("DEBUG", "DIGEST-VALUE", key).String(), rr.do("DEBUG", "DIGEST-VALUE", key).String(); w != g {
			t.Errorf("%s: master %s, replica %s\n master: %s\nreplica: %s", key, w, g,
				mr.do("XRANGE", key, "-", "+"), rr.do("XRANGE", key, "-", "+"))
		}
	}
	idle := regexp.MustCompile(`", :\d+, :`)
	for _, cmd := range [][]string{
		{"XRANGE", "plain", "-", "+"},
		{"XLEN", "plain"},
		{"XRANGE", "seq", "-", "+"},
		{"XRANGE", "capped", "-", "+"},
		{"XRANGE", "minid", "-", "+"},
		{"XPENDING", "plain", "g"},
		{"XPENDING", "plain", "g", "-", "+", "100"},
		{"XINFO", "GROUPS", "plain"},
	} {
		w, g := mr.do(cmd...).String(), rr.do(cmd...).String()
		if w = idle.ReplaceAllString(w, `", :*, :`); w != idle.ReplaceAllString(g, `", :*, :`) {
			t.Errorf("%v:\n master: %s\nreplica: %s", cmd, w, g)
		}
	}
}

// TestStreamsBlocking: stream readers blocked on one key are served in
// the order they blocked, each with what is past its own ID; BLOCK's
// milliseconds are kept and 0 waits for ever; readers of one group share
// the entries, each delivered once, under concurrent writers; a reader
// whose connection goes leaves the others be.
func TestStreamsBlocking(t *testing.T) {
	ctx := context.Background()
	kv := startLimitkv(t, "--persistence", "no")
	raw := dialRaw(t, kv.Addr)

	// BLOCK's milliseconds: the reader is counted blocked, then answered
	// nil by the timeout (no XADD comes).
	timed := dialRaw(t, kv.Addr)
	timed.send(resp.AppendCommand(nil, []byte("XREAD"), []byte("BLOCK"), []byte("1000"), []byte("STREAMS"), []byte("none"), []byte("$")))
	xsAwaitBlocked(t, raw, 1)
	timed.c.SetReadDeadline(time.Now().Add(30 * time.Second))
	if v := timed.read(); v.String() != "*nil" {
		t.Fatalf("XREAD BLOCK 1000 on nothing: %s", v)
	}
	xsAwaitBlocked(t, raw, 0)

	// FIFO: each reader is served in turn by the one XADD.
	const readers = 5
	got := make([]chan string, readers)
	for i := range got {
		got[i] = make(chan string, 1)
		cl := goRedis(t, kv.Addr, 2)
		id := "$"
		if i%2 == 1 {
			id = "0"
		}
		go func() {
			v, err := cl.Do(ctx, "XREAD", "BLOCK", "0", "STREAMS", "fifo", id).Result()
			if err != nil {
				got[i] <- err.Error()
				return
			}
			got[i] <- toString(v)
		}()
		xsAwaitBlocked(t, raw, i+1)
	}
	// A reader that hangs up leaves the wait.
	gone := dialRaw(t, kv.Addr)
	gone.send(resp.AppendCommand(nil, []byte("XREAD"), []byte("BLOCK"), []byte("0"), []byte("STREAMS"), []byte("fifo"), []byte("$")))
	xsAwaitBlocked(t, raw, readers+1)
	gone.c.Close()
	xsAwaitBlocked(t, raw, readers)
	// BLOCK 0 waits for ever: while a BLOCK 150 reader of another key
	// times out, none of them is answered.
	timed.send(resp.AppendCommand(nil, []byte("XREAD"), []byte("BLOCK"), []byte("150"), []byte("STREAMS"), []byte("other"), []byte("$")))
	if v := timed.read(); v.String() != "*nil" {
		t.Fatalf("XREAD BLOCK 150 on other: %s", v)
	}
	for i := range got {
		select {
		case v := <-got[i]:
			t.Fatalf("reader %d answered before any XADD: %s", i, v)
		default:
		}
	}
	xsDo(t, raw, "XADD", "fifo", "1-0", "f", "v")
	for i := range got {
		if v := <-got[i]; v != "[[fifo [[1-0 [f v]]]]]" {
			t.Errorf("reader %d: %s", i, v)
		}
	}

	// A group shared by blocked readers and concurrent writers: every
	// entry goes to exactly one consumer, and is pending for it.
	xsDo(t, raw, "XGROUP", "CREATE", "jobs", "workers", "$", "MKSTREAM")
	const workers, writers, per = 4, 3, 200
	var mu sync.Mutex
	seen := map[string]string{}
	var wg sync.WaitGroup
	stop := make(chan struct{})
	for w := 0; w < workers; w++ {
		cl := goRedis(t, kv.Addr, 2)
		name := "w" + strconv.Itoa(w)
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				select {
				case <-stop:
					return
				default:
				}
				res, err := cl.XReadGroup(ctx, &redis.XReadGroupArgs{Group: "workers", Consumer: name,
					Streams: []string{"jobs", ">"}, Count: 7, Block: 100 * time.Millisecond}).Result()
				if err == redis.Nil {
					continue
				}
				if err != nil {
					t.Errorf("%s: %v", name, err)
					return
				}
				mu.Lock()
				for _, msg := range res[0].Messages {
					if prev, dup := seen[msg.ID]; dup {
						t.Errorf("%s delivered to %s and %s", msg.ID, prev, name)
					}
					seen[msg.ID] = name
				}
				mu.Unlock()
			}
		}()
	}
	var wwg sync.WaitGroup
	for w := 0; w < writers; w++ {
		cl := goRedis(t, kv.Addr, 2)
		wwg.Add(1)
		go func() {
			defer wwg.Done()
			for i := 0; i < per; i++ {
				if err := cl.XAdd(ctx, &redis.XAddArgs{Stream: "jobs", Values: []any{"w", w, "i", i}}).Err(); err != nil {
					t.Error(err)
					return
				}
			}
		}()
	}
	wwg.Wait()
	deadline := time.Now().Add(20 * time.Second)
	for {
		mu.Lock()
		n := len(seen)
		mu.Unlock()
		if n == writers*per {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d of %d entries delivered", n, writers*per)
		}
		time.Sleep(10 * time.Millisecond)
	}
	close(stop)
	wg.Wait()
	if v := xsDo(t, raw, "XPENDING", "jobs", "workers"); v.Elems[0].Int != writers*per {
		t.Fatalf("XPENDING: %s", v)
	}
	for id, name := range seen {
		v := xsDo(t, raw, "XPENDING", "jobs", "workers", id, id, "1")
		if len(v.Elems) != 1 || string(v.Elems[0].Elems[1].Str) != name {
			t.Fatalf("%s pending as %s, delivered to %s", id, v, name)
		}
	}
}
