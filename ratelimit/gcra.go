package ratelimit

import (
	"encoding/binary"
	"errors"
	"math"
	"math/bits"
)

// CL.THROTTLE: the generic cell rate algorithm, with the arithmetic of the
// redis-cell module so that its users get the same replies: nanosecond
// durations, the emission interval computed through a double, "remaining"
// through doubles of whole microseconds, and times in the reply rounded up
// to whole seconds when they have a millisecond part.
//
// State body: the theoretical arrival time (TAT) in ns since the epoch.

// GCRA is one CL.THROTTLE request.
type GCRA struct {
	MaxBurst int64
	Count    int64 // count_per_period
	Period   int64 // seconds
	Quantity int64
	// Peek evaluates the request without recording it (named policies'
	// RL.CHECK ... PEEK; CL.THROTTLE looks with quantity 0 instead).
	Peek bool
}

// ThrottleResult is CL.THROTTLE's reply.
type ThrottleResult struct {
	Limited    bool
	Limit      int64
	Remaining  int64
	RetryAfter int64 // seconds, -1 when allowed
	ResetAfter int64 // seconds

	// The same two in ns, before rounding (RetryNs -1e9 when allowed).
	RetryNs, ResetNs int64
}

// Errors of CL.THROTTLE, in redis-cell's words where it has them.
var (
	ErrZeroRate     = errors.New("Zero rates are not supported")
	ErrGCRAOverflow = errors.New("rate parameters out of range")
)

// checkedMul multiplies, reporting overflow.
func checkedMul(a, b int64) (int64, bool) {
	hi, lo := bits.Mul64(uint64(absInt(a)), uint64(absInt(b)))
	if hi != 0 || lo > math.MaxInt64 || a == math.MinInt64 || b == math.MinInt64 {
		return 0, false
	}
	p := int64(lo)
	if (a < 0) != (b < 0) {
		p = -p
	}
	return p, true
}

func absInt(a int64) int64 {
	if a < 0 {
		return -a
	}
	return a
}

func checkedAdd(a, b int64) (int64, bool) {
	s := a + b
	if (b > 0 && s < a) || (b < 0 && s > a) {
		return 0, false
	}
	return s, true
}

// doubleToInt converts as Rust's "as i64" does: truncation, saturation at
// the ends of the range, NaN to zero.
func doubleToInt(f float64) int64 {
	switch {
	case math.IsNaN(f):
		return 0
	case f >= math.MaxInt64:
		return math.MaxInt64
	case f <= math.MinInt64:
		return math.MinInt64
	}
	return int64(f)
}

// wholeSecondsUp is redis-cell's reply rounding: whole seconds (towards
// zero), plus one when the duration has a positive millisecond part.
func wholeSecondsUp(ns int64) int64 {
	s := ns / 1e9
	if (ns%1e9)/1e6 > 0 {
		s++
	}
	return s
}

// DecideGCRA runs CL.THROTTLE at nowMs. It returns the reply and, when the
// request consumed tokens, the new state (appended to out) with the key's
// expiry, which redis-cell sets as a TTL of the time to the new TAT in
// whole ms.
func DecideGCRA(old []byte, g GCRA, nowMs int64, out []byte) (res ThrottleResult, state []byte, expireAt int64, write bool, err error) {
	// Rate::per_period: the period in ns divided by the count, via doubles.
	periodNs, ok := checkedMul(g.Period, 1e9)
	if !ok {
		return res, nil, 0, false, ErrGCRAOverflow
	}
	if g.Count == 0 || periodNs == 0 {
		return res, nil, 0, false, ErrZeroRate
	}
	emission := doubleToInt(float64(periodNs) / float64(g.Count))
	if emission == 0 {
		return res, nil, 0, false, ErrZeroRate
	}
	burst, ok1 := checkedAdd(g.MaxBurst, 1)
	dvt, ok2 := checkedMul(emission, burst)
	increment, ok3 := checkedMul(emission, g.Quantity)
	now, ok4 := checkedMul(nowMs, 1e6)
	if !ok1 || !ok2 || !ok3 || !ok4 {
		return res, nil, 0, false, ErrGCRAOverflow
	}
	res.Limit = burst
	res.RetryAfter, res.RetryNs = -1, -1e9

	tat := now
	if len(old) > 1 && old[0] == KindGCRA {
		r := varintReader{b: old[1:]}
		if v := r.varint(); !r.bad {
			tat = v
		}
	}
	newTAT, ok := checkedAdd(max(tat, now), increment)
	if !ok {
		return res, nil, 0, false, ErrGCRAOverflow
	}
	diff := now - (newTAT - dvt)
	var ttl int64
	if diff < 0 {
		res.Limited = true
		if increment <= dvt {
			res.RetryNs = -diff
			res.RetryAfter = wholeSecondsUp(-diff)
		}
		ttl = tat - now
	} else {
		ttl = newTAT - now
		if g.Quantity != 0 && !g.Peek {
			state = binary.AppendVarint(append(out, KindGCRA), newTAT)
			expireAt = nowMs + ttl/1e6
			write = true
		}
	}
	if next := dvt - ttl; next > -emission {
		res.Remaining = doubleToInt(float64(next/1000) / float64(emission/1000))
	}
	res.ResetNs = ttl
	res.ResetAfter = wholeSecondsUp(ttl)
	return res, state, expireAt, write, nil
}
