package commands

import (
	"bufio"
	"math/rand"
	"net"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/limitkv/limitkv/acl"
	"github.com/limitkv/limitkv/resp"
)

// TestACLDescribeRoundTrip: over the real table, whatever rules made a
// user, its description (ACL LIST, ACL SAVE) read back as rules is
// described the same way. Package acl's tests check the bitmaps too, over
// a smaller table.
func TestACLDescribeRoundTrip(t *testing.T) {
	cat := acl.NewCatalog(testTable())
	pool := []string{"+@all", "-@all", "allcommands", "nocommands", "on", "off", "nopass", ">pw", "resetpass",
		"~*", "resetkeys", "~k:*", "%R~r:*", "%W~w:*", "%RW~b:*", "&*", "resetchannels", "&ch:*",
		"+select|0", "+select|3", "+config|get", "-config", "+client", "-client|kill", "+rl.slide", "-get",
		"+get", "-set", "+set", "clearselectors", "(~s:* +get)", "(+@read %R~x:*)", "()"}
	for _, c := range acl.CategoryOrder {
		pool = append(pool, "+@"+c.Names()[0], "-@"+c.Names()[0])
	}
	apply := func(rules []string) (*acl.Rules, bool) {
		ops, open := acl.MergeSelectorArgs(rules)
		if open >= 0 {
			return nil, false
		}
		r := acl.NewRules(cat, false)
		for _, op := range ops {
			if r.Set(op, false) != nil {
				return nil, false
			}
		}
		return r.Seal(), true
	}
	rng := rand.New(rand.NewSource(14))
	for i := 0; i < 2000; i++ {
		var rules []string
		for n := rng.Intn(8) + 1; n > 0; n-- {
			rules = append(rules, pool[rng.Intn(len(pool))])
		}
		// Keys after ~* are an error, as in Redis; drop such sets.
		r, ok := apply(rules)
		if !ok {
			continue
		}
		desc := r.Describe()
		back, ok := apply(strings.Fields(desc))
		if !ok {
			t.Fatalf("rules %q: description %q does not read back", rules, desc)
		}
		if got := back.Describe(); got != desc {
			t.Fatalf("rules %q\n described: %s\n read back: %s", rules, desc, got)
		}
	}
}

// TestACLLogGroupsAndTrims: a denial like a recent one (same reason,
// context, object and user, within 60 s) counts in it; others are new
// entries, newest first, at most acllog-max-len of them.
func TestACLLogGroupsAndTrims(t *testing.T) {
	h := newHarness(t, "acllog-max-len", "4")
	h.do("ACL", "SETUSER", "u", "on", "nopass", "-@all", "+get", "~a")
	h.use("u")
	h.do("AUTH", "u", "x")
	h.do("GET", "z") // the oldest, trimmed when the log is full
	h.do("GET", "b")
	h.do("GET", "b")
	h.clock.Advance(30_000)
	h.do("GET", "b")
	h.clock.Advance(61_000)
	h.do("GET", "b") // more than a minute after the last: new entry
	h.do("SET", "a", "1")
	h.do("GET", "c")
	h.use("main")
	h.do("CONFIG", "SET", "acllog-max-len", "5")
	h.do("ACL", "DRYRUN", "u", "get", "b") // a dry run logs nothing
	log := h.do("ACL", "LOG")
	var got []string
	for _, e := range log.Elems {
		f := map[string]string{}
		for i := 0; i+1 < len(e.Elems); i += 2 {
			f[string(e.Elems[i].Str)] = e.Elems[i+1].String()
		}
		got = append(got, f["reason"]+" "+f["object"]+" "+f["count"]+" "+f["age-seconds"])
	}
	want := []string{`"key" "c" :1 "0"`, `"command" "set" :1 "0"`, `"key" "b" :1 "0"`, `"key" "b" :3 "61"`}
	if !slices.Equal(got, want) {
		t.Fatalf("ACL LOG:\n got %q\nwant %q", got, want)
	}
	h.use("u")
	h.do("AUTH", "u", "x") // nopass: any password
	h.use("main")
	h.do("ACL", "SETUSER", "u", "resetpass")
	h.use("u")
	h.do("AUTH", "u", "x")
	h.use("main")
	if e := h.do("ACL", "LOG", "1").Elems[0]; !strings.Contains(e.String(), `"reason", "auth"`) || !strings.Contains(e.String(), `"object", "AUTH"`) {
		t.Fatalf("failed AUTH logged as %s", e)
	}
	if v := h.do("ACL", "LOG", "RESET"); v.String() != "+OK" || len(h.do("ACL", "LOG").Elems) != 0 {
		t.Fatal("ACL LOG RESET")
	}
}

// TestDefaultUserIsOpen: the default user's usual rules need no check, a
// restricted default user does.
func TestDefaultUserIsOpen(t *testing.T) {
	h := newHarness(t)
	if !h.srv.acl.def.rules.Load().Open() {
		t.Fatal("the default user is checked")
	}
	h.do("ACL", "SETUSER", "default", "-flushall")
	if h.srv.acl.def.rules.Load().Open() {
		t.Fatal("a restricted default user is not checked")
	}
	if v := h.do("FLUSHALL"); v.String() != "-NOPERM this user has no permissions to run the 'flushall' command" {
		t.Fatalf("FLUSHALL: %v", v)
	}
}

// TestACLRulesChangeUnderLoad: rules changed, users deleted and files
// reloaded while other connections run commands as those users; run with
// -race. Every reply is a result, NOPERM, or (once the user is gone) a
// closed connection.
func TestACLRulesChangeUnderLoad(t *testing.T) {
	h := newHarness(t)
	h.do("ACL", "SETUSER", "u", "on", ">pw", "~k*", "+@all")
	done := make(chan struct{})
	errs := make(chan string, 8)
	for i := 0; i < 4; i++ {
		go func(i int) {
			defer func() { errs <- "" }()
			c, err := net.Dial("tcp", h.addr)
			if err != nil {
				errs <- err.Error()
				return
			}
			defer c.Close()
			c.SetDeadline(time.Now().Add(time.Minute))
			r := bufio.NewReader(c)
			send := func(args ...string) (resp.Value, bool) {
				var bs [][]byte
				for _, a := range args {
					bs = append(bs, []byte(a))
				}
				if _, err := c.Write(resp.AppendCommand(nil, bs...)); err != nil {
					return resp.Value{}, false
				}
				v, err := resp.ReadValue(r)
				return v, err == nil
			}
			if v, ok := send("AUTH", "u", "pw"); !ok || v.String() != "+OK" {
				errs <- "AUTH: " + v.String()
				return
			}
			for n := 0; ; n++ {
				select {
				case <-done:
					return
				default:
				}
				v, ok := send("SET", "k"+strconv.Itoa(i), "v")
				if !ok {
					return // the user was deleted
				}
				if s := v.String(); s != "+OK" && !strings.HasPrefix(s, "-NOPERM") {
					errs <- "SET: " + s
					return
				}
			}
		}(i)
	}
	for i := 0; i < 200; i++ {
		if i%2 == 0 {
			h.do("ACL", "SETUSER", "u", "-set")
		} else {
			h.do("ACL", "SETUSER", "u", "+set", "resetkeys", "~k*", "(+get ~x)")
		}
		h.do("ACL", "LIST")
		h.do("ACL", "LOG", "1")
	}
	h.do("ACL", "DELUSER", "u")
	close(done)
	for i := 0; i < 4; i++ {
		if e := <-errs; e != "" {
			t.Fatal(e)
		}
	}
}
