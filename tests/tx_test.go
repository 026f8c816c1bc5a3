package tests

import (
	"context"
	"errors"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/redis/go-redis/v9"
)

// TestExecIsAtomic: writers move value between two keys inside MULTI/EXEC
// from many connections while readers check, also inside MULTI/EXEC, that
// the sum never changes: no connection ever sees half a transaction.
func TestExecIsAtomic(t *testing.T) {
	s := startLimitkv(t)
	ctx := context.Background()
	c := goRedis(t, s.addr, 2, func(o *redis.Options) { o.PoolSize = 64 })
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
	c := goRedis(t, s.addr, 2, func(o *redis.Options) { o.PoolSize = 64 })
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
