package tests

import (
	"bufio"
	"bytes"
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/limitkv/limitkv/internal/testserver"
	"github.com/limitkv/limitkv/resp"
)

// Client buffers: what a client costs the server must be bounded by its
// limits, counted, and given back.

// procStatus reads a field of /proc/PID/status in bytes (VmRSS, VmHWM).
func procStatus(t testing.TB, s *server, field string) int64 {
	t.Helper()
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", s.Cmd.Process.Pid))
	if err != nil {
		t.Skip("no /proc")
	}
	for _, l := range strings.Split(string(b), "\n") {
		if strings.HasPrefix(l, field+":") {
			n, _ := strconv.ParseInt(strings.Fields(l)[1], 10, 64)
			return n << 10
		}
	}
	t.Fatalf("no %s in /proc/PID/status", field)
	return 0
}

// infoField returns one field of an INFO section.
func infoField(t testing.TB, c *rawConn, section, field string) int64 {
	t.Helper()
	v := c.do("INFO", section)
	m := regexp.MustCompile(`(?m)^` + field + `:(\d+)`).FindStringSubmatch(string(v.Str))
	if m == nil {
		t.Fatalf("no %s in INFO %s:\n%s", field, section, v.Str)
	}
	n, _ := strconv.ParseInt(m[1], 10, 64)
	return n
}

// clientField returns a field of the CLIENT LIST line of client id.
func clientField(t testing.TB, c *rawConn, id int64, field string) (int64, bool) {
	t.Helper()
	for _, line := range strings.Split(string(c.do("CLIENT", "LIST").Str), "\n") {
		if !strings.HasPrefix(line, "id="+strconv.FormatInt(id, 10)+" ") {
			continue
		}
		m := regexp.MustCompile(`\b` + regexp.QuoteMeta(field) + `=(\d+)`).FindStringSubmatch(line)
		if m == nil {
			t.Fatalf("no %s in %s", field, line)
		}
		n, _ := strconv.ParseInt(m[1], 10, 64)
		return n, true
	}
	return 0, false
}

// TestPipelinedBigRepliesBounded: eight clients pipeline GET of a 1 MB value
// 100,000 times and never read. The server must stop reading them rather
// than buffer their replies: its memory stays bounded and a new client is
// answered at once.
func TestPipelinedBigRepliesBounded(t *testing.T) {
	s := startLimitkv(t, "--persistence", "no")
	c := dialRaw(t, s.Addr)
	c.do("SET", "big", strings.Repeat("v", 1<<20))
	base := procStatus(t, s, "VmRSS")
	req := bytes.Repeat(resp.AppendCommand(nil, []byte("GET"), []byte("big")), 1000)
	var ids []int64
	var wg sync.WaitGroup
	for i := 0; i < 8; i++ {
		p := dialRaw(t, s.Addr)
		ids = append(ids, p.do("CLIENT", "ID").Int)
		wg.Add(1)
		go func() {
			defer wg.Done()
			p.c.SetWriteDeadline(time.Now().Add(6 * time.Second))
			for j := 0; j < 100; j++ {
				if _, err := p.c.Write(req); err != nil {
					return // the server stopped reading, or the test is over
				}
			}
		}()
	}
	var peak int64
	for end := time.Now().Add(4 * time.Second); time.Now().Before(end); time.Sleep(50 * time.Millisecond) {
		peak = max(peak, procStatus(t, s, "VmRSS")-base)
		if peak > 1<<30 {
			break // today's server heads for gigabytes: no need to watch
		}
	}
	start := time.Now()
	probe, err := net.DialTimeout("tcp", s.Addr, 15*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer probe.Close()
	// Answered, within a deadline that only a server buffering gigabytes
	// (or stuck writing to the clients that do not read) would miss.
	probe.SetDeadline(time.Now().Add(15 * time.Second))
	probe.Write([]byte("PING\r\n"))
	line, err := bufio.NewReader(probe).ReadString('\n')
	pingTime := time.Since(start)
	t.Logf("RSS growth at most %d MB; a new client's PING answered in %v", peak>>20, pingTime)
	if err != nil || line != "+PONG\r\n" {
		t.Errorf("new client's PING: %q %v after %v", line, err, pingTime)
	}
	if peak > 300<<20 {
		t.Errorf("RSS grew by %d MB", peak>>20)
	}
	// The pipelining clients' buffers show in CLIENT LIST and INFO.
	omem, _ := clientField(t, c, ids[0], "omem")
	tot, _ := clientField(t, c, ids[0], "tot-mem")
	normal := infoField(t, c, "memory", "mem_clients_normal")
	used := infoField(t, c, "memory", "used_memory")
	t.Logf("a pipelining client: omem %d, tot-mem %d; mem_clients_normal %d, used_memory %d", omem, tot, normal, used)
	// The eight clients' figures are read at different moments, each
	// somewhere between a write and the next: INFO's sum is at least the
	// one client's.
	if omem <= 0 || omem > 2<<20 || tot < omem || normal < omem || used < normal {
		t.Errorf("omem %d, tot-mem %d, mem_clients_normal %d, used_memory %d", omem, tot, normal, used)
	}
	wg.Wait()
}

// TestOutputBufferLimitCloses: with client-output-buffer-limit "normal 1mb
// 512kb 1", a client that asks for big replies and reads nothing is closed,
// by limitkv as by redis-server, and Redis's line is logged.
func TestOutputBufferLimitCloses(t *testing.T) {
	servers := map[string]*server{"limitkv": startLimitkv(t, "--persistence", "no")}
	if testserver.Available("redis-server") {
		servers["redis-server"] = startRedis(t)
	}
	for name, s := range servers {
		c := dialRaw(t, s.Addr)
		if v := c.do("CONFIG", "SET", "client-output-buffer-limit", "normal 1mb 512kb 1"); v.String() != "+OK" {
			t.Fatalf("%s: CONFIG SET: %s", name, v)
		}
		c.do("SET", "v", strings.Repeat("x", 700<<10))
		victim := dialRaw(t, s.Addr)
		id := victim.do("CLIENT", "ID").Int
		victim.c.(*net.TCPConn).SetReadBuffer(64 << 10)
		go victim.c.Write(bytes.Repeat(resp.AppendCommand(nil, []byte("GET"), []byte("v")), 200))
		start := time.Now()
		for {
			if _, ok := clientField(t, c, id, "omem"); !ok {
				break
			}
			if time.Since(start) > 8*time.Second {
				t.Fatalf("%s: a client that does not read is still connected after 8s", name)
			}
			time.Sleep(20 * time.Millisecond)
		}
		t.Logf("%s closed the client after %v", name, time.Since(start).Round(10*time.Millisecond))
		// A client that reads its replies is left alone.
		reader := dialRaw(t, s.Addr)
		for i := 0; i < 5; i++ {
			if v := reader.do("GET", "v"); len(v.Str) != 700<<10 {
				t.Fatalf("%s: a reading client got %s", name, v.String()[:20])
			}
		}
		c.do("CONFIG", "SET", "client-output-buffer-limit", "normal 0 0 0")
	}
	kv := servers["limitkv"]
	kv.Stop()
	if !strings.Contains(kv.Output(), "scheduled to be closed ASAP for overcoming of output buffer limits.") {
		t.Errorf("no output buffer limit line in the log:\n%s", kv.Output())
	}
}

// TestBigSetMemory: a 256 MB SET costs about its size (Redis: 1x), not a
// multiple of it, and the memory goes back after DEL and close.
func TestBigSetMemory(t *testing.T) {
	s := startLimitkv(t, "--persistence", "no")
	c := dialRaw(t, s.Addr)
	c.do("PING")
	const n = 256 << 20
	base := procStatus(t, s, "VmRSS")
	val := bytes.Repeat([]byte("v"), n)
	w := dialRaw(t, s.Addr)
	fmt.Fprintf(w.c, "*3\r\n$3\r\nSET\r\n$3\r\nbig\r\n$%d\r\n", n)
	w.send(val)
	w.send([]byte("\r\n"))
	if v := w.read(); v.String() != "+OK" {
		t.Fatal(v)
	}
	peak := procStatus(t, s, "VmHWM") - base
	if v := c.do("STRLEN", "big"); v.Int != n {
		t.Fatalf("STRLEN %d", v.Int)
	}
	// The writer's read buffer is back to its usual size.
	info := string(w.do("CLIENT", "INFO").Str)
	if m := regexp.MustCompile(` rbs=(\d+) `).FindStringSubmatch(info); m == nil || len(m[1]) > 5 {
		t.Errorf("read buffer after the SET: %s", info)
	}
	c.do("DEL", "big")
	w.c.Close()
	var after int64
	for end := time.Now().Add(5 * time.Second); time.Now().Before(end); time.Sleep(100 * time.Millisecond) {
		if after = procStatus(t, s, "VmRSS") - base; after < 32<<20 {
			break
		}
	}
	t.Logf("256 MB SET: peak RSS growth %d MB (%.2fx); %d MB after DEL and close", peak>>20, float64(peak)/n, after>>20)
	if float64(peak) > 1.6*n {
		t.Errorf("peak RSS growth %d MB for a 256 MB value", peak>>20)
	}
	if after > 32<<20 {
		t.Errorf("RSS still %d MB above its start after DEL and close", after>>20)
	}
}

// pidStatus reads a field of /proc/PID/status in bytes (VmRSS, VmHWM).
func pidStatus(t testing.TB, pid int, field string) int64 {
	t.Helper()
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		t.Fatalf("process %d: %v", pid, err)
	}
	for _, l := range strings.Split(string(b), "\n") {
		if strings.HasPrefix(l, field+":") {
			n, _ := strconv.ParseInt(strings.Fields(l)[1], 10, 64)
			return n << 10
		}
	}
	t.Fatalf("no %s in /proc/%d/status", field, pid)
	return 0
}

// TestBigSetMemoryPersisted is TestBigSetMemory with persistence on: the
// snapshot of one 256 MB value costs the server little more than the
// value (it used to stage two copies of it: 3x at the peak, and 265 MB
// kept after DEL), and the snapshot worker, whose Pebble batch, flush and
// table writer hold several copies while it writes, gives them back once
// the value is on disk (it stayed at 1 GB or more).
func TestBigSetMemoryPersisted(t *testing.T) {
	s := startLimitkv(t)
	c := dialRaw(t, s.Addr)
	c.do("PING")
	worker := snapshotWorker(t, s)
	const n = 256 << 20
	val := make([]byte, n) // random: the worst case for the writer's compression
	for i := 0; i < n; i += 8 {
		x := rand.Uint64()
		for j := 0; j < 8; j++ {
			val[i+j] = byte(x >> (8 * j))
		}
	}
	base, wbase := procStatus(t, s, "VmRSS"), pidStatus(t, worker, "VmRSS")
	w := dialRaw(t, s.Addr)
	start := time.Now()
	fmt.Fprintf(w.c, "*3\r\n$3\r\nSET\r\n$3\r\nbig\r\n$%d\r\n", n)
	w.send(val)
	w.send([]byte("\r\n"))
	if v := w.read(); v.String() != "+OK" {
		t.Fatal(v)
	}
	val = nil
	w.c.Close()
	for {
		if b, _ := strconv.ParseInt(info(c, "snapshot_last_bytes"), 10, 64); b >= n {
			break
		}
		if time.Since(start) > 2*time.Minute {
			t.Fatalf("the value is not saved after %v:\n%s", time.Since(start), c.do("INFO", "persistence").Str)
		}
		time.Sleep(50 * time.Millisecond)
	}
	saved := time.Since(start)
	peak := procStatus(t, s, "VmHWM") - base
	var wafter int64
	for {
		if wafter = pidStatus(t, worker, "VmRSS") - wbase; wafter < 64<<20 || time.Since(start) > 90*time.Second {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	released := time.Since(start)
	wpeak := pidStatus(t, worker, "VmHWM") - wbase
	t.Logf("256 MB SET, persisted: saved after %v; server peak RSS growth %d MB (%.2fx); worker peak growth %d MB (%.2fx), "+
		"%d MB above its start %v after the SET", saved.Round(time.Millisecond), peak>>20, float64(peak)/n, wpeak>>20, float64(wpeak)/n,
		wafter>>20, released.Round(time.Millisecond))
	if float64(peak) > 1.6*n {
		t.Errorf("server peak RSS growth %d MB for a 256 MB value", peak>>20)
	}
	if wafter >= 64<<20 {
		t.Errorf("the worker still holds %d MB more than at its start, %v after the SET", wafter>>20, released)
	}

	c.do("DEL", "big")
	var after, wdel int64
	for end := time.Now().Add(30 * time.Second); time.Now().Before(end); time.Sleep(100 * time.Millisecond) {
		// The DEL is on disk once no change is left unsaved (an idle
		// periodic snapshot is not counted: snapshot_count cannot say).
		saved := info(c, "rdb_changes_since_last_save") == "0"
		after, wdel = procStatus(t, s, "VmRSS")-base, pidStatus(t, worker, "VmRSS")-wbase
		if saved && after < 32<<20 && wdel < 64<<20 {
			break
		}
	}
	t.Logf("after DEL: server %d MB, worker %d MB above their start", after>>20, wdel>>20)
	if after >= 32<<20 || wdel >= 64<<20 {
		t.Errorf("after DEL and its snapshot: server %d MB, worker %d MB above their start", after>>20, wdel>>20)
	}
}

// TestQueryBufferLimitCloses: a request whose bytes pass
// client-query-buffer-limit closes its client, with nothing sent and
// Redis's line logged, as redis-server does; the requests before it are
// served.
func TestQueryBufferLimitCloses(t *testing.T) {
	servers := map[string]*server{"limitkv": startLimitkv(t, "--persistence", "no")}
	if testserver.Available("redis-server") {
		servers["redis-server"] = startRedis(t)
	}
	for name, s := range servers {
		c := dialRaw(t, s.Addr)
		if v := c.do("CONFIG", "SET", "client-query-buffer-limit", "1mb"); v.String() != "+OK" {
			t.Fatalf("%s: %s", name, v)
		}
		victim := dialRaw(t, s.Addr)
		victim.send([]byte("PING\r\n*3\r\n$3\r\nSET\r\n$1\r\nk\r\n$2000000\r\n"))
		go victim.c.Write(bytes.Repeat([]byte("x"), 2000000))
		if got := victim.readAll(); got != "+PONG\r\n" {
			t.Errorf("%s: the client read %.40q", name, got)
		}
		if v := c.do("EXISTS", "k"); v.Int != 0 {
			t.Errorf("%s: the refused SET ran", name)
		}
	}
	kv := servers["limitkv"]
	kv.Stop()
	if !strings.Contains(kv.Output(), "Closing client that reached max query buffer length: id=") {
		t.Errorf("no query buffer line in the log:\n%s", kv.Output())
	}
}

// TestClientListBuffers: CLIENT LIST shows a big argument being read
// (argv-mem) and a reply waiting for a client that does not read (omem).
func TestClientListBuffers(t *testing.T) {
	s := startLimitkv(t, "--persistence", "no")
	c := dialRaw(t, s.Addr)
	partial := dialRaw(t, s.Addr)
	id := partial.do("CLIENT", "ID").Int
	partial.send([]byte("*3\r\n$3\r\nSET\r\n$1\r\nk\r\n$1000000\r\n" + strings.Repeat("p", 300000)))
	var argv, qbuf int64
	for end := time.Now().Add(5 * time.Second); time.Now().Before(end) && argv == 0; time.Sleep(20 * time.Millisecond) {
		argv, _ = clientField(t, c, id, "argv-mem")
		qbuf, _ = clientField(t, c, id, "qbuf")
	}
	if argv < 1000000 {
		t.Errorf("argv-mem %d while a 1 MB argument is being read (qbuf %d)", argv, qbuf)
	}
	partial.send([]byte(strings.Repeat("p", 700000) + "\r\n"))
	if v := partial.read(); v.String() != "+OK" {
		t.Fatal(v)
	}
	if argv, _ = clientField(t, c, id, "argv-mem"); argv != 0 {
		t.Errorf("argv-mem %d after the request", argv)
	}
	if v := c.do("CLIENT", "INFO"); !regexp.MustCompile(`qbuf=\d+ qbuf-free=\d+ argv-mem=\d+ multi-mem=0 rbs=\d+ rbp=\d+ obl=0 oll=0 omem=0 tot-mem=\d+ `).MatchString(string(v.Str)) {
		t.Errorf("CLIENT INFO: %s", v.Str)
	}
}

// TestClientEviction: with maxmemory-clients, while the clients together
// use at least that much, the client using the most memory is closed,
// those that said CLIENT NO-EVICT ON are spared, and INFO counts the
// evictions, on redis-server and limitkv alike.
func TestClientEviction(t *testing.T) {
	for name, s := range map[string]*server{"redis-server": startRedis(t), "limitkv": startLimitkv(t, "--persistence", "no")} {
		admin := dialRaw(t, s.Addr)
		mustDo(t, admin, "+OK", "CLIENT", "NO-EVICT", "ON")
		mustDo(t, admin, "+OK", "CONFIG", "SET", "maxmemory-clients", "1mb")
		mustDo(t, admin, `["maxmemory-clients", "1048576"]`, "CONFIG", "GET", "maxmemory-clients")
		before := infoField(t, admin, "stats", "evicted_clients")
		victim := dialRaw(t, s.Addr)
		mustDo(t, victim, "+PONG", "PING")
		// A spared client's 3 MB argument takes the clients over the limit:
		// the other evictable one goes.
		keeper := dialRaw(t, s.Addr)
		mustDo(t, keeper, "+OK", "CLIENT", "NO-EVICT", "ON")
		keeper.send([]byte("*2\r\n$4\r\nECHO\r\n$3000000\r\n"))
		keeper.send(bytes.Repeat([]byte("x"), 3000000-10))
		if got, closed := closedByServer(victim); !closed || got != "" {
			t.Errorf("%s: the evictable client was not closed (read %q)", name, got)
		}
		if n := infoField(t, admin, "stats", "evicted_clients") - before; n != 1 {
			t.Errorf("%s: evicted_clients went up by %d", name, n)
		}
		keeper.send([]byte("xxxxxxxxxx\r\n"))
		if v := keeper.read(); len(v.Str) != 3000000 {
			t.Errorf("%s: the spared client got %.30s", name, v.String())
		}
		mustDo(t, admin, "+OK", "CONFIG", "SET", "maxmemory-clients", "0")
	}
}
