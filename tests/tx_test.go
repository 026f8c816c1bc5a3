package tests

import (
	"context"
	"errors"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/limitkv/limitkv/resp"
	"github.com/redis/go-redis/v9"
)

// TestExecIsAtomic: writers move value between two keys inside MULTI/EXEC
// from many connections while readers check, also inside MULTI/EXEC, that
// the sum never changes: no connection ever sees half a transaction.
func TestExecIsAtomic(t *testing.T) {
	s := startLimitkv(t)
	ctx := context.Background()
	c := goRedis(t, s.Addr, 2, func(o *redis.Options) { o.PoolSize = 64 })
	// Keys chosen to land in different shards, so the transaction spans locks.
	c.MSet(ctx, "acct:a", 1000, "acct:b", 1000)
	var wg sync.WaitGroup
	var bad atomic.Int64
	stop := make(chan struct{})
	for i := 0; i < 32; i++ {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			from, to := "acct:a", "acct:b"
			if i%2 == 1 {
				from, to = to, from
			}
			for j := 0; j < 300; j++ {
				c.TxPipelined(ctx, func(p redis.Pipeliner) error {
					p.DecrBy(ctx, from, 7)
					p.IncrBy(ctx, to, 7)
					return nil
				})
			}
		}(i)
	}
	var readers sync.WaitGroup
	for i := 0; i < 16; i++ {
		readers.Add(1)
		go func() {
			defer readers.Done()
			for {
				select {
				case <-stop:
					return
				default:
				}
				cmds, err := c.TxPipelined(ctx, func(p redis.Pipeliner) error {
					p.Get(ctx, "acct:a")
					p.Get(ctx, "acct:b")
					return nil
				})
				if err != nil {
					continue
				}
				a, _ := cmds[0].(*redis.StringCmd).Int()
				b, _ := cmds[1].(*redis.StringCmd).Int()
				if a+b != 2000 {
					bad.Add(1)
				}
			}
		}()
	}
	wg.Wait()
	close(stop)
	readers.Wait()
	if bad.Load() > 0 {
		t.Fatalf("%d reads saw half a transaction", bad.Load())
	}
	a, _ := c.Get(ctx, "acct:a").Int()
	b, _ := c.Get(ctx, "acct:b").Int()
	if a+b != 2000 {
		t.Fatalf("sum %d after the transfers", a+b)
	}
}

// TestWatchOptimisticIncrement: 50 connections increment one counter with
// the WATCH / GET / MULTI / SET / EXEC recipe, retrying when EXEC aborts.
// No increment may be lost, which holds only if WATCH aborts every EXEC
// whose key another connection changed in between.
func TestWatchOptimisticIncrement(t *testing.T) {
	s := startLimitkv(t)
	ctx := context.Background()
	c := goRedis(t, s.Addr, 2, func(o *redis.Options) { o.PoolSize = 64 })
	const conns, each = 50, 40
	var wg sync.WaitGroup
	var aborted atomic.Int64
	for i := 0; i < conns; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for j := 0; j < each; j++ {
				for {
					err := c.Watch(ctx, func(tx *redis.Tx) error {
						n, err := tx.Get(ctx, "ctr").Int()
						if err != nil && err != redis.Nil {
							return err
						}
						_, err = tx.TxPipelined(ctx, func(p redis.Pipeliner) error {
							p.Set(ctx, "ctr", strconv.Itoa(n+1), 0)
							return nil
						})
						return err
					}, "ctr")
					if errors.Is(err, redis.TxFailedErr) {
						aborted.Add(1)
						continue
					}
					if err != nil {
						t.Error(err)
						return
					}
					break
				}
			}
		}()
	}
	wg.Wait()
	if n, _ := c.Get(ctx, "ctr").Int(); n != conns*each {
		t.Fatalf("counter %d, want %d", n, conns*each)
	}
	if aborted.Load() == 0 {
		t.Log("no EXEC was aborted: the connections never raced")
	}
	t.Logf("%d EXECs aborted by WATCH and retried", aborted.Load())
}

// TestNoCommandHangsInsideExecOrScripts runs every command a transaction
// or a script may run, inside MULTI/EXEC and from EVAL, each with a
// handful of arguments: EXEC and scripts hold every shard lock, and a
// command that takes one again (INFO's counters, MEMORY STATS, UNWATCH did)
// never answers and leaves the server stuck for everyone. A command that
// does not answer in time fails the test, naming it.
func TestNoCommandHangsInsideExecOrScripts(t *testing.T) {
	s := startLimitkv(t, "--persistence", "no")
	c := dialRaw(t, s.Addr)
	// What would stop the server, block or move it, or cut the connection.
	skip := map[string]bool{
		"shutdown": true, "debug": true, "monitor": true, "replicaof": true, "slaveof": true,
		"failover": true, "sync": true, "psync": true, "config|set": true, "client|pause": true,
		"client|kill": true, "client|reply": true, "quit": true, "reset": true, "hello": true,
		"auth": true, "acl|load": true, "acl|save": true, "config|rewrite": true, "save": true,
	}
	type cmd struct {
		args              []string
		noMulti, noScript bool
		fullName          string
	}
	var cmds []cmd
	var add func(v resp.Value, parent string)
	add = func(v resp.Value, parent string) {
		name := string(v.Elems[0].Str)
		arity := int(v.Elems[1].Int)
		flags := map[string]bool{}
		for _, f := range v.Elems[2].Elems {
			flags[string(f.Str)] = true
		}
		var words []string
		if parent != "" {
			words = []string{parent, strings.TrimPrefix(name, parent+"|")}
		} else {
			words = []string{name}
		}
		if len(v.Elems) > 9 && len(v.Elems[9].Elems) > 0 {
			for _, sub := range v.Elems[9].Elems {
				add(sub, name)
			}
			return
		}
		n := arity
		if n < 0 {
			n = -n
		}
		args := append([]string(nil), words...)
		for len(args) < n {
			args = append(args, "k")
		}
		cmds = append(cmds, cmd{args: args, noMulti: flags["no_multi"], noScript: flags["noscript"], fullName: name})
	}
	for _, v := range c.do("COMMAND").Elems {
		add(v, "")
	}
	if len(cmds) < 200 {
		t.Fatalf("COMMAND listed %d commands", len(cmds))
	}
	try := func(how string, req []byte, replies int, name string) {
		t.Helper()
		conn := dialRaw(t, s.Addr)
		conn.c.SetDeadline(time.Now().Add(10 * time.Second))
		conn.send(req)
		for i := 0; i < replies; i++ {
			if _, err := resp.ReadValue(conn.r); err != nil {
				t.Fatalf("%s inside %s: no answer (%v): the server is stuck", name, how, err)
			}
		}
		conn.c.Close()
	}
	for _, cm := range cmds {
		if skip[cm.fullName] {
			continue
		}
		if !cm.noMulti {
			var req []byte
			req = appendCmd(req, "MULTI")
			req = appendCmd(req, cm.args...)
			req = appendCmd(req, "EXEC")
			try("MULTI/EXEC", req, 3, cm.fullName)
		}
		if !cm.noScript {
			quoted := make([]string, len(cm.args))
			for i, a := range cm.args {
				quoted[i] = "'" + a + "'"
			}
			script := "return redis.pcall(" + strings.Join(quoted, ",") + ")"
			try("EVAL", appendCmd(nil, "EVAL", script, "0"), 1, cm.fullName)
		}
	}
}
