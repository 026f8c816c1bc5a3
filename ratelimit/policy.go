package ratelimit

import (
	"slices"
	"strconv"
	"strings"
)

// A named policy (RL.POLICY SET name ...) is a limit defined once on the
// server, the arguments of RL.FIXED, RL.SLIDE, CL.THROTTLE or RL.ACQUIRE
// after the key, that applications apply by name with RL.CHECK. This is its
// model: its kinds, the parse of a definition and the normalised form
// RL.POLICY GET returns and snapshots keep. The registry, the commands and
// the counts of decisions are the server's.

// MaxPolicyName bounds a policy's name; names are of [A-Za-z0-9_.-], so
// that they fit INFO lines (which a colon or a comma would break) and
// metric labels.
const MaxPolicyName = 128

// PolicyKind is the limit a policy applies, which is also the kind of
// state its keys hold.
type PolicyKind byte

const (
	PolicyFixed PolicyKind = iota
	PolicySlide
	PolicyGCRA
	PolicyConcurrency
)

var policyKindNames = [...]string{PolicyFixed: "FIXED", PolicySlide: "SLIDE", PolicyGCRA: "GCRA", PolicyConcurrency: "CONCURRENCY"}

// String is the kind as a definition names it.
func (k PolicyKind) String() string { return policyKindNames[k] }

// Policy is one named policy; it never changes once parsed.
type Policy struct {
	Name string
	// Key is the name as a container keys the policy's state (the same
	// bytes, kept so that a decision converts nothing).
	Key  []byte
	Kind PolicyKind
	// Def is the normalised definition (the words after the name), which
	// RL.POLICY GET returns and snapshots keep: fed back to ParsePolicy it
	// gives the same policy.
	Def [][]byte
	// FIXED and SLIDE: the rules and options; COST and PEEK come with
	// each RL.CHECK.
	Rules    []Rule
	First    bool
	Zone     *Zone
	Penalize bool
	Ban      int64 // BAN's duration in ms; 0 for none
	// GCRA: CL.THROTTLE's max_burst, count_per_period and period (s).
	GCRA GCRA
	// CONCURRENCY: RL.ACQUIRE's limit and lease (ms); the id comes with
	// each RL.CHECK.
	Leases, Lease int64
	// Shadow: decisions are answered allowed, denials counted apart.
	Shadow bool
	// MaxCost is the smallest limit of the rules: a COST above it could
	// never be allowed, and is an error.
	MaxCost int64
}

// CheckPolicyName refuses a name that is not 1 to MaxPolicyName
// characters of [A-Za-z0-9_.-].
func CheckPolicyName(name []byte) error {
	if len(name) == 0 || len(name) > MaxPolicyName {
		return ArgError("invalid policy name '" + string(name[:min(len(name), MaxPolicyName)]) + "': expected 1 to 128 characters from A-Z a-z 0-9 _ . -")
	}
	for _, ch := range name {
		if !('a' <= ch && ch <= 'z' || 'A' <= ch && ch <= 'Z' || '0' <= ch && ch <= '9' || ch == '_' || ch == '.' || ch == '-') {
			return ArgError("invalid policy name '" + string(name) + "': expected 1 to 128 characters from A-Z a-z 0-9 _ . -")
		}
	}
	return nil
}

// ParsePolicy reads a policy's definition, the words after its name,
// refusing it with an ArgError that names the argument. A TZ's zone is
// loaded here.
func ParsePolicy(name []byte, def [][]byte) (*Policy, error) {
	if err := CheckPolicyName(name); err != nil {
		return nil, err
	}
	if len(def) == 0 {
		return nil, ArgError("policy '" + string(name) + "' has no definition: expected FIXED, SLIDE, GCRA or CONCURRENCY and that command's arguments after the key")
	}
	p := &Policy{Name: string(name), Key: []byte(string(name))}
	args := def[1:]
	// COST and PEEK are each request's, given to RL.CHECK.
	for _, a := range args {
		if is(a, "COST") || is(a, "PEEK") {
			return nil, ArgError(strings.ToUpper(string(a)) + " belongs to RL.CHECK, not to a policy's definition")
		}
	}
	switch kind := def[0]; {
	case is(kind, "FIXED"), is(kind, "SLIDE"):
		p.Kind = PolicySlide
		cmd := "rl.slide"
		if is(kind, "FIXED") {
			p.Kind, cmd = PolicyFixed, "rl.fixed"
		}
		var rules [MaxRules]Rule
		a, err := ParseArgs(args, cmd, p.Kind == PolicyFixed, &rules)
		if err != nil {
			return nil, err
		}
		if len(a.Rules) == 0 {
			return nil, ArgError("policy '" + string(name) + "' has no rule: expected limit window [limit window ...]")
		}
		p.Rules = slices.Clone(a.Rules)
		p.First, p.Zone, p.Penalize = a.First, a.Zone, a.Penalize
		p.Ban, p.Shadow = a.Ban, a.Shadow
		p.MaxCost = MaxLimit
		for _, r := range p.Rules {
			p.MaxCost = min(p.MaxCost, r.Limit)
		}
	case is(kind, "GCRA"):
		p.Kind = PolicyGCRA
		// SHADOW may end the definition, as it may any command's.
		if n := len(args); n > 0 && is(args[n-1], "SHADOW") {
			p.Shadow = true
			args = args[:n-1]
		}
		if err := p.parseGCRA(args); err != nil {
			return nil, err
		}
	case is(kind, "CONCURRENCY"):
		p.Kind = PolicyConcurrency
		if len(args) < 2 {
			return nil, ArgError("wrong number of arguments: expected limit lease [SHADOW]")
		}
		a, err := ParseLease(args[0], args[1], args[2:])
		if err != nil {
			return nil, err
		}
		p.Leases, p.Lease, p.Shadow = a.Limit, a.Lease, a.Shadow
	default:
		return nil, ArgError("invalid policy type '" + string(kind) + "': expected FIXED, SLIDE, GCRA or CONCURRENCY")
	}
	p.Def = p.normalised()
	return p, nil
}

// parseGCRA reads "max_burst count_per_period period", CL.THROTTLE's
// arguments; the quantity is RL.CHECK's COST. The period is a duration in
// whole seconds (a bare number is seconds, as in CL.THROTTLE).
func (p *Policy) parseGCRA(args [][]byte) error {
	if len(args) != 3 {
		if len(args) > 3 {
			return ArgError("syntax error: unexpected argument '" + string(args[3]) + "'")
		}
		return ArgError("GCRA needs max_burst count_per_period period")
	}
	burst, ok := ParseInt(args[0])
	if !ok || burst < 0 || burst >= MaxLimit {
		return ArgError("invalid max_burst '" + string(args[0]) + "': expected an integer from 0 to 9007199254740991")
	}
	count, ok := ParseLimit(args[1])
	if !ok {
		return ArgError("invalid count_per_period '" + string(args[1]) + "': expected " + LimitRange)
	}
	period, ok := ParseDuration(args[2])
	if !ok || period%1000 != 0 {
		return ArgError("invalid period '" + string(args[2]) + "': expected whole seconds, a number with unit s, m, h or d (a bare number is seconds), from 1s to 3650d")
	}
	g := GCRA{MaxBurst: burst, Count: count, Period: period / 1000}
	// DecideGCRA's arithmetic in ns must not overflow for any COST the
	// policy admits: the burst's span, (max_burst+1) emission intervals,
	// is bounded by the longest window, and an interval is at least 1 ns.
	emission := int64(float64(g.Period*1e9) / float64(g.Count))
	if emission == 0 {
		return ArgError("invalid count_per_period '" + string(args[1]) + "': more than one per nanosecond over the period")
	}
	if span, ok := mulNoOverflow(emission, burst+1); !ok || span > MaxWindow*1e6 {
		return ArgError("GCRA policy too long: max_burst+1 requests at count_per_period per period must span at most 3650d")
	}
	p.GCRA = g
	p.MaxCost = burst + 1
	return nil
}

func mulNoOverflow(a, b int64) (int64, bool) {
	if a != 0 && b > (1<<63-1)/a {
		return 0, false
	}
	return a * b, true
}

// normalised returns the policy's definition in one form: the type and
// option words in upper case, numbers in decimal, windows in their
// largest whole unit, the zone as ParseZone names it.
func (p *Policy) normalised() [][]byte {
	w := []string{p.Kind.String()}
	switch p.Kind {
	case PolicyFixed, PolicySlide:
		for _, r := range p.Rules {
			w = append(w, strconv.FormatInt(r.Limit, 10), formatWindow(r.Window))
		}
		if p.First {
			w = append(w, "ALIGN", "FIRST")
		}
		if p.Zone != nil {
			w = append(w, "TZ", p.Zone.Name)
		}
		if p.Penalize {
			w = append(w, "PENALIZE")
		}
		if p.Ban != 0 {
			w = append(w, "BAN", formatWindow(p.Ban))
		}
	case PolicyGCRA:
		w = append(w, strconv.FormatInt(p.GCRA.MaxBurst, 10), strconv.FormatInt(p.GCRA.Count, 10), formatWindow(p.GCRA.Period*1000))
	case PolicyConcurrency:
		w = append(w, strconv.FormatInt(p.Leases, 10), formatWindow(p.Lease))
	}
	if p.Shadow {
		w = append(w, "SHADOW")
	}
	out := make([][]byte, len(w))
	for i, s := range w {
		out[i] = []byte(s)
	}
	return out
}
