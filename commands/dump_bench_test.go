package commands

import (
	"fmt"
	"testing"

	"github.com/limitkv/limitkv/engine"
	"github.com/limitkv/limitkv/rdb"
)

// BenchmarkDumpList is DUMP's work on a list of 100 000 elements, under
// the shard's lock.
func BenchmarkDumpList(b *testing.B) {
	eng := engine.New(engine.Config{})
	key := []byte("l")
	sh := eng.ShardFor(key)
	l := engine.NewList()
	for i := 0; i < 100000; i++ {
		l.PushTail([]byte(fmt.Sprintf("element-number-%d", i)))
	}
	sh.Lock()
	defer sh.Unlock()
	sh.SetObject(0, key, engine.KindList, l, 0)
	e, _ := sh.Find(0, key, 1)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		p, _ := dumpValue(nil, sh, e)
		rdb.Seal(p)
	}
}
