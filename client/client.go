package client

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"
)

// Client makes limitkv's rate-limit calls over a go-redis client the
// application already has. It holds no state of its own and is safe for
// concurrent use, as the go-redis client is.
type Client struct {
	rdb redis.UniversalClient
}

// New wraps rdb: a *redis.Client (redis.NewClient, or redis.NewFailoverClient
// for Sentinel), a *redis.ClusterClient, a *redis.Ring, or whatever
// redis.NewUniversalClient returned. Its timeouts, pool and retries are the
// ones every call uses.
//
// A *redis.ClusterClient (found by type assertion, so a cluster client
// wrapped in another type is taken as a single node) changes what the
// per-node calls do: Top and TopReset go to every master, since RL.TOP
// counts the denials each node decided. Every other call is one command
// on one key, or on the policies the cluster bus spreads, and goes where
// go-redis routes it.
func New(rdb redis.UniversalClient) *Client {
	return &Client{rdb: rdb}
}

// cluster is the cluster client, when rdb is one.
func (c *Client) cluster() (*redis.ClusterClient, bool) {
	cc, ok := c.rdb.(*redis.ClusterClient)
	return cc, ok
}

// Redis returns the go-redis client the calls go through.
func (c *Client) Redis() redis.UniversalClient { return c.rdb }

// Decision is the reply of every RL command, with its times as durations.
type Decision struct {
	// Allowed says whether the request may proceed (and, unless PEEK, was
	// counted).
	Allowed bool
	// Limit is the limit of the rule that decided: when denied, the rule
	// that makes the request wait longest; when allowed, the rule with the
	// least remaining.
	Limit int64
	// Remaining is the units left in that rule after this request.
	Remaining int64
	// RetryAfter is how long until the same request would be allowed by
	// every rule. It is 0 when the request was allowed (the wire's -1): a
	// duration that means "wait this long" has no use for a negative
	// sentinel, and 0 is what time.Sleep, time.After and a Retry-After
	// header want for "now". With Shadow, a request the limit would have
	// refused is Allowed with its real RetryAfter, above 0: that is how a
	// shadow denial shows.
	RetryAfter time.Duration
	// ResetAfter is how long until the reported rule is back to its full
	// limit (0 when it already is).
	ResetAfter time.Duration
}

// Rule is one limit and its window: at most Limit units per Window.
// Windows are whole milliseconds from 1ms to 3650 days.
type Rule struct {
	Limit  int64
	Window time.Duration
}

// PerSecond is n units per second.
func PerSecond(n int64) Rule { return Rule{Limit: n, Window: time.Second} }

// PerMinute is n units per minute.
func PerMinute(n int64) Rule { return Rule{Limit: n, Window: time.Minute} }

// PerHour is n units per hour.
func PerHour(n int64) Rule { return Rule{Limit: n, Window: time.Hour} }

// PerDay is n units per day (24 hours; with RL.FIXED and TZ, a calendar
// day in that zone).
func PerDay(n int64) Rule { return Rule{Limit: n, Window: 24 * time.Hour} }

// String is the rule as the commands take it: "100 1m".
func (r Rule) String() string {
	w, err := FormatWindow(r.Window)
	if err != nil {
		w = "<" + err.Error() + ">"
	}
	return strconv.FormatInt(r.Limit, 10) + " " + w
}

// ErrWindow is returned (wrapped) for a window or lease that limitkv's
// duration syntax cannot express: zero, negative, or not a whole number of
// milliseconds.
var ErrWindow = errors.New("limitkv: windows are whole milliseconds, at least 1ms")

// FormatWindow writes d in limitkv's duration syntax, in the largest unit
// that expresses it exactly: 24h is "1d", 90s is "90s", 1500ms is "1500ms".
// A duration that is not a positive whole number of milliseconds is an
// error wrapping ErrWindow, rather than a silently rounded window.
func FormatWindow(d time.Duration) (string, error) {
	if d <= 0 || d%time.Millisecond != 0 {
		return "", fmt.Errorf("%w: window %v", ErrWindow, d)
	}
	for _, u := range windowUnits {
		if d%u.d == 0 {
			return strconv.FormatInt(int64(d/u.d), 10) + u.suffix, nil
		}
	}
	panic("unreachable: every whole-millisecond duration is a number of ms")
}

var windowUnits = [...]struct {
	d      time.Duration
	suffix string
}{
	{24 * time.Hour, "d"},
	{time.Hour, "h"},
	{time.Minute, "m"},
	{time.Second, "s"},
	{time.Millisecond, "ms"},
}

// Option is one of the commands' optional arguments (COST, PEEK, ...).
// Options are sent as given: a command that does not take one answers
// limitkv's own error naming it ("PENALIZE given twice or not valid for
// RL.FIXED"), so the server stays the one authority on what each command
// accepts.
type Option struct {
	kind optionKind
	n    int64
	s    string
}

type optionKind uint8

const (
	optCost optionKind = iota + 1
	optPeek
	optPenalize
	optAlignFirst
	optTZ
	optKeep
	optBan
	optShadow
	optReadOnly
)

// Cost makes the request take n units instead of 1 (RL.FIXED, RL.SLIDE).
func Cost(n int64) Option { return Option{kind: optCost, n: n} }

// Peek evaluates the request without recording anything (RL.FIXED,
// RL.SLIDE).
func Peek() Option { return Option{kind: optPeek} }

// Penalize records denied requests too, so that a client that keeps
// retrying stays blocked (RL.SLIDE).
func Penalize() Option { return Option{kind: optPenalize} }

// AlignFirst starts a window with the first request that finds none open,
// instead of at multiples of the window from the epoch (RL.FIXED).
func AlignFirst() Option { return Option{kind: optAlignFirst} }

// TZ aligns RL.FIXED's windows to local time in zone: an IANA name
// ("Asia/Shanghai") or an offset ("+08:00").
func TZ(zone string) Option { return Option{kind: optTZ, s: zone} }

// Keep sets how many logins RL.LOGIN keeps in its list (at least the
// limit).
func Keep(n int64) Option { return Option{kind: optKeep, n: n} }

// Ban denies every request on the key for d after a rule denies one,
// fail2ban-style, whatever the rules would say (RL.FIXED, RL.SLIDE,
// RL.LOGIN). A PEEK never starts a ban.
func Ban(d time.Duration) Option { return Option{kind: optBan, n: int64(d)} }

// Shadow computes the decision and evolves the state as if enforced, but
// answers allowed (the other fields are the real ones), and counts the
// would-be denial apart in INFO ratelimit: a dry run for a new limit
// (RL.FIXED, RL.SLIDE, RL.ACQUIRE, policies).
func Shadow() Option { return Option{kind: optShadow} }

// ReadOnly sends the command's read-only twin (RL.FIXED_RO, RL.SLIDE_RO,
// RL.CHECK_RO): the answer the command would give, changing nothing, as
// Peek does, but as a read, which replicas serve (a go-redis client that
// routes reads to replicas sends it there) and a user with only @read may
// call.
func ReadOnly() Option { return Option{kind: optReadOnly} }

// commandFor returns name, or its read-only twin when opts ask for it.
func commandFor(name string, opts []Option) string {
	for _, o := range opts {
		if o.kind == optReadOnly {
			return name + "_RO"
		}
	}
	return name
}

func appendOptions(args []any, opts []Option) ([]any, error) {
	for _, o := range opts {
		switch o.kind {
		case optCost:
			args = append(args, "COST", o.n)
		case optPeek:
			args = append(args, "PEEK")
		case optPenalize:
			args = append(args, "PENALIZE")
		case optAlignFirst:
			args = append(args, "ALIGN", "FIRST")
		case optTZ:
			args = append(args, "TZ", o.s)
		case optKeep:
			args = append(args, "KEEP", o.n)
		case optBan:
			w, err := FormatWindow(time.Duration(o.n))
			if err != nil {
				return nil, fmt.Errorf("%w (BAN)", err)
			}
			args = append(args, "BAN", w)
		case optShadow:
			args = append(args, "SHADOW")
		}
	}
	return args, nil
}

func appendRules(args []any, rules []Rule) ([]any, error) {
	if len(rules) == 0 {
		return nil, errors.New("limitkv: at least one rule is needed")
	}
	for _, r := range rules {
		w, err := FormatWindow(r.Window)
		if err != nil {
			return nil, fmt.Errorf("%w (rule with limit %d)", err, r.Limit)
		}
		args = append(args, r.Limit, w)
	}
	return args, nil
}

// Fixed is RL.FIXED key limit window [limit window ...] [options]: fixed
// windows, reset at multiples of the window from the epoch (or local
// midnight with TZ, or from the first request with AlignFirst). Options:
// Cost, Peek, AlignFirst, TZ, Ban, Shadow, ReadOnly.
func (c *Client) Fixed(ctx context.Context, key string, rules []Rule, opts ...Option) (Decision, error) {
	return c.rulesCommand(ctx, "RL.FIXED", key, rules, opts)
}

// Slide is RL.SLIDE key limit window [limit window ...] [options]: an exact
// sliding window. Options: Cost, Peek, Penalize, Ban, Shadow, ReadOnly.
func (c *Client) Slide(ctx context.Context, key string, rules []Rule, opts ...Option) (Decision, error) {
	return c.rulesCommand(ctx, "RL.SLIDE", key, rules, opts)
}

func (c *Client) rulesCommand(ctx context.Context, name, key string, rules []Rule, opts []Option) (Decision, error) {
	args := make([]any, 0, 2+2*len(rules)+3*len(opts))
	args = append(args, commandFor(name, opts), key)
	args, err := appendRules(args, rules)
	if err != nil {
		return Decision{}, err
	}
	if args, err = appendOptions(args, opts); err != nil {
		return Decision{}, err
	}
	return c.decide(ctx, args)
}

// Login is RL.LOGIN key limit window [KEEP n]: at most rule.Limit
// successful logins per rule.Window, recorded in a plain list at key.
// Options: Keep, Ban.
func (c *Client) Login(ctx context.Context, key string, rule Rule, opts ...Option) (Decision, error) {
	args := make([]any, 0, 4+2*len(opts))
	args = append(args, "RL.LOGIN", key)
	args, err := appendRules(args, []Rule{rule})
	if err != nil {
		return Decision{}, err
	}
	if args, err = appendOptions(args, opts); err != nil {
		return Decision{}, err
	}
	return c.decide(ctx, args)
}

// decide runs an RL command and reads its five-integer reply.
func (c *Client) decide(ctx context.Context, args []any) (Decision, error) {
	v, err := c.rdb.Do(ctx, args...).Slice()
	if err != nil {
		return Decision{}, err
	}
	var n [5]int64
	if err := fiveInts(v, &n, args[0]); err != nil {
		return Decision{}, err
	}
	d := Decision{
		Allowed:    n[0] == 1,
		Limit:      n[1],
		Remaining:  n[2],
		ResetAfter: time.Duration(n[4]) * time.Millisecond,
	}
	if n[3] > 0 {
		d.RetryAfter = time.Duration(n[3]) * time.Millisecond
	}
	return d, nil
}

func fiveInts(v []any, n *[5]int64, cmd any) error {
	if len(v) != 5 {
		return fmt.Errorf("limitkv: %v answered %d elements, expected 5 integers", cmd, len(v))
	}
	for i, e := range v {
		x, ok := e.(int64)
		if !ok {
			return fmt.Errorf("limitkv: %v answered %T at position %d, expected an integer", cmd, e, i+1)
		}
		n[i] = x
	}
	return nil
}

// Throttled is CL.THROTTLE's reply, kept to redis-cell's meaning (whole
// seconds, rounded up) but typed.
type Throttled struct {
	// Allowed is the wire's 0 (redis-cell answers 1 for "limited").
	Allowed bool
	// Limit is max_burst + 1, as redis-cell reports it.
	Limit     int64
	Remaining int64
	// RetryAfter is how long until the request would fit, whole seconds;
	// 0 when allowed, and 0 with Never set when it can never fit.
	RetryAfter time.Duration
	// ResetAfter is how long until the bucket is full again, whole seconds.
	ResetAfter time.Duration
	// Never says the request was denied because its quantity exceeds what
	// the bucket can ever hold (redis-cell's -1 on a limited request): no
	// wait will help.
	Never bool
}

// Throttle is CL.THROTTLE key max_burst count_per_period period quantity,
// redis-cell's GCRA: count per period, with bursts of maxBurst+1. period
// must be a whole number of seconds (the command's unit); quantity 0 peeks.
func (c *Client) Throttle(ctx context.Context, key string, maxBurst, countPerPeriod int64, period time.Duration, quantity int64) (Throttled, error) {
	if period%time.Second != 0 {
		return Throttled{}, fmt.Errorf("limitkv: CL.THROTTLE period %v is not a whole number of seconds", period)
	}
	v, err := c.rdb.Do(ctx, "CL.THROTTLE", key, maxBurst, countPerPeriod, int64(period/time.Second), quantity).Slice()
	if err != nil {
		return Throttled{}, err
	}
	var n [5]int64
	if err := fiveInts(v, &n, "CL.THROTTLE"); err != nil {
		return Throttled{}, err
	}
	t := Throttled{
		Allowed:    n[0] == 0,
		Limit:      n[1],
		Remaining:  n[2],
		ResetAfter: time.Duration(n[4]) * time.Second,
	}
	switch {
	case n[3] >= 0:
		t.RetryAfter = time.Duration(n[3]) * time.Second
	case !t.Allowed:
		t.Never = true
	}
	return t, nil
}
