package client

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"sync"
	"testing"
	"time"
)

// TestMiddlewarePolicy: a limiter on a named policy follows the policy as
// the server has it, changed without touching the limiter.
func TestMiddlewarePolicy(t *testing.T) {
	rec := &recorder{}
	c, _ := newClient(t, rec)
	ctx := context.Background()
	policy := fmt.Sprintf("clienttestmw%d", time.Now().UnixNano())
	if err := c.SetPolicy(ctx, policy, SlidePolicy([]Rule{PerMinute(2)})); err != nil {
		t.Fatal(err)
	}
	defer c.DelPolicy(ctx, policy)
	l := mustLimiter(t, c, LimiterConfig{Policy: policy})
	h := l.Handler(okHandler)
	for i, want := range []int{200, 200, 429} {
		w := serve(h, "192.0.2.1:1", nil)
		if w.Code != want {
			t.Fatalf("request %d: %d", i+1, w.Code)
		}
		if got := argString(rec.last(t).args); got != "RL.CHECK "+policy+" "+key(t, "")+":192.0.2.1" {
			t.Errorf("sent %q", got)
		}
		n := rawFive(t, rec.last(t))
		if got, want := w.Header().Get("RateLimit-Policy"), `"`+policy+`";q=2`; got != want {
			t.Errorf("request %d: RateLimit-Policy %q, want %q", i+1, got, want)
		}
		tMs := n[4]
		if n[0] == 0 {
			tMs = n[3]
			if ra := w.Header().Get("Retry-After"); ra != strconv.FormatInt((n[3]+999)/1000, 10) {
				t.Errorf("Retry-After %q, raw %v", ra, n)
			}
		}
		if got, want := w.Header().Get("RateLimit"), fmt.Sprintf(`"%s";r=%d;t=%d`, policy, n[2], (tMs+999)/1000); got != want {
			t.Errorf("request %d: RateLimit %q, want %q", i+1, got, want)
		}
	}
	// Raised on the server: the same limiter lets the next one through.
	if err := c.SetPolicy(ctx, policy, SlidePolicy([]Rule{PerMinute(5)})); err != nil {
		t.Fatal(err)
	}
	w := serve(h, "192.0.2.1:1", nil)
	if w.Code != 200 || w.Header().Get("RateLimit-Policy") != `"`+policy+`";q=5` {
		t.Errorf("after raising the policy: %d, %q", w.Code, w.Header().Get("RateLimit-Policy"))
	}
}

// TestMiddlewareConcurrency: at most two requests in the handler at once;
// a third is refused while they run; their slots come back when they
// return, and nothing is left on the server.
func TestMiddlewareConcurrency(t *testing.T) {
	c, rdb := newClient(t, nil)
	var errs []error
	var mu sync.Mutex
	l := mustLimiter(t, c, LimiterConfig{Concurrency: 2, Lease: time.Minute,
		OnError: func(_ *http.Request, err error) { mu.Lock(); errs = append(errs, err); mu.Unlock() }})
	entered := make(chan struct{})
	leave := make(chan struct{})
	srv := httptest.NewServer(l.Handler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		entered <- struct{}{}
		<-leave
		io.WriteString(w, "done")
	})))
	defer srv.Close()
	get := func() (*http.Response, error) {
		resp, err := http.Get(srv.URL)
		if err == nil {
			io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
		}
		return resp, err
	}
	var wg sync.WaitGroup
	codes := make(chan int, 2)
	for i := 0; i < 2; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if resp, err := get(); err == nil {
				codes <- resp.StatusCode
			}
		}()
	}
	<-entered
	<-entered
	resp, err := get()
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != http.StatusTooManyRequests {
		t.Errorf("third request in flight: %d", resp.StatusCode)
	}
	if got := resp.Header.Get("RateLimit-Policy"); got != `"default";q=2;qu="concurrent-requests"` {
		t.Errorf("RateLimit-Policy %q", got)
	}
	// Refused until the earliest lease would end: a minute at most.
	ra, _ := strconv.Atoi(resp.Header.Get("Retry-After"))
	if got := resp.Header.Get("RateLimit"); ra < 59 || ra > 60 || got != `"default";r=0;t=`+strconv.Itoa(ra) {
		t.Errorf("Retry-After %d, RateLimit %q", ra, got)
	}
	close(leave)
	wg.Wait()
	close(codes)
	for code := range codes {
		if code != http.StatusOK {
			t.Errorf("a request in flight ended with %d", code)
		}
	}
	k := key(t, "") + ":127.0.0.1"
	if n, err := rdb.Exists(context.Background(), k).Result(); err != nil || n != 0 {
		t.Errorf("EXISTS %s after both returned = %d, %v: the slots were not released", k, n, err)
	}
	if len(errs) != 0 {
		t.Errorf("errors: %v", errs)
	}
}

// TestMiddlewareLeaseRenewed: a handler that runs for several leases
// keeps its slot: another request is refused all along, and is let in
// once the handler returns.
func TestMiddlewareLeaseRenewed(t *testing.T) {
	rec := &recorder{}
	c, rdb := newClient(t, rec)
	// renewals counts the RL.ACQUIREs that took the slot: the first, then
	// one per renewal.
	renewals := func() int {
		rec.mu.Lock()
		defer rec.mu.Unlock()
		n := 0
		for _, cl := range rec.calls {
			if v, ok := cl.reply.([]any); ok && len(cl.args) > 0 && cl.args[0] == "RL.ACQUIRE" && len(v) > 0 && v[0] == int64(1) {
				n++
			}
		}
		return n - 1
	}
	var errs []error
	var mu sync.Mutex
	l := mustLimiter(t, c, LimiterConfig{Concurrency: 1, Lease: 600 * time.Millisecond,
		OnError: func(_ *http.Request, err error) { mu.Lock(); errs = append(errs, err); mu.Unlock() }})
	entered := make(chan struct{})
	leave := make(chan struct{})
	slow := l.Handler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		close(entered)
		<-leave
	}))
	done := make(chan int)
	go func() { done <- serve(slow, "192.0.2.1:1", nil).Code }()
	<-entered
	quick := l.Handler(okHandler)
	// Five renewals, 2.5 leases' worth: without them the slot would be
	// free after 600 ms. Each check follows a renewal, a lease ahead of
	// its end rather than a guessed time.
	for i := 1; i <= 5; i++ {
		for deadline := time.Now().Add(15 * time.Second); renewals() < i; time.Sleep(time.Millisecond) {
			if time.Now().After(deadline) {
				t.Fatalf("renewal %d never came", i)
			}
		}
		if w := serve(quick, "192.0.2.1:2", nil); w.Code != http.StatusTooManyRequests {
			t.Fatalf("after renewal %d: %d; the running request's lease was not kept", i, w.Code)
		}
	}
	close(leave)
	if code := <-done; code != http.StatusOK {
		t.Errorf("the slow request: %d", code)
	}
	if w := serve(quick, "192.0.2.1:2", nil); w.Code != http.StatusOK {
		t.Errorf("after the slow request returned: %d", w.Code)
	}
	if n, err := rdb.Exists(context.Background(), key(t, "")+":192.0.2.1").Result(); err != nil || n != 0 {
		t.Errorf("EXISTS = %d, %v after every request returned", n, err)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(errs) != 0 {
		t.Errorf("errors: %v", errs)
	}
}

// TestConcurrencyPolicy: a CONCURRENCY policy through the client
// (CheckID, Release) and through the middleware, which holds a slot per
// request and gives it back.
func TestConcurrencyPolicy(t *testing.T) {
	rec := &recorder{}
	c, rdb := newClient(t, rec)
	ctx := context.Background()
	policy := fmt.Sprintf("clienttestcc%d", time.Now().UnixNano())
	if err := c.SetPolicy(ctx, policy, ConcurrencyPolicy(1, time.Minute)); err != nil {
		t.Fatal(err)
	}
	defer c.DelPolicy(ctx, policy)
	if p, err := c.GetPolicy(ctx, policy); err != nil || p.String() != "CONCURRENCY 1 1m" {
		t.Errorf("GET = %q, %v", p, err)
	}
	k := key(t, "direct")
	for i, s := range []struct {
		id      string
		allowed bool
	}{{"a", true}, {"b", false}, {"a", true}} {
		d, err := c.CheckID(ctx, policy, k, s.id)
		if err != nil || d.Allowed != s.allowed || d.Limit != 1 {
			t.Errorf("check %d (%s): %+v, %v", i+1, s.id, d, err)
		}
	}
	if a := argString(rec.last(t).args); a != "RL.CHECK "+policy+" "+k+" ID a" {
		t.Errorf("sent %q", a)
	}
	if freed, err := c.Release(ctx, k, "a"); err != nil || !freed {
		t.Errorf("release: %v, %v", freed, err)
	}
	if _, err := c.Check(ctx, policy, k); err == nil || err.Error() != "ERR policy '"+policy+"' is a CONCURRENCY policy: RL.CHECK "+policy+" key ID id, released with RL.RELEASE key id" {
		t.Errorf("RL.CHECK without ID: %v", err)
	}

	l := mustLimiter(t, c, LimiterConfig{Policy: policy, ConcurrencyPolicy: true, Lease: time.Minute})
	entered, leave := make(chan struct{}), make(chan struct{})
	h := l.Handler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		close(entered)
		<-leave
	}))
	done := make(chan int)
	go func() { done <- serve(h, "192.0.2.1:1", nil).Code }()
	<-entered
	w := serve(h, "192.0.2.1:2", nil)
	if w.Code != http.StatusTooManyRequests || w.Header().Get("RateLimit-Policy") != `"`+policy+`";q=1;qu="concurrent-requests"` {
		t.Errorf("second in flight: %d, RateLimit-Policy %q", w.Code, w.Header().Get("RateLimit-Policy"))
	}
	close(leave)
	if code := <-done; code != http.StatusOK {
		t.Errorf("first: %d", code)
	}
	if n, err := rdb.Exists(ctx, key(t, "")+":192.0.2.1").Result(); err != nil || n != 0 {
		t.Errorf("EXISTS = %d, %v after the request returned", n, err)
	}
	if _, err := NewLimiter(c, LimiterConfig{Concurrency: 1, ConcurrencyPolicy: true}); err == nil {
		t.Error("ConcurrencyPolicy without Policy: no error")
	}
}
