package tests

import (
	"bytes"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/limitkv/limitkv/resp"
)

// Faults, black box: a disk that fills up, a damaged data directory.

// mountTmpfs mounts a tmpfs of the given size on a new directory, and
// skips the test where that is not allowed (it needs root).
func mountTmpfs(t *testing.T, size string) string {
	t.Helper()
	dir := t.TempDir()
	out, err := exec.Command("mount", "-t", "tmpfs", "-o", "size="+size, "tmpfs", dir).CombinedOutput()
	if err != nil {
		t.Skipf("cannot mount a tmpfs here (%v: %s); this test needs root", err, strings.TrimSpace(string(out)))
	}
	t.Cleanup(func() { exec.Command("umount", "-l", dir).Run() })
	return dir
}

// waitExit waits for the process to end, at most limit, and returns its
// exit code and how long it took.
func waitExit(t testing.TB, s *server, limit time.Duration) (int, time.Duration) {
	t.Helper()
	start := time.Now()
	select {
	case <-s.Done:
	case <-time.After(limit):
		t.Fatalf("the server did not exit within %v:\n%s", limit, s.Output())
	}
	return s.Cmd.ProcessState.ExitCode(), time.Since(start)
}

// info returns one field of INFO persistence.
func info(c *rawConn, field string) string {
	for _, line := range strings.Split(string(c.do("INFO", "persistence").Str), "\r\n") {
		if v, ok := strings.CutPrefix(line, field+":"); ok {
			return v
		}
	}
	return ""
}

// setMany writes n keys prefix:0.. with random 1 KB values, pipelined,
// and returns the values. Every write must succeed.
func setMany(t *testing.T, c *rawConn, prefix string, from, n int) map[string]string {
	t.Helper()
	vals := map[string]string{}
	val := make([]byte, 1024)
	const depth = 100
	for i := from; i < from+n; i += depth {
		var b []byte
		m := min(depth, from+n-i)
		for j := i; j < i+m; j++ {
			for k := range val {
				val[k] = 'a' + byte(rand.IntN(26))
			}
			key := prefix + ":" + strconv.Itoa(j)
			vals[key] = string(val)
			b = resp.AppendCommand(b, []byte("SET"), []byte(key), val)
		}
		c.send(b)
		for j := 0; j < m; j++ {
			if v := c.read(); v.String() != "+OK" {
				t.Fatalf("SET while the disk fills: %s", v)
			}
		}
	}
	return vals
}

// fillDisk writes a file in dir until the disk is full, and returns it.
func fillDisk(t *testing.T, dir string) string {
	t.Helper()
	path := filepath.Join(dir, "ballast")
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	chunk := make([]byte, 64<<10)
	for {
		if _, err := f.Write(chunk); err != nil {
			if !errors.Is(err, syscall.ENOSPC) {
				t.Fatal(err)
			}
			return path
		}
	}
}

// TestFullDisk fills a real 20 MB tmpfs under a write load. The server
// keeps serving, and keeps a second server off its directory; INFO, SAVE
// and SHUTDOWN report the failure; SIGTERM ends
// it within seconds; the log stays short. Restarted on the full disk it
// serves the last good snapshot; once there is room again, snapshots
// succeed.
func TestFullDisk(t *testing.T) {
	mnt := mountTmpfs(t, "20m")
	dir := filepath.Join(mnt, "data")
	flags := []string{"--snapshot-interval", "200ms"}

	s := startLimitkvIn(t, dir, flags...)
	c := dialRaw(t, s.Addr)
	good := setMany(t, c, "good", 0, 1000)
	if v := c.do("SAVE"); v.String() != "+OK" {
		t.Fatalf("SAVE on an empty disk: %s", v)
	}
	// Write until a snapshot fails.
	deadline := time.Now().Add(60 * time.Second)
	n := 0
	for info(c, "rdb_last_bgsave_status") != "err" {
		if time.Now().After(deadline) {
			t.Fatalf("no snapshot failed after writing %d MB to a 20 MB disk:\n%s", n/1000, s.Output())
		}
		setMany(t, c, "load", n, 1000)
		n += 1000
	}
	t.Logf("the first snapshot failed after %d MB", n/1000)
	// Its worker stopped: the server still holds the directory.
	secondServerRefused(t, dir, s)
	if v := c.do("PING"); v.String() != "+PONG" {
		t.Fatal(v)
	}
	setMany(t, c, "after", 0, 100)
	if v := c.do("GET", "after:7"); v.Null {
		t.Fatal("a write after the failure is not there")
	}
	deadline = time.Now().Add(10 * time.Second)
	for info(c, "rdb_bgsave_in_progress") != "0" {
		if time.Now().After(deadline) {
			t.Fatal("rdb_bgsave_in_progress stays 1")
		}
		time.Sleep(10 * time.Millisecond)
	}
	if e, _ := strconv.Atoi(info(c, "snapshot_errors")); e == 0 || info(c, "rdb_last_bgsave_status") != "err" ||
		!strings.Contains(info(c, "snapshot_last_error"), "no space left on device") {
		t.Fatalf("INFO after the failure:\n%s", c.do("INFO", "persistence").Str)
	}
	if v := c.do("SAVE"); v.Type != '-' || !strings.Contains(v.String(), "no space left on device") {
		t.Fatalf("SAVE on a full disk: %s", v)
	}
	if v := c.do("SHUTDOWN"); v.Type != '-' {
		t.Fatalf("SHUTDOWN on a full disk: %s", v)
	}
	if v := c.do("PING"); v.String() != "+PONG" {
		t.Fatal("not serving after a refused SHUTDOWN:", v)
	}
	s.Cmd.Process.Signal(syscall.SIGTERM)
	code, took := waitExit(t, s, 15*time.Second)
	t.Logf("SIGTERM: exit code %d after %v", code, took)
	if code == 0 || took > 10*time.Second || !strings.Contains(s.Output(), "final snapshot failed") {
		t.Fatalf("SIGTERM on a full disk: exit code %d after %v:\n%s", code, took, s.Output())
	}
	if lines := strings.Count(s.Output(), "\n"); lines > 30 {
		t.Fatalf("%d log lines:\n%.3000s", lines, s.Output())
	}

	// Full to the last byte, the server still starts, with the data of
	// the last good snapshot.
	ballast := fillDisk(t, mnt)
	s = startLimitkvIn(t, dir, flags...)
	c = dialRaw(t, s.Addr)
	for k, v := range good {
		if got := c.do("GET", k); string(got.Str) != v {
			t.Fatalf("%s after a restart on the full disk: %.40s", k, got)
		}
	}
	if st := info(c, "rdb_last_bgsave_status"); st != "err" {
		t.Fatalf("INFO on a full disk at start-up: %s\n%s", st, s.Output())
	}
	if v := c.do("SHUTDOWN"); v.Type != '-' {
		t.Fatalf("SHUTDOWN on a full disk: %s", v)
	}
	c.send(resp.AppendCommand(nil, []byte("SHUTDOWN"), []byte("NOSAVE")))
	c.readAll()
	if code, took := waitExit(t, s, 10*time.Second); code != 0 {
		t.Fatalf("SHUTDOWN NOSAVE: exit code %d after %v:\n%s", code, took, s.Output())
	}
	if lines := strings.Count(s.Output(), "\n"); lines > 20 {
		t.Fatalf("%d log lines:\n%.3000s", lines, s.Output())
	}

	// Room again: snapshots succeed.
	os.Remove(ballast)
	s = startLimitkvIn(t, dir, flags...)
	c = dialRaw(t, s.Addr)
	if v := c.do("SAVE"); v.String() != "+OK" {
		t.Fatalf("SAVE once there is room: %s\n%s", v, s.Output())
	}
	c.do("SET", "marker", "v")
	c.send(resp.AppendCommand(nil, []byte("SHUTDOWN")))
	c.readAll()
	if code, _ := waitExit(t, s, 10*time.Second); code != 0 {
		t.Fatalf("SHUTDOWN once there is room: exit code %d:\n%s", code, s.Output())
	}
	s = startLimitkvIn(t, dir, flags...)
	c = dialRaw(t, s.Addr)
	if v := c.do("GET", "marker"); string(v.Str) != "v" {
		t.Fatalf("marker after a restart: %s", v)
	}
	if v := c.do("GET", "good:999"); string(v.Str) != good["good:999"] {
		t.Fatal("good:999 lost")
	}
}

// TestDamagedTableAtStartup: with one damaged table, start-up fails at
// once, non-zero, with one message naming the file and what to do.
func TestDamagedTableAtStartup(t *testing.T) {
	dir := t.TempDir()
	s := startLimitkvIn(t, dir, "--snapshot-interval", "0")
	c := dialRaw(t, s.Addr)
	setMany(t, c, "k", 0, 3000) // 3 MB: written as a table at once
	if v := c.do("SAVE"); v.String() != "+OK" {
		t.Fatal(v)
	}
	s.Stop()
	tables, _ := filepath.Glob(filepath.Join(dir, "*.sst"))
	if len(tables) == 0 {
		t.Fatal("no table file to damage")
	}
	sort.Slice(tables, func(i, j int) bool { return size(tables[i]) > size(tables[j]) })
	f, err := os.OpenFile(tables[0], os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	junk := make([]byte, 4096)
	for i := range junk {
		junk[i] = byte(rand.Uint32())
	}
	f.WriteAt(junk, size(tables[0])/2)
	f.Close()

	// runBinary fails the test if the server does not stop by itself.
	out, err := runBinary(t, "--port", strconv.Itoa(freePort(t)), "--dir", dir)
	name := filepath.Base(tables[0])
	if err == nil || !strings.Contains(out, name) || !strings.Contains(out, "move the directory aside") {
		t.Fatalf("start-up on a damaged %s: %v:\n%s", name, err, out)
	}
	if lines := strings.Count(strings.TrimSpace(out), "\n") + 1; lines != 1 {
		t.Errorf("%d lines, want one:\n%s", lines, out)
	}
}

func size(path string) int64 {
	fi, err := os.Stat(path)
	if err != nil {
		return 0
	}
	return fi.Size()
}

// TestWorkerDiesWithServer: the snapshot worker never outlives its
// server, however the server ends, and a server started at once on the
// same directory gets it.
func TestWorkerDiesWithServer(t *testing.T) {
	dir := t.TempDir()
	s := startLimitkvIn(t, dir)
	worker := snapshotWorker(t, s)
	c := dialRaw(t, s.Addr)
	c.do("SET", "k", "v")
	c.do("SAVE")
	s.Kill()
	// A worker that outlived its server would live on: the bound is only
	// there to end the test.
	deadline := time.Now().Add(15 * time.Second)
	for alive(worker) {
		if time.Now().After(deadline) {
			t.Fatalf("the worker %d outlived its server", worker)
		}
		time.Sleep(10 * time.Millisecond)
	}
	s = startLimitkvIn(t, dir)
	if v := dialRaw(t, s.Addr).do("GET", "k"); string(v.Str) != "v" {
		t.Fatalf("GET k after a restart: %s", v)
	}
}

// alive reports whether a process runs (a zombie does not).
func alive(pid int) bool {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return false
	}
	// The state follows the command name in parentheses.
	i := strings.LastIndexByte(string(b), ')')
	return i < 0 || i+2 >= len(b) || b[i+2] != 'Z'
}

// snapshotWorker returns the pid of the server's snapshot worker. The
// worker is started from a thread of its own (so that its parent-death
// signal is tied to a thread that never ends): it lists the children of
// every thread, not only the main one's.
func snapshotWorker(t *testing.T, s *server) int {
	t.Helper()
	var workers []int
	for deadline := time.Now().Add(15 * time.Second); len(workers) == 0 && time.Now().Before(deadline); {
		tasks, err := filepath.Glob(fmt.Sprintf("/proc/%d/task/*/children", s.Cmd.Process.Pid))
		if err != nil || len(tasks) == 0 {
			t.Skipf("cannot list the server's children: %v", err)
		}
		for _, task := range tasks {
			b, _ := os.ReadFile(task)
			for _, f := range strings.Fields(string(b)) {
				n, _ := strconv.Atoi(f)
				workers = append(workers, n)
			}
		}
		if len(workers) == 0 {
			time.Sleep(20 * time.Millisecond)
		}
	}
	if len(workers) != 1 {
		t.Fatalf("the server has %d child processes, want one worker", len(workers))
	}
	return workers[0]
}

// secondServerRefused starts a second server on dir, and fails the test
// unless it exits with status 1, saying that the directory is in use and
// by which process. "At once" is what the exit proves: the holder keeps
// the lock for the whole test, so a server that waited for it, or served
// anyway, would not exit; the bound on that is a generous one, not a
// measure of how fast the machine starts a process.
func secondServerRefused(t *testing.T, dir string, holder *server) {
	t.Helper()
	cmd := exec.Command(limitkvBin, "--port", strconv.Itoa(freePort(t)), "--dir", dir)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	start := time.Now()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case err := <-done:
		took := time.Since(start)
		pid := "pid " + strconv.Itoa(holder.Cmd.Process.Pid)
		t.Logf("second server: %v after %v: %s", err, took.Round(time.Millisecond), strings.TrimSpace(out.String()))
		if cmd.ProcessState.ExitCode() != 1 ||
			!strings.Contains(out.String(), "in use by another process") || !strings.Contains(out.String(), pid) {
			t.Fatalf("second server on a held directory: %v after %v:\n%s", err, took, out.String())
		}
	case <-time.After(20 * time.Second):
		cmd.Process.Kill()
		<-done
		t.Fatalf("a second server started on a directory in use:\n%s", out.String())
	}
}

// TestSecondServerRefused: the server holds its data directory for its
// whole life, not only through its snapshot worker, which may be down (on
// a full disk it stops, and a new one starts only at a later snapshot). A
// second server on the same directory is refused at once, naming the
// first; the first goes on saving.
func TestSecondServerRefused(t *testing.T) {
	dir := t.TempDir()
	a := startLimitkvIn(t, dir)
	c := dialRaw(t, a.Addr)
	c.do("SET", "k", "v")
	if v := c.do("SAVE"); v.String() != "+OK" {
		t.Fatal(v)
	}
	secondServerRefused(t, dir, a)

	worker := snapshotWorker(t, a)
	syscall.Kill(worker, syscall.SIGKILL)
	for deadline := time.Now().Add(15 * time.Second); alive(worker); time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("the worker %d survived SIGKILL", worker)
		}
	}
	secondServerRefused(t, dir, a)

	c.do("SET", "k2", "v2")
	if v := c.do("SAVE"); v.Type == '-' {
		// The snapshot that finds its worker dead fails; the next starts
		// a new one.
		if v = c.do("SAVE"); v.String() != "+OK" {
			t.Fatalf("SAVE after the worker died: %s\n%s", v, a.Output())
		}
	}
	a.Stop()
	b := startLimitkvIn(t, dir)
	cb := dialRaw(t, b.Addr)
	if v := cb.do("MGET", "k", "k2"); v.String() != `["v", "v2"]` {
		t.Fatalf("after a restart: %s", v)
	}
}
