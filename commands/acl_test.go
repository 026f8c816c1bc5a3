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

	"github.com/limitkv/limitkv/cmdspec"
	"github.com/limitkv/limitkv/resp"
)

// aclTestCatalog is the commands of the real table, as ACL rules know
// them, built once.
var aclTestCatalog = newACLCatalog(testTable())

// applyRules builds a user from rules as ACL SETUSER would.
func applyRules(t *testing.T, tab *aclCatalog, rules []string) *userRules {
	t.Helper()
	ops, open := mergeSelectorArgs(rules)
	if open >= 0 {
		t.Fatalf("unmatched parenthesis in %q", rules)
	}
	r := newUserRules(tab, false)
	for _, op := range ops {
		if err := r.set(op, false); err != nil {
			t.Fatalf("%q: %v", op, err)
		}
	}
	return r.seal()
}

// TestACLDescribeRoundTrip: whatever rules made a user, its description
// (ACL LIST, ACL SAVE) read back as rules makes a user with the same
// command bitmap, first arguments, keys and channels, described the same
// way. Redis asserts the first half of this each time it describes a user.
func TestACLDescribeRoundTrip(t *testing.T) {
	tab := aclTestCatalog
	pool := []string{"+@all", "-@all", "allcommands", "nocommands", "on", "off", "nopass", ">pw", "resetpass",
		"~*", "resetkeys", "~k:*", "%R~r:*", "%W~w:*", "%RW~b:*", "&*", "resetchannels", "&ch:*",
		"+select|0", "+select|3", "+config|get", "-config", "+client", "-client|kill", "+rl.slide", "-get",
		"+get", "-set", "+set", "clearselectors", "(~s:* +get)", "(+@read %R~x:*)", "()"}
	for _, c := range aclCategoryOrder {
		pool = append(pool, "+@"+c.Names()[0], "-@"+c.Names()[0])
	}
	rng := rand.New(rand.NewSource(14))
	for i := 0; i < 2000; i++ {
		var rules []string
		for n := rng.Intn(8) + 1; n > 0; n-- {
			rules = append(rules, pool[rng.Intn(len(pool))])
		}
		// Keys after ~* are an error, as in Redis; drop such sets.
		r, ok := tryRules(tab, rules)
		if !ok {
			continue
		}
		desc := r.describe()
		back := applyRules(t, tab, strings.Fields(desc))
		if got := back.describe(); got != desc {
			t.Fatalf("rules %q\n described: %s\n read back: %s", rules, desc, got)
		}
		for j, s := range r.selectors {
			b := back.selectors[j]
			if !slices.Equal(s.cmds, b.cmds) || s.allKeys != b.allKeys || s.allChannels != b.allChannels ||
				!slices.Equal(s.keys, b.keys) || !slices.Equal(s.channels, b.channels) {
				t.Fatalf("rules %q: selector %d differs after the round trip (%s)", rules, j, desc)
			}
			for id, args := range s.firstArgs {
				if !s.bit(id) && !slices.Equal(args, b.firstArgs[id]) {
					t.Fatalf("rules %q: first args of %s lost (%s)", rules, tab.byID[id].fullName(), desc)
				}
			}
		}
	}
}

func tryRules(tab *aclCatalog, rules []string) (*userRules, bool) {
	ops, open := mergeSelectorArgs(rules)
	if open >= 0 {
		return nil, false
	}
	r := newUserRules(tab, false)
	for _, op := range ops {
		if r.set(op, false) != nil {
			return nil, false
		}
	}
	return r.seal(), true
}

// TestACLCategoriesBringSubcommands: a category that holds a container
// allows all its subcommands, as in Redis (CONFIG is @slow, so +@slow
// allows CONFIG GET); -@all forgets first arguments.
func TestACLCategoriesBringSubcommands(t *testing.T) {
	tab := aclTestCatalog
	r := applyRules(t, tab, []string{"-@all", "+@slow"})
	for _, name := range []string{"config|get", "client|setname", "acl|whoami"} {
		if !r.selectors[0].bit(aclLookup(tab, name).id) {
			t.Errorf("+@slow does not allow %s", name)
		}
	}
	r = applyRules(t, tab, []string{"+select|0", "-@all"})
	if len(r.selectors[0].firstArgs) != 0 {
		t.Error("-@all kept first arguments")
	}
}

// TestACLKeys: which arguments are keys and what each needs, SET's
// depending on GET and EVAL's on numkeys.
func TestACLKeys(t *testing.T) {
	tab := aclTestCatalog
	for _, c := range []struct {
		cmd  string
		want string // pos:need, need r, w or rw or - (neither)
	}{
		{"get k", "1:r"},
		{"set k v", "1:w"},
		{"set k v get", "1:rw"},
		{"set k v EX 1 GeT", "1:rw"},
		{"set k v gets", "1:w"},
		{"mset a 1 b 2", "1:w 3:w"},
		{"exists a b", "1:- 2:-"},
		{"del a b", "1:w 2:w"},
		{"lmove a b left right", "1:rw 2:w"},
		{"rename a b", "1:rw 2:w"},
		{"bitop and d a b", "2:w 3:r 4:r"},
		{"eval s 2 a b c", "3:rw 4:rw"},
		{"eval s 0 a", ""},
		{"eval s 3 a b", ""},
		{"eval s -1 a", ""},
		{"eval s 1x a", "3:rw"},
		{"eval_ro s 1 a", "3:r"},
		{"rl.slide k 1 1s", "1:rw"},
		{"ping", ""},
	} {
		args := [][]byte{}
		for _, f := range strings.Fields(c.cmd) {
			args = append(args, []byte(f))
		}
		cmd := aclLookup(tab, string(args[0]))
		var got []string
		for _, k := range cmd.aclKeys(args, nil) {
			need := map[uint8]string{0: "-", aclRead: "r", aclWrite: "w", aclRW: "rw"}[k.need]
			got = append(got, string(rune('0'+k.pos))+":"+need)
		}
		if strings.Join(got, " ") != c.want {
			t.Errorf("%s: keys %q, want %q", c.cmd, strings.Join(got, " "), c.want)
		}
	}
}

// TestACLSelectorsPickTheRelevantDenial: with several selectors, a command
// none allows is reported as Redis does: the command if no selector
// allowed it, else the last key that none allowed.
func TestACLSelectorsPickTheRelevantDenial(t *testing.T) {
	tab := aclTestCatalog
	r := applyRules(t, tab, []string{"-@all", "+mget", "~a:*", "(+mget ~b:*)"})
	args := func(s string) [][]byte {
		var out [][]byte
		for _, f := range strings.Fields(s) {
			out = append(out, []byte(f))
		}
		return out
	}
	mget := tab.table.Lookup([]byte("mget"))
	for _, c := range []struct {
		cmd      string
		res, pos int
	}{
		{"mget a:1 a:2", aclOK, 0},
		{"mget b:1", aclOK, 0},
		{"mget a:1 b:1", aclDeniedKey, 2},
		{"mget c:1 a:1", aclDeniedKey, 1},
	} {
		if res, pos := r.checkCommand(mget, args(c.cmd)); res != c.res || pos != c.pos {
			t.Errorf("%s: %d at %d, want %d at %d", c.cmd, res, pos, c.res, c.pos)
		}
	}
	if res, _ := r.checkCommand(tab.table.Lookup([]byte("get")), args("get a:1")); res != aclDeniedCmd {
		t.Errorf("GET: %d", res)
	}
}

// TestACLChannels: channels are matched by glob, PSUBSCRIBE's patterns
// only literally, as ACLCheckChannelAgainstList does.
func TestACLChannels(t *testing.T) {
	tab := aclTestCatalog
	r := applyRules(t, tab, []string{"&news.*", "&exact"})
	for _, c := range []struct {
		ch      string
		pattern bool
		ok      bool
	}{
		{"news.sport", false, true},
		{"exact", false, true},
		{"other", false, false},
		{"news.*", true, true},
		{"news.s*", true, false},
	} {
		if got := r.channelAllowed([]byte(c.ch), c.pattern); got != c.ok {
			t.Errorf("%s (pattern %v): %v", c.ch, c.pattern, got)
		}
	}
	// A PUBLISH-like spec checks its channel argument.
	pub := &aclCmd{name: "publish", spec: &cmdspec.Spec{Name: "publish"}, channels: channelSpecs["publish"]}
	s := r.selectors[0]
	s.allCommands = true
	if res, pos := s.check(pub, [][]byte{[]byte("publish"), []byte("other"), []byte("msg")}, nil); res != aclDeniedChans || pos != 1 {
		t.Errorf("PUBLISH other: %d at %d", res, pos)
	}
	if res, _ := s.check(pub, [][]byte{[]byte("publish"), []byte("news.x"), []byte("msg")}, nil); res != aclOK {
		t.Errorf("PUBLISH news.x: %d", res)
	}
	if !channelsShrunk(applyRules(t, tab, []string{"&a", "&b"}), applyRules(t, tab, []string{"&a"})) ||
		channelsShrunk(applyRules(t, tab, []string{"&a"}), applyRules(t, tab, []string{"&a", "&b"})) ||
		channelsShrunk(applyRules(t, tab, []string{"&*"}), applyRules(t, tab, []string{"&*"})) {
		t.Error("channelsShrunk")
	}
}

// TestACLPasswordsAreHashed: a user keeps only SHA-256 hashes, compares
// them, and a disabled user or a user without password never passes.
func TestACLPasswordsAreHashed(t *testing.T) {
	tab := aclTestCatalog
	r := applyRules(t, tab, []string{"on", ">s3cret", ">other"})
	if strings.Contains(r.describe(), "s3cret") || !strings.Contains(r.describe(), "#"+hashPassword("s3cret")) {
		t.Fatalf("description %q", r.describe())
	}
	if !r.checkPassword([]byte("s3cret")) || !r.checkPassword([]byte("other")) || r.checkPassword([]byte("s3cre")) {
		t.Error("checkPassword")
	}
	if applyRules(t, tab, []string{"off", ">s3cret"}).checkPassword([]byte("s3cret")) {
		t.Error("a disabled user authenticated")
	}
	if applyRules(t, tab, []string{"on"}).checkPassword([]byte("")) {
		t.Error("a user without passwords authenticated")
	}
	if !applyRules(t, tab, []string{"on", "nopass"}).checkPassword([]byte("anything")) {
		t.Error("nopass refused a password")
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
	if !h.srv.acl.def.rules.Load().open {
		t.Fatal("the default user is checked")
	}
	h.do("ACL", "SETUSER", "default", "-flushall")
	if h.srv.acl.def.rules.Load().open {
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
