package client

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/limitkv/limitkv/internal/testserver"
	"github.com/redis/go-redis/v9"
)

// TestBanAndShadow: the options reach the server as its syntax and their
// decisions are typed as the raw replies say.
func TestBanAndShadow(t *testing.T) {
	rec := &recorder{}
	c, _ := newClient(t, rec)
	ctx := context.Background()
	k := key(t, "")

	d, err := c.Fixed(ctx, k+"b", []Rule{PerMinute(1)}, Ban(5*time.Minute))
	if err != nil || !d.Allowed {
		t.Fatalf("first: %+v, %v", d, err)
	}
	if a := argString(rec.last(t).args); a != "RL.FIXED "+k+"b 1 1m BAN 5m" {
		t.Errorf("sent %q", a)
	}
	// The denial starts a ban of exactly 5 minutes.
	d, err = c.Fixed(ctx, k+"b", []Rule{PerMinute(1)}, Ban(5*time.Minute))
	if err != nil || d.Allowed || d.RetryAfter != 5*time.Minute {
		t.Fatalf("second: %+v, %v; want denied with RetryAfter 5m", d, err)
	}
	// Dropping the option does not lift it; the slide command has its own key.
	d, err = c.Fixed(ctx, k+"b", []Rule{PerMinute(100)})
	if err != nil || d.Allowed || d.RetryAfter > 5*time.Minute || d.RetryAfter < 5*time.Minute-time.Second {
		t.Errorf("while banned: %+v, %v", d, err)
	}
	if _, err := c.Login(ctx, k+"l", Rule{Limit: 1, Window: time.Hour}, Ban(90*time.Second)); err != nil {
		t.Fatal(err)
	}
	if a := argString(rec.last(t).args); a != "RL.LOGIN "+k+"l 1 1h BAN 90s" {
		t.Errorf("sent %q", a)
	}
	if _, err := c.Slide(ctx, k+"x", []Rule{PerMinute(1)}, Ban(500*time.Microsecond)); !errors.Is(err, ErrWindow) {
		t.Errorf("a 500µs ban: %v", err)
	}

	// SHADOW: the would-be denial is allowed, with its real retry time,
	// and recorded nothing: the enforced call after it is refused alike.
	for i := 0; i < 2; i++ {
		if d, err = c.Slide(ctx, k+"s", []Rule{PerMinute(1)}, Shadow()); err != nil || !d.Allowed {
			t.Fatalf("shadow %d: %+v, %v", i+1, d, err)
		}
	}
	if a := argString(rec.last(t).args); a != "RL.SLIDE "+k+"s 1 1m SHADOW" {
		t.Errorf("sent %q", a)
	}
	if d.RetryAfter <= 0 || d.Remaining != 0 {
		t.Errorf("shadow denial: %+v; want allowed with RetryAfter > 0", d)
	}
	enforced, err := c.Slide(ctx, k+"s", []Rule{PerMinute(1)})
	if err != nil || enforced.Allowed || enforced.Remaining != 0 || enforced.RetryAfter > d.RetryAfter {
		t.Errorf("enforced after shadow: %+v, %v (shadow said %+v)", enforced, err, d)
	}
}

// TestAcquireRelease: at most limit holders; a renewal takes no second
// slot; a release frees one and answers whether it did; the key goes
// with its last lease.
func TestAcquireRelease(t *testing.T) {
	rec := &recorder{}
	c, rdb := newClient(t, rec)
	ctx := context.Background()
	k := key(t, "")
	for i, s := range []struct {
		id        string
		allowed   bool
		remaining int64
	}{{"a", true, 1}, {"b", true, 0}, {"c", false, 0}, {"a", true, 0}} {
		d, err := c.Acquire(ctx, k, 2, 30*time.Second, s.id)
		if err != nil {
			t.Fatal(err)
		}
		n := rawFive(t, rec.last(t))
		if d.Allowed != s.allowed || d.Remaining != s.remaining || d.Limit != 2 || d.Allowed != (n[0] == 1) {
			t.Errorf("acquire %d (%s): %+v, raw %v", i+1, s.id, d, n)
		}
		if !d.Allowed && (d.RetryAfter <= 0 || d.RetryAfter > 30*time.Second) {
			t.Errorf("denied: RetryAfter %v, want until the earliest lease ends", d.RetryAfter)
		}
	}
	if a := argString(rec.last(t).args); a != "RL.ACQUIRE "+k+" 2 30s a" {
		t.Errorf("sent %q", a)
	}
	for _, s := range []struct {
		id    string
		freed bool
	}{{"b", true}, {"b", false}, {"never", false}} {
		freed, err := c.Release(ctx, k, s.id)
		if err != nil || freed != s.freed {
			t.Errorf("release %s: %v, %v; want %v", s.id, freed, err, s.freed)
		}
	}
	if d, err := c.Acquire(ctx, k, 2, 30*time.Second, "c"); err != nil || !d.Allowed {
		t.Errorf("acquire after a release: %+v, %v", d, err)
	}
	c.Release(ctx, k, "a")
	c.Release(ctx, k, "c")
	if n, err := rdb.Exists(ctx, k).Result(); err != nil || n != 0 {
		t.Errorf("EXISTS after the last release = %d, %v", n, err)
	}
	// SHADOW is sent; errors are the server's.
	if _, err := c.Acquire(ctx, k, 1, time.Minute, "z", Shadow()); err != nil {
		t.Fatal(err)
	}
	if a := argString(rec.last(t).args); a != "RL.ACQUIRE "+k+" 1 1m z SHADOW" {
		t.Errorf("sent %q", a)
	}
	var rerr redis.Error
	if _, err := c.Acquire(ctx, k+"e", 1, time.Minute, ""); !errors.As(err, &rerr) || err.Error() != "ERR invalid id of 0 bytes: expected 1 to 256 bytes" {
		t.Errorf("empty id: %v", err)
	}
	if _, err := c.Acquire(ctx, k+"e", 1, 0, "x"); !errors.Is(err, ErrWindow) {
		t.Errorf("zero lease: %v", err)
	}
}

// TestPolicies: definitions built here go through SET and come back from
// GET normalised as the server keeps them; RL.CHECK decides as the
// command of the same rules; errors are the server's.
func TestPolicies(t *testing.T) {
	rec := &recorder{}
	c, _ := newClient(t, rec)
	ctx := context.Background()
	prefix := fmt.Sprintf("clienttest%d", time.Now().UnixNano())
	for _, p := range []struct {
		name string
		def  Policy
		get  string
	}{
		{"slide", SlidePolicy([]Rule{PerMinute(3), PerHour(10)}, Penalize()), "SLIDE 3 1m 10 1h PENALIZE"},
		{"fixed", FixedPolicy([]Rule{{Limit: 100, Window: 1440 * time.Minute}}, TZ("Asia/Shanghai"), Ban(time.Hour)), "FIXED 100 1d TZ Asia/Shanghai BAN 1h"},
		{"first", FixedPolicy([]Rule{PerDay(5)}, AlignFirst(), Shadow()), "FIXED 5 1d ALIGN FIRST SHADOW"},
		{"gcra", GCRAPolicy(4, 10, time.Minute), "GCRA 4 10 1m"},
	} {
		name := prefix + p.name
		if err := c.SetPolicy(ctx, name, p.def); err != nil {
			t.Fatalf("%s: %v", p.def, err)
		}
		got, err := c.GetPolicy(ctx, name)
		if err != nil || got.String() != p.get {
			t.Errorf("GET %s = %q, %v; want %q", name, got.String(), err, p.get)
		}
		// What GET gave, set again, is the same policy.
		if err := c.SetPolicy(ctx, name, got); err != nil {
			t.Errorf("SET of GET's %q: %v", got, err)
		}
	}
	names, err := c.ListPolicies(ctx, prefix+"*")
	if want := []string{prefix + "first", prefix + "fixed", prefix + "gcra", prefix + "slide"}; err != nil || fmt.Sprint(names) != fmt.Sprint(want) {
		t.Errorf("LIST = %v, %v; want %v", names, err, want)
	}

	k := key(t, "")
	for i, want := range []bool{true, true, true, false} {
		d, err := c.Check(ctx, prefix+"slide", k)
		if err != nil || d.Allowed != want || d.Limit != 3 {
			t.Errorf("check %d: %+v, %v", i+1, d, err)
		}
	}
	if a := argString(rec.last(t).args); a != "RL.CHECK "+prefix+"slide "+k {
		t.Errorf("sent %q", a)
	}
	d, err := c.Check(ctx, prefix+"gcra", k+"g", Cost(5), Peek())
	if err != nil || !d.Allowed || d.Limit != 5 || d.Remaining != 0 {
		t.Errorf("GCRA peek of 5: %+v, %v", d, err)
	}
	if a := argString(rec.last(t).args); a != "RL.CHECK "+prefix+"gcra "+k+"g COST 5 PEEK" {
		t.Errorf("sent %q", a)
	}

	for _, n := range []string{"slide", "fixed", "first", "gcra"} {
		if ok, err := c.DelPolicy(ctx, prefix+n); err != nil || !ok {
			t.Errorf("DEL %s: %v, %v", n, ok, err)
		}
	}
	if ok, err := c.DelPolicy(ctx, prefix+"slide"); err != nil || ok {
		t.Errorf("DEL again: %v, %v", ok, err)
	}
	want := "ERR no such policy '" + prefix + "slide'"
	if _, err := c.Check(ctx, prefix+"slide", k); err == nil || err.Error() != want {
		t.Errorf("check of a deleted policy: %v", err)
	}
	if _, err := c.GetPolicy(ctx, prefix+"slide"); err == nil || err.Error() != want {
		t.Errorf("GET of a deleted policy: %v", err)
	}
	if err := c.SetPolicy(ctx, "bad:name", SlidePolicy([]Rule{PerMinute(1)})); err == nil ||
		err.Error() != "ERR invalid policy name 'bad:name': expected 1 to 128 characters from A-Z a-z 0-9 _ . -" {
		t.Errorf("bad name: %v", err)
	}
	if err := c.SetPolicy(ctx, prefix+"x", SlidePolicy([]Rule{{Limit: 1, Window: time.Microsecond}})); !errors.Is(err, ErrWindow) {
		t.Errorf("bad window: %v", err)
	}
	if err := c.SetPolicy(ctx, prefix+"x", GCRAPolicy(1, 1, 1500*time.Millisecond)); err == nil {
		t.Error("GCRA period of 1.5s: no error")
	}
}

// TestTop: the keys denied most often, read in RESP2 and RESP3 alike.
func TestTop(t *testing.T) {
	ctx := context.Background()
	for _, proto := range []int{2, 3} {
		testserver.TrackSources()
		rdb := redis.NewClient(&redis.Options{Addr: serverAddr, Protocol: proto})
		defer rdb.Close()
		c := New(rdb)
		if err := c.TopReset(ctx); err != nil {
			t.Fatal(err)
		}
		k := key(t, fmt.Sprint(proto))
		for i := 0; i < 6; i++ {
			c.Fixed(ctx, k+"many", []Rule{PerHour(1)})
		}
		for i := 0; i < 3; i++ {
			c.Fixed(ctx, k+"few", []Rule{PerHour(1)})
		}
		top, err := c.Top(ctx, 2)
		if err != nil {
			t.Fatal(err)
		}
		want := []Denied{{Key: k + "many", Denials: 5}, {Key: k + "few", Denials: 2}}
		if fmt.Sprint(top) != fmt.Sprint(want) {
			t.Errorf("RESP%d: RL.TOP 2 = %+v, want %+v", proto, top, want)
		}
		if _, err := c.Top(ctx, 0); err == nil {
			t.Errorf("RESP%d: RL.TOP 0: no error", proto)
		}
	}
}
