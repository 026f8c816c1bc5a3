package main

import (
	"crypto/sha1"
	"encoding/hex"
	"fmt"
	"math/rand/v2"
	"strconv"
	"strings"

	"github.com/limitkv/limitkv/resp"
)

// Each workload is done natively on limitkv and the way users do it on
// Redis today: the rate limits as Lua scripts run by EVALSHA, the rest with
// the same commands on both.

// The scripts take the time from the server (TIME), as a correct limiter
// must when several application servers share it, and return 1 (allowed)
// or 0 (denied). They compute no retry time: limitkv's reply carries one,
// so the comparison leaves Redis the lighter job.

// slideLua is the ZSET sliding window (SMS per hour, replies per minute)
// done right: trim what left the window, count, add a unique member only
// when under the limit ('<', so the limit is not off by one), and keep the
// key alive as long as its newest member. The member is the time in µs
// plus a request id from the client, so two requests in one ms (or one µs)
// never collide.
const slideLua = `local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local limit = tonumber(ARGV[1])
local window = tonumber(ARGV[2])
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', now - window)
if redis.call('ZCARD', KEYS[1]) < limit then
  redis.call('ZADD', KEYS[1], now, t[1] .. t[2] .. '-' .. ARGV[3])
  redis.call('PEXPIRE', KEYS[1], window)
  return 1
end
return 0
`

// fixedLua is the classic fixed window (SMS per hour, quotas that reset,
// conversations per hour and per day): INCR, and set the TTL on the
// request that created the counter; atomic as a script.
const fixedLua = `local n = redis.call('INCR', KEYS[1])
if n == 1 then
  redis.call('PEXPIRE', KEYS[1], ARGV[2])
end
if n > tonumber(ARGV[1]) then
  return 0
end
return 1
`

// loginLua is the "5 logins per hour" login guard, corrected: the
// limit-th newest login (LINDEX limit-1) must be older than the window;
// the new login's time, from the server, goes to the head (LPUSH), the
// list keeps the newest limit entries (LTRIM 0 limit-1) and lives a window
// after the newest.
const loginLua = `local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local limit = tonumber(ARGV[1])
local window = tonumber(ARGV[2])
local oldest = redis.call('LINDEX', KEYS[1], limit - 1)
if oldest and now - tonumber(oldest) < window then
  return 0
end
redis.call('LPUSH', KEYS[1], now)
redis.call('LTRIM', KEYS[1], 0, limit - 1)
redis.call('PEXPIRE', KEYS[1], window)
return 1
`

// leaseLua is the concurrency limit (a semaphore whose slots free
// themselves) as users write it on Redis: a sorted set of holders scored
// by their lease's end; drop the ended, then admit a holder already in
// (a renewal) or a new one while fewer than limit hold a slot. The key
// lives as long as its newest lease. RL.RELEASE's counterpart is ZREM.
const leaseLua = `local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local limit = tonumber(ARGV[1])
local lease = tonumber(ARGV[2])
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', now)
if redis.call('ZSCORE', KEYS[1], ARGV[3]) or redis.call('ZCARD', KEYS[1]) < limit then
  redis.call('ZADD', KEYS[1], now + lease, ARGV[3])
  redis.call('PEXPIRE', KEYS[1], lease)
  return 1
end
return 0
`

var scripts = map[string]string{"slide": slideLua, "fixed": fixedLua, "login": loginLua, "lease": leaseLua}

// benchPolicy is the named policy of the "check" workload, defined on
// limitkv before the runs: the sliding window of the "slide" workload.
var benchPolicy = []string{"RL.POLICY", "SET", "bench-slide", "SLIDE", "100", "60s"}

func scriptSHA(src string) string {
	sum := sha1.Sum([]byte(src))
	return hex.EncodeToString(sum[:])
}

// value32 is the 32-byte value of the GET and SET workloads.
const value32 = "0123456789abcdef0123456789abcdef"

// argKind says how the encoder fills one argument of a command template.
type argKind uint8

const (
	argLit       argKind = iota // the text as is
	argKey                      // the text (a prefix) followed by the user number
	argDay                      // a day of ten years, drawn per operation
	argNonce                    // a request id unique within the run
	argPadKey                   // the prefix and the user number in 12 digits, as redis-benchmark writes __rand_int__
	argSameNonce                // the request id the last argNonce made (a release names its acquire's holder)
	argNum                      // the user number alone, as a value (XADD's field value on one stream key)
)

type arg struct {
	kind argKind
	text []byte
}

// command is a command template; op is what one operation sends.
type command []arg
type op []command

func lit(s string) arg    { return arg{kind: argLit, text: []byte(s)} }
func keyArg(p string) arg { return arg{kind: argKey, text: []byte(p)} }
func dayArg() arg         { return arg{kind: argDay} }
func nonceArg() arg       { return arg{kind: argNonce} }
func sameNonceArg() arg   { return arg{kind: argSameNonce} }
func numArg() arg         { return arg{kind: argNum} }
func padKeyArg(p string) arg {
	return arg{kind: argPadKey, text: []byte(p)}
}
func cmd(name string, args ...arg) command {
	return append(command{lit(name)}, args...)
}

// evalsha calls a script with one key and its arguments.
func evalsha(script, keyPrefix string, args ...arg) command {
	return cmd("EVALSHA", append([]arg{lit(scriptSHA(scripts[script])), lit("1"), keyArg(keyPrefix)}, args...)...)
}

// maxArgs bounds a template's length; the encoder's scratch has that many.
const maxArgs = 8

// encoder fills templates into RESP requests. It belongs to one goroutine
// and does not allocate once its buffers have grown.
type encoder struct {
	args  [maxArgs][]byte
	key   []byte
	day   []byte
	nonce []byte
	seq   uint64 // this goroutine's requests so far
	id    uint64 // the goroutine's number, and how many there are:
	ids   uint64 // the nonce seq*ids+id is unique across goroutines
	rng   *rand.Rand
}

func newEncoder(id, ids int, seed uint64) *encoder {
	return &encoder{
		id: uint64(id), ids: uint64(ids),
		rng: rand.New(rand.NewPCG(seed, uint64(id)+1)),
		key: make([]byte, 0, 64), day: make([]byte, 0, 8), nonce: make([]byte, 0, 16),
	}
}

// appendOp appends the requests of one operation on the given user.
// Arguments of one kind share a buffer: a template has at most one key.
func (e *encoder) appendOp(b []byte, o op, user int) []byte {
	day := -1
	for _, c := range o {
		for i, a := range c {
			switch a.kind {
			case argLit:
				e.args[i] = a.text
			case argKey:
				e.key = strconv.AppendInt(append(e.key[:0], a.text...), int64(user), 10)
				e.args[i] = e.key
			case argPadKey:
				e.key = appendPadded(append(e.key[:0], a.text...), user)
				e.args[i] = e.key
			case argDay:
				if day < 0 {
					day = e.rng.IntN(3650)
				}
				e.day = strconv.AppendInt(e.day[:0], int64(day), 10)
				e.args[i] = e.day
			case argNonce:
				e.nonce = strconv.AppendUint(e.nonce[:0], e.seq*e.ids+e.id, 36)
				e.seq++
				e.args[i] = e.nonce
			case argSameNonce:
				e.args[i] = e.nonce
			case argNum:
				e.day = strconv.AppendInt(e.day[:0], int64(user), 10)
				e.args[i] = e.day
			}
		}
		b = resp.AppendCommand(b, e.args[:len(c)]...)
	}
	return b
}

// randDigits is how many digits redis-benchmark writes for __rand_int__.
const randDigits = 12

// appendPadded appends n (not negative) in randDigits digits, zero-padded
// on the left, the way redis-benchmark expands __rand_int__.
func appendPadded(b []byte, n int) []byte {
	var d [randDigits]byte
	for i := randDigits - 1; i >= 0; i-- {
		d[i] = byte('0' + n%10)
		n /= 10
	}
	return append(b, d[:]...)
}

// workload is one row of the results: the same operation on both servers.
type workload struct {
	id       string // for -only
	name     string
	limitkv  op
	redis    op
	decision bool // the reply carries an allow flag (RL reply or script result)
	// check verifies the replies of one operation on a key no run touches
	// (or, for GET, a preloaded key).
	check func(server string, replies []resp.Value) error
	// checkUser is the user number of that verification.
	checkUser func(users int) int
}

func (w *workload) opFor(kind string) op {
	if kind == kindLimitkv {
		return w.limitkv
	}
	return w.redis
}

// describe renders an operation as a reader would type it.
func describe(o op) string {
	var parts []string
	for _, c := range o {
		var words []string
		for i, a := range c {
			switch a.kind {
			case argLit:
				if c[0].kind == argLit && string(c[0].text) == "EVALSHA" && i == 1 {
					words = append(words, "<sha>")
					continue
				}
				words = append(words, string(a.text))
			case argKey, argPadKey:
				words = append(words, string(a.text)+"<n>")
			case argDay:
				words = append(words, "<day>")
			case argNonce, argSameNonce:
				words = append(words, "<id>")
			case argNum:
				words = append(words, "<n>")
			}
		}
		parts = append(parts, strings.Join(words, " "))
	}
	return strings.Join(parts, " + ")
}

func scriptName(o op) string {
	if len(o) >= 1 && string(o[0][0].text) == "EVALSHA" {
		sha := string(o[0][1].text)
		for name, src := range scripts {
			if scriptSHA(src) == sha {
				return name + ".lua"
			}
		}
	}
	return ""
}

// freshUser is a user number outside the run's range: its key is new.
func freshUser(users int) int { return users + 7 }

func firstUser(int) int { return 0 }

// workloadIDs are the names -only takes.
func workloadIDs() []string {
	var ids []string
	for _, w := range workloads() {
		ids = append(ids, w.id)
	}
	return ids
}

func workloads() []*workload {
	return []*workload{
		{
			id: "slide", name: "sliding window 100/60s",
			limitkv:  op{cmd("RL.SLIDE", keyArg("slide:"), lit("100"), lit("60s"))},
			redis:    op{evalsha("slide", "slide:", lit("100"), lit("60000"), nonceArg())},
			decision: true, check: checkDecision(100), checkUser: freshUser,
		},
		{
			id: "check", name: "named policy: sliding window 100/60s",
			limitkv:  op{cmd("RL.CHECK", lit(benchPolicy[2]), keyArg("check:"))},
			redis:    op{evalsha("slide", "check:", lit("100"), lit("60000"), nonceArg())},
			decision: true, check: checkDecision(100), checkUser: freshUser,
		},
		{
			id: "lease", name: "concurrency 100, 30s lease: acquire + release",
			limitkv: op{
				cmd("RL.ACQUIRE", keyArg("lease:"), lit("100"), lit("30s"), nonceArg()),
				cmd("RL.RELEASE", keyArg("lease:"), sameNonceArg()),
			},
			redis: op{
				evalsha("lease", "lease:", lit("100"), lit("30000"), nonceArg()),
				cmd("ZREM", keyArg("lease:"), sameNonceArg()),
			},
			decision: true, check: checkLease, checkUser: freshUser,
		},
		{
			id: "fixed", name: "fixed window 100/60s",
			limitkv:  op{cmd("RL.FIXED", keyArg("fixed:"), lit("100"), lit("60s"))},
			redis:    op{evalsha("fixed", "fixed:", lit("100"), lit("60000"))},
			decision: true, check: checkDecision(100), checkUser: freshUser,
		},
		{
			id: "login", name: "login guard 5/1h",
			limitkv:  op{cmd("RL.LOGIN", keyArg("login:"), lit("5"), lit("1h"))},
			redis:    op{evalsha("login", "login:", lit("5"), lit("3600000"))},
			decision: true, check: checkDecision(5), checkUser: freshUser,
		},
		{
			id: "bitmap", name: "online-day bitmap",
			limitkv:   op{cmd("SETBIT", keyArg("online:"), dayArg(), lit("1")), cmd("BITCOUNT", keyArg("online:"))},
			redis:     op{cmd("SETBIT", keyArg("online:"), dayArg(), lit("1")), cmd("BITCOUNT", keyArg("online:"))},
			check:     checkInts(0, 1),
			checkUser: freshUser,
		},
		{
			id: "get", name: "GET (32-byte values)",
			limitkv: op{cmd("GET", keyArg("key:"))},
			redis:   op{cmd("GET", keyArg("key:"))},
			check: func(_ string, r []resp.Value) error {
				if len(r) != 1 || r[0].Type != '$' || r[0].Null || string(r[0].Str) != value32 {
					return fmt.Errorf("GET of a preloaded key answered %v", replyText(r))
				}
				return nil
			},
			checkUser: firstUser,
		},
		{
			id: "set", name: "SET (32-byte values)",
			limitkv: op{cmd("SET", keyArg("key:"), lit(value32))},
			redis:   op{cmd("SET", keyArg("key:"), lit(value32))},
			check: func(_ string, r []resp.Value) error {
				if len(r) != 1 || r[0].Type != '+' || string(r[0].Str) != "OK" {
					return fmt.Errorf("SET answered %v", replyText(r))
				}
				return nil
			},
			checkUser: freshUser,
		},
		{
			id: "incr", name: "INCR",
			limitkv: op{cmd("INCR", keyArg("counter:"))},
			redis:   op{cmd("INCR", keyArg("counter:"))},
			check:   checkInts(1), checkUser: freshUser,
		},
	}
}

// checkDecision expects an allowed first decision on a new key: limitkv's
// five-integer RL reply [1, limit, limit-1, -1, reset], the scripts' 1.
func checkDecision(limit int64) func(string, []resp.Value) error {
	return func(kind string, r []resp.Value) error {
		if len(r) != 1 {
			return fmt.Errorf("%d replies to one command", len(r))
		}
		v := r[0]
		if kind == kindRedis {
			if v.Type != ':' || v.Int != 1 {
				return fmt.Errorf("script answered %v, want :1 (allowed)", v)
			}
			return nil
		}
		if v.Type != '*' || len(v.Elems) != 5 {
			return fmt.Errorf("RL command answered %v, want an array of 5 integers", v)
		}
		for _, e := range v.Elems {
			if e.Type != ':' {
				return fmt.Errorf("RL command answered %v, want an array of 5 integers", v)
			}
		}
		if v.Elems[0].Int != 1 || v.Elems[1].Int != limit || v.Elems[2].Int != limit-1 || v.Elems[3].Int != -1 || v.Elems[4].Int <= 0 {
			return fmt.Errorf("first decision on a new key answered %v, want [1, %d, %d, -1, reset>0]", v, limit, limit-1)
		}
		return nil
	}
}

// checkLease expects a slot taken on a new key and given back.
func checkLease(kind string, r []resp.Value) error {
	if len(r) != 2 {
		return fmt.Errorf("%d replies to acquire + release", len(r))
	}
	if err := checkDecision(100)(kind, r[:1]); err != nil {
		return err
	}
	if r[1].Type != ':' || r[1].Int != 1 {
		return fmt.Errorf("release answered %v, want :1", r[1])
	}
	return nil
}

func checkInts(want ...int64) func(string, []resp.Value) error {
	return func(_ string, r []resp.Value) error {
		if len(r) != len(want) {
			return fmt.Errorf("%d replies, want %d", len(r), len(want))
		}
		for i, v := range r {
			if v.Type != ':' || v.Int != want[i] {
				return fmt.Errorf("replies %v, want integers %v", replyText(r), want)
			}
		}
		return nil
	}
}

func replyText(r []resp.Value) string {
	var parts []string
	for _, v := range r {
		parts = append(parts, v.String())
	}
	return strings.Join(parts, " ")
}

// verifyWorkload sends one operation of w on a connection of its own and
// checks the replies' shape.
func verifyWorkload(s *server, w *workload, users int) error {
	c, err := dial(s.Addr)
	if err != nil {
		return err
	}
	defer c.close()
	e := newEncoder(0, 1, 1)
	buf := e.appendOp(nil, w.opFor(s.Kind), w.checkUser(users))
	if _, err := c.conn.Write(buf); err != nil {
		return err
	}
	replies := make([]resp.Value, len(w.opFor(s.Kind)))
	for i := range replies {
		if replies[i], err = resp.ReadValue(c.r); err != nil {
			return err
		}
	}
	if err := w.check(s.Kind, replies); err != nil {
		return fmt.Errorf("%s %s: %v", s.Kind, w.id, err)
	}
	return nil
}

// definePolicy defines, on limitkv, the policy the "check" workload applies.
func definePolicy(s *server) error {
	c, err := dial(s.Addr)
	if err != nil {
		return err
	}
	defer c.close()
	_, err = c.ok(benchPolicy...)
	return err
}

// loadScripts SCRIPT LOADs the scripts into Redis and checks the digests.
func loadScripts(s *server) error {
	c, err := dial(s.Addr)
	if err != nil {
		return err
	}
	defer c.close()
	for name, src := range scripts {
		v, err := c.ok("SCRIPT", "LOAD", src)
		if err != nil {
			return err
		}
		if string(v.Str) != scriptSHA(src) {
			return fmt.Errorf("SCRIPT LOAD %s answered %s, want %s", name, v.Str, scriptSHA(src))
		}
	}
	return nil
}
