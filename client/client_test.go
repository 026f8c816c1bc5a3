package client

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/limitkv/limitkv/internal/testserver"
	"github.com/redis/go-redis/v9"
)

func TestFormatWindow(t *testing.T) {
	for _, c := range []struct {
		d    time.Duration
		want string
	}{
		{time.Millisecond, "1ms"},
		{999 * time.Millisecond, "999ms"},
		{1500 * time.Millisecond, "1500ms"},
		{time.Second, "1s"},
		{90 * time.Second, "90s"},
		{time.Minute, "1m"},
		{90 * time.Minute, "90m"},
		{time.Hour, "1h"},
		{36 * time.Hour, "36h"},
		{24 * time.Hour, "1d"},
		{7 * 24 * time.Hour, "7d"},
		{time.Hour + time.Millisecond, "3600001ms"},
		{3650 * 24 * time.Hour, "3650d"},
	} {
		got, err := FormatWindow(c.d)
		if err != nil || got != c.want {
			t.Errorf("FormatWindow(%v) = %q, %v; want %q", c.d, got, err, c.want)
		}
	}
	for _, d := range []time.Duration{0, -time.Second, time.Nanosecond, 500 * time.Microsecond, 1500 * time.Microsecond, time.Second + time.Microsecond} {
		if got, err := FormatWindow(d); !errors.Is(err, ErrWindow) {
			t.Errorf("FormatWindow(%v) = %q, %v; want an error wrapping ErrWindow", d, got, err)
		}
	}
	if got := PerMinute(100).String(); got != "100 1m" {
		t.Errorf("PerMinute(100).String() = %q", got)
	}
	for r, want := range map[Rule]Rule{
		PerSecond(5): {5, time.Second}, PerMinute(6): {6, time.Minute},
		PerHour(7): {7, time.Hour}, PerDay(8): {8, 24 * time.Hour},
	} {
		if r != want {
			t.Errorf("builder gave %+v, want %+v", r, want)
		}
	}
}

// TestWindowsReachTheServerExactly: the server reads every formatted
// window as the duration it came from. A fresh RL.SLIDE key with one
// request is back to its full limit exactly one window later, so the
// reply's reset_after_ms is the window the server understood.
func TestWindowsReachTheServerExactly(t *testing.T) {
	c, _ := newClient(t, nil)
	ctx := context.Background()
	for _, w := range []time.Duration{time.Millisecond, 1500 * time.Millisecond, 90 * time.Second, time.Hour + time.Millisecond, 36 * time.Hour, 3650 * 24 * time.Hour} {
		d, err := c.Slide(ctx, key(t, w.String()), []Rule{{Limit: 5, Window: w}})
		if err != nil {
			t.Fatalf("window %v: %v", w, err)
		}
		if !d.Allowed || d.ResetAfter != w || d.Remaining != 4 {
			t.Errorf("window %v: %+v, want allowed with ResetAfter %v", w, d, w)
		}
	}
}

// TestDecisionsMatchRawReplies checks each typed call against the raw reply
// of the same command, recorded by a go-redis hook, and the arguments the
// call sent.
func TestDecisionsMatchRawReplies(t *testing.T) {
	rec := &recorder{}
	c, _ := newClient(t, rec)
	ctx := context.Background()
	k := key(t, "")
	for _, step := range []struct {
		call func() (Decision, error)
		args string
	}{
		{func() (Decision, error) { return c.Slide(ctx, k+"s", []Rule{PerMinute(3), PerHour(5)}) },
			"RL.SLIDE " + k + "s 3 1m 5 1h"},
		{func() (Decision, error) { return c.Slide(ctx, k+"s", []Rule{PerMinute(3), PerHour(5)}, Cost(2)) },
			"RL.SLIDE " + k + "s 3 1m 5 1h COST 2"},
		{func() (Decision, error) { return c.Slide(ctx, k+"s", []Rule{PerMinute(3), PerHour(5)}, Peek()) },
			"RL.SLIDE " + k + "s 3 1m 5 1h PEEK"},
		{func() (Decision, error) { return c.Slide(ctx, k+"s", []Rule{PerMinute(3), PerHour(5)}, Penalize()) },
			"RL.SLIDE " + k + "s 3 1m 5 1h PENALIZE"},
		{func() (Decision, error) {
			return c.Fixed(ctx, k+"f", []Rule{{Limit: 2, Window: 10 * time.Second}}, AlignFirst())
		}, "RL.FIXED " + k + "f 2 10s ALIGN FIRST"},
		{func() (Decision, error) {
			return c.Fixed(ctx, k+"f", []Rule{{Limit: 2, Window: 10 * time.Second}}, AlignFirst(), Cost(2))
		}, "RL.FIXED " + k + "f 2 10s ALIGN FIRST COST 2"},
		{func() (Decision, error) {
			return c.Fixed(ctx, k+"tz", []Rule{PerDay(10)}, TZ("Asia/Shanghai"), Cost(10))
		},
			"RL.FIXED " + k + "tz 10 1d TZ Asia/Shanghai COST 10"},
		{func() (Decision, error) { return c.Fixed(ctx, k+"tz", []Rule{PerDay(10)}, TZ("Asia/Shanghai")) },
			"RL.FIXED " + k + "tz 10 1d TZ Asia/Shanghai"},
		{func() (Decision, error) { return c.Login(ctx, k+"l", Rule{Limit: 1, Window: time.Hour}, Keep(4)) },
			"RL.LOGIN " + k + "l 1 1h KEEP 4"},
		{func() (Decision, error) { return c.Login(ctx, k+"l", Rule{Limit: 1, Window: time.Hour}) },
			"RL.LOGIN " + k + "l 1 1h"},
	} {
		d, err := step.call()
		if err != nil {
			t.Fatalf("%s: %v", step.args, err)
		}
		got := rec.last(t)
		if a := argString(got.args); a != step.args {
			t.Errorf("sent %q, want %q", a, step.args)
		}
		n := rawFive(t, got)
		want := Decision{Allowed: n[0] == 1, Limit: n[1], Remaining: n[2], ResetAfter: time.Duration(n[4]) * time.Millisecond}
		if n[3] != -1 {
			want.RetryAfter = time.Duration(n[3]) * time.Millisecond
		}
		if d != want {
			t.Errorf("%s: decision %+v, raw reply %v", step.args, d, n)
		}
		if (n[0] == 1) != (n[3] == -1) {
			t.Errorf("%s: raw reply %v: retry_after_ms is -1 exactly when allowed", step.args, n)
		}
	}
}

// TestSlideExactness: three per minute are allowed, with the remaining
// count going down, and the fourth is refused until the first request
// leaves the window.
func TestSlideExactness(t *testing.T) {
	c, _ := newClient(t, nil)
	ctx := context.Background()
	k := key(t, "")
	start := time.Now()
	for i := int64(1); i <= 3; i++ {
		d, err := c.Slide(ctx, k, []Rule{PerMinute(3)})
		if err != nil {
			t.Fatal(err)
		}
		if !d.Allowed || d.Limit != 3 || d.Remaining != 3-i || d.RetryAfter != 0 {
			t.Fatalf("request %d: %+v", i, d)
		}
	}
	d, err := c.Slide(ctx, k, []Rule{PerMinute(3)})
	elapsed := time.Since(start)
	if err != nil {
		t.Fatal(err)
	}
	if d.Allowed || d.Limit != 3 || d.Remaining != 0 {
		t.Fatalf("fourth request: %+v", d)
	}
	if d.RetryAfter > time.Minute || d.RetryAfter < time.Minute-elapsed-time.Millisecond {
		t.Errorf("fourth request: RetryAfter %v, want within %v of 1m", d.RetryAfter, elapsed)
	}
	// A PEEK with the same answer records nothing.
	p, err := c.Slide(ctx, k, []Rule{PerMinute(3)}, Peek())
	if err != nil || p.Allowed || p.Remaining != 0 {
		t.Errorf("peek: %+v, %v", p, err)
	}
}

// TestFixedCost: a request costing more than what is left is refused
// without being counted, and a cheaper one still fits.
func TestFixedCost(t *testing.T) {
	c, _ := newClient(t, nil)
	ctx := context.Background()
	k := key(t, "")
	rules := []Rule{PerHour(5)}
	for _, s := range []struct {
		cost      int64
		allowed   bool
		remaining int64
	}{{2, true, 3}, {2, true, 1}, {2, false, 1}, {1, true, 0}, {1, false, 0}} {
		d, err := c.Fixed(ctx, k, rules, Cost(s.cost))
		if err != nil {
			t.Fatal(err)
		}
		if d.Allowed != s.allowed || d.Remaining != s.remaining || d.Limit != 5 {
			t.Fatalf("cost %d: %+v, want allowed=%v remaining=%d", s.cost, d, s.allowed, s.remaining)
		}
		if !d.Allowed && (d.RetryAfter <= 0 || d.RetryAfter > time.Hour || d.RetryAfter != d.ResetAfter) {
			t.Errorf("denied: RetryAfter %v ResetAfter %v: both are the end of the hour", d.RetryAfter, d.ResetAfter)
		}
	}
}

func TestLogin(t *testing.T) {
	c, rdb := newClient(t, nil)
	ctx := context.Background()
	k := key(t, "")
	for i, want := range []bool{true, true, false} {
		d, err := c.Login(ctx, k, Rule{Limit: 2, Window: time.Hour})
		if err != nil {
			t.Fatal(err)
		}
		if d.Allowed != want {
			t.Fatalf("login %d: %+v", i+1, d)
		}
	}
	if n, err := rdb.LLen(ctx, k).Result(); err != nil || n != 2 {
		t.Errorf("LLEN = %d, %v; the list holds the two recorded logins", n, err)
	}
}

// TestThrottle checks CL.THROTTLE's typed reply against redis-cell's
// documented examples and the raw replies.
func TestThrottle(t *testing.T) {
	rec := &recorder{}
	c, _ := newClient(t, rec)
	ctx := context.Background()
	k := key(t, "")

	got, err := c.Throttle(ctx, k+"a", 15, 30, time.Minute, 1)
	if err != nil {
		t.Fatal(err)
	}
	want := Throttled{Allowed: true, Limit: 16, Remaining: 15, ResetAfter: 2 * time.Second}
	if got != want {
		t.Errorf("CL.THROTTLE 15 30 60: %+v, want %+v", got, want)
	}
	if a := argString(rec.last(t).args); a != "CL.THROTTLE "+k+"a 15 30 60 1" {
		t.Errorf("sent %q", a)
	}

	// Six tokens never fit a burst of five: limited, and no wait helps.
	got, err = c.Throttle(ctx, k+"b", 4, 1, time.Second, 6)
	if err != nil {
		t.Fatal(err)
	}
	if want := (Throttled{Allowed: false, Limit: 5, Remaining: 5, Never: true}); got != want {
		t.Errorf("CL.THROTTLE 4 1 1 6: %+v, want %+v", got, want)
	}

	// A burst of two at one per minute: the third waits about 30s.
	for i := 0; i < 3; i++ {
		got, err = c.Throttle(ctx, k+"c", 1, 2, time.Minute, 1)
		if err != nil {
			t.Fatal(err)
		}
		n := rawFive(t, rec.last(t))
		want := Throttled{Allowed: n[0] == 0, Limit: n[1], Remaining: n[2], ResetAfter: time.Duration(n[4]) * time.Second}
		if n[3] >= 0 {
			want.RetryAfter = time.Duration(n[3]) * time.Second
		}
		if got != want {
			t.Errorf("call %d: %+v, raw %v", i+1, got, n)
		}
		if got.Allowed != (i < 2) {
			t.Errorf("call %d: allowed=%v", i+1, got.Allowed)
		}
	}
	if got.RetryAfter != 30*time.Second {
		t.Errorf("third call: RetryAfter %v, want 30s", got.RetryAfter)
	}

	if _, err := c.Throttle(ctx, k+"d", 1, 1, 1500*time.Millisecond, 1); err == nil || !strings.Contains(err.Error(), "whole number of seconds") {
		t.Errorf("a period of 1.5s: err %v", err)
	}
	if _, err := c.Throttle(ctx, k+"d", 1, 0, time.Minute, 1); err == nil || err.Error() != "Cell error: Store error: Zero rates are not supported" {
		t.Errorf("a zero rate: err %v, want redis-cell's error", err)
	}
}

// TestServerErrors: the server's errors come back as go-redis errors with
// their text unchanged, and change nothing.
func TestServerErrors(t *testing.T) {
	c, rdb := newClient(t, nil)
	ctx := context.Background()
	k := key(t, "")
	if err := rdb.Set(ctx, k+"str", "x", 0).Err(); err != nil {
		t.Fatal(err)
	}
	for _, e := range []struct {
		call func() error
		want string
	}{
		{func() error { _, err := c.Slide(ctx, k+"str", []Rule{PerMinute(3)}); return err },
			"WRONGTYPE Operation against a key holding the wrong kind of value"},
		{func() error { _, err := c.Fixed(ctx, k+"a", []Rule{PerMinute(0)}); return err },
			"ERR invalid limit '0': expected an integer from 1 to 9007199254740992"},
		{func() error { _, err := c.Fixed(ctx, k+"a", []Rule{PerMinute(10)}, Cost(11)); return err },
			"ERR COST 11 exceeds the limit 10 of rule '10 1m': the request could never be allowed"},
		{func() error { _, err := c.Fixed(ctx, k+"a", []Rule{PerMinute(10)}, TZ("Mars")); return err },
			"ERR invalid TZ 'Mars': expected an IANA time zone such as Asia/Shanghai or an offset such as +08:00"},
		{func() error { _, err := c.Fixed(ctx, k+"a", []Rule{PerMinute(10)}, Penalize()); return err },
			"ERR PENALIZE given twice or not valid for RL.FIXED"},
		{func() error { _, err := c.Slide(ctx, k+"a", []Rule{PerMinute(10)}, AlignFirst()); return err },
			"ERR ALIGN given twice or not valid for RL.SLIDE"},
	} {
		err := e.call()
		var rerr redis.Error
		if !errors.As(err, &rerr) || err.Error() != e.want {
			t.Errorf("err %v (%T), want the server's %q", err, err, e.want)
		}
	}
	if n, err := rdb.Exists(ctx, k+"a").Result(); err != nil || n != 0 {
		t.Errorf("EXISTS after refused commands = %d, %v", n, err)
	}

	// Errors found before sending anything.
	if _, err := c.Slide(ctx, k+"a", nil); err == nil {
		t.Error("no rules: no error")
	}
	if _, err := c.Slide(ctx, k+"a", []Rule{{Limit: 5, Window: 500 * time.Microsecond}}); !errors.Is(err, ErrWindow) {
		t.Errorf("a 500µs window: err %v", err)
	}
}

// TestClientKinds: the calls work through the go-redis clients users
// have: the universal constructor's and a ring's (which routes each
// command by its key, found through limitkv's COMMAND key specs).
func TestClientKinds(t *testing.T) {
	testserver.TrackSources()
	ctx := context.Background()
	uni := redis.NewUniversalClient(&redis.UniversalOptions{Addrs: []string{serverAddr}})
	defer uni.Close()
	ring := redis.NewRing(&redis.RingOptions{Addrs: map[string]string{"one": serverAddr}})
	defer ring.Close()
	for name, rdb := range map[string]redis.UniversalClient{"universal": uni, "ring": ring} {
		c := New(rdb)
		k := key(t, name)
		for i, want := range []bool{true, false} {
			d, err := c.Slide(ctx, k, []Rule{PerMinute(1)})
			if err != nil || d.Allowed != want {
				t.Errorf("%s, call %d: %+v, %v", name, i+1, d, err)
			}
		}
		if c.Redis() != rdb {
			t.Errorf("%s: Redis() is not the client given", name)
		}
	}
}

// TestReadOnly: the ReadOnly option sends the read-only twin, which
// answers as the command would and records nothing.
func TestReadOnly(t *testing.T) {
	rec := &recorder{}
	c, rdb := newClient(t, rec)
	ctx := context.Background()
	k := key(t, "")
	rules := []Rule{PerHour(3)}
	if _, err := c.Fixed(ctx, k, rules, Cost(2)); err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 2; i++ {
		d, err := c.Fixed(ctx, k, rules, ReadOnly())
		if err != nil || !d.Allowed || d.Remaining != 0 {
			t.Fatalf("look %d: %+v, %v", i, d, err)
		}
	}
	if err := rdb.Do(ctx, "RL.POLICY", "SET", "client-ro", "SLIDE", "2", "1h").Err(); err != nil {
		t.Fatal(err)
	}
	if d, err := c.Check(ctx, "client-ro", k+"p", ReadOnly()); err != nil || !d.Allowed || d.Remaining != 1 {
		t.Fatalf("policy look: %+v, %v", d, err)
	}
	if d, err := c.Check(ctx, "client-ro", k+"p"); err != nil || d.Remaining != 1 {
		t.Fatalf("the look recorded something: %+v, %v", d, err)
	}
	rec.mu.Lock()
	defer rec.mu.Unlock()
	var names []any
	for _, cl := range rec.calls {
		names = append(names, cl.args[0])
	}
	want := []any{"RL.FIXED", "RL.FIXED_RO", "RL.FIXED_RO", "RL.POLICY", "RL.CHECK_RO", "RL.CHECK"}
	if fmt.Sprint(names) != fmt.Sprint(want) {
		t.Fatalf("commands sent: %v, want %v", names, want)
	}
}
