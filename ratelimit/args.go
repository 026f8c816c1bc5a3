package ratelimit

import (
	"strconv"
	"strings"
)

// The arguments that define a limit, as RL.FIXED, RL.SLIDE, RL.ACQUIRE
// and the named policies made of them take them. Parsing allocates nothing
// on good input; on bad input it returns an ArgError naming the argument.

// MaxRules bounds the "limit window" pairs of one request, so that parsing
// needs no allocation.
const MaxRules = 16

// ArgError is a refused argument: the text says which and what was
// expected. It carries no error code: the caller's reply adds one.
type ArgError string

func (e ArgError) Error() string { return string(e) }

// LimitRange is the range of a limit or a COST, in the words of errors.
const LimitRange = "an integer from 1 to 9007199254740992"

// ParseLimit parses a limit or a COST: an integer from 1 to MaxLimit.
func ParseLimit(b []byte) (int64, bool) {
	n, ok := ParseInt(b)
	return n, ok && n >= 1 && n <= MaxLimit
}

// ParseDuration reads a window: a positive whole number with an optional
// unit ms, s, m, h or d; a bare number is seconds, as in EXPIRE. It is at
// most MaxWindow.
func ParseDuration(b []byte) (int64, bool) {
	i := 0
	for i < len(b) && b[i] >= '0' && b[i] <= '9' {
		i++
	}
	if i == 0 || i > 15 {
		return 0, false
	}
	n, err := strconv.ParseInt(string(b[:i]), 10, 64)
	if err != nil {
		return 0, false
	}
	var unit int64
	switch strings.ToLower(string(b[i:])) {
	case "", "s":
		unit = 1000
	case "ms":
		unit = 1
	case "m":
		unit = 60 * 1000
	case "h":
		unit = 3600 * 1000
	case "d":
		unit = 24 * 3600 * 1000
	default:
		return 0, false
	}
	if n <= 0 || n > MaxWindow/unit {
		return 0, false
	}
	return n * unit, true
}

// formatWindow writes a duration in ms in its largest whole unit, as
// ParseDuration reads it back.
func formatWindow(ms int64) string {
	for _, u := range []struct {
		ms   int64
		unit string
	}{{24 * 3600 * 1000, "d"}, {3600 * 1000, "h"}, {60 * 1000, "m"}, {1000, "s"}} {
		if ms%u.ms == 0 {
			return strconv.FormatInt(ms/u.ms, 10) + u.unit
		}
	}
	return strconv.FormatInt(ms, 10) + "ms"
}

// is reports whether b is s (upper case) in any ASCII case.
func is(b []byte, s string) bool {
	if len(b) != len(s) {
		return false
	}
	for i := 0; i < len(b); i++ {
		c := b[i]
		if 'a' <= c && c <= 'z' {
			c -= 'a' - 'A'
		}
		if c != s[i] {
			return false
		}
	}
	return true
}

// IsOption reports whether b names an option of some RL command, so that
// a command refusing it can say it is misplaced rather than unknown.
func IsOption(b []byte) bool {
	for _, o := range []string{"COST", "PEEK", "PENALIZE", "ALIGN", "TZ", "KEEP", "BAN", "SHADOW"} {
		if is(b, o) {
			return true
		}
	}
	return false
}

// Args are the arguments of RL.FIXED and RL.SLIDE after the key.
type Args struct {
	Rules    []Rule
	Cost     int64
	Peek     bool
	Penalize bool  // RL.SLIDE: record denied requests too
	First    bool  // RL.FIXED ALIGN FIRST
	Zone     *Zone // RL.FIXED TZ; nil for UTC
	Ban      int64 // BAN's duration in ms; 0 for none
	Shadow   bool
}

// ParseArgs reads "limit window [limit window ...]" and the options after
// them, from the arguments that follow the key; fixed says whether ALIGN and
// TZ are accepted (RL.FIXED) or PENALIZE (RL.SLIDE), cmd names the command
// in errors. BAN and SHADOW are accepted by both. The rules are kept in
// *rules, so that parsing allocates nothing. A TZ is loaded here (the
// first use of a zone reads its rules), so the caller parses before it
// takes any lock. Named policies read their definitions with it too, so a
// policy accepts exactly what the command does.
func ParseArgs(args [][]byte, cmd string, fixed bool, rules *[MaxRules]Rule) (Args, error) {
	a := Args{Cost: 1}
	j := 0
	for j < len(args) {
		if _, isInt := ParseInt(args[j]); !isInt && len(a.Rules) > 0 {
			break
		}
		limit, ok := ParseLimit(args[j])
		if !ok {
			return a, ArgError("invalid limit '" + string(args[j]) + "': expected " + LimitRange)
		}
		if j+1 >= len(args) {
			return a, ArgError("limit " + string(args[j]) + " has no window")
		}
		window, ok := ParseDuration(args[j+1])
		if !ok {
			return a, ArgError("invalid window '" + string(args[j+1]) + "' for limit " + string(args[j]) +
				": expected a whole number with unit ms, s, m, h or d (a bare number is seconds), from 1ms to 3650d")
		}
		if len(a.Rules) == MaxRules {
			return a, ArgError("too many rules: at most 16 limit/window pairs")
		}
		rules[len(a.Rules)] = Rule{Limit: limit, Window: window}
		a.Rules = rules[:len(a.Rules)+1]
		j += 2
	}
	var seenCost, seenAlign, seenTZ, seenBan bool
	for ; j < len(args); j++ {
		opt := args[j]
		hasValue := j+1 < len(args)
		switch {
		case is(opt, "COST") && hasValue && !seenCost:
			n, ok := ParseLimit(args[j+1])
			if !ok {
				return a, ArgError("invalid COST '" + string(args[j+1]) + "': expected " + LimitRange)
			}
			a.Cost, seenCost = n, true
			j++
		case is(opt, "PEEK") && !a.Peek:
			a.Peek = true
		case is(opt, "PENALIZE") && !fixed && !a.Penalize:
			a.Penalize = true
		case is(opt, "BAN") && hasValue && !seenBan:
			d, err := ParseBan(args[j+1])
			if err != nil {
				return a, err
			}
			a.Ban, seenBan = d, true
			j++
		case is(opt, "SHADOW") && !a.Shadow:
			a.Shadow = true
		case is(opt, "ALIGN") && fixed && hasValue && !seenAlign:
			switch v := args[j+1]; {
			case is(v, "EPOCH"):
			case is(v, "FIRST"):
				a.First = true
			default:
				return a, ArgError("invalid ALIGN '" + string(v) + "': expected EPOCH or FIRST")
			}
			seenAlign = true
			j++
		case is(opt, "TZ") && fixed && hasValue && !seenTZ:
			z, err := ParseZone(args[j+1])
			if err != nil {
				return a, ArgError("invalid TZ '" + string(args[j+1]) + "': expected an IANA time zone such as Asia/Shanghai or an offset such as +08:00")
			}
			a.Zone, seenTZ = z, true
			j++
		case (is(opt, "COST") || is(opt, "ALIGN") || is(opt, "TZ") || is(opt, "BAN")) && !hasValue:
			return a, ArgError(strings.ToUpper(string(opt)) + " needs a value")
		default:
			if IsOption(opt) {
				return a, ArgError(strings.ToUpper(string(opt)) + " given twice or not valid for " + strings.ToUpper(cmd))
			}
			return a, ArgError("syntax error: unexpected argument '" + string(opt) + "'")
		}
	}
	if a.Zone != nil && a.First {
		return a, ArgError("TZ applies to ALIGN EPOCH only")
	}
	for i, r := range a.Rules {
		if a.Cost > r.Limit {
			return a, ArgError("COST " + strconv.FormatInt(a.Cost, 10) + " exceeds the limit " + string(args[2*i]) +
				" of rule '" + string(args[2*i]) + " " + string(args[1+2*i]) + "': the request could never be allowed")
		}
		if a.Zone != nil && a.Zone.CheckWindow(r.Window) != nil {
			return a, ArgError("window '" + string(args[1+2*i]) + "' cannot be aligned to local time in " + a.Zone.Name +
				": with TZ use a window that divides a day or a whole number of days")
		}
	}
	return a, nil
}

// ParseBan reads BAN's duration, in the window syntax.
func ParseBan(b []byte) (int64, error) {
	d, ok := ParseDuration(b)
	if !ok {
		return 0, ArgError("invalid BAN '" + string(b) +
			"': expected a whole number with unit ms, s, m, h or d (a bare number is seconds), from 1ms to 3650d")
	}
	return d, nil
}

// Lease is RL.ACQUIRE's semaphore: at most Limit leases of Lease ms.
type Lease struct {
	Limit  int64
	Lease  int64 // ms
	Shadow bool
}

const leaseLimitRange = "an integer from 1 to 10000"

// ParseLease reads RL.ACQUIRE's "limit lease" and the options after its
// id (only SHADOW), which also define a CONCURRENCY policy.
func ParseLease(limitArg, leaseArg []byte, opts [][]byte) (Lease, error) {
	var a Lease
	limit, ok := ParseInt(limitArg)
	if !ok || limit < 1 || limit > MaxLeases {
		return a, ArgError("invalid limit '" + string(limitArg) + "': expected " + leaseLimitRange +
			" (a semaphore wider than that is better split over several keys)")
	}
	lease, ok := ParseDuration(leaseArg)
	if !ok {
		return a, ArgError("invalid lease '" + string(leaseArg) +
			"': expected a whole number with unit ms, s, m, h or d (a bare number is seconds), from 1ms to 3650d")
	}
	a.Limit, a.Lease = limit, lease
	for _, opt := range opts {
		switch {
		case is(opt, "SHADOW") && !a.Shadow:
			a.Shadow = true
		case is(opt, "SHADOW") || IsOption(opt):
			return a, ArgError(strings.ToUpper(string(opt)) + " given twice or not valid for RL.ACQUIRE")
		default:
			return a, ArgError("syntax error: unexpected argument '" + string(opt) + "'")
		}
	}
	return a, nil
}

// CheckLeaseID checks a lease's id: 1 to MaxLeaseID bytes. An empty id is
// refused rather than taken as a name: it is what an unset variable sends,
// and every such caller would renew one shared lease.
func CheckLeaseID(id []byte) error {
	if len(id) == 0 || len(id) > MaxLeaseID {
		return ArgError("invalid id of " + strconv.Itoa(len(id)) + " bytes: expected 1 to 256 bytes")
	}
	return nil
}
