package tests

import (
	"context"
	"strconv"
	"strings"
	"testing"

	"github.com/limitkv/limitkv/resp"
)

// TestSPopReplicatesItsEffect: a replica is sent what SPOP removed (SREM,
// or DEL for the whole set), never SPOP, which would choose again.
func TestSPopReplicatesItsEffect(t *testing.T) {
	kv := startLimitkv(t, "--persistence", "no")
	c := dialRaw(t, kv.Addr)
	args := []string{"SADD", "s"}
	for i := 0; i < 50; i++ {
		args = append(args, "m"+strconv.Itoa(i))
	}
	c.do(args...)

	// A replica's end of the link, read raw.
	link := openReplicaLink(t, kv.Addr)
	readUntil, stream := link.readUntil, &link.stream
	c.do("SET", "marker-1", "x")
	readUntil("marker-1")
	from := stream.Len()

	one := string(c.do("SPOP", "s").Str)
	two := c.do("SPOP", "s", "2")
	rest := c.do("SPOP", "s", "100")
	if len(two.Elems) != 2 || len(rest.Elems) != 47 {
		t.Fatalf("SPOP s 2: %s; SPOP s 100: %d members", two, len(rest.Elems))
	}
	c.do("SET", "marker-2", "x")
	readUntil("marker-2")
	got := stream.String()[from:]
	if strings.Contains(strings.ToUpper(got), "SPOP") {
		t.Fatalf("SPOP itself reached the replica: %q", got)
	}
	want := []string{
		string(resp.AppendCommand(nil, []byte("SREM"), []byte("s"), []byte(one))),
		string(resp.AppendCommand(nil, []byte("SREM"), []byte("s"), two.Elems[0].Str, two.Elems[1].Str)),
		string(resp.AppendCommand(nil, []byte("DEL"), []byte("s"))),
	}
	at := 0
	for _, w := range want {
		i := strings.Index(got[at:], w)
		if i < 0 {
			t.Fatalf("%q not in the stream (in order) after the first %d bytes: %q", w, at, got)
		}
		at += i + len(w)
	}
}

// TestSetRandomCommands checks SRANDMEMBER and SPOP by their properties
// through the server: counts, distinct members or repeats as asked, every
// member reached, and what SPOP takes gone from the set.
func TestSetRandomCommands(t *testing.T) {
	kv := startLimitkv(t, "--persistence", "no")
	c := goRedis(t, kv.Addr, 3)
	ctx := context.Background()
	shapes := map[string]func(i int) string{
		"ints":    strconv.Itoa,
		"strings": func(i int) string { return "member:" + strconv.Itoa(i) },
	}
	for _, size := range []int{1, 5, 100, 1000} {
		for name, f := range shapes {
			key := name + ":" + strconv.Itoa(size)
			members := map[string]bool{}
			var all []any
			for i := 0; i < size; i++ {
				members[f(i)] = true
				all = append(all, f(i))
			}
			if err := c.SAdd(ctx, key, all...).Err(); err != nil {
				t.Fatal(err)
			}
			for _, count := range []int64{1, 2, 3, int64(size / 3), int64(size/3 + 1), int64(size - 1), int64(size), int64(size + 5)} {
				if count <= 0 {
					continue
				}
				got, err := c.SRandMemberN(ctx, key, count).Result()
				if err != nil {
					t.Fatal(err)
				}
				if want := min(int(count), size); len(got) != want {
					t.Fatalf("%s: SRANDMEMBER %d gave %d members, want %d", key, count, len(got), want)
				}
				seen := map[string]bool{}
				for _, m := range got {
					if !members[m] || seen[m] {
						t.Fatalf("%s: SRANDMEMBER %d gave %q (a member: %v, again: %v)", key, count, m, members[m], seen[m])
					}
					seen[m] = true
				}
				// Negative: exactly |count| draws, repeats allowed.
				got, err = c.SRandMemberN(ctx, key, -count).Result()
				if err != nil || len(got) != int(count) {
					t.Fatalf("%s: SRANDMEMBER -%d: %d members, %v", key, count, len(got), err)
				}
				for _, m := range got {
					if !members[m] {
						t.Fatalf("%s: SRANDMEMBER -%d gave %q", key, count, m)
					}
				}
			}
			// Every member is drawn in time.
			drawn := map[string]bool{}
			for i := 0; i < 200 && len(drawn) < size; i++ {
				got, _ := c.SRandMemberN(ctx, key, -int64(size)).Result()
				for _, m := range got {
					drawn[m] = true
				}
			}
			if len(drawn) != size {
				t.Errorf("%s: SRANDMEMBER reached %d of %d members", key, len(drawn), size)
			}
			// SPOP empties the set in pieces, never giving a member twice.
			popped := map[string]bool{}
			for n := int64(1); c.Exists(ctx, key).Val() == 1; n *= 2 {
				got, err := c.SPopN(ctx, key, n).Result()
				if err != nil {
					t.Fatal(err)
				}
				for _, m := range got {
					if !members[m] || popped[m] {
						t.Fatalf("%s: SPOP %d gave %q (a member: %v, popped before: %v)", key, n, m, members[m], popped[m])
					}
					popped[m] = true
					if c.SIsMember(ctx, key, m).Val() {
						t.Fatalf("%s: %q popped and still there", key, m)
					}
				}
				if card := c.SCard(ctx, key).Val(); int(card) != size-len(popped) {
					t.Fatalf("%s: SCARD %d after %d popped of %d", key, card, len(popped), size)
				}
			}
			if len(popped) != size {
				t.Fatalf("%s: popped %d of %d", key, len(popped), size)
			}
		}
	}
}

// TestSetsEvicted: sets count in used_memory as they grow, and maxmemory
// evicts them like any key.
func TestSetsEvicted(t *testing.T) {
	kv := startLimitkv(t, "--persistence", "no", "--maxmemory", "4mb", "--maxmemory-policy", "allkeys-lru")
	c := dialRaw(t, kv.Addr)
	for k := 0; k < 5000; k++ {
		args := [][]byte{[]byte("SADD"), []byte("set:" + strconv.Itoa(k))}
		for j := 0; j < 100; j++ {
			args = append(args, []byte("member:"+strconv.Itoa(j)))
		}
		c.send(resp.AppendCommand(nil, args...))
		if v := c.read(); v.Int != 100 {
			t.Fatalf("SADD %d: %s", k, v)
		}
	}
	used := infoField(t, c, "memory", "used_memory")
	evicted := infoField(t, c, "stats", "evicted_keys")
	keys := c.do("DBSIZE").Int
	t.Logf("5,000 sets of 100 strings into 4 MB: used_memory %d, %d evicted, %d kept", used, evicted, keys)
	if evicted == 0 || keys+evicted != 5000 || used > 4<<20+4<<20/10 {
		t.Fatalf("used_memory %d, %d evicted, %d kept", used, evicted, keys)
	}
}
