package tests

import "testing"

// TestCommandInfoMatchesRedis asks limitkv and a real redis-server for the
// COMMAND INFO of every command and subcommand limitkv has, and compares
// what Redis also knows: name, arity, flags, the legacy key range and
// movablekeys (which limitkv derives from its key specs), ACL categories
// (derived from the stated ones and the flags), tips and key specs. A
// container's list of subcommands is left out, since limitkv has fewer;
// each subcommand is compared on its own.
func TestCommandInfoMatchesRedis(t *testing.T) {
	redisSrv := startRedis(t)
	kv := startLimitkv(t)
	r, k := dialRaw(t, redisSrv.Addr), dialRaw(t, kv.Addr)
	r.do("HELLO", "3")
	k.do("HELLO", "3")
	names := k.do("COMMAND", "LIST")
	compared := 0
	for _, n := range names.Elems {
		name := string(n.Str)
		want := r.do("COMMAND", "INFO", name).Elems[0]
		got := k.do("COMMAND", "INFO", name).Elems[0]
		if want.Null {
			continue // limitkv's own, or newer than Redis 7.0 (CLIENT SETINFO)
		}
		compared++
		if len(got.Elems) != 10 || len(want.Elems) != 10 {
			t.Fatalf("%s: COMMAND INFO has %d elements, Redis %d", name, len(got.Elems), len(want.Elems))
		}
		for i, field := range []string{"name", "arity", "flags", "first key", "last key", "step",
			"ACL categories", "tips", "key specs"} {
			if g, w := got.Elems[i].String(), want.Elems[i].String(); g != w {
				t.Errorf("%s: %s\n got: %s\nwant: %s", name, field, g, w)
			}
		}
	}
	if compared < 150 {
		t.Errorf("only %d commands compared", compared)
	}
	t.Logf("%d of %d commands compared with redis-server", compared, len(names.Elems))
}
