package pubsub

import (
	"slices"
	"strings"
	"sync"
	"testing"
)

type client struct {
	name string
	subs Subs
}

func (c *client) PubSub() *Subs { return &c.subs }

func newRegistry() *Registry[*client] {
	r := &Registry[*client]{}
	r.Init()
	return r
}

type delivery struct {
	to  string
	msg string
}

func publish(r *Registry[*client], k Kind, channel, message string) (int, []delivery) {
	var got []delivery
	n := r.Publish(k, []byte(channel), []byte(message), func(to *client, b []byte) {
		got = append(got, delivery{to.name, string(b)})
	})
	slices.SortFunc(got, func(a, b delivery) int { return strings.Compare(a.to+a.msg, b.to+b.msg) })
	return n, got
}

// TestSubscriptions: a client's own subscriptions, their order and the
// counts a notification carries; the registry forgets a name nobody
// listens to.
func TestSubscriptions(t *testing.T) {
	r := newRegistry()
	a, b := &client{name: "a"}, &client{name: "b"}
	for _, n := range []string{"z", "x", "z", "y"} {
		r.Add(a, Channel, []byte(n))
	}
	r.Add(a, Pattern, []byte("n*"))
	r.Add(a, Shard, []byte("s"))
	r.Add(b, Channel, []byte("x"))
	if got := a.subs.Ordered(Channel); !slices.Equal(got, []string{"z", "x", "y"}) {
		t.Errorf("ordered %q", got)
	}
	if sub, psub, ssub := a.subs.Counts(); sub != 3 || psub != 1 || ssub != 1 {
		t.Errorf("counts %d %d %d", sub, psub, ssub)
	}
	if n := a.subs.Notified(Channel); n != 4 {
		t.Errorf("channels and patterns: %d, want 4", n)
	}
	if n := a.subs.Notified(Shard); n != 1 {
		t.Errorf("shard channels: %d, want 1", n)
	}
	if r.Count(Channel) != 3 || r.NumSub(Channel, []byte("x")) != 2 {
		t.Errorf("count %d, x has %d", r.Count(Channel), r.NumSub(Channel, []byte("x")))
	}
	r.Remove(a, Channel, "z")
	r.Remove(a, Channel, "never")
	if r.Count(Channel) != 2 || slices.Contains(r.Channels(Channel, nil), "z") {
		t.Errorf("z still known: %v", r.Channels(Channel, nil))
	}
	if got := r.Channels(Channel, []byte("[xy]")); !slices.Equal(got, []string{"x", "y"}) {
		t.Errorf("channels matching: %q", got)
	}
	if !r.Drop(a) || a.subs.Subscribed() || r.Drop(a) {
		t.Fatal("drop")
	}
	if r.Count(Channel) != 1 || r.Count(Pattern) != 0 || r.Count(Shard) != 0 {
		t.Errorf("after drop: %d %d %d", r.Count(Channel), r.Count(Pattern), r.Count(Shard))
	}
	var each []string
	r.Each(func(k Kind, name []byte, cl *client) { each = append(each, cl.name+":"+string(name)) })
	if !slices.Equal(each, []string{"b:x"}) {
		t.Errorf("each %q", each)
	}
}

// TestPublish: the channel's subscribers get a message, those of each
// matching pattern a pattern message, a client subscribed both ways twice;
// shard channels are a namespace of their own, which patterns never match.
func TestPublish(t *testing.T) {
	r := newRegistry()
	a, b := &client{name: "a"}, &client{name: "b"}
	r.Add(a, Channel, []byte("news"))
	r.Add(a, Pattern, []byte("n*"))
	r.Add(b, Pattern, []byte("*s"))
	r.Add(b, Shard, []byte("news"))
	n, got := publish(r, Channel, "news", "hi")
	want := []delivery{
		{"a", "*3\r\n$7\r\nmessage\r\n$4\r\nnews\r\n$2\r\nhi\r\n"},
		{"a", "*4\r\n$8\r\npmessage\r\n$2\r\nn*\r\n$4\r\nnews\r\n$2\r\nhi\r\n"},
		{"b", "*4\r\n$8\r\npmessage\r\n$2\r\n*s\r\n$4\r\nnews\r\n$2\r\nhi\r\n"},
	}
	if n != 3 || !slices.Equal(got, want) {
		t.Errorf("got %d %q", n, got)
	}
	n, got = publish(r, Shard, "news", "")
	if n != 1 || !slices.Equal(got, []delivery{{"b", "*3\r\n$8\r\nsmessage\r\n$4\r\nnews\r\n$0\r\n\r\n"}}) {
		t.Errorf("shard: %d %q", n, got)
	}
	if n, _ := publish(r, Channel, "nobody", "x"); n != 1 {
		t.Errorf("n* matches nobody: %d receivers, want 1", n)
	}
	if PushType(3) != '>' || PushType(2) != '*' {
		t.Error("push type")
	}
}

// TestExecHold: while an EXEC holds the registry, a request holding every
// shard lock (the EXEC itself) does not lock it again; one that does not
// waits for ReleaseExec.
func TestExecHold(t *testing.T) {
	r := newRegistry()
	a := &client{name: "a"}
	r.HoldForExec(a)
	r.HoldForExec(a) // a second SUBSCRIBE in the same EXEC
	if !r.HeldByExec(a) || r.HeldByExec(&client{}) {
		t.Fatal("held by")
	}
	if r.Lock(true) || r.RLock(true) {
		t.Fatal("the EXEC locked the registry it holds")
	}
	var wg sync.WaitGroup
	locked := make(chan struct{})
	wg.Add(1)
	go func() {
		defer wg.Done()
		if r.RLock(false) {
			close(locked)
			r.RUnlock()
		}
	}()
	select {
	case <-locked:
		t.Fatal("a reader got in while the EXEC held the registry")
	default:
	}
	r.ReleaseExec()
	wg.Wait()
	if r.HeldByExec(a) {
		t.Error("still held")
	}
	if !r.Lock(true) {
		t.Fatal("not held, yet not locked")
	}
	r.Unlock()
}
