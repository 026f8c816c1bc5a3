package commands

import (
	"bufio"
	"bytes"
	"fmt"
	"strings"
	"sync"
	"testing"

	"github.com/limitkv/limitkv/resp"
)

// TestFunctionStateRebuilt: a function that breaks its Lua state (a value
// stack overflow) gets its error, and the libraries are loaded again into
// a new state, so that every function still runs.
func TestFunctionStateRebuilt(t *testing.T) {
	s := newScriptServer(t)
	lib := "#!lua name=deep\n" +
		"local function f(...) local x = f(1, ...) return x end\n" +
		"redis.register_function('overflow', function() return f() end)\n" +
		"redis.register_function('count', function(keys) return redis.call('INCR', keys[1]) end)"
	if got := s.do("FUNCTION", "LOAD", lib); got != `"deep"` {
		t.Fatalf("FUNCTION LOAD: %s", got)
	}
	if got := s.do("FCALL", "count", "1", "n"); got != ":1" {
		t.Fatalf("FCALL count: %s", got)
	}
	state := s.srv.scripts.Functions.State()
	if got := s.do("FCALL", "overflow", "0"); !strings.HasPrefix(got, "-ERR user_function:2: stack overflow") {
		t.Fatalf("overflowing the value stack: %s", got)
	}
	if s.srv.scripts.Functions.State() == state {
		t.Fatal("the state whose value stack grew is kept")
	}
	if got := s.do("FCALL", "count", "1", "n"); got != ":2" {
		t.Fatalf("FCALL count after the overflow: %s", got)
	}
	if got := s.do("FUNCTION", "STATS"); got != `["running_script", nil, "engines", ["LUA", ["libraries_count", :1, "functions_count", :2]]]` {
		t.Fatalf("FUNCTION STATS after the overflow: %s", got)
	}
	// EVAL's state is another: a script cannot see the libraries.
	if got := s.do("EVAL", "return type(redis.register_function)", "0"); got != `"nil"` {
		t.Fatalf("redis.register_function from EVAL: %s", got)
	}
}

// TestFunctionsConcurrent: FCALL from many clients, with EVAL and with
// libraries loaded and deleted meanwhile, loses no update and runs no
// function of a deleted library (run with -race).
func TestFunctionsConcurrent(t *testing.T) {
	base := newScriptServer(t)
	const lib = "#!lua name=counter\nredis.register_function('incr2', function(keys) redis.call('INCR', keys[1]) return redis.call('INCR', keys[1]) end)"
	if got := base.do("FUNCTION", "LOAD", lib); got != `"counter"` {
		t.Fatalf("FUNCTION LOAD: %s", got)
	}
	const clients, each = 6, 200
	var wg sync.WaitGroup
	fail := make(chan string, clients+1)
	for i := range clients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			s := &scriptServer{t: t, srv: base.srv, w: resp.NewWriter(2), client: newTestClient(base.srv)}
			for range each {
				args := [][]byte{[]byte("FCALL"), []byte("incr2"), []byte("1"), []byte("n")}
				if i%2 == 1 {
					args = [][]byte{[]byte("EVAL"), []byte("redis.call('INCR', KEYS[1]) return redis.call('INCR', KEYS[1])"), []byte("1"), []byte("n")}
				}
				s.w.Reset()
				s.run(args...)
				v, err := resp.ReadValue(bufio.NewReader(bytes.NewReader(s.w.Bytes())))
				if err != nil || v.Type != ':' || v.Int%2 != 0 {
					fail <- fmt.Sprintf("client %d: reply %q", i, s.w.Bytes())
					return
				}
			}
		}()
	}
	wg.Add(1)
	go func() {
		defer wg.Done()
		s := &scriptServer{t: t, srv: base.srv, w: resp.NewWriter(2), client: newTestClient(base.srv)}
		for j := range 50 {
			name := fmt.Sprintf("churn%d", j)
			code := "#!lua name=" + name + "\nredis.register_function('" + name + "', function() return 1 end)"
			if got := s.do("FUNCTION", "LOAD", code); got != `"`+name+`"` {
				fail <- "FUNCTION LOAD: " + got
				return
			}
			if got := s.do("FCALL", name, "0"); got != ":1" {
				fail <- "FCALL: " + got
				return
			}
			if got := s.do("FUNCTION", "DELETE", name); got != "+OK" {
				fail <- "FUNCTION DELETE: " + got
				return
			}
			s.do("FUNCTION", "LIST")
		}
	}()
	wg.Wait()
	close(fail)
	for msg := range fail {
		t.Fatal(msg)
	}
	if got := base.do("GET", "n"); got != fmt.Sprintf(`"%d"`, 2*clients*each) {
		t.Fatalf("n = %s after %d runs of two INCRs", got, clients*each)
	}
}

// BenchmarkFCall runs FCALL in-process, as dispatch does, locks included,
// beside BenchmarkEvalSha's scripts.
func BenchmarkFCall(b *testing.B) {
	funcs := []struct {
		name, body string
		args       []string
	}{
		{"return-key", "return keys[1]", []string{"1", "key"}},
		{"incr", "return redis.call('INCR', keys[1])", []string{"1", "counter"}},
	}
	for _, f := range funcs {
		b.Run(f.name, func(b *testing.B) {
			s := newScriptServer(b)
			lib := "#!lua name=bench\nredis.register_function('f', function(keys, args) " + f.body + " end)"
			if got := s.do("FUNCTION", "LOAD", lib); got != `"bench"` {
				b.Fatal(got)
			}
			args := [][]byte{[]byte("FCALL"), []byte("f")}
			for _, a := range f.args {
				args = append(args, []byte(a))
			}
			s.w.Reset()
			s.run(args...)
			if bytes.HasPrefix(s.w.Bytes(), []byte("-")) {
				b.Fatalf("%s", s.w.Bytes())
			}
			b.ReportAllocs()
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				s.w.Reset()
				s.run(args...)
			}
		})
	}
}

// TestFunctionLoadBreaksState: a library whose code overflows the value
// stack while it loads with no time limit (a master's) is refused, and
// the state it broke is replaced, the other libraries loaded again.
func TestFunctionLoadBreaksState(t *testing.T) {
	s := newScriptServer(t)
	if got := s.do("FUNCTION", "LOAD", "#!lua name=ok\nredis.register_function('ok', function() return 'ok' end)"); got != `"ok"` {
		t.Fatalf("FUNCTION LOAD: %s", got)
	}
	s.client.master = true
	state := s.srv.scripts.Functions.State()
	got := s.do("FUNCTION", "LOAD", "#!lua name=deep\nlocal function f(...) local x = f(1, ...) return x end\nf()")
	if !strings.HasPrefix(got, "-ERR Error registering functions: ERR user_function") || !strings.Contains(got, "stack overflow") {
		t.Fatalf("a library overflowing the stack: %s", got)
	}
	s.client.master = false
	if s.srv.scripts.Functions.State() == state {
		t.Fatal("the state whose value stack grew is kept")
	}
	if got := s.do("FCALL", "ok", "0"); got != `"ok"` {
		t.Fatalf("FCALL ok after the overflow: %s", got)
	}
	if got := s.do("FUNCTION", "LIST", "LIBRARYNAME", "deep"); got != "[]" {
		t.Fatalf("the library that failed is listed: %s", got)
	}
}
