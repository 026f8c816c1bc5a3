package commands

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"

	"github.com/limitkv/limitkv/engine"
	"github.com/limitkv/limitkv/ratelimit"
	"github.com/limitkv/limitkv/resp"
)

// policyCommands: named policies. RL.POLICY SET and DEL change every
// application's limits: they are @admin and @dangerous as well as
// @ratelimit, so that "+@ratelimit -@admin" lets a user apply policies
// with RL.CHECK and read them without redefining them.
func policyCommands() []*command {
	return []*command{
		cmd("rl.check", -3, "write denyoom fast", cmdRLCheck).withPrepare(prepareRLCheck),
		cmd("rl.check_ro", -3, "readonly fast", cmdRLCheckRO).withPrepare(prepareRLCheckRO),
		cmd("rl.policy", -2, "", nil).withSub(
			cmd("del", 3, "write admin fast", cmdPolicyDel),
			cmd("get", 3, "readonly fast", cmdPolicyGet),
			cmd("help", 2, "loading stale", cmdHelp),
			cmd("list", -2, "readonly", cmdPolicyList),
			cmd("set", -4, "write admin denyoom", cmdPolicySet),
		),
	}
}

// Named policies: RL.POLICY SET|GET|DEL|LIST and RL.CHECK. A policy is a
// limit defined once on the server (the arguments of RL.FIXED, RL.SLIDE or
// CL.THROTTLE after the key) that applications apply by name, so that a
// limit changes without a deploy and is reported per policy.
//
// Snapshots keep the policies in a meta record of their own
// (PoliciesPayload, RestorePolicies).
//
// The registry (ratelimit.Registry) is bounded, so that its memory and
// the metrics' cardinality are: at most ratelimit.MaxPolicies policies,
// names of at most ratelimit.MaxPolicyName bytes from [A-Za-z0-9_.-], and
// a definition is what the policy's command accepts, at most 16 rules.

func cmdPolicySet(c *Ctx) {
	p, err := ratelimit.ParseNamed(c.Args[2], c.Args[3:])
	if err != nil {
		c.argError(err)
		return
	}
	reg := &c.Srv.policies
	reg.Lock()
	defer reg.Unlock()
	m, msg := reg.WithChanges([]*ratelimit.Named{p}, "")
	if msg != "" {
		c.W.Error(msg)
		return
	}
	reg.ReplaceLocked(m)
	c.sharePolicy(p.Name)
	c.W.OK()
}

// sharePolicy sends a change of the named policy (the caller holds the
// registry's lock) where it must go: to the replicas through the
// replication stream, or in a cluster to every node, replicas included,
// with its stamp over the bus. A cluster's replicas take changes from the
// bus only: one replicated late through the stream, or stamped again on
// its way, would undo a later change made meanwhile on another master.
func (c *Ctx) sharePolicy(name string) {
	switch {
	case c.Srv.Cluster == nil:
		c.replicate(-1, c.Args...)
	case !c.Client.master:
		c.Srv.stampPolicy(name)
	}
}

func cmdPolicyGet(c *Ctx) {
	p := c.Srv.policies.Lookup(c.Args[2])
	if p == nil {
		c.W.Error(noSuchPolicy(c.Args[2]))
		return
	}
	c.W.Array(len(p.Def))
	for _, w := range p.Def {
		c.W.Bulk(w)
	}
}

func cmdPolicyDel(c *Ctx) {
	reg := &c.Srv.policies
	reg.Lock()
	defer reg.Unlock()
	if reg.Lookup(c.Args[2]) == nil {
		if c.Srv.Cluster != nil {
			// The name may be being set on another node at this moment:
			// the deletion, later, must win there as here.
			c.sharePolicy(string(c.Args[2]))
		}
		c.W.Int(0)
		return
	}
	m, _ := reg.WithChanges(nil, string(c.Args[2]))
	reg.ReplaceLocked(m)
	c.sharePolicy(string(c.Args[2]))
	c.W.Int(1)
}

func cmdPolicyList(c *Ctx) {
	if len(c.Args) > 3 {
		c.W.Error(msgSyntax)
		return
	}
	var names []string
	for _, p := range c.Srv.policies.Sorted() {
		if len(c.Args) == 3 && !engine.Match(c.Args[2], []byte(p.Name), false) {
			continue
		}
		names = append(names, p.Name)
	}
	c.W.Array(len(names))
	for _, n := range names {
		c.W.BulkString(n)
	}
}

func noSuchPolicy(name []byte) string {
	return "ERR no such policy '" + trunc(string(name), ratelimit.MaxPolicyName) + "'"
}

// cmdRLCheck: RL.CHECK name key [COST n] [PEEK], or RL.CHECK name key ID id
// for a CONCURRENCY policy (released with RL.RELEASE). The key is the
// subject: it holds one state per policy applied to it (a container,
// ratelimit/policies.go), so that two policies on one key are two limits;
// the reply is the policy's command's.
func cmdRLCheck(c *Ctx) { rlCheckCmd(c, false) }

// cmdRLCheckRO: RL.CHECK_RO name key [COST n], or RL.CHECK_RO name key
// [ID id] for a CONCURRENCY policy: what RL.CHECK would answer, changing
// nothing (see RL.ACQUIRE_RO for a CONCURRENCY policy's reply).
func cmdRLCheckRO(c *Ctx) { rlCheckCmd(c, true) }

// checkArgs are an RL.CHECK request's policy and options.
type checkArgs struct {
	p    *ratelimit.Named
	cost int64
	peek bool
	id   []byte // CONCURRENCY
}

func prepareRLCheck(c *Ctx)   { prepareCheck(c, false) }
func prepareRLCheckRO(c *Ctx) { prepareCheck(c, true) }

// prepareCheck finds RL.CHECK's policy and reads its options into the
// client's request, or the reply refusing them.
func prepareCheck(c *Ctx, readOnly bool) {
	r := &c.Client.rl.req
	r.check = checkArgs{}
	r.msg = readCheck(c, &r.check, readOnly)
}

// readCheck fills in a from the request, or returns the reply refusing it.
func readCheck(c *Ctx, a *checkArgs, readOnly bool) string {
	p := c.Srv.policies.Lookup(c.Args[1])
	if p == nil {
		return noSuchPolicy(c.Args[1])
	}
	cost, peek := int64(1), false
	seenCost := false
	var id []byte
	for j := 3; j < len(c.Args); j++ {
		switch opt := c.Args[j]; {
		case p.Kind == ratelimit.PolicyConcurrency && is(opt, "ID") && j+1 < len(c.Args) && id == nil:
			id = c.Args[j+1]
			if err := ratelimit.CheckLeaseID(id); err != nil {
				return argMsg(err)
			}
			j++
		case p.Kind == ratelimit.PolicyConcurrency && is(opt, "ID") && j+1 >= len(c.Args):
			return "ERR ID needs a value"
		case p.Kind == ratelimit.PolicyConcurrency && (is(opt, "COST") || is(opt, "PEEK")):
			return "ERR " + strings.ToUpper(string(opt)) + " is not valid for policy '" + p.Name + "' (CONCURRENCY): a request holds one slot, RL.ACQUIRE has no PEEK"
		case is(opt, "COST") && j+1 < len(c.Args) && !seenCost:
			n, ok := ratelimit.ParseLimit(c.Args[j+1])
			if !ok {
				return "invalid COST '" + string(c.Args[j+1]) + "': expected " + ratelimit.LimitRange
			}
			cost, seenCost = n, true
			j++
		case is(opt, "COST") && j+1 >= len(c.Args):
			return "ERR COST needs a value"
		case is(opt, "PEEK") && !peek:
			peek = true
		case is(opt, "COST") || is(opt, "PEEK") || is(opt, "ID"):
			return "ERR " + strings.ToUpper(string(opt)) + " given twice or not valid for policy '" + p.Name + "' (" + p.Kind.String() + ")"
		default:
			return "syntax error: unexpected argument '" + string(opt) + "'"
		}
	}
	peek = peek || readOnly
	if p.Kind == ratelimit.PolicyConcurrency && id == nil && !readOnly {
		return "ERR policy '" + p.Name + "' is a CONCURRENCY policy: RL.CHECK " + p.Name + " key ID id, released with RL.RELEASE key id"
	}
	if cost > p.MaxCost && p.Kind != ratelimit.PolicyConcurrency {
		return "ERR COST " + strconv.FormatInt(cost, 10) + " exceeds the limit " + strconv.FormatInt(p.MaxCost, 10) +
			" of policy '" + p.Name + "': the request could never be allowed"
	}
	*a = checkArgs{p: p, cost: cost, peek: peek, id: id}
	return ""
}

func rlCheckCmd(c *Ctx, readOnly bool) {
	r := &c.Client.rl.req
	if r.msg != "" {
		c.W.Error(r.msg)
		return
	}
	// Not kept past the request: a policy deleted since stays unreachable.
	a := r.check
	r.check = checkArgs{}
	p, cost, peek, id := a.p, a.cost, a.peek, a.id
	key := c.Args[2]
	sh := c.Shard(key)
	var d ratelimit.Decision
	var err error
	sc := &c.Client.rl.decide
	switch {
	case p.Kind == ratelimit.PolicyFixed:
		o := ratelimit.FixedOptions{Cost: cost, Peek: peek, First: p.First, Zone: p.Zone, Ban: p.Ban}
		d, err = sh.PolicyFixed(c.DB, key, c.Now, p.Key, p.Rules, o, sc)
	case p.Kind == ratelimit.PolicySlide:
		o := ratelimit.SlideOptions{Cost: cost, Peek: peek, Penalize: p.Penalize, Ban: p.Ban}
		d, err = sh.PolicySlide(c.DB, key, c.Now, p.Key, p.Rules, o, sc)
	case p.Kind == ratelimit.PolicyGCRA:
		g := p.GCRA
		g.Quantity, g.Peek = cost, peek
		var res ratelimit.ThrottleResult
		res, err = sh.PolicyThrottle(c.DB, key, c.Now, p.Key, g, sc)
		d = gcraDecision(res)
	case p.Kind == ratelimit.PolicyConcurrency && readOnly:
		d, err = sh.PeekAcquire(c.DB, key, c.Now, p.Key, p.Leases, p.Lease, id, sc)
	case p.Kind == ratelimit.PolicyConcurrency:
		d, err = sh.PolicyAcquire(c.DB, key, c.Now, p.Key, p.Leases, p.Lease, id, sc)
	}
	if err != nil {
		c.Err(err)
		return
	}
	if !peek {
		p.Counts.Count(d.Allowed, p.Shadow)
	}
	c.decided(rlCheck, d, peek, p.Shadow)
}

// gcraDecision gives a CL.THROTTLE result in the RL reply's conventions:
// allowed as 1, times in ms (rounded up, so that a client waiting that
// long is allowed), -1 retry when allowed.
func gcraDecision(res ratelimit.ThrottleResult) ratelimit.Decision {
	d := ratelimit.Decision{Allowed: !res.Limited, Limit: res.Limit, Remaining: res.Remaining, RetryAfter: -1}
	if res.Limited && res.RetryNs >= 0 {
		d.RetryAfter = (res.RetryNs + 999_999) / 1_000_000
	}
	d.ResetAfter = max((res.ResetNs+999_999)/1_000_000, 0)
	return d
}

// infoPolicies writes each policy's decisions, sorted by name, in INFO's
// ratelimit section: policy_<name>:allowed=..,denied=..,shadow_denied=..
func infoPolicies(s *Server, b *strings.Builder) {
	for _, p := range s.policies.Sorted() {
		fmt.Fprintf(b, "policy_%s:allowed=%d,denied=%d,shadow_denied=%d\r\n",
			p.Name, p.Counts.Allowed.Load(), p.Counts.Denied.Load(), p.Counts.ShadowDenied.Load())
	}
}

// PolicyStat counts the decisions of one named policy.
type PolicyStat struct {
	Policy                        string
	Allowed, Denied, ShadowDenied int64
}

// PolicyStats returns the decisions of each policy, sorted by name: at
// most ratelimit.MaxPolicies of them, so the metrics' policy label stays bounded.
func (s *Server) PolicyStats() []PolicyStat {
	ps := s.policies.Sorted()
	out := make([]PolicyStat, len(ps))
	for i, p := range ps {
		out[i] = PolicyStat{p.Name, p.Counts.Allowed.Load(), p.Counts.Denied.Load(), p.Counts.ShadowDenied.Load()}
	}
	return out
}

// PoliciesPayload returns the policies as snapshots keep them (nil: none),
// and a number that changes whenever they do.
func (s *Server) PoliciesPayload() ([]byte, uint64) {
	reg := &s.policies
	reg.Lock()
	defer reg.Unlock()
	return reg.Payload(), reg.Gen()
}

// RestorePolicies replaces the policies with those of a payload made by
// PoliciesPayload (a snapshot's, a master's in a full sync; nil: none).
// A cluster node merges them with its own instead, by their stamps: it
// has the changes every node sent over the bus, which a master's copy,
// taken a moment ago, may not have yet.
func (s *Server) RestorePolicies(payload []byte) error {
	rec, err := ratelimit.ReadPayload(payload)
	if err != nil {
		return err
	}
	reg := &s.policies
	reg.Lock()
	defer reg.Unlock()
	if s.Cluster != nil {
		_, err := reg.MergeLocked(rec.Changes())
		return err
	}
	reg.RestoreLocked(rec)
	return nil
}

// policiesForSync is the replication's hook for a full sync: the policies
// as a payload, read under the registry's lock, which release lets go once
// the sync has read its offset (see functionsForSync).
func (s *Server) policiesForSync() ([]byte, func()) {
	reg := &s.policies
	reg.Lock()
	return reg.Payload(), reg.Unlock
}

// LoadPolicyFile reads a file of "RL.POLICY SET name ..." lines (quoting
// as in redis-cli and the config file; a '#' that begins an argument
// outside quotes begins a comment, so a line may end with one) and adds
// its policies to those the snapshot had, replacing those of the same
// names; a name defined twice takes its last line, as the commands would.
// One bad line refuses the whole file: the error names the file and line.
func (s *Server) LoadPolicyFile(path string) (int, error) {
	f, err := os.Open(path)
	if err != nil {
		return 0, err
	}
	defer f.Close()
	ps, err := readPolicyFile(f, path)
	if err != nil {
		return 0, err
	}
	reg := &s.policies
	reg.Lock()
	defer reg.Unlock()
	m, msg := reg.WithChanges(ps, "")
	if msg != "" {
		return 0, fmt.Errorf("%s: %s", path, msg)
	}
	reg.ReplaceLocked(m)
	return len(ps), nil
}

func readPolicyFile(r io.Reader, path string) ([]*ratelimit.Named, error) {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64*1024), 1<<20)
	var ps []*ratelimit.Named
	line := 0
	for sc.Scan() {
		line++
		fail := func(msg string) error {
			return fmt.Errorf("%s:%d: %s", path, line, msg)
		}
		// Operators annotate a definition on its own line ("SLIDE 50 1m
		// SHADOW  # rolling out"); a '#' inside an argument or in quotes
		// stays data, as in a shell.
		args, ok := resp.SplitArgsComment([]byte(strings.TrimSpace(sc.Text())))
		if !ok {
			return nil, fail("unbalanced quotes")
		}
		if len(args) == 0 {
			continue // blank, or only a comment
		}
		if len(args) < 3 || !is(args[0], "RL.POLICY") || !is(args[1], "SET") {
			return nil, fail("expected RL.POLICY SET name FIXED|SLIDE|GCRA|CONCURRENCY ...")
		}
		p, err := ratelimit.ParseNamed(args[2], args[3:])
		if err != nil {
			return nil, fail(err.Error())
		}
		ps = append(ps, p)
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("%s:%d: %v", path, line+1, err)
	}
	if len(ps) > ratelimit.MaxPolicies {
		return nil, fmt.Errorf("%s: too many policies: at most %d", path, ratelimit.MaxPolicies)
	}
	return ps, nil
}
