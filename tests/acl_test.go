package tests

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"net"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"
)

// closedByServer reads what the server still sends and reports whether it
// then closed the connection (not merely went quiet for 5 s).
func closedByServer(c *rawConn) (string, bool) {
	c.c.SetReadDeadline(time.Now().Add(5 * time.Second))
	var b bytes.Buffer
	_, err := b.ReadFrom(c.r) // nil at EOF
	var ne net.Error
	timedOut := errors.As(err, &ne) && ne.Timeout()
	return b.String(), !timedOut
}

func sha256Hex(s string) string {
	sum := sha256.Sum256([]byte(s))
	return hex.EncodeToString(sum[:])
}

// TestACLFileSaveLoad: users come from the aclfile at start-up; ACL SAVE
// writes what ACL LIST shows, passwords only as hashes, through a
// temporary file; a restart and ACL LOAD read it back to the same users; a
// broken file changes nothing and says which line is wrong; ACL LOAD
// disconnects the clients of the users it replaces.
func TestACLFileSaveLoad(t *testing.T) {
	dir := t.TempDir()
	aclfile := filepath.Join(dir, "users.acl")
	os.WriteFile(aclfile, []byte("user app on >app-secret ~rl:* -@all +@ratelimit -@admin +ping\n\nuser default on nopass ~* &* +@all\n"), 0o600)
	s := startLimitkv(t, "--aclfile", aclfile)
	admin := dialRaw(t, s.Addr)
	app := dialRaw(t, s.Addr)
	for _, tc := range []struct {
		c    *rawConn
		args []string
		want string
	}{
		{app, []string{"AUTH", "app", "wrong"}, "-WRONGPASS invalid username-password pair or user is disabled."},
		{app, []string{"AUTH", "app", "app-secret"}, "+OK"},
		{app, []string{"RL.SLIDE", "rl:user:1", "10", "1m"}, "[:1, :10, :9, :-1, :60000]"},
		{app, []string{"RL.SLIDE", "user:1", "10", "1m"}, "-NOPERM this user has no permissions to access one of the keys used as arguments"},
		{app, []string{"GET", "rl:user:1"}, "-NOPERM this user has no permissions to run the 'get' command"},
		// The application user of docs/operations.md decides and reads
		// policies, but neither redefines them nor sees every client's keys.
		{admin, []string{"RL.POLICY", "SET", "api", "SLIDE", "2", "1m"}, "+OK"},
		{app, []string{"RL.CHECK", "api", "rl:user:2"}, "[:1, :2, :1, :-1, :60000]"},
		{app, []string{"RL.POLICY", "GET", "api"}, `["SLIDE", "2", "1m"]`},
		{app, []string{"RL.POLICY", "SET", "api", "SLIDE", "1000", "1m"}, "-NOPERM this user has no permissions to run the 'rl.policy|set' command"},
		{app, []string{"RL.TOP"}, "-NOPERM this user has no permissions to run the 'rl.top' command"},
		{admin, []string{"ACL", "SETUSER", "ops", "on", ">ops pass", "allkeys", "+@all", "-@dangerous"}, "+OK"},
		{admin, []string{"ACL", "SAVE"}, "+OK"},
	} {
		if got := tc.c.do(tc.args...).String(); got != tc.want {
			t.Fatalf("%v: got %s, want %s", tc.args, got, tc.want)
		}
	}
	list := admin.do("ACL", "LIST")
	data, err := os.ReadFile(aclfile)
	if err != nil {
		t.Fatal(err)
	}
	var want []string
	for _, e := range list.Elems {
		want = append(want, string(e.Str))
	}
	if string(data) != strings.Join(want, "\n")+"\n" {
		t.Fatalf("ACL SAVE wrote\n%s\nACL LIST shows\n%s", data, strings.Join(want, "\n"))
	}
	if strings.Contains(string(data), "app-secret") || strings.Contains(string(data), "ops pass") ||
		!strings.Contains(string(data), "#"+sha256Hex("app-secret")) || !strings.Contains(string(data), "#"+sha256Hex("ops pass")) {
		t.Fatalf("passwords not saved as hashes only:\n%s", data)
	}
	entries, _ := os.ReadDir(dir)
	if len(entries) != 1 {
		t.Fatalf("ACL SAVE left files behind: %v", entries)
	}

	// A restart reads the saved file back to the same users.
	s.Stop()
	s = startLimitkv(t, "--aclfile", aclfile)
	admin = dialRaw(t, s.Addr)
	if got := admin.do("ACL", "LIST").String(); got != list.String() {
		t.Fatalf("after a restart ACL LIST is\n%s\nwas\n%s", got, list)
	}
	app = dialRaw(t, s.Addr)
	if got := app.do("AUTH", "app", "app-secret").String(); got != "+OK" {
		t.Fatalf("AUTH app after restart: %s", got)
	}

	// A broken file changes nothing; the error names each bad line.
	os.WriteFile(aclfile, []byte("user app on >x ~rl:* +@ratelimit\nuser bad on +nosuch\nuser worse on %Q~x\nnot a user line\nuser app on\n"), 0o600)
	wantErr := "-ERR " + aclfile + ":2: Error in applying operation '+nosuch': Unknown command or category name in ACL. " +
		aclfile + ":3: Syntax error. " + aclfile + ":4 should start with user keyword followed by the username. " +
		"WARNING: Duplicate user 'app' found on line 5. WARNING: ACL errors detected, no change to the previously active ACL rules was performed"
	if got := admin.do("ACL", "LOAD").String(); got != wantErr {
		t.Fatalf("ACL LOAD of a broken file:\n got %s\nwant %s", got, wantErr)
	}
	if got := admin.do("ACL", "LIST").String(); got != list.String() {
		t.Fatalf("a failed ACL LOAD changed the users:\n%s", got)
	}
	if got := app.do("PING").String(); got != "+PONG" {
		t.Fatalf("a failed ACL LOAD touched app's connection: %s", got)
	}

	// A good file replaces the users: app's connection is closed, the
	// default user's stays, and a file without a default user gives it
	// its initial rules.
	os.WriteFile(aclfile, []byte("user app on >new-secret ~rl:* -@all +@ratelimit\n"), 0o600)
	if got := admin.do("ACL", "LOAD").String(); got != "+OK" {
		t.Fatalf("ACL LOAD: %s", got)
	}
	if got, closed := closedByServer(app); got != "" || !closed {
		t.Fatalf("app's connection got %q after ACL LOAD (closed: %v)", got, closed)
	}
	if got := admin.do("ACL", "USERS").String(); got != `["app", "default"]` {
		t.Fatalf("ACL USERS after LOAD: %s", got)
	}
	if got := admin.do("ACL", "GETUSER", "default").String(); !strings.Contains(got, `"commands", "+@all"`) {
		t.Fatalf("default user after LOAD: %s", got)
	}
	app = dialRaw(t, s.Addr)
	if got := app.do("AUTH", "app", "new-secret").String(); got != "+OK" {
		t.Fatalf("AUTH with the loaded password: %s", got)
	}
}

// TestACLStartupErrors: the server refuses to start with users in both
// the config file and an aclfile, with a missing or broken aclfile, or
// with a user defined twice in the config file.
func TestACLStartupErrors(t *testing.T) {
	dir := t.TempDir()
	conf := filepath.Join(dir, "limitkv.conf")
	aclfile := filepath.Join(dir, "users.acl")
	os.WriteFile(aclfile, []byte("user a on nopass +@all\n"), 0o600)
	for _, c := range []struct {
		name, conf string
		args       []string
		want       string
	}{
		{"both", "user b on nopass +@all\n", []string{"--aclfile", aclfile}, "please define either an ACL file or declare users directly"},
		{"missing aclfile", "", []string{"--aclfile", filepath.Join(dir, "none.acl")}, "Error loading ACLs, opening file '" + filepath.Join(dir, "none.acl") + "': No such file or directory"},
		{"duplicate user", "user b on\nuser b off\n", nil, "limitkv.conf:2: Error in user declaration 'b': Duplicate user found"},
		{"bad rule", "user b on +@nosuch\n", nil, "limitkv.conf:1: Error loading ACL rule '+@nosuch' for the user named 'b': Unknown command or category name in ACL"},
	} {
		os.WriteFile(conf, []byte(c.conf), 0o644)
		args := append([]string{"--config", conf, "--port", "0", "--persistence", "no"}, c.args...)
		out, err := runBinary(t, args...)
		if err == nil || !strings.Contains(out, c.want) {
			t.Errorf("%s: %v\n%s", c.name, err, out)
		}
	}
	bad := filepath.Join(dir, "bad.acl")
	os.WriteFile(bad, []byte("user a on\nuser b on ~* ~x\n"), 0o600)
	out, err := runBinary(t, "--aclfile", bad, "--port", "0", "--persistence", "no")
	if err == nil || !strings.Contains(out, "Aborting Redis startup because of ACL errors: "+bad+":2: Adding a pattern after the * pattern") {
		t.Errorf("broken aclfile: %v\n%s", err, out)
	}
}

// TestACLConfigUsers: "user" lines of the config file define users (a
// "user default" line replaces the default user's rules, requirepass
// included), and CONFIG REWRITE writes them back as ACL LIST shows them.
func TestACLConfigUsers(t *testing.T) {
	dir := t.TempDir()
	conf := filepath.Join(dir, "limitkv.conf")
	os.WriteFile(conf, []byte("requirepass ignored\nuser default on >admin-pw ~* &* +@all\nuser app on >app-pw ~rl:* -@all +@ratelimit\n"), 0o644)
	s := startLimitkv(t, "--config", conf)
	c := dialRaw(t, s.Addr)
	if got := c.do("AUTH", "ignored").String(); !strings.HasPrefix(got, "-WRONGPASS") {
		t.Fatalf("requirepass won over the user line: %s", got)
	}
	if got := c.do("AUTH", "admin-pw").String(); got != "+OK" {
		t.Fatalf("AUTH admin-pw: %s", got)
	}
	list := c.do("ACL", "LIST").String()
	if !strings.Contains(list, "user app on #"+sha256Hex("app-pw")+" ~rl:* resetchannels -@all +@ratelimit") {
		t.Fatalf("ACL LIST: %s", list)
	}
	c.do("ACL", "SETUSER", "app", "+ping")
	if got := c.do("CONFIG", "REWRITE").String(); got != "+OK" {
		t.Fatal(got)
	}
	data, _ := os.ReadFile(conf)
	if strings.Contains(string(data), "app-pw") || !strings.Contains(string(data), "user app on #"+sha256Hex("app-pw")+" ~rl:* resetchannels -@all +@ratelimit +ping\n") {
		t.Fatalf("CONFIG REWRITE wrote:\n%s", data)
	}
	s.Stop()
	s = startLimitkv(t, "--config", conf)
	c = dialRaw(t, s.Addr)
	c.do("AUTH", "admin-pw")
	if got := c.do("ACL", "LIST").String(); got != strings.Replace(list, "+@ratelimit", "+@ratelimit +ping", 1) {
		t.Fatalf("users after CONFIG REWRITE and a restart:\n%s\nwant\n%s", got, list)
	}
}

// TestRequirepassIsTheDefaultUsersPassword: requirepass, at start-up or by
// CONFIG SET, sets the default user's only password (nopass when empty);
// clients already authenticated stay so.
func TestRequirepassIsTheDefaultUsersPassword(t *testing.T) {
	s := startLimitkv(t)
	c := dialRaw(t, s.Addr)
	if got := c.do("CONFIG", "SET", "requirepass", "s3cret").String(); got != "+OK" {
		t.Fatal(got)
	}
	if got := c.do("ACL", "LIST").String(); got != `["user default on #`+sha256Hex("s3cret")+` ~* &* +@all"]` {
		t.Fatalf("ACL LIST: %s", got)
	}
	c2 := dialRaw(t, s.Addr)
	if got := c2.do("GET", "k").String(); got != "-NOAUTH Authentication required." {
		t.Fatalf("new client: %s", got)
	}
	if got := c2.do("AUTH", "s3cret").String(); got != "+OK" {
		t.Fatalf("AUTH: %s", got)
	}
	if got := c.do("CONFIG", "SET", "requirepass", "").String(); got != "+OK" {
		t.Fatal(got)
	}
	if got := c.do("ACL", "LIST").String(); got != `["user default on nopass ~* &* +@all"]` {
		t.Fatalf("ACL LIST: %s", got)
	}
	if got := c.do("AUTH", "x").String(); !strings.Contains(got, "without any password configured") {
		t.Fatalf("AUTH without a password set: %s", got)
	}
}

// TestACLDelUserDisconnects: deleting a user closes its connections;
// turning it off does not (as in Redis), but it can no longer log in.
func TestACLDelUserDisconnects(t *testing.T) {
	s := startLimitkv(t)
	admin := dialRaw(t, s.Addr)
	admin.do("ACL", "SETUSER", "u", "on", ">pw", "+@all", "~*")
	u1, u2 := dialRaw(t, s.Addr), dialRaw(t, s.Addr)
	for _, c := range []*rawConn{u1, u2} {
		if got := c.do("AUTH", "u", "pw").String(); got != "+OK" {
			t.Fatal(got)
		}
	}
	if !strings.Contains(admin.do("CLIENT", "LIST").String(), " user=u ") {
		t.Fatal("CLIENT LIST does not show user=u")
	}
	admin.do("ACL", "SETUSER", "u", "off")
	if got := u1.do("PING").String(); got != "+PONG" {
		t.Fatalf("an off user's client: %s", got)
	}
	if got := dialRaw(t, s.Addr).do("AUTH", "u", "pw").String(); !strings.HasPrefix(got, "-WRONGPASS") {
		t.Fatalf("AUTH as an off user: %s", got)
	}
	if got := admin.do("ACL", "DELUSER", "u").String(); got != ":1" {
		t.Fatal(got)
	}
	for _, c := range []*rawConn{u1, u2} {
		if got, closed := closedByServer(c); got != "" || !closed {
			t.Fatalf("a deleted user's client got %q (closed: %v)", got, closed)
		}
	}
}

// TestACLCatMatchesRedis: for every category, ACL CAT lists what
// redis-server lists, the commands limitkv does not implement included
// (ACL rules know them); limitkv's own are in @ratelimit and its usual
// categories.
func TestACLCatMatchesRedis(t *testing.T) {
	redisSrv := startRedis(t)
	kv := startLimitkv(t)
	r, k := dialRaw(t, redisSrv.Addr), dialRaw(t, kv.Addr)
	names := func(c *rawConn, args ...string) []string {
		var out []string
		for _, e := range c.do(args...).Elems {
			out = append(out, string(e.Str))
		}
		sort.Strings(out)
		return out
	}
	redisCats, kvCats := r.do("ACL", "CAT").String(), k.do("ACL", "CAT").String()
	if want := strings.TrimSuffix(redisCats, "]") + `, "ratelimit"]`; kvCats != want {
		t.Fatalf("ACL CAT:\n got %s\nwant %s", kvCats, want)
	}
	own := func(n string) bool {
		return strings.HasPrefix(n, "rl.") || strings.HasPrefix(n, "cl.throttle") || n == "client|setinfo"
	}
	for _, e := range k.do("ACL", "CAT").Elems {
		cat := string(e.Str)
		var got []string
		for _, n := range names(k, "ACL", "CAT", cat) {
			if !own(n) {
				got = append(got, n)
			}
		}
		if cat == "ratelimit" {
			if all := strings.Join(names(k, "ACL", "CAT", cat), " "); all != "cl.throttle cl.throttle_ro rl.acquire rl.acquire_ro rl.check rl.check_ro rl.fixed rl.fixed_ro rl.login rl.policy rl.policy|del rl.policy|get rl.policy|help rl.policy|list rl.policy|set rl.release rl.slide rl.slide_ro rl.top" {
				t.Errorf("@ratelimit: %v", all)
			}
			continue
		}
		if want := names(r, "ACL", "CAT", cat); strings.Join(got, " ") != strings.Join(want, " ") {
			t.Errorf("@%s:\n got %v\nwant %v", cat, got, want)
		}
	}
}

// TestACLRevokedChannelsDisconnect: ACL SETUSER that takes away channels
// a client of the user is subscribed to disconnects that client, and only
// it; channels still allowed keep their subscribers.
func TestACLRevokedChannelsDisconnect(t *testing.T) {
	s := startLimitkv(t)
	admin := dialRaw(t, s.Addr)
	admin.do("ACL", "SETUSER", "u", "on", ">pw", "+@all", "&news.*", "&alerts")
	news, alerts, pat := dialRaw(t, s.Addr), dialRaw(t, s.Addr), dialRaw(t, s.Addr)
	for _, c := range []*rawConn{news, alerts, pat} {
		if got := c.do("AUTH", "u", "pw").String(); got != "+OK" {
			t.Fatal(got)
		}
	}
	news.do("SUBSCRIBE", "news.a")
	alerts.do("SUBSCRIBE", "alerts")
	pat.do("PSUBSCRIBE", "news.*")
	if got := admin.do("PUBLISH", "news.a", "x").String(); got != ":2" {
		t.Fatalf("PUBLISH: %s", got)
	}
	// Only &alerts goes: the alerts subscriber is dropped.
	if got := admin.do("ACL", "SETUSER", "u", "resetchannels", "&news.*").String(); got != "+OK" {
		t.Fatal(got)
	}
	if got, closed := closedByServer(alerts); got != "" || !closed {
		t.Fatalf("the alerts subscriber got %q (closed: %v)", got, closed)
	}
	if got := admin.do("PUBLISH", "news.a", "y").String(); got != ":2" {
		t.Fatalf("news subscribers were dropped too: PUBLISH answers %s", got)
	}
	// A narrower channel pattern no longer allows the subscribed pattern
	// (matched literally) but still the channel (matched as a glob).
	admin.do("ACL", "SETUSER", "u", "resetchannels", "&news.a")
	if _, closed := closedByServer(news); closed {
		t.Fatal("the news.a subscriber was dropped though news.a is still allowed")
	}
	if got, closed := closedByServer(pat); !strings.Contains(got, "pmessage") || !closed {
		t.Fatalf("the pattern subscriber got %q (closed: %v)", got, closed)
	}
	if got := admin.do("PUBLISH", "news.a", "z").String(); got != ":1" {
		t.Fatalf("PUBLISH after narrowing: %s", got)
	}
}
