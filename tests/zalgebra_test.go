package tests

import (
	"strings"
	"testing"
)

// zalgWrites are the sorted-set algebra and geo writes, over both
// encodings and with destinations that exist, hold another type or are
// left empty.
var zalgWrites = [][]string{
	{"ZADD", "a", "1", "x", "2", "y", "3", "z"},
	{"ZADD", "b", "10", "y", "20", "z", "30", "w"},
	{"ZUNIONSTORE", "u", "2", "a", "b", "WEIGHTS", "2", "0.5", "AGGREGATE", "MAX"},
	{"ZINTERSTORE", "i", "2", "a", "b"},
	{"ZDIFFSTORE", "d", "2", "a", "b"},
	{"SET", "str", "v"},
	{"ZUNIONSTORE", "str", "1", "a"},
	{"ZINTERSTORE", "u", "2", "a", "nosuch"},
	{"ZRANGESTORE", "r", "b", "(10", "+inf", "BYSCORE"},
	{"GEOADD", "g", "13.361389", "38.115556", "Palermo", "15.087269", "37.502669", "Catania"},
	{"GEOADD", "g", "CH", "XX", "13.4", "38.1", "Palermo", "1", "1", "NoSuch"},
	{"GEOSEARCHSTORE", "gs", "g", "FROMLONLAT", "15", "37", "BYRADIUS", "200", "km", "STOREDIST"},
	{"GEORADIUS", "g", "15", "37", "200", "km", "STORE", "gr"},
	{"GEORADIUSBYMEMBER", "g", "Palermo", "300", "km", "STOREDIST", "gd"},
}

var zalgProbes = [][]string{
	{"ZRANGE", "u", "0", "-1", "WITHSCORES"}, {"ZRANGE", "i", "0", "-1", "WITHSCORES"},
	{"ZRANGE", "d", "0", "-1", "WITHSCORES"}, {"ZRANGE", "str", "0", "-1", "WITHSCORES"},
	{"ZRANGE", "r", "0", "-1", "WITHSCORES"}, {"ZRANGE", "g", "0", "-1", "WITHSCORES"},
	{"ZRANGE", "gs", "0", "-1", "WITHSCORES"}, {"ZRANGE", "gr", "0", "-1", "WITHSCORES"},
	{"ZRANGE", "gd", "0", "-1", "WITHSCORES"}, {"EXISTS", "u"}, {"DBSIZE"},
}

// TestZAlgebraReplicatesAndPersists: the writes reach a replica (as the
// commands themselves, GEOADD as the ZADD it ran) and survive a restart.
func TestZAlgebraReplicatesAndPersists(t *testing.T) {
	dir := t.TempDir()
	m := startLimitkvIn(t, dir, "--enable-debug-command", "yes", "--snapshot-interval", "1h")
	mc := goRedis(t, m.Addr, 2)
	r := startReplicaOf(t, m, "", "--persistence", "no")
	rc := goRedis(t, r.Addr, 2)
	waitInSync(t, mc, rc)
	c := dialRaw(t, m.Addr)
	for _, cmd := range zalgWrites {
		if v := c.do(cmd...); v.Type == '-' {
			t.Fatalf("%v: %s", cmd, v)
		}
	}
	var before []string
	for _, p := range zalgProbes {
		before = append(before, c.do(p...).String())
	}
	if !strings.Contains(before[len(before)-2], "0") {
		t.Fatalf("ZINTERSTORE of an empty intersection kept its destination: %s", before[len(before)-2])
	}
	waitInSync(t, mc, rc)
	sameKeyspace(t, mc, rc)
	rr := dialRaw(t, r.Addr)
	for i, p := range zalgProbes {
		if got := rr.do(p...).String(); got != before[i] {
			t.Errorf("%v on the replica: %s, master: %s", p, got, before[i])
		}
	}
	m.Stop()
	m2 := startLimitkvIn(t, dir)
	c2 := dialRaw(t, m2.Addr)
	for i, p := range zalgProbes {
		if got := c2.do(p...).String(); got != before[i] {
			t.Errorf("%v after restart: %s, before: %s", p, got, before[i])
		}
	}
}
