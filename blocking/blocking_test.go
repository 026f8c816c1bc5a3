package blocking

import (
	"sync"
	"testing"
	"time"
)

type client struct {
	mu sync.Mutex
	on *Waiter
}

func (c *client) SetBlocked(w *Waiter) {
	c.mu.Lock()
	c.on = w
	c.mu.Unlock()
}

func (c *client) blockedOn() *Waiter {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.on
}

func keys(ks ...string) [][]byte {
	out := make([][]byte, len(ks))
	for i, k := range ks {
		out[i] = []byte(k)
	}
	return out
}

func waiter(db int, kind uint8) *Waiter {
	return &Waiter{Client: &client{}, DB: db, Kind: kind}
}

// TestOrderAndKinds: waiters on a key come out in the order they blocked,
// the first of the key's kind; a claimed one leaves every key it waited
// on, and only one claim of it succeeds.
func TestOrderAndKinds(t *testing.T) {
	var r Registry
	a, b, c := waiter(0, 1), waiter(0, 2), waiter(0, 1)
	r.Add(a, keys("k", "k", "other"))
	r.Add(b, keys("k"))
	r.Add(c, keys("k"))
	if len(a.Keys) != 2 {
		t.Fatalf("keys %q: a key named twice is waited on once", a.Keys)
	}
	if r.Blocked() != 3 || r.Keys() != 2 || !r.Waiting() {
		t.Fatalf("blocked %d, keys %d", r.Blocked(), r.Keys())
	}
	if a.Client.(*client).blockedOn() != a {
		t.Error("the client was not told it blocked")
	}
	if w := r.First(0, []byte("k"), 1); w != a {
		t.Errorf("first of kind 1: %p, want a", w)
	}
	if w := r.First(0, []byte("k"), 2); w != b {
		t.Errorf("first of kind 2: %p, want b", w)
	}
	if w := r.First(1, []byte("k"), 1); w != nil {
		t.Error("a waiter of db 0 found in db 1")
	}
	if !r.Claim(a) || r.Claim(a) {
		t.Fatal("a claim must succeed once")
	}
	if a.Client.(*client).blockedOn() != nil {
		t.Error("the client still looks blocked once claimed")
	}
	if w := r.First(0, []byte("k"), 1); w != c {
		t.Errorf("after a's claim: %p, want c", w)
	}
	if w := r.First(0, []byte("other"), 1); w != nil || r.Keys() != 1 {
		t.Errorf("a's other key still waited on: %p, %d keys", w, r.Keys())
	}
	r.Claim(b)
	r.Claim(c)
	if r.Blocked() != 0 || r.Keys() != 0 || r.Waiting() {
		t.Errorf("after every claim: blocked %d, keys %d", r.Blocked(), r.Keys())
	}
}

// TestReady: a write readies a key once, and only if someone waits on
// it; NoteAllReady readies every waited key.
func TestReady(t *testing.T) {
	var r Registry
	var ready []ReadyKey
	if ready = r.NoteReady(ready, 0, []byte("k")); len(ready) != 0 {
		t.Fatalf("nobody waits, yet %v", ready)
	}
	r.Add(waiter(0, 1), keys("k"))
	r.Add(waiter(3, 1), keys("x", "y"))
	ready = r.NoteReady(ready, 0, []byte("k"))
	ready = r.NoteReady(ready, 0, []byte("k"))
	ready = r.NoteReady(ready, 1, []byte("k"))
	if len(ready) != 1 || ready[0] != (ReadyKey{0, "k"}) {
		t.Fatalf("ready %v", ready)
	}
	ready = r.NoteAllReady(ready)
	if len(ready) != 3 {
		t.Errorf("all ready: %v", ready)
	}
	if n := len(r.Waiters()); n != 2 {
		t.Errorf("%d waiters, want 2, each once", n)
	}
}

// TestAwait: each end of a wait, and the claim that settles a race
// between them.
func TestAwait(t *testing.T) {
	var r Registry
	t.Run("timeout", func(t *testing.T) {
		w := waiter(0, 1)
		w.Timeout = 10 * time.Millisecond
		r.Add(w, keys("k"))
		if why, own := r.Await(w, nil, nil); why != TimedOut || !own {
			t.Errorf("got %v, %v", why, own)
		}
		if r.Blocked() != 0 {
			t.Error("still registered")
		}
	})
	t.Run("gone", func(t *testing.T) {
		w := waiter(0, 1)
		r.Add(w, keys("k"))
		gone := make(chan struct{})
		close(gone)
		if why, own := r.Await(w, gone, nil); why != Gone || !own {
			t.Errorf("got %v, %v", why, own)
		}
	})
	t.Run("served", func(t *testing.T) {
		w := waiter(0, 1)
		r.Add(w, keys("k"))
		served := false
		go func() {
			if r.Claim(r.First(0, []byte("k"), 1)) {
				served = true // the reply, written before Wake
				w.Wake()
			}
		}()
		if why, own := r.Await(w, nil, nil); why != Served || own || !served {
			t.Errorf("got %v, %v, served %v", why, own, served)
		}
	})
	t.Run("hung up while served", func(t *testing.T) {
		// The other party claimed first: the hang-up is still reported,
		// and Await returns once the reply is written.
		w := waiter(0, 1)
		r.Add(w, keys("k"))
		if !r.Claim(w) {
			t.Fatal("claim")
		}
		hung := make(chan struct{})
		close(hung)
		written := make(chan struct{})
		go func() {
			time.Sleep(5 * time.Millisecond)
			close(written)
			w.Wake()
		}()
		why, own := r.Await(w, nil, hung)
		select {
		case <-written:
		default:
			t.Error("Await returned before the claimer woke the waiter")
		}
		if why != HungUp || own {
			t.Errorf("got %v, %v", why, own)
		}
	})
}

// BenchmarkBlockAndServe: a waiter registered, found by a write to its
// key and claimed, as a BLPOP served by a push.
func BenchmarkBlockAndServe(b *testing.B) {
	var r Registry
	cl := &client{}
	k := keys("queue")
	var ready []ReadyKey
	b.ReportAllocs()
	for i := 0; i < b.N; i++ {
		w := &Waiter{Client: cl, Kind: 1}
		r.Add(w, k)
		ready = r.NoteReady(ready[:0], 0, k[0])
		got := r.First(0, []byte(ready[0].Key), 1)
		if got != w || !r.Claim(got) {
			b.Fatal("not served")
		}
		got.Wake()
	}
}

// TestAppendWaiters: every waiter of a kind on a key, in the order they
// blocked, appended to what the caller passed; a claimed one is gone.
func TestAppendWaiters(t *testing.T) {
	var r Registry
	a, b, c := waiter(0, 7), waiter(0, 1), waiter(0, 7)
	r.Add(a, keys("s"))
	r.Add(b, keys("s"))
	r.Add(c, keys("s", "t"))
	got := r.AppendWaiters(nil, 0, []byte("s"), 7)
	if len(got) != 2 || got[0] != a || got[1] != c {
		t.Fatalf("waiters of kind 7: %v", got)
	}
	var buf [4]*Waiter
	if got := r.AppendWaiters(buf[:1], 0, []byte("t"), 7); len(got) != 2 || got[1] != c {
		t.Fatalf("appended: %v", got)
	}
	if got := r.AppendWaiters(nil, 3, []byte("s"), 7); len(got) != 0 {
		t.Fatalf("another database: %v", got)
	}
	r.Claim(a)
	if got := r.AppendWaiters(nil, 0, []byte("s"), 7); len(got) != 1 || got[0] != c {
		t.Fatalf("after a claim: %v", got)
	}
}
