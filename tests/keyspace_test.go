package tests

import (
	"path/filepath"
	"strings"
	"testing"
)

// Keyspace notifications against redis-server: each file of
// testdata/keyspace runs as a differential file (see diff_test.go) on
// servers with DEBUG enabled, which the files use to stop active expiry
// (DEBUG SET-ACTIVE-EXPIRE 0) and to let keys expire (DEBUG SLEEP); a
// subscriber's "<<" compares every event both servers published.
func TestKeyspaceEventsDifferential(t *testing.T) {
	redisSrv := startRedis(t, "--enable-debug-command", "yes")
	kv := startLimitkv(t, "--enable-debug-command", "yes")
	files, _ := filepath.Glob("testdata/keyspace/*.txt")
	if len(files) == 0 {
		t.Fatal("no keyspace event files")
	}
	for _, f := range files {
		t.Run(strings.TrimSuffix(filepath.Base(f), ".txt"), func(t *testing.T) {
			for _, addr := range []string{redisSrv.Addr, kv.Addr} {
				c := dialRaw(t, addr)
				for _, cmd := range [][]string{{"CONFIG", "SET", "notify-keyspace-events", ""}, {"DEBUG", "SET-ACTIVE-EXPIRE", "1"}} {
					if v := c.do(cmd...); v.String() != "+OK" {
						t.Fatalf("%s: %v", cmd, v)
					}
				}
			}
			runDiffFile(t, f, redisSrv.Addr, kv.Addr)
		})
	}
}
