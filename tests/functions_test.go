package tests

import (
	"net"
	"strings"
	"testing"
	"time"
)

// Functions against the real binary: libraries survive a restart (the
// snapshot keeps them), reach replicas by the full sync and by the
// stream, and a looping function is stopped by FUNCTION KILL. Replies are
// Redis 7.0.15's (checked by hand against redis-server; the rest is in
// testdata/diff/functions.txt).

const (
	counterLib = "#!lua name=counters\n" +
		"redis.register_function('bump', function(keys, args) return redis.call('INCRBY', keys[1], args[1]) end)\n" +
		"redis.register_function{function_name='peek', callback=function(keys) return redis.call('GET', keys[1]) end, flags={'no-writes'}, description='reads'}"
	extraLib = "#!lua name=extra\nredis.register_function{function_name='hello', callback=function() return 'hello' end, flags={'no-writes'}}"
)

func mustDo(t *testing.T, c *rawConn, want string, args ...string) {
	t.Helper()
	if v := c.do(args...); v.String() != want {
		t.Fatalf("%v: %s, want %s", args, v, want)
	}
}

func TestFunctionsSurviveRestart(t *testing.T) {
	dir := t.TempDir()
	s := startLimitkvIn(t, dir, "--snapshot-interval", "1h")
	c := dialRaw(t, s.Addr)
	mustDo(t, c, `"counters"`, "FUNCTION", "LOAD", counterLib)
	mustDo(t, c, `"extra"`, "FUNCTION", "LOAD", extraLib)
	mustDo(t, c, ":5", "FCALL", "bump", "1", "hits", "5")
	list := c.do("FUNCTION", "LIST", "WITHCODE").String()
	dump := c.do("FUNCTION", "DUMP").String()
	s.Stop()

	s = startLimitkvIn(t, dir, "--snapshot-interval", "1h")
	c = dialRaw(t, s.Addr)
	if got := c.do("FUNCTION", "LIST", "WITHCODE").String(); got != list {
		t.Fatalf("FUNCTION LIST after a restart:\n%s\nbefore:\n%s", got, list)
	}
	if got := c.do("FUNCTION", "DUMP").String(); got != dump {
		t.Fatalf("FUNCTION DUMP after a restart differs")
	}
	mustDo(t, c, ":7", "FCALL", "bump", "1", "hits", "2")
	mustDo(t, c, `"7"`, "FCALL_RO", "peek", "1", "hits")
	mustDo(t, c, `"hello"`, "FCALL", "hello", "0")

	// A deletion is kept too, with no key changed since.
	mustDo(t, c, "+OK", "FUNCTION", "DELETE", "extra")
	s.Stop()
	s = startLimitkvIn(t, dir, "--snapshot-interval", "1h")
	c = dialRaw(t, s.Addr)
	mustDo(t, c, "-ERR Function not found", "FCALL", "hello", "0")
	mustDo(t, c, ":8", "FCALL", "bump", "1", "hits", "1")

	// And a flush: nothing is left to load.
	mustDo(t, c, "+OK", "FUNCTION", "FLUSH")
	s.Stop()
	s = startLimitkvIn(t, dir, "--snapshot-interval", "1h")
	c = dialRaw(t, s.Addr)
	mustDo(t, c, "[]", "FUNCTION", "LIST")
	mustDo(t, c, `"8"`, "GET", "hits")
	s.Stop()

	// A periodic snapshot keeps a library loaded with no key changed:
	// it is there after a crash.
	s = startLimitkvIn(t, dir, "--snapshot-interval", "100ms")
	c = dialRaw(t, s.Addr)
	mustDo(t, c, `"extra"`, "FUNCTION", "LOAD", extraLib)
	// Only the library is there to write, and a periodic snapshot that
	// writes nothing is not counted: the first one counted saved it.
	pollUntil(t, "a snapshot of the library", func() bool { return info(c, "snapshot_count") != "0" })
	s.Kill()
	s = startLimitkvIn(t, dir, "--snapshot-interval", "1h")
	c = dialRaw(t, s.Addr)
	mustDo(t, c, `"hello"`, "FCALL", "hello", "0")
}

func TestFunctionsReplicate(t *testing.T) {
	m := startMaster(t, "--persistence", "no")
	mc := goRedis(t, m.Addr, 2)
	mr := dialRaw(t, m.Addr)
	// Loaded before the replica attaches: its full sync carries them.
	mustDo(t, mr, `"counters"`, "FUNCTION", "LOAD", counterLib)
	mustDo(t, mr, ":3", "FCALL", "bump", "1", "hits", "3")
	// The replica has a library of its own, which the sync replaces.
	r := startMaster(t, "--persistence", "no")
	rc := goRedis(t, r.Addr, 2)
	rr := dialRaw(t, r.Addr)
	mustDo(t, rr, `"mine"`, "FUNCTION", "LOAD", "#!lua name=mine\nredis.register_function('mine', function() return 1 end)")
	host, port, _ := net.SplitHostPort(m.Addr)
	mustDo(t, rr, "+OK", "REPLICAOF", host, port)
	waitInSync(t, mc, rc)
	mustDo(t, rr, "-READONLY You can't write against a read only replica.", "FUNCTION", "LOAD", extraLib)
	want := mr.do("FUNCTION", "LIST", "WITHCODE").String()
	if got := rr.do("FUNCTION", "LIST", "WITHCODE").String(); got != want {
		t.Fatalf("replica's libraries after the full sync:\n%s\nmaster's:\n%s", got, want)
	}
	mustDo(t, rr, `"3"`, "FCALL_RO", "peek", "1", "hits")
	mustDo(t, rr, "-READONLY You can't write against a read only replica.", "FCALL", "bump", "1", "hits", "1")

	// Then by the stream: loads, the keys a function writes, deletions,
	// restores, flushes.
	mustDo(t, mr, `"extra"`, "FUNCTION", "LOAD", extraLib)
	mustDo(t, mr, ":4", "FCALL", "bump", "1", "hits", "1")
	waitInSync(t, mc, rc)
	mustDo(t, rr, `"hello"`, "FCALL_RO", "hello", "0")
	mustDo(t, rr, `"4"`, "GET", "hits")
	dump := mr.do("FUNCTION", "DUMP")
	mustDo(t, mr, "+OK", "FUNCTION", "DELETE", "extra")
	waitInSync(t, mc, rc)
	mustDo(t, rr, "-ERR Function not found", "FCALL_RO", "hello", "0")
	mustDo(t, mr, "+OK", "FUNCTION", "FLUSH")
	waitInSync(t, mc, rc)
	mustDo(t, rr, "[]", "FUNCTION", "LIST")
	mustDo(t, mr, "+OK", "FUNCTION", "RESTORE", string(dump.Str))
	waitInSync(t, mc, rc)
	if got, want := rr.do("FUNCTION", "LIST", "WITHCODE").String(), mr.do("FUNCTION", "LIST", "WITHCODE").String(); got != want {
		t.Fatalf("replica's libraries after FUNCTION RESTORE:\n%s\nmaster's:\n%s", got, want)
	}
	sameKeyspace(t, mc, rc)
}

func TestFunctionKill(t *testing.T) {
	kv := startLimitkv(t, "--busy-reply-threshold", "100")
	runner := dialRaw(t, kv.Addr)
	other := dialRaw(t, kv.Addr)
	const busyFCall = "-BUSY Redis is busy running a script. You can only call FUNCTION KILL or SHUTDOWN NOSAVE."
	const busyEval = "-BUSY Redis is busy running a script. You can only call SCRIPT KILL or SHUTDOWN NOSAVE."
	mustDo(t, other, "-NOTBUSY No scripts in execution right now.", "FUNCTION", "KILL")
	mustDo(t, other, `"loops"`, "FUNCTION", "LOAD", "#!lua name=loops\n"+
		"redis.register_function{function_name='spin', callback=function() while true do end end, flags={'no-writes'}}\n"+
		"redis.register_function('spinw', function(keys) redis.call('SET', keys[1], '1') while true do end end)")

	runner.send(encodeCommand("FCALL_RO", "spin", "0"))
	waitBusy(t, other)
	mustDo(t, other, busyFCall, "PING")
	mustDo(t, other, busyFCall, "SCRIPT", "KILL")
	stats := other.do("FUNCTION", "STATS").String()
	if !strings.HasPrefix(stats, `["running_script", ["name", "spin", "command", ["FCALL_RO", "spin", "0"], "duration_ms", :`) ||
		!strings.HasSuffix(stats, `"engines", ["LUA", ["libraries_count", :1, "functions_count", :2]]]`) {
		t.Fatalf("FUNCTION STATS while a function runs: %s", stats)
	}
	mustDo(t, other, "+OK", "FUNCTION", "KILL")
	if v := runner.read(); v.String() != "-ERR Script killed by user with SCRIPT KILL... script: spin, on @user_function:2." {
		t.Fatalf("killed function's reply: %s", v)
	}
	mustDo(t, other, "+PONG", "PING")
	mustDo(t, other, `["running_script", nil, "engines", ["LUA", ["libraries_count", :1, "functions_count", :2]]]`, "FUNCTION", "STATS")

	// FUNCTION KILL does not stop an EVAL, nor does FUNCTION STATS
	// answer while one runs.
	runner.send(encodeCommand("EVAL", "while true do end", "0"))
	waitBusy(t, other)
	mustDo(t, other, busyEval, "FUNCTION", "KILL")
	mustDo(t, other, busyEval, "FUNCTION", "STATS")
	mustDo(t, other, "+OK", "SCRIPT", "KILL")
	if v := runner.read(); !strings.HasPrefix(v.String(), "-ERR Script killed by user with SCRIPT KILL...") {
		t.Fatalf("killed script's reply: %s", v)
	}

	// A function that has written cannot be killed.
	runner.send(encodeCommand("FCALL", "spinw", "1", "k"))
	waitBusy(t, other)
	if v := other.do("FUNCTION", "KILL"); !strings.HasPrefix(v.String(), "-UNKILLABLE Sorry the script already executed write commands") {
		t.Fatalf("FUNCTION KILL after a write: %s", v)
	}
	other.send(encodeCommand("SHUTDOWN", "NOSAVE"))
	select {
	case <-kv.Done:
	case <-time.After(5 * time.Second):
		t.Fatal("SHUTDOWN NOSAVE did not stop the server while a function was running")
	}
}

// TestFunctionsOnStaleReplica: with its master gone and
// replica-serve-stale-data no, a replica runs only functions that declared
// allow-stale, and they may call only stale commands.
func TestFunctionsOnStaleReplica(t *testing.T) {
	m := startMaster(t, "--persistence", "no")
	mc := goRedis(t, m.Addr, 2)
	mr := dialRaw(t, m.Addr)
	mustDo(t, mr, `"stale"`, "FUNCTION", "LOAD", "#!lua name=stale\n"+
		"redis.register_function{function_name='plain', callback=function() return 'plain' end, flags={'no-writes'}}\n"+
		"redis.register_function{function_name='time', callback=function() return type(redis.call('TIME')) end, flags={'no-writes', 'allow-stale'}}\n"+
		"redis.register_function{function_name='get', callback=function() return redis.call('GET', 'k') end, flags={'no-writes', 'allow-stale'}}")
	r := startReplicaOf(t, m, "", "--persistence", "no", "--replica-serve-stale-data", "no")
	rc := goRedis(t, r.Addr, 2)
	rr := dialRaw(t, r.Addr)
	waitInSync(t, mc, rc)
	mustDo(t, rr, `"plain"`, "FCALL_RO", "plain", "0")
	m.Kill()
	deadline := time.Now().Add(10 * time.Second)
	for replInfo(t, rc, "replication", "master_link_status") != "down" {
		if time.Now().After(deadline) {
			t.Fatal("the replica did not see its master go")
		}
		time.Sleep(20 * time.Millisecond)
	}
	mustDo(t, rr, "-MASTERDOWN Link with MASTER is down and replica-serve-stale-data is set to 'no'.", "FCALL_RO", "plain", "0")
	mustDo(t, rr, `"table"`, "FCALL_RO", "time", "0")
	mustDo(t, rr, "-ERR Can not execute the command on a stale replica script: get, on @user_function:4.", "FCALL_RO", "get", "0")
}
