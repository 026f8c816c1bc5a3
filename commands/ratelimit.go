package commands

import (
	"strconv"
	"strings"

	"github.com/limitkv/limitkv/engine"
	"github.com/limitkv/limitkv/ratelimit"
)

// ratelimitCommands: limitkv's own decisions, and CL.THROTTLE, which
// follows the redis-cell module and registers as it does. Each has a
// read-only twin (_RO) that answers what PEEK would, on replicas too.
func ratelimitCommands() []*command {
	return []*command{
		cmd("rl.fixed", -4, "write denyoom fast", cmdRLFixed).withPrepare(prepareRLFixed),
		cmd("rl.fixed_ro", -4, "readonly fast", cmdRLFixedRO).withPrepare(prepareRLFixed),
		cmd("rl.slide", -4, "write denyoom fast", cmdRLSlide).withPrepare(prepareRLSlide),
		cmd("rl.slide_ro", -4, "readonly fast", cmdRLSlideRO).withPrepare(prepareRLSlide),
		cmd("rl.login", -4, "write denyoom fast", cmdRLLogin),
		cmd("cl.throttle", -1, "write denyoom fast", cmdCLThrottle),
		cmd("cl.throttle_ro", -1, "readonly fast", cmdCLThrottleRO),
	}
}

// RL.ACQUIRE and RL.RELEASE are in ratelimit_lease.go. Each decision
// runs under the key's shard lock, on the server's clock, in one round
// trip; see docs/commands.md for the contract.

// rlScratch is a client's reusable memory for decisions: with it a
// decision on an existing key allocates nothing.
type rlScratch struct {
	rules  [ratelimit.MaxRules]ratelimit.Rule
	decide engine.LimitScratch
	// req is the request its spec's Prepare read, for Run.
	req rlRequest
	// parsed is the last RL.FIXED or RL.SLIDE arguments read without
	// error, whose rules are still in rules: a client asks with the same
	// limit and window every time, and comparing a few bytes costs less
	// than reading them again.
	parsed rlParsed
}

// rlParsed is a client's last arguments read, as sent and as read.
type rlParsed struct {
	raw   []byte // each argument after the key, length-prefixed; nil: none
	fixed bool
	args  ratelimit.Args
}

// maxParsedRaw bounds the arguments a client keeps to compare: a long
// list of rules is parsed each time rather than held.
const maxParsedRaw = 128

// same reports whether args are the arguments kept, for the same command.
func (p *rlParsed) same(args [][]byte, fixed bool) bool {
	if p.raw == nil || p.fixed != fixed {
		return false
	}
	raw := p.raw
	for _, a := range args {
		if len(raw) == 0 || int(raw[0]) != len(a) || len(raw) < 1+len(a) || string(raw[1:1+len(a)]) != string(a) {
			return false
		}
		raw = raw[1+len(a):]
	}
	return len(raw) == 0
}

// keep remembers args, read as a, unless they are too long to.
func (p *rlParsed) keep(args [][]byte, fixed bool, a ratelimit.Args) {
	p.raw = p.raw[:0]
	for _, arg := range args {
		if len(arg) > 255 || len(p.raw)+1+len(arg) > maxParsedRaw {
			p.raw = nil
			return
		}
		p.raw = append(p.raw, byte(len(arg)))
		p.raw = append(p.raw, arg...)
	}
	if p.raw == nil {
		p.raw = []byte{} // no arguments after the key is an answer too
	}
	p.fixed, p.args = fixed, a
}

// rlRequest is an RL request's arguments as Prepare read them, before
// dispatch locked the key. msg, when set, is the reply refusing them,
// which Run writes in their place.
type rlRequest struct {
	msg   string
	args  ratelimit.Args // RL.FIXED, RL.SLIDE
	check checkArgs      // RL.CHECK
}

// rlCommand names a rate-limit command in the Server's decision counters.
type rlCommand int

const (
	rlFixed rlCommand = iota
	rlSlide
	rlLogin
	clThrottle
	rlAcquire
	rlCheck
	rlCommands
)

// shadows says whether the command takes the SHADOW option, and so has a
// shadow-denied count to show.
func (cmd rlCommand) shadows() bool {
	return cmd == rlFixed || cmd == rlSlide || cmd == rlAcquire || cmd == rlCheck
}

// rlCounterNames are the counters' prefixes in INFO, in INFO's order.
var rlCounterNames = [rlCommands]string{"rl_fixed", "rl_slide", "rl_login", "cl_throttle", "rl_acquire", "rl_check"}

// rlStats counts the decisions of each rate-limit command for INFO's
// ratelimit section and the metrics. Requests that only ask (PEEK,
// CL.THROTTLE with quantity 0) are not counted. A SHADOW request that the
// limit would have refused counts as shadow-denied, not as allowed or
// denied, so that operators see what a limit in rollout would refuse.
type rlStats [rlCommands]ratelimit.Counts

func (st *rlStats) reset() {
	for i := range st {
		st[i].Reset()
	}
}

func (st *rlStats) count(cmd rlCommand, allowed bool) {
	st[cmd].Count(allowed, false)
}

// decided is where every RL decision ends: it counts the decision (unless
// the request only looked) and writes the five-integer reply. A SHADOW
// request's denial is counted as shadow-denied and answered as allowed,
// with the other fields as the limit computed them. Denials (not shadow
// ones) are counted for RL.TOP against the command's first key by its key
// specs: a new caller declares its key there, as dispatch needs anyway.
func (c *Ctx) decided(cmd rlCommand, d ratelimit.Decision, peek, shadow bool) {
	if !peek {
		c.Srv.rl[cmd].Count(d.Allowed, shadow)
		if !d.Allowed && !shadow {
			c.noteDenied() // RL.TOP, rl.denied
			if d.BanStarted {
				c.notifyFirstKey(notifyRateLimit, "rl.ban")
			}
		}
	}
	if shadow {
		d.Allowed = true
	}
	c.replyDecision(d)
}

func prepareRLFixed(c *Ctx) { c.prepareRules(true) }
func prepareRLSlide(c *Ctx) { c.prepareRules(false) }

// prepareRules reads RL.FIXED's or RL.SLIDE's arguments after the key
// (loading a TZ's zone) into the client's request.
func (c *Ctx) prepareRules(fixed bool) {
	r := &c.Client.rl.req
	p := &c.Client.rl.parsed
	if p.same(c.Args[2:], fixed) {
		r.args, r.msg = p.args, ""
		return
	}
	a, err := ratelimit.ParseArgs(c.Args[2:], c.Spec.Name, fixed, &c.Client.rl.rules)
	r.args, r.msg = a, ""
	if err != nil {
		r.msg = argMsg(err)
		p.raw = nil // the rules it overwrote are no longer those kept
		return
	}
	p.keep(c.Args[2:], fixed, a)
}

// argError replies with the text of an argument that package ratelimit
// refused.
func (c *Ctx) argError(err error) {
	c.W.Error(argMsg(err))
}

// argMsg is the reply to an argument that package ratelimit refused: its
// text carries no error code of its own, and may begin with a word in
// capitals ("TZ applies to ...") that the reply must not take for one.
func argMsg(err error) string { return "ERR " + err.Error() }

// replyDecision writes the five-integer reply.
func (c *Ctx) replyDecision(d ratelimit.Decision) {
	c.W.Array(5)
	c.W.Int(b2i(d.Allowed))
	c.W.Int(d.Limit)
	c.W.Int(d.Remaining)
	c.W.Int(d.RetryAfter)
	c.W.Int(d.ResetAfter)
}

// The read-only twins RL.FIXED_RO, RL.SLIDE_RO, CL.THROTTLE_RO,
// RL.ACQUIRE_RO and RL.CHECK_RO take their command's arguments and answer
// what it would, changing nothing, as PEEK does: Redis's convention for the
// read-only twin of a command that writes (SORT_RO, EVAL_RO). Being reads
// (@read, not @write), they are served by replicas and allowed to a user
// with only @read: dashboards and admin tools ask how much is left without
// a write. They count no decision.

func cmdRLFixed(c *Ctx)   { rlFixedCmd(c, false) }
func cmdRLFixedRO(c *Ctx) { rlFixedCmd(c, true) }
func cmdRLSlide(c *Ctx)   { rlSlideCmd(c, false) }
func cmdRLSlideRO(c *Ctx) { rlSlideCmd(c, true) }

func rlFixedCmd(c *Ctx, readOnly bool) {
	r := &c.Client.rl.req
	if r.msg != "" {
		c.W.Error(r.msg)
		return
	}
	a := r.args
	a.Peek = a.Peek || readOnly
	o := ratelimit.FixedOptions{Cost: a.Cost, Peek: a.Peek, First: a.First, Zone: a.Zone, Ban: a.Ban}
	d, err := c.Shard(c.Args[1]).Fixed(c.DB, c.Args[1], c.Now, a.Rules, o, &c.Client.rl.decide)
	if err != nil {
		c.Err(err)
		return
	}
	c.decided(rlFixed, d, a.Peek, a.Shadow)
}

func rlSlideCmd(c *Ctx, readOnly bool) {
	r := &c.Client.rl.req
	if r.msg != "" {
		c.W.Error(r.msg)
		return
	}
	a := r.args
	a.Peek = a.Peek || readOnly
	o := ratelimit.SlideOptions{Cost: a.Cost, Peek: a.Peek, Penalize: a.Penalize, Ban: a.Ban}
	d, err := c.Shard(c.Args[1]).Slide(c.DB, c.Args[1], c.Now, a.Rules, o, &c.Client.rl.decide)
	if err != nil {
		c.Err(err)
		return
	}
	c.decided(rlSlide, d, a.Peek, a.Shadow)
}

// cmdCLThrottle is redis-cell's CL.THROTTLE, with its argument parsing and
// its error texts ("Cell error: ..."), which clients written against the
// module may match on. CL.THROTTLE_RO answers what it would for the
// quantity, recording nothing (redis-cell's quantity 0 looks, but answers
// for a request of 0).
func cmdCLThrottle(c *Ctx)   { clThrottleCmd(c, false) }
func cmdCLThrottleRO(c *Ctx) { clThrottleCmd(c, true) }

func clThrottleCmd(c *Ctx, readOnly bool) {
	if len(c.Args) != 5 && len(c.Args) != 6 {
		c.W.ErrorVerbatim("Cell error: Store error: Usage: " + c.Spec.Name + " <key> <max_burst> <count per period> <period> [<quantity>]")
		return
	}
	var vals [4]int64
	vals[3] = 1
	for i := 2; i < len(c.Args); i++ {
		n, err := strconv.ParseInt(string(c.Args[i]), 10, 64)
		if err != nil {
			c.W.ErrorVerbatim("Cell error: Store error: Couldn't parse as integer: " + string(c.Args[i]))
			return
		}
		vals[i-2] = n
	}
	g := ratelimit.GCRA{MaxBurst: vals[0], Count: vals[1], Period: vals[2], Quantity: vals[3], Peek: readOnly}
	res, err := c.Shard(c.Args[1]).Throttle(c.DB, c.Args[1], c.Now, g, &c.Client.rl.decide)
	switch {
	case err == ratelimit.ErrZeroRate || err == ratelimit.ErrGCRAOverflow:
		c.W.ErrorVerbatim("Cell error: Store error: " + err.Error())
		return
	case err != nil:
		c.Err(err)
		return
	}
	if g.Quantity != 0 && !readOnly {
		c.Srv.rl.count(clThrottle, !res.Limited)
		if res.Limited {
			c.noteDenied() // RL.TOP
		}
	}
	c.W.Array(5)
	c.W.Int(b2i(res.Limited))
	c.W.Int(res.Limit)
	c.W.Int(res.Remaining)
	c.W.Int(res.RetryAfter)
	c.W.Int(res.ResetAfter)
}

func infoRateLimit(s *Server, b *strings.Builder) {
	for cmd, name := range rlCounterNames {
		kv(b, name+"_allowed", s.rl[cmd].Allowed.Load())
		kv(b, name+"_denied", s.rl[cmd].Denied.Load())
		if rlCommand(cmd).shadows() {
			kv(b, name+"_shadow_denied", s.rl[cmd].ShadowDenied.Load())
		}
	}
	infoPolicies(s, b)
}

// cmdRLLogin: RL.LOGIN key limit window [KEEP n] [BAN duration].
func cmdRLLogin(c *Ctx) {
	limit, ok := ratelimit.ParseLimit(c.Args[2])
	if !ok {
		c.W.Error("invalid limit '" + string(c.Args[2]) + "': expected " + ratelimit.LimitRange)
		return
	}
	window, ok := ratelimit.ParseDuration(c.Args[3])
	if !ok {
		c.W.Error("invalid window '" + string(c.Args[3]) + "' for limit " + string(c.Args[2]) +
			": expected a whole number with unit ms, s, m, h or d (a bare number is seconds), from 1ms to 3650d")
		return
	}
	keep := c.Srv.Cfg.LoginKeep()
	var ban int64
	var seenKeep bool
	for j := 4; j < len(c.Args); j++ {
		opt := c.Args[j]
		hasValue := j+1 < len(c.Args)
		switch {
		case is(opt, "KEEP") && hasValue && !seenKeep:
			n, ok := engine.ParseInt(c.Args[j+1])
			if !ok || n < 1 || n > maxLoginKeep {
				c.W.Error("invalid KEEP '" + string(c.Args[j+1]) + "': expected an integer from 1 to 1048576")
				return
			}
			keep, seenKeep = n, true
			j++
		case is(opt, "BAN") && hasValue && ban == 0:
			d, err := ratelimit.ParseBan(c.Args[j+1])
			if err != nil {
				c.argError(err)
				return
			}
			ban = d
			j++
		case (is(opt, "KEEP") || is(opt, "BAN")) && !hasValue:
			c.W.Error("ERR " + strings.ToUpper(string(opt)) + " needs a value")
			return
		case ratelimit.IsOption(opt):
			c.W.Error("ERR " + strings.ToUpper(string(opt)) + " given twice or not valid for RL.LOGIN")
			return
		default:
			c.W.Error("syntax error: unexpected argument '" + string(opt) + "'")
			return
		}
	}
	d, err := c.Shard(c.Args[1]).Login(c.DB, c.Args[1], c.Now, limit, window, keep, ban)
	if err != nil {
		c.Err(err)
		return
	}
	c.decided(rlLogin, d, false, false)
}

// maxLoginKeep bounds KEEP, and so the list RL.LOGIN keeps.
const maxLoginKeep = 1 << 20
