package tests

import (
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/limitkv/limitkv/resp"
)

// The differential suite sends every command of testdata/diff/*.txt to
// limitkv and to a real redis-server, in the same order on the same
// connections, and compares the replies exactly: type, length and bytes.
//
// File syntax: one command per line in redis-cli's quoting; "#" starts a
// comment; "@name" switches to (or opens) connection "name"; "<" reads one
// more reply on the current connection without sending anything (the
// second confirmation of SUBSCRIBE a b, a message published from another
// connection) and compares it. A command may be prefixed with
//
//	sort:    the reply is an array whose order is unspecified (KEYS, SCAN)
//	approx:  integers may differ by up to 100 (PTTL just after PEXPIRE)
//	ignore:  run on both but do not compare (set-up with random output)
//	acllog:  the reply is ACL LOG's: each entry's age-seconds and
//	         client-info (times, ports, ids) are not compared
//	aclrules: ACL rules (ACL LIST, GETUSER) whose single-command rules
//	         ("+get -set") are compared as a set: Redis lists them in the
//	         order of its command hash table, which changes from run to run
//	stats:   an INFO reply whose lines may come in any order and whose
//	         timings differ (commandstats' usec and usec_per_call,
//	         latencystats' percentiles): lines are sorted, timings masked
//	shape:   every integer and every client address is masked (SLOWLOG
//	         GET: ids, times, durations, ports), the rest compared
//	client:  a CLIENT INFO or CLIENT LIST reply: the fields that name the
//	         connection (id, addr, laddr, fd), its times (age, idle) and
//	         the memory figures, which follow each server's own layout
//	         (qbuf-free, argv-mem, multi-mem, rbs, rbp, tot-mem), are
//	         masked; lib-name and lib-ver, which limitkv shows for CLIENT
//	         SETINFO (Redis 7.2's), are left out
//	block:   a blocking command: sent, its reply left for a later "<" on
//	         the same connection, and the next line waits until both
//	         servers count it among their blocked clients
//
// "let NAME = COMMAND" runs the command on both servers and keeps each
// one's reply (a CLIENT ID), uncompared; "{NAME}" in a later line stands
// for that server's own value, and an integer reply equal to it is
// compared as "{NAME}".
//
// "<<" reads, on the current connection (a subscriber), every message
// that arrived so far and compares the whole sequence: it subscribes the
// connection to a marker channel, publishes the marker from a connection
// of its own, reads up to it, and unsubscribes. Keyspace notifications
// are tested so; the subscriber must not match the marker channel,
// "<<end>>", with a pattern.
//
// Each file starts on empty servers.

// knownDifferences are replies limitkv gives on purpose differently from
// Redis 7.0.15. A matching command is run on both servers, but not compared.
var knownDifferences = []struct {
	pattern *regexp.Regexp
	reason  string
}{
	{regexp.MustCompile(`(?i)^CLIENT SETINFO`), "CLIENT SETINFO is Redis 7.2's; limitkv accepts it because go-redis v9 and other clients send it on connect"},
	{regexp.MustCompile(`(?i)^MEMORY USAGE`), "sizes follow limitkv's own layout, which is what MEMORY USAGE is for"},
	{regexp.MustCompile(`(?i)^OBJECT ENCODING`), "encodings are limitkv's own (reported in Redis's vocabulary where one fits)"},
	{regexp.MustCompile(`(?i)^SCRIPT DEBUG (YES|SYNC)`), "limitkv has no Lua debugger: it refuses to turn one on rather than accept and ignore the request"},
}

func knownDifference(line string) (string, bool) {
	for _, d := range knownDifferences {
		if d.pattern.MatchString(line) {
			return d.reason, true
		}
	}
	return "", false
}

func TestDifferential(t *testing.T) {
	redisSrv := startRedis(t)
	kv := startLimitkv(t)
	files, _ := filepath.Glob("testdata/diff/*.txt")
	if len(files) == 0 {
		t.Fatal("no differential test files")
	}
	total := 0
	for _, f := range files {
		t.Run(strings.TrimSuffix(filepath.Base(f), ".txt"), func(t *testing.T) {
			total += runDiffFile(t, f, redisSrv.Addr, kv.Addr)
		})
	}
	t.Logf("%d commands compared with redis-server", total)
}

type diffPair struct{ redis, kv *rawConn }

func runDiffFile(t *testing.T, path, redisAddr, kvAddr string) int {
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	conns := map[string]*diffPair{}
	open := func(name string) *diffPair {
		if p, ok := conns[name]; ok {
			return p
		}
		p := &diffPair{redis: dialRaw(t, redisAddr), kv: dialRaw(t, kvAddr)}
		conns[name] = p
		return p
	}
	cur := open("main")
	for _, p := range []*rawConn{cur.redis, cur.kv} {
		if v := p.do("FLUSHALL"); v.String() != "+OK" {
			t.Fatalf("FLUSHALL: %s", v)
		}
	}
	compared := 0
	vars := map[string][2]string{} // let: redis-server's value, limitkv's
	for n, line := range strings.Split(string(data), "\n") {
		line = strings.TrimSpace(line)
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		if strings.HasPrefix(line, "@") {
			cur = open(strings.TrimSpace(line[1:]))
			continue
		}
		if line == "<<" {
			compared++
			if ws, gs := drainMessages(t, cur.redis, open("\x00pub").redis), drainMessages(t, cur.kv, open("\x00pub").kv); ws != gs {
				t.Errorf("%s:%d: <<\n redis: %s\nlimitkv: %s", filepath.Base(path), n+1, ws, gs)
			}
			continue
		}
		if line == "<" {
			// A reply that must already be on its way: never wait long.
			for _, c := range []*rawConn{cur.redis, cur.kv} {
				c.c.SetReadDeadline(time.Now().Add(10 * time.Second))
			}
			want, got := cur.redis.read(), cur.kv.read()
			for _, c := range []*rawConn{cur.redis, cur.kv} {
				c.c.SetReadDeadline(time.Now().Add(2 * time.Minute))
			}
			compared++
			if ws, gs := unvar(want.String(), vars, 0), unvar(got.String(), vars, 1); ws != gs {
				t.Errorf("%s:%d: <\n redis: %s\nlimitkv: %s", filepath.Base(path), n+1, ws, gs)
			}
			continue
		}
		mode := ""
		for _, m := range []string{"sort:", "approx:", "ignore:", "acllog:", "aclrules:", "stats:", "shape:", "client:", "block:"} {
			if strings.HasPrefix(line, m) {
				mode, line = m, strings.TrimSpace(line[len(m):])
			}
		}
		letName := ""
		if rest, ok := strings.CutPrefix(line, "let "); ok {
			name, cmd, ok := strings.Cut(rest, " = ")
			if !ok {
				t.Fatalf("%s:%d: let NAME = COMMAND", path, n+1)
			}
			letName, line = strings.TrimSpace(name), cmd
		}
		var reqs [2][]byte
		for side := range reqs {
			l := line
			for name, v := range vars {
				l = strings.ReplaceAll(l, "{"+name+"}", v[side])
			}
			args, ok := resp.SplitArgs([]byte(l))
			if !ok || len(args) == 0 {
				t.Fatalf("%s:%d: cannot parse %q", path, n+1, l)
			}
			reqs[side] = resp.AppendCommand(nil, args...)
		}
		var blockedBefore [2]int64
		if mode == "block:" {
			blockedBefore = blockedClients(open("\x00poll"))
		}
		cur.redis.send(reqs[0])
		cur.kv.send(reqs[1])
		if mode == "block:" {
			// Its reply is read by a later "<"; the lines after it run
			// once both servers count one more blocked client.
			awaitBlocked(t, open("\x00poll"), blockedBefore)
			continue
		}
		want, got := cur.redis.read(), cur.kv.read()
		if letName != "" {
			vars[letName] = [2]string{strings.Trim(want.String(), ":\""), strings.Trim(got.String(), ":\"")}
			continue
		}
		if reason, ok := knownDifference(line); ok {
			t.Logf("%s:%d: %s: not compared: %s", filepath.Base(path), n+1, line, reason)
			continue
		}
		if mode == "ignore:" {
			continue
		}
		compared++
		ws, gs := unvar(render(want, mode), vars, 0), unvar(render(got, mode), vars, 1)
		if ws != gs {
			t.Errorf("%s:%d: %s\n redis: %s\nlimitkv: %s", filepath.Base(path), n+1, line, ws, gs)
		}
	}
	return compared
}

// unvar writes each integer of a rendered reply that is a let's value on
// this side as the let's name.
func unvar(s string, vars map[string][2]string, side int) string {
	for name, v := range vars {
		s = regexp.MustCompile(`:`+regexp.QuoteMeta(v[side])+`\b`).ReplaceAllString(s, ":{"+name+"}")
	}
	return s
}

// drainMessages reads what subscriber sub received up to now (see "<<"),
// one message a line.
func drainMessages(t *testing.T, sub, pub *rawConn) string {
	const marker = "<<end>>"
	sub.c.SetReadDeadline(time.Now().Add(10 * time.Second))
	defer sub.c.SetReadDeadline(time.Now().Add(2 * time.Minute))
	sub.send(resp.AppendCommand(nil, []byte("SUBSCRIBE"), []byte(marker)))
	var got []string
	isMarker := func(v resp.Value, word string) bool {
		return len(v.Elems) == 3 && string(v.Elems[0].Str) == word && string(v.Elems[1].Str) == marker
	}
	for i := 0; ; i++ {
		v := sub.read()
		if isMarker(v, "subscribe") {
			break
		}
		if i > 10000 {
			t.Fatal("no confirmation of the marker's subscription")
		}
		got = append(got, v.String())
	}
	pub.do("PUBLISH", marker, "x")
	for i := 0; ; i++ {
		v := sub.read()
		if isMarker(v, "message") {
			break
		}
		if i > 10000 {
			t.Fatal("the marker never arrived")
		}
		got = append(got, v.String())
	}
	sub.send(resp.AppendCommand(nil, []byte("UNSUBSCRIBE"), []byte(marker)))
	for i := 0; !isMarker(sub.read(), "unsubscribe"); i++ {
		if i > 10000 {
			t.Fatal("no confirmation of the marker's unsubscription")
		}
	}
	return "\n  " + strings.Join(got, "\n  ")
}

// render turns a reply into comparable text, applying the line's mode.
func render(v resp.Value, mode string) string {
	switch mode {
	case "sort:":
		v = sortValue(v)
	case "approx:":
		if v.Type == ':' && v.Int > 100 {
			return ":~" + strconv.FormatInt((v.Int+50)/100, 10)
		}
	case "acllog:":
		v = maskACLLog(v)
	case "aclrules:":
		v = sortCommandRules(v)
	case "stats:":
		if v.Type == '$' || v.Type == '=' {
			lines := strings.Split(strings.TrimSuffix(string(v.Str), "\r\n"), "\r\n")
			for i, l := range lines {
				lines[i] = statTimings.ReplaceAllString(l, "${1}*")
			}
			sort.Strings(lines)
			v.Str = []byte(strings.Join(lines, "\r\n"))
		}
	case "shape:":
		v = maskShape(v)
	case "client:":
		if v.Type == '$' || v.Type == '=' {
			v.Str = []byte(maskClientInfo(string(v.Str)))
		}
	}
	return v.String()
}

// maskClientInfo masks, in each line of CLIENT LIST or CLIENT INFO, the
// fields that differ from server to server (see the client: mode).
func maskClientInfo(s string) string {
	lines := strings.Split(s, "\n")
	for i, l := range lines {
		var kept []string
		for _, f := range strings.Fields(l) {
			k, _, _ := strings.Cut(f, "=")
			switch k {
			case "id", "addr", "laddr", "fd", "age", "idle", "qbuf-free", "argv-mem", "multi-mem", "rbs", "rbp", "tot-mem":
				f = k + "=*"
			case "lib-name", "lib-ver":
				continue
			}
			kept = append(kept, f)
		}
		lines[i] = strings.Join(kept, " ")
	}
	return strings.Join(lines, "\n")
}

// sortCommandRules sorts, in every string of a reply, each run of
// single-command rules ("+get", "-client|kill", "+select|0"), keeping a
// selector's closing parenthesis at the end of its run.
func sortCommandRules(v resp.Value) resp.Value {
	if len(v.Elems) > 0 {
		out := v
		out.Elems = make([]resp.Value, len(v.Elems))
		for i, e := range v.Elems {
			out.Elems[i] = sortCommandRules(e)
		}
		return out
	}
	if v.Type != '$' && v.Type != '+' {
		return v
	}
	words := strings.Split(string(v.Str), " ")
	single := func(w string) bool {
		return len(w) > 1 && (w[0] == '+' || w[0] == '-') && w[1] != '@'
	}
	for i := 0; i < len(words); {
		if !single(words[i]) {
			i++
			continue
		}
		j := i
		closing := false
		for j < len(words) && single(words[j]) && !closing {
			if strings.HasSuffix(words[j], ")") {
				words[j] = strings.TrimSuffix(words[j], ")")
				closing = true
			}
			j++
		}
		sort.Strings(words[i:j])
		if closing {
			words[j-1] += ")"
		}
		i = j
	}
	v.Str = []byte(strings.Join(words, " "))
	return v
}

// maskACLLog blanks the fields of ACL LOG entries that differ between any
// two servers: how old each entry is and which connection caused it.
func maskACLLog(v resp.Value) resp.Value {
	out := v
	out.Elems = make([]resp.Value, len(v.Elems))
	for i, e := range v.Elems {
		entry := e
		entry.Elems = append([]resp.Value(nil), e.Elems...)
		for j := 0; j+1 < len(entry.Elems); j += 2 {
			switch string(entry.Elems[j].Str) {
			case "age-seconds", "client-info":
				entry.Elems[j+1] = resp.Value{Type: '$', Str: []byte("(masked)")}
			}
		}
		out.Elems[i] = entry
	}
	return out
}

// statTimings finds the timings in INFO commandstats and latencystats.
var statTimings = regexp.MustCompile(`((?:usec|usec_per_call|p[0-9.]+)=)[0-9.]+`)

var clientAddr = regexp.MustCompile(`^(127\.0\.0\.1|\[::1\]|::1):[0-9]+$`)

// maskShape masks integers and client addresses throughout a reply.
func maskShape(v resp.Value) resp.Value {
	switch {
	case v.Type == ':':
		v.Int = 0
	case v.Type == '$' && clientAddr.Match(v.Str):
		v.Str = []byte("<addr>")
	}
	if len(v.Elems) > 0 {
		elems := make([]resp.Value, len(v.Elems))
		for i, e := range v.Elems {
			elems[i] = maskShape(e)
		}
		v.Elems = elems
	}
	return v
}

// sortValue sorts the elements of an array reply, the pairs of a map, and
// the key list of a SCAN-style [cursor, [keys]] reply.
func sortValue(v resp.Value) resp.Value {
	if len(v.Elems) == 2 && v.Elems[1].Type == '*' && v.Elems[0].Type == '$' {
		v.Elems[1] = sortValue(v.Elems[1])
		return v
	}
	if v.Type == '%' {
		type pair struct{ k, v resp.Value }
		var ps []pair
		for i := 0; i+1 < len(v.Elems); i += 2 {
			ps = append(ps, pair{v.Elems[i], v.Elems[i+1]})
		}
		sort.Slice(ps, func(i, j int) bool { return ps[i].k.String() < ps[j].k.String() })
		elems := make([]resp.Value, 0, len(v.Elems))
		for _, p := range ps {
			elems = append(elems, p.k, p.v)
		}
		v.Elems = elems
		return v
	}
	elems := append([]resp.Value(nil), v.Elems...)
	sort.Slice(elems, func(i, j int) bool { return elems[i].String() < elems[j].String() })
	v.Elems = elems
	return v
}

// blockedClients returns INFO's blocked_clients of both servers, asked on
// connection p.
func blockedClients(p *diffPair) [2]int64 {
	var n [2]int64
	for i, c := range []*rawConn{p.redis, p.kv} {
		v := c.do("INFO", "clients")
		for _, l := range strings.Split(string(v.Str), "\r\n") {
			if f, ok := strings.CutPrefix(l, "blocked_clients:"); ok {
				n[i], _ = strconv.ParseInt(f, 10, 64)
			}
		}
	}
	return n
}

// awaitBlocked waits, 10 s at most, until both servers count more blocked
// clients than before.
func awaitBlocked(t *testing.T, p *diffPair, before [2]int64) {
	for i := 0; i < 2000; i++ {
		n := blockedClients(p)
		if n[0] > before[0] && n[1] > before[1] {
			return
		}
		time.Sleep(5 * time.Millisecond)
	}
	t.Fatalf("a blocking command did not block: blocked_clients %v, before %v", blockedClients(p), before)
}
