package persist

import (
	"os"
	"strconv"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/limitkv/limitkv/engine"
)

// The snapshot figures: a full snapshot of 1M small keys, the restore of
// the same, and an incremental snapshot of 1k changed keys out of 1M. They
// run on the real filesystem (a temporary directory), because the disk's
// sync is part of the cost; with Pebble in a worker process (as the
// server runs it) and in this process (to see what the worker costs).

const benchKeys = 1_000_000

func loadKeys(eng *engine.Engine, n int, ttl int64) {
	key := make([]byte, 0, 32)
	for i := 0; i < n; i++ {
		key = strconv.AppendInt(append(key[:0], "user:"...), int64(i), 10)
		s := eng.ShardFor(key)
		s.Lock()
		s.SetInt(0, key, int64(i), ttl)
		s.Unlock()
	}
}

func benchStore(b *testing.B, dir string, eng *engine.Engine, worker bool) *Store {
	o := Options{Dir: dir, FS: vfs.Default, Log: quiet}
	if worker {
		o = workerOptions(dir, "", quiet)
	}
	st, err := Open(eng, o)
	if err != nil {
		b.Fatal(err)
	}
	return st
}

func BenchmarkSnapshot1M(b *testing.B) {
	b.Run("worker", func(b *testing.B) { benchSnapshot1M(b, true) })
	b.Run("in-process", func(b *testing.B) { benchSnapshot1M(b, false) })
}

func benchSnapshot1M(b *testing.B, worker bool) {
	for i := 0; i < b.N; i++ {
		dir := b.TempDir()
		clock := engine.NewManualClock(t0)
		eng := newEngine(clock)
		st := benchStore(b, dir, eng, worker)
		st.Load(t0)
		loadKeys(eng, benchKeys, t0+3_600_000)
		start := time.Now()
		if err := st.Snapshot(); err != nil {
			b.Fatal(err)
		}
		full := time.Since(start)
		b.ReportMetric(full.Seconds(), "full-s")

		// 1k changed keys out of 1M.
		for j := 0; j < 1000; j++ {
			with(eng, "user:"+strconv.Itoa(j*997), func(s *engine.Shard, k []byte) { s.SetInt(0, k, -1, 0) })
		}
		start = time.Now()
		if err := st.Snapshot(); err != nil {
			b.Fatal(err)
		}
		inc := time.Since(start)
		b.ReportMetric(inc.Seconds()*1000, "incr1k-ms")
		b.ReportMetric(100*inc.Seconds()/full.Seconds(), "incr-%-of-full")
		st.Close()

		eng2 := newEngine(clock)
		st2 := benchStore(b, dir, eng2, worker)
		start = time.Now()
		n, err := st2.Load(t0)
		if err != nil || n != benchKeys {
			b.Fatalf("loaded %d keys: %v", n, err)
		}
		b.ReportMetric(time.Since(start).Seconds(), "restore-s")
		st2.Close()
		os.RemoveAll(dir)
	}
}
