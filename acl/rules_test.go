package acl

import (
	"math/rand"
	"slices"
	"strings"
	"testing"

	"github.com/limitkv/limitkv/cmdspec"
)

// testCatalog is a small table of real commands, with the flags of their
// rows in package commands and their key specs and categories as the data
// files give them, and Redis's commands that limitkv lacks.
var testCatalog = func() *Catalog {
	rng := func(begin, last, step int, flags string) cmdspec.KeySpec {
		return cmdspec.KeySpec{Flags: flags, Begin: begin, LastKey: last, KeyStep: step}
	}
	keynum := func(flags string) cmdspec.KeySpec {
		return cmdspec.KeySpec{Flags: flags, Begin: 2, KeyNum: true, FirstKey: 1, KeyStep: 1}
	}
	const (
		script = cmdspec.NoScript | cmdspec.SkipMonitor | cmdspec.NoMandatoryKeys | cmdspec.Stale | cmdspec.RunsScript
		admin  = cmdspec.Admin | cmdspec.NoScript | cmdspec.Loading | cmdspec.Stale
		conn   = cmdspec.NoScript | cmdspec.Loading | cmdspec.Stale
	)
	type row struct {
		name  string
		flags cmdspec.Flag
		data  cmdspec.Data
		sub   []row
	}
	rows := []row{
		{name: "get", flags: cmdspec.ReadOnly | cmdspec.Fast, data: cmdspec.Data{KeySpecs: []cmdspec.KeySpec{rng(1, 0, 1, "RO access")}, Categories: cmdspec.CatString}},
		{name: "set", flags: cmdspec.Write | cmdspec.DenyOOM, data: cmdspec.Data{KeySpecs: []cmdspec.KeySpec{rng(1, 0, 1, "RW access update variable_flags")}, Categories: cmdspec.CatString}},
		{name: "mget", flags: cmdspec.ReadOnly | cmdspec.Fast, data: cmdspec.Data{KeySpecs: []cmdspec.KeySpec{rng(1, -1, 1, "RO access")}, Categories: cmdspec.CatString}},
		{name: "mset", flags: cmdspec.Write | cmdspec.DenyOOM, data: cmdspec.Data{KeySpecs: []cmdspec.KeySpec{rng(1, -1, 2, "OW update")}, Categories: cmdspec.CatString}},
		{name: "exists", flags: cmdspec.ReadOnly | cmdspec.Fast, data: cmdspec.Data{KeySpecs: []cmdspec.KeySpec{rng(1, -1, 1, "RO")}, Categories: cmdspec.CatKeyspace}},
		{name: "del", flags: cmdspec.Write, data: cmdspec.Data{KeySpecs: []cmdspec.KeySpec{rng(1, -1, 1, "RM delete")}, Categories: cmdspec.CatKeyspace}},
		{name: "lmove", flags: cmdspec.Write | cmdspec.DenyOOM, data: cmdspec.Data{KeySpecs: []cmdspec.KeySpec{rng(1, 0, 1, "RW access delete"), rng(2, 0, 1, "RW insert")}, Categories: cmdspec.CatList}},
		{name: "rename", flags: cmdspec.Write, data: cmdspec.Data{KeySpecs: []cmdspec.KeySpec{rng(1, 0, 1, "RW access delete"), rng(2, 0, 1, "OW update")}, Categories: cmdspec.CatKeyspace}},
		{name: "bitop", flags: cmdspec.Write | cmdspec.DenyOOM, data: cmdspec.Data{KeySpecs: []cmdspec.KeySpec{rng(2, 0, 1, "OW update"), rng(3, -1, 1, "RO access")}, Categories: cmdspec.CatBitmap}},
		{name: "eval", flags: script | cmdspec.MayReplicate, data: cmdspec.Data{KeySpecs: []cmdspec.KeySpec{keynum("RW access update")}, Categories: cmdspec.CatScripting}},
		{name: "eval_ro", flags: script | cmdspec.ReadOnly, data: cmdspec.Data{KeySpecs: []cmdspec.KeySpec{keynum("RO access")}, Categories: cmdspec.CatScripting}},
		{name: "rl.slide", flags: cmdspec.Write | cmdspec.DenyOOM | cmdspec.Fast, data: cmdspec.Data{KeySpecs: []cmdspec.KeySpec{rng(1, 0, 1, "RW access update")}, Categories: cmdspec.CatRateLimit}},
		{name: "publish", flags: cmdspec.PubSub | cmdspec.Loading | cmdspec.Stale | cmdspec.Fast | cmdspec.MayReplicate},
		{name: "psubscribe", flags: cmdspec.PubSub | conn},
		{name: "select", flags: cmdspec.Loading | cmdspec.Stale | cmdspec.Fast, data: cmdspec.Data{Categories: cmdspec.CatConnection}},
		{name: "ping", flags: cmdspec.Fast, data: cmdspec.Data{Categories: cmdspec.CatConnection}},
		{name: "flushall", flags: cmdspec.Write, data: cmdspec.Data{Categories: cmdspec.CatKeyspace | cmdspec.CatDangerous}},
		{name: "auth", flags: conn | cmdspec.Fast | cmdspec.NoAuth | cmdspec.AllowBusy, data: cmdspec.Data{Categories: cmdspec.CatConnection}},
		{name: "config", sub: []row{{name: "get", flags: admin}, {name: "set", flags: admin}}},
		{name: "client", sub: []row{
			{name: "kill", flags: admin, data: cmdspec.Data{Categories: cmdspec.CatConnection}},
			{name: "list", flags: admin, data: cmdspec.Data{Categories: cmdspec.CatConnection}},
			{name: "setname", flags: conn, data: cmdspec.Data{Categories: cmdspec.CatConnection}},
		}},
		{name: "acl", sub: []row{{name: "whoami", flags: conn}}},
	}
	data := map[string]*cmdspec.Data{}
	var specs []*cmdspec.Spec
	for _, r := range rows {
		s := &cmdspec.Spec{Name: r.name, Arity: -1, Flags: r.flags}
		data[r.name] = &r.data
		for _, sub := range r.sub {
			s.Sub = append(s.Sub, &cmdspec.Spec{Name: sub.name, Arity: -2, Flags: sub.flags})
			data[r.name+"|"+sub.name] = &sub.data
		}
		specs = append(specs, s)
	}
	specs[1].KeyFlags = func(args [][]byte) string { // SET's, as package commands has it
		for _, a := range args[3:] {
			if strings.EqualFold(string(a), "get") {
				return "RW access update"
			}
		}
		return "OW update"
	}
	t, err := cmdspec.NewTable(specs, data)
	if err != nil {
		panic(err)
	}
	return NewCatalog(t)
}()

func argv(s string) [][]byte {
	var out [][]byte
	for _, f := range strings.Fields(s) {
		out = append(out, []byte(f))
	}
	return out
}

// applyRules builds a user from rules as ACL SETUSER would.
func applyRules(t *testing.T, c *Catalog, rules []string) *Rules {
	t.Helper()
	r, err := tryRules(c, rules)
	if err != nil {
		t.Fatalf("%q: %v", rules, err)
	}
	return r
}

func tryRules(c *Catalog, rules []string) (*Rules, error) {
	ops, open := MergeSelectorArgs(rules)
	if open >= 0 {
		return nil, ErrSyntax
	}
	r := NewRules(c, false)
	for _, op := range ops {
		if err := r.Set(op, false); err != nil {
			return nil, err
		}
	}
	return r.Seal(), nil
}

func (c *Catalog) spec(name string) *cmdspec.Spec { return c.lookup(name).spec }

// TestDescribeRoundTrip: whatever rules made a user, its description
// (ACL LIST, ACL SAVE) read back as rules makes a user with the same
// command bitmap, first arguments, keys and channels, described the same
// way. Redis asserts the first half of this each time it describes a user.
func TestDescribeRoundTrip(t *testing.T) {
	c := testCatalog
	pool := []string{"+@all", "-@all", "allcommands", "nocommands", "on", "off", "nopass", ">pw", "resetpass",
		"~*", "resetkeys", "~k:*", "%R~r:*", "%W~w:*", "%RW~b:*", "&*", "resetchannels", "&ch:*",
		"+select|0", "+select|3", "+config|get", "-config", "+client", "-client|kill", "+rl.slide", "-get",
		"+get", "-set", "+set", "clearselectors", "(~s:* +get)", "(+@read %R~x:*)", "()",
		"-monitor", "+module|list", "-module|load", "+lolwut"}
	for _, cat := range CategoryOrder {
		pool = append(pool, "+@"+cat.Names()[0], "-@"+cat.Names()[0])
	}
	rng := rand.New(rand.NewSource(14))
	for i := 0; i < 4000; i++ {
		var rules []string
		for n := rng.Intn(8) + 1; n > 0; n-- {
			rules = append(rules, pool[rng.Intn(len(pool))])
		}
		// Keys after ~* are an error, as in Redis; drop such sets.
		r, err := tryRules(c, rules)
		if err != nil {
			continue
		}
		desc := r.Describe()
		back := applyRules(t, c, strings.Fields(desc))
		if got := back.Describe(); got != desc {
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
					t.Fatalf("rules %q: first args of %s lost (%s)", rules, c.byID[id].fullName(), desc)
				}
			}
		}
	}
}

// TestCategoriesBringSubcommands: a category that holds a container
// allows all its subcommands, as in Redis (CONFIG is @slow, so +@slow
// allows CONFIG GET); -@all forgets first arguments.
func TestCategoriesBringSubcommands(t *testing.T) {
	c := testCatalog
	r := applyRules(t, c, []string{"-@all", "+@slow"})
	for _, name := range []string{"config|get", "client|setname", "acl|whoami", "module|list", "module|help"} {
		if !r.selectors[0].bit(c.lookup(name).id) {
			t.Errorf("+@slow does not allow %s", name)
		}
	}
	r = applyRules(t, c, []string{"+select|0", "-@all"})
	if len(r.selectors[0].firstArgs) != 0 {
		t.Error("-@all kept first arguments")
	}
}

// TestAbsentCommands: rules name Redis's commands that limitkv lacks, as
// Redis's own, and describe them back; ACL CAT lists them.
func TestAbsentCommands(t *testing.T) {
	c := testCatalog
	for _, c := range []struct{ rules, want string }{
		{"+@all -@hyperloglog", "+@all -@hyperloglog"},
		{"-@all +failover +module|unload", "-@all +failover +module|unload"},
		{"+@all -module|list", "+@all -module|list"},
		{"-@all +MODULE|LoadEx", "-@all +module|loadex"},
	} {
		r := applyRules(t, testCatalog, strings.Fields(c.rules))
		if got, _, _ := r.DescribeSelector(0); got != c.want {
			t.Errorf("%s: described as %q, want %q", c.rules, got, c.want)
		}
	}
	for _, bad := range []string{"+module|nosuch", "+module|list|x", "+failover|a|b", "-nosuch"} {
		if _, err := tryRules(c, []string{bad}); err == nil {
			t.Errorf("%s: no error", bad)
		}
	}
	if got := c.InCategory(cmdspec.CatHyperLogLog); !slices.Contains(got, "pfdebug") {
		t.Errorf("@hyperloglog: %v", got)
	}
	if got := c.InCategory(cmdspec.CatScripting); !slices.Equal(got, []string{"eval", "eval_ro"}) {
		t.Errorf("@scripting: %v", got)
	}
}

// TestKeys: which arguments are keys and what each needs, SET's
// depending on GET and EVAL's on numkeys.
func TestKeys(t *testing.T) {
	c := testCatalog
	for _, tc := range []struct {
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
		args := argv(tc.cmd)
		var got []string
		for _, k := range c.lookup(string(args[0])).keyArgs(args, nil) {
			need := map[uint8]string{0: "-", permRead: "r", permWrite: "w", permRW: "rw"}[k.need]
			got = append(got, string(rune('0'+k.pos))+":"+need)
		}
		if strings.Join(got, " ") != tc.want {
			t.Errorf("%s: keys %q, want %q", tc.cmd, strings.Join(got, " "), tc.want)
		}
	}
}

// TestSelectorsPickTheRelevantDenial: with several selectors, a command
// none allows is reported as Redis does: the command if no selector
// allowed it, else the last key that none allowed.
func TestSelectorsPickTheRelevantDenial(t *testing.T) {
	c := testCatalog
	r := applyRules(t, c, []string{"-@all", "+mget", "~a:*", "(+mget ~b:*)"})
	for _, tc := range []struct {
		cmd string
		res Result
		pos int
	}{
		{"mget a:1 a:2", OK, 0},
		{"mget b:1", OK, 0},
		{"mget a:1 b:1", DeniedKey, 2},
		{"mget c:1 a:1", DeniedKey, 1},
	} {
		if res, pos := r.Check(c.spec("mget"), argv(tc.cmd)); res != tc.res || pos != tc.pos {
			t.Errorf("%s: %d at %d, want %d at %d", tc.cmd, res, pos, tc.res, tc.pos)
		}
	}
	if res, _ := r.Check(c.spec("get"), argv("get a:1")); res != DeniedCmd {
		t.Errorf("GET: %d", res)
	}
	if res, _ := r.Check(c.spec("auth"), argv("auth x")); res != OK {
		t.Errorf("AUTH, which needs no authentication: %d", res)
	}
	r = applyRules(t, c, []string{"-@all", "+select|0"})
	if res, _ := r.Check(c.spec("select"), argv("select 0")); res != OK {
		t.Errorf("SELECT 0 with +select|0: %d", res)
	}
	if res, _ := r.Check(c.spec("select"), argv("select 1")); res != DeniedCmd {
		t.Errorf("SELECT 1 with +select|0: %d", res)
	}
}

// TestFullKeyRead: only a selector that allows the command and reading
// every key lets SORT read keys no argument names.
func TestFullKeyRead(t *testing.T) {
	c := testCatalog
	for _, tc := range []struct {
		rules []string
		want  bool
	}{
		{[]string{"+@all", "~*"}, true},
		{[]string{"+@all", "%R~*"}, true},
		{[]string{"+@all", "%W~*"}, false},
		{[]string{"+@all", "~k*"}, false},
		{[]string{"-@all", "~*", "(+get %R~*)"}, true},
		{[]string{"-@all", "+get", "~k*", "(-get ~*)"}, false},
	} {
		if got := applyRules(t, c, tc.rules).FullKeyRead(c.spec("get"), argv("get k")); got != tc.want {
			t.Errorf("%q: %v, want %v", tc.rules, got, tc.want)
		}
	}
}

// TestChannels: channels are matched by glob, PSUBSCRIBE's patterns
// only literally, as ACLCheckChannelAgainstList does.
func TestChannels(t *testing.T) {
	c := testCatalog
	r := applyRules(t, c, []string{"&news.*", "&exact"})
	for _, tc := range []struct {
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
		if got := r.ChannelAllowed([]byte(tc.ch), tc.pattern); got != tc.ok {
			t.Errorf("%s (pattern %v): %v", tc.ch, tc.pattern, got)
		}
	}
	r = applyRules(t, c, []string{"+@all", "&news.*"})
	if res, pos := r.Check(c.spec("publish"), argv("publish other msg")); res != DeniedChannel || pos != 1 {
		t.Errorf("PUBLISH other: %d at %d", res, pos)
	}
	if res, _ := r.Check(c.spec("publish"), argv("publish news.x msg")); res != OK {
		t.Errorf("PUBLISH news.x: %d", res)
	}
	if res, pos := r.Check(c.spec("psubscribe"), argv("psubscribe news.* news.s*")); res != DeniedChannel || pos != 2 {
		t.Errorf("PSUBSCRIBE news.* news.s*: %d at %d", res, pos)
	}
	if !ChannelsShrunk(applyRules(t, c, []string{"&a", "&b"}), applyRules(t, c, []string{"&a"})) ||
		ChannelsShrunk(applyRules(t, c, []string{"&a"}), applyRules(t, c, []string{"&a", "&b"})) ||
		ChannelsShrunk(applyRules(t, c, []string{"&*"}), applyRules(t, c, []string{"&*"})) {
		t.Error("ChannelsShrunk")
	}
}

// TestPasswordsAreHashed: a user keeps only SHA-256 hashes, compares
// them, and a disabled user or a user without password never passes.
func TestPasswordsAreHashed(t *testing.T) {
	c := testCatalog
	r := applyRules(t, c, []string{"on", ">s3cret", ">other"})
	if strings.Contains(r.Describe(), "s3cret") || !strings.Contains(r.Describe(), "#"+HashPassword("s3cret")) {
		t.Fatalf("description %q", r.Describe())
	}
	if !r.CheckPassword([]byte("s3cret")) || !r.CheckPassword([]byte("other")) || r.CheckPassword([]byte("s3cre")) {
		t.Error("CheckPassword")
	}
	if applyRules(t, c, []string{"off", ">s3cret"}).CheckPassword([]byte("s3cret")) {
		t.Error("a disabled user authenticated")
	}
	if applyRules(t, c, []string{"on"}).CheckPassword([]byte("")) {
		t.Error("a user without passwords authenticated")
	}
	if !applyRules(t, c, []string{"on", "nopass"}).CheckPassword([]byte("anything")) {
		t.Error("nopass refused a password")
	}
}

// TestParseFile: an aclfile with a mistake anywhere loads no user, and
// the message names every line at fault as Redis's does.
func TestParseFile(t *testing.T) {
	c := testCatalog
	users, err := ParseFile("users.acl", []byte("user default on nopass ~* &* +@all\n\nuser app on #"+HashPassword("pw")+" ~app:* -@all +get (+set ~s:*)\n"), c, false)
	if err != nil {
		t.Fatal(err)
	}
	if len(users) != 2 || users[1].Name != "app" || !users[1].Rules.CheckPassword([]byte("pw")) || !users[0].Rules.Open() {
		t.Fatalf("users %+v", users)
	}
	if got, want := users[1].Rules.Describe(), "on #"+HashPassword("pw")+" ~app:* resetchannels -@all +get (~s:* resetchannels -@all +set)"; got != want {
		t.Errorf("app: %s", got)
	}
	_, err = ParseFile("users.acl", []byte("user a on +nosuch\nusr b\nuser a on\nuser c on ~* ~k\nuser d (+get\n"), c, false)
	want := "users.acl:1: Error in applying operation '+nosuch': Unknown command or category name in ACL. " +
		"users.acl:2 should start with user keyword followed by the username. " +
		"WARNING: Duplicate user 'a' found on line 3. " +
		"users.acl:4: Adding a pattern after the * pattern (or the 'allkeys' flag) is not valid and does not have any effect. Try 'resetkeys' to start with an empty list of patterns. " +
		"users.acl:5: Unmatched parenthesis in selector definition." +
		"WARNING: ACL errors detected, no change to the previously active ACL rules was performed"
	if err == nil || err.Error() != want {
		t.Errorf("got %v\nwant %s", err, want)
	}
}
