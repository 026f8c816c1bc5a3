package tests

import (
	"bufio"
	"net"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// TestMigrateWithRedis moves keys between limitkv and redis-server both
// ways, and gives each MIGRATE the same request from a redis-server
// source: the replies must be the same.
func TestMigrateWithRedis(t *testing.T) {
	target := startRedis(t, "--requirepass", "secret")
	srcRedis := startRedis(t)
	kv := startLimitkv(t)
	tr, sr, k := dialRaw(t, target.Addr), dialRaw(t, srcRedis.Addr), dialRaw(t, kv.Addr)
	if v := tr.do("AUTH", "secret"); v.String() != "+OK" {
		t.Fatal(v)
	}
	_, port, _ := net.SplitHostPort(target.Addr)
	both := func(build [][]string, migrate ...string) (redisReply, kvReply string) {
		t.Helper()
		for _, c := range []*rawConn{sr, k} {
			c.do("FLUSHALL")
			for _, cmd := range build {
				c.do(cmd...)
			}
		}
		args := append([]string{"MIGRATE", "127.0.0.1", port}, migrate...)
		tr.do("FLUSHALL")
		redisReply = sr.do(args...).String()
		redisTarget := tr.do("DUMP", "k").String()
		tr.do("FLUSHALL")
		kvReply = k.do(args...).String()
		if redisReply != kvReply {
			t.Errorf("%v:\n redis: %s\nlimitkv: %s", migrate, redisReply, kvReply)
		}
		if got := tr.do("DUMP", "k").String(); got != redisTarget {
			t.Errorf("%v: the target holds another value from limitkv than from redis", migrate)
		}
		return
	}
	build := [][]string{{"RPUSH", "k", "a", "b", "1"}, {"SET", "s", "v"}, {"ZADD", "z", "1", "m"}}
	auth := []string{"AUTH", "secret"}
	for _, c := range [][]string{
		append([]string{"k", "0", "1000"}, auth...),
		{"k", "0", "1000"}, // NOAUTH from the target
		{"k", "0", "1000", "AUTH", "wrong"},
		{"k", "0", "1000", "AUTH2", "default", "secret"},
		{"k", "0", "1000", "AUTH2", "nobody", "secret"},
		append([]string{"k", "0", "1000", "COPY"}, auth...),
		append([]string{"", "0", "1000", "REPLACE"}, append(auth, "KEYS", "k", "s", "z", "missing")...),
		append([]string{"missing", "0", "1000"}, auth...),
		append([]string{"", "0", "1000"}, append(auth, "KEYS", "missing", "missing2")...),
		append([]string{"k", "0", "1000", "KEYS", "k"}, auth...),
		append([]string{"k", "3", "1000"}, auth...),
		append([]string{"k", "99", "1000"}, auth...),
		append([]string{"k", "0", "0"}, auth...),
		append([]string{"k", "0", "-5"}, auth...),
		{"k", "0", "abc"},
		{"k", "x", "1000"},
		{"k", "0", "1000", "AUTH"},
		{"k", "0", "1000", "AUTH2", "u"},
		{"k", "0", "1000", "FOO"},
	} {
		both(build, c...)
		// Source keys: deleted unless COPY or an error, on both.
		for _, key := range []string{"k", "s", "z"} {
			if a, b := sr.do("EXISTS", key).String(), k.do("EXISTS", key).String(); a != b {
				t.Errorf("%v: EXISTS %s after MIGRATE: redis %s, limitkv %s", c, key, a, b)
			}
		}
	}
	// BUSYKEY from the target, and REPLACE over it.
	for _, replace := range []bool{false, true} {
		args := append([]string{"MIGRATE", "127.0.0.1", port, "k", "0", "1000"}, auth...)
		if replace {
			args = append(args, "REPLACE")
		}
		var replies []string
		for _, c := range []*rawConn{sr, k} {
			c.do("SET", "k", "new")
			tr.do("SET", "k", "old")
			replies = append(replies, c.do(args...).String())
		}
		if replies[0] != replies[1] {
			t.Errorf("replace=%v: redis %s, limitkv %s", replace, replies[0], replies[1])
		}
	}
	// The TTL goes along.
	k.do("SET", "t", "v", "PX", "100000")
	if v := k.do("MIGRATE", "127.0.0.1", port, "t", "0", "1000", "AUTH", "secret"); v.String() != "+OK" {
		t.Fatal(v)
	}
	if ttl := tr.do("PTTL", "t").Int; ttl < 90000 || ttl > 100000 {
		t.Errorf("PTTL on the target %d, want about 100000", ttl)
	}
	// A closed port, on both.
	closed := freePort(t)
	for _, c := range []*rawConn{sr, k} {
		c.do("SET", "k", "v")
	}
	a := sr.do("MIGRATE", "127.0.0.1", strconv.Itoa(closed), "k", "0", "200").String()
	b := k.do("MIGRATE", "127.0.0.1", strconv.Itoa(closed), "k", "0", "200").String()
	if a != b {
		t.Errorf("closed port: redis %s, limitkv %s", a, b)
	}
	// Each source keeps its connection to the target for the next
	// MIGRATE (the closed port left none), as INFO stats shows.
	if a, b := infoField(t, sr, "stats", "migrate_cached_sockets"), infoField(t, k, "stats", "migrate_cached_sockets"); a != 1 || b != a {
		t.Errorf("migrate_cached_sockets: redis %d, limitkv %d", a, b)
	}
	// And from redis-server to limitkv.
	_, kvPort, _ := net.SplitHostPort(kv.Addr)
	k.do("FLUSHALL")
	sr.do("HSET", "h", "f", "v", "g", "w")
	if v := sr.do("MIGRATE", "127.0.0.1", kvPort, "h", "0", "1000"); v.String() != "+OK" {
		t.Fatalf("redis -> limitkv: %s", v)
	}
	if v := k.do("HGETALL", "h"); v.String() != `["f", "v", "g", "w"]` {
		t.Errorf("HGETALL on limitkv after redis's MIGRATE: %s", v)
	}
}

// slowTarget accepts connections, reads what it is sent, and answers +OK
// to each command only when release is closed (or never, if it is nil).
// arrived is told when a client's commands have come and wait for their
// replies; received returns every byte sent to it so far.
func slowTarget(t *testing.T, release chan struct{}) (addr string, arrived <-chan struct{}, received func() string) {
	got := make(chan struct{}, 1)
	var mu sync.Mutex
	var all strings.Builder
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				r := bufio.NewReader(c)
				n := 0
				c.SetDeadline(time.Now().Add(30 * time.Second))
				for {
					line, err := r.ReadString('\n')
					if err != nil {
						return
					}
					mu.Lock()
					all.WriteString(line)
					mu.Unlock()
					if strings.HasPrefix(line, "*") {
						n++
					}
					if r.Buffered() == 0 && n > 0 {
						select {
						case got <- struct{}{}:
						default:
						}
					}
					if r.Buffered() == 0 && release != nil {
						<-release
						for ; n > 0; n-- {
							c.Write([]byte("+OK\r\n"))
						}
					}
				}
			}()
		}
	}()
	return ln.Addr().String(), got, func() string {
		mu.Lock()
		defer mu.Unlock()
		return all.String()
	}
}

// TestMigrateHoldsNoLock: while MIGRATE waits for its target, the key it
// moves can be read and written; a key written meanwhile is sent again,
// its new value replacing the target's copy, and deleted here once the
// target has it; a target that never answers gives Redis's IOERR.
func TestMigrateHoldsNoLock(t *testing.T) {
	kv := startLimitkv(t)
	release := make(chan struct{})
	target, arrived, received := slowTarget(t, release)
	host, port, _ := net.SplitHostPort(target)
	k, other := dialRaw(t, kv.Addr), dialRaw(t, kv.Addr)
	k.do("SET", "a", "1")
	k.do("SET", "b", "1")
	k.send([]byte("*9\r\n$7\r\nMIGRATE\r\n$" + strconv.Itoa(len(host)) + "\r\n" + host + "\r\n$" + strconv.Itoa(len(port)) + "\r\n" + port +
		"\r\n$0\r\n\r\n$1\r\n0\r\n$5\r\n10000\r\n$4\r\nKEYS\r\n$1\r\na\r\n$1\r\nb\r\n"))
	<-arrived // MIGRATE is now waiting for its target
	other.c.SetDeadline(time.Now().Add(15 * time.Second))
	if v := other.do("GET", "a"); string(v.Str) != "1" {
		t.Fatalf("GET during MIGRATE: %s", v)
	}
	if v := other.do("SET", "b", "meanwhile"); v.String() != "+OK" {
		t.Fatalf("SET during MIGRATE: %s", v)
	}
	first := received()
	close(release)
	if v := k.read(); v.String() != "+OK" {
		t.Fatalf("MIGRATE: %s", v)
	}
	for _, key := range []string{"a", "b"} {
		if v := other.do("EXISTS", key); v.Int != 0 {
			t.Errorf("the migrated key %s is still here", key)
		}
	}
	again := strings.TrimPrefix(received(), first)
	if !strings.Contains(again, "$7\r\nRESTORE\r\n$1\r\nb\r\n") || !strings.Contains(again, "meanwhile") || !strings.HasSuffix(again, "$7\r\nREPLACE\r\n") {
		t.Errorf("b, written during MIGRATE, was not sent again with its new value to replace the target's copy: %q", again)
	}

	target, _, _ = slowTarget(t, nil)
	host, port, _ = net.SplitHostPort(target)
	k.do("SET", "c", "1")
	if v := k.do("MIGRATE", host, port, "c", "0", "100"); v.String() != "-IOERR error or timeout reading to target instance" {
		t.Errorf("silent target: %s", v)
	}
	if v := k.do("EXISTS", "c"); v.Int != 1 {
		t.Error("a key whose MIGRATE failed was deleted")
	}
}

// TestDumpFamilyReplicates: what RESTORE, COPY, MOVE and MIGRATE change
// on a master reaches its replica, in every database.
func TestDumpFamilyReplicates(t *testing.T) {
	m := startMaster(t, "--persistence", "no")
	r := startReplicaOf(t, m, "", "--persistence", "no")
	target := startRedis(t)
	mc, rc := goRedis(t, m.Addr, 2), goRedis(t, r.Addr, 2)
	waitInSync(t, mc, rc)
	k := dialRaw(t, m.Addr)
	_, tport, _ := net.SplitHostPort(target.Addr)
	for _, cmd := range [][]string{
		{"RPUSH", "l", "a", "b", "c"},
		{"HSET", "h", "f", "v"},
		{"ZADD", "z", "1", "a", "2", "b"},
		{"SET", "s", "v"},
		{"RL.FIXED", "rl", "5", "1m"},
	} {
		k.do(cmd...)
	}
	for _, key := range []string{"l", "h", "z", "s"} {
		p := k.do("DUMP", key)
		for _, cmd := range [][]string{
			{"RESTORE", key + "-r", "0", string(p.Str)},
			{"RESTORE", key + "-t", "100000", string(p.Str)},
			{"RESTORE", key, "0", string(p.Str), "REPLACE", "IDLETIME", "5"},
			{"RESTORE", key + "-gone", "1", string(p.Str), "ABSTTL"},
		} {
			if v := k.do(cmd...); v.String() != "+OK" {
				t.Fatalf("%v: %s", cmd[:3], v)
			}
		}
	}
	for _, cmd := range [][]string{
		{"COPY", "l", "l-copy"},
		{"COPY", "h", "h-copy", "DB", "2"},
		{"COPY", "rl", "rl-copy", "DB", "3", "REPLACE"},
		{"MOVE", "z", "4"},
		{"MOVE", "rl", "5"},
		{"MIGRATE", "127.0.0.1", tport, "s", "0", "1000"},
		{"MIGRATE", "127.0.0.1", tport, "", "0", "1000", "COPY", "KEYS", "l", "h"},
		{"MIGRATE", "127.0.0.1", tport, "", "0", "1000", "REPLACE", "KEYS", "l-r", "h-r"},
	} {
		if v := k.do(cmd...); v.Type == '-' {
			t.Fatalf("%v: %s", cmd, v)
		}
	}
	if v := k.do("EXISTS", "s", "l-r", "h-r"); v.Int != 0 {
		t.Fatalf("migrated keys still on the master: %d", v.Int)
	}
	waitInSync(t, mc, rc)
	sameKeyspace(t, mc, rc)
}
