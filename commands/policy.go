package commands

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/limitkv/limitkv/engine"
	"github.com/limitkv/limitkv/ratelimit"
	"github.com/limitkv/limitkv/resp"
)

// Named policies: RL.POLICY SET|GET|DEL|LIST and RL.CHECK. A policy is a
// limit defined once on the server (the arguments of RL.FIXED, RL.SLIDE or
// CL.THROTTLE after the key) that applications apply by name, so that a
// limit changes without a deploy and is reported per policy.
//
// RL.CHECK is as hot as the commands it stands for, so the policies are an
// immutable map behind an atomic pointer: a lookup takes no lock and
// allocates nothing; RL.POLICY SET and DEL copy the map and swap it, under
// the registry's mutex, under which they are also sent to the replicas (a
// full sync reads the policies under it with the offset its copy stands
// for, as it does the function libraries). Snapshots keep the policies in
// a meta record of their own (PoliciesPayload, RestorePolicies).
//
// The registry is bounded, so that its memory and the metrics' cardinality
// are: at most maxPolicies policies, names of at most
// ratelimit.MaxPolicyName bytes from [A-Za-z0-9_.-], and a definition is
// what the policy's command accepts, at most 16 rules. What a policy is,
// and the parse of its definition, are ratelimit's (ratelimit/policy.go).

const maxPolicies = 10000

// policy is one named policy as the server keeps it: the policy, which
// never changes once published (a SET publishes a new one), and its
// counts.
type policy struct {
	*ratelimit.Policy
	// counts are the policy's decisions, for INFO and the metrics. A SET
	// that replaces a policy keeps them (the series of a name goes on);
	// a DEL drops them.
	counts *rlCounts
}

// policyRegistry is the server's policies.
type policyRegistry struct {
	// mu orders the changes and their replication (see above).
	mu  sync.Mutex
	cur atomic.Pointer[map[string]*policy]
	// gen counts changes, for snapshots.
	gen atomic.Uint64
}

// lookup finds a policy without locking or allocating.
func (reg *policyRegistry) lookup(name []byte) *policy {
	m := reg.cur.Load()
	if m == nil {
		return nil
	}
	return (*m)[string(name)]
}

// snapshot returns the current map (never nil); it must not be changed.
func (reg *policyRegistry) snapshot() map[string]*policy {
	if m := reg.cur.Load(); m != nil {
		return *m
	}
	return nil
}

// sorted returns the policies by name.
func (reg *policyRegistry) sorted() []*policy {
	m := reg.snapshot()
	out := make([]*policy, 0, len(m))
	for _, p := range m {
		out = append(out, p)
	}
	slices.SortFunc(out, func(a, b *policy) int { return strings.Compare(a.Name, b.Name) })
	return out
}

// replaceLocked publishes m (the caller holds mu), carrying the counters
// of the policies it replaces over to their successors.
func (reg *policyRegistry) replaceLocked(m map[string]*policy) {
	old := reg.snapshot()
	for name, p := range m {
		if p.counts == nil {
			if prev := old[name]; prev != nil {
				p.counts = prev.counts
			} else {
				p.counts = new(rlCounts)
			}
		}
	}
	reg.cur.Store(&m)
	reg.gen.Add(1)
}

// withChanges returns a copy of the current policies with set added (or
// replacing those of the same names) and del removed, or the reason it
// would hold too many.
func (reg *policyRegistry) withChanges(set []*policy, del string) (map[string]*policy, string) {
	old := reg.snapshot()
	m := make(map[string]*policy, len(old)+len(set))
	for name, p := range old {
		if name != del {
			m[name] = p
		}
	}
	for _, p := range set {
		m[p.Name] = p
	}
	if len(m) > maxPolicies {
		return nil, "too many policies: at most " + strconv.Itoa(maxPolicies)
	}
	return m, ""
}

// parsePolicy reads a policy's definition, the words after its name.
func parsePolicy(name []byte, def [][]byte) (*policy, error) {
	p, err := ratelimit.ParsePolicy(name, def)
	if err != nil {
		return nil, err
	}
	return &policy{Policy: p}, nil
}

func cmdPolicySet(c *Ctx) {
	p, err := parsePolicy(c.Args[2], c.Args[3:])
	if err != nil {
		c.argError(err)
		return
	}
	reg := &c.Srv.policies
	reg.mu.Lock()
	defer reg.mu.Unlock()
	m, msg := reg.withChanges([]*policy{p}, "")
	if msg != "" {
		c.W.Error(msg)
		return
	}
	reg.replaceLocked(m)
	c.replicate(-1, c.Args...)
	c.W.OK()
}

func cmdPolicyGet(c *Ctx) {
	p := c.Srv.policies.lookup(c.Args[2])
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
	reg.mu.Lock()
	defer reg.mu.Unlock()
	if reg.lookup(c.Args[2]) == nil {
		c.W.Int(0)
		return
	}
	m, _ := reg.withChanges(nil, string(c.Args[2]))
	reg.replaceLocked(m)
	c.replicate(-1, c.Args...)
	c.W.Int(1)
}

func cmdPolicyList(c *Ctx) {
	if len(c.Args) > 3 {
		c.W.Error(msgSyntax)
		return
	}
	var names []string
	for _, p := range c.Srv.policies.sorted() {
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

func cmdPolicyHelp(c *Ctx) {
	help(c, "RL.POLICY", []string{
		"SET <name> FIXED|SLIDE|GCRA|CONCURRENCY <arguments of that command after the key>",
		"    FIXED: RL.FIXED's, SLIDE: RL.SLIDE's, GCRA: CL.THROTTLE's without the quantity,",
		"    CONCURRENCY: RL.ACQUIRE's without the id.",
		"    Create or replace a named policy.",
		"GET <name>",
		"    Return the policy's definition, as SET takes it.",
		"DEL <name>",
		"    Delete the policy; returns 1, or 0 if there was none.",
		"LIST [<pattern>]",
		"    Return the names of the policies (matching the glob pattern), sorted.",
	})
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
	p    *policy
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
	p := c.Srv.policies.lookup(c.Args[1])
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
		p.counts.count(d.Allowed, p.Shadow)
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
	for _, p := range s.policies.sorted() {
		fmt.Fprintf(b, "policy_%s:allowed=%d,denied=%d,shadow_denied=%d\r\n",
			p.Name, p.counts.allowed.Load(), p.counts.denied.Load(), p.counts.shadowDenied.Load())
	}
}

// resetPolicyCounts zeroes every policy's counters (CONFIG RESETSTAT).
func (reg *policyRegistry) resetCounts() {
	for _, p := range reg.snapshot() {
		p.counts.reset()
	}
}

// PolicyStat counts the decisions of one named policy.
type PolicyStat struct {
	Policy                        string
	Allowed, Denied, ShadowDenied int64
}

// PolicyStats returns the decisions of each policy, sorted by name: at
// most maxPolicies of them, so the metrics' policy label stays bounded.
func (s *Server) PolicyStats() []PolicyStat {
	ps := s.policies.sorted()
	out := make([]PolicyStat, len(ps))
	for i, p := range ps {
		out[i] = PolicyStat{p.Name, p.counts.allowed.Load(), p.counts.denied.Load(), p.counts.shadowDenied.Load()}
	}
	return out
}

// Policies in snapshots and full syncs: a version byte, then per policy
// its name and its normalised definition, each word length-prefixed.
const policyPayloadVersion = 1

func (reg *policyRegistry) payload() []byte {
	ps := reg.sorted()
	if len(ps) == 0 {
		return nil
	}
	b := []byte{policyPayloadVersion}
	b = binary.AppendUvarint(b, uint64(len(ps)))
	for _, p := range ps {
		b = binary.AppendUvarint(b, uint64(len(p.Def)+1))
		b = binary.AppendUvarint(b, uint64(len(p.Name)))
		b = append(b, p.Name...)
		for _, w := range p.Def {
			b = binary.AppendUvarint(b, uint64(len(w)))
			b = append(b, w...)
		}
	}
	return b
}

// readPolicyPayload parses a payload, each definition as SET would.
func readPolicyPayload(b []byte) ([]*policy, error) {
	if len(b) == 0 {
		return nil, nil
	}
	if b[0] != policyPayloadVersion {
		return nil, fmt.Errorf("policies recorded in an unknown format (version %d)", b[0])
	}
	b = b[1:]
	bad := errors.New("the recorded policies are damaged")
	next := func() (uint64, bool) {
		v, n := binary.Uvarint(b)
		if n <= 0 {
			return 0, false
		}
		b = b[n:]
		return v, true
	}
	count, ok := next()
	if !ok || count > maxPolicies {
		return nil, bad
	}
	out := make([]*policy, 0, count)
	for i := uint64(0); i < count; i++ {
		nw, ok := next()
		if !ok || nw < 2 || nw > 256 {
			return nil, bad
		}
		words := make([][]byte, nw)
		for j := range words {
			l, ok := next()
			if !ok || l > uint64(len(b)) {
				return nil, bad
			}
			words[j], b = b[:l:l], b[l:]
		}
		p, err := parsePolicy(words[0], words[1:])
		if err != nil {
			return nil, fmt.Errorf("policy '%s': %v", words[0], err)
		}
		out = append(out, p)
	}
	return out, nil
}

// PoliciesPayload returns the policies as snapshots keep them (nil: none),
// and a number that changes whenever they do.
func (s *Server) PoliciesPayload() ([]byte, uint64) {
	reg := &s.policies
	reg.mu.Lock()
	defer reg.mu.Unlock()
	return reg.payload(), reg.gen.Load()
}

// RestorePolicies replaces the policies with those of a payload made by
// PoliciesPayload (a snapshot's, a master's in a full sync; nil: none).
func (s *Server) RestorePolicies(payload []byte) error {
	ps, err := readPolicyPayload(payload)
	if err != nil {
		return err
	}
	reg := &s.policies
	reg.mu.Lock()
	defer reg.mu.Unlock()
	m := make(map[string]*policy, len(ps))
	for _, p := range ps {
		m[p.Name] = p
	}
	reg.replaceLocked(m)
	return nil
}

// policiesForSync is the replication's hook for a full sync: the policies
// as a payload, read under the registry's lock, which release lets go once
// the sync has read its offset (see functionsForSync).
func (s *Server) policiesForSync() ([]byte, func()) {
	reg := &s.policies
	reg.mu.Lock()
	return reg.payload(), reg.mu.Unlock
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
	reg.mu.Lock()
	defer reg.mu.Unlock()
	m, msg := reg.withChanges(ps, "")
	if msg != "" {
		return 0, fmt.Errorf("%s: %s", path, msg)
	}
	reg.replaceLocked(m)
	return len(ps), nil
}

func readPolicyFile(r io.Reader, path string) ([]*policy, error) {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64*1024), 1<<20)
	var ps []*policy
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
		p, err := parsePolicy(args[2], args[3:])
		if err != nil {
			return nil, fail(err.Error())
		}
		ps = append(ps, p)
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("%s:%d: %v", path, line+1, err)
	}
	if len(ps) > maxPolicies {
		return nil, fmt.Errorf("%s: too many policies: at most %d", path, maxPolicies)
	}
	return ps, nil
}
