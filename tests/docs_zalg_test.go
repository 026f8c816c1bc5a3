package tests

import "testing"

// TestCommandDocsZAlgebraGeo compares the COMMAND DOCS of the sorted-set
// algebra and geo commands with redis-server's, argument trees included:
// redis-cli's hints and client generators read them.
func TestCommandDocsZAlgebraGeo(t *testing.T) {
	redisSrv := startRedis(t)
	kv := startLimitkv(t)
	r, k := dialRaw(t, redisSrv.Addr), dialRaw(t, kv.Addr)
	for _, n := range []string{"zunion", "zinter", "zdiff", "zunionstore", "zinterstore", "zdiffstore", "zintercard", "zrangestore", "zrandmember", "hrandfield", "geoadd", "geopos", "geodist", "geohash", "geosearch", "geosearchstore", "georadius", "georadius_ro", "georadiusbymember", "georadiusbymember_ro"} {
		w := r.do("COMMAND", "DOCS", n).String()
		g := k.do("COMMAND", "DOCS", n).String()
		if w != g {
			t.Errorf("%s\n got: %s\nwant: %s", n, g, w)
		}
	}
}
