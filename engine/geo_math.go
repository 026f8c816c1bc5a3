package engine

import "math"

// Correctly rounded sin, cos and asin for geo distances. Redis calls the C
// library's, which round correctly in practice (glibc's), while Go's
// math.Cos and math.Asin can be off by one bit: enough to change a stored
// distance (GEOSEARCHSTORE ... STOREDIST) or a point on a radius' edge.
// These evaluate in double-double arithmetic (about 106 bits) and round
// once; arguments beyond the range the geo code uses fall back to math.

// dd is an unevaluated sum hi + lo with |lo| <= ulp(hi)/2.
type dd struct{ hi, lo float64 }

func twoSum(a, b float64) dd {
	s := a + b
	bb := s - a
	return dd{s, (a - (s - bb)) + (b - bb)}
}

func quickTwoSum(a, b float64) dd {
	s := a + b
	return dd{s, b - (s - a)}
}

func (a dd) add(b dd) dd {
	s := twoSum(a.hi, b.hi)
	t := twoSum(a.lo, b.lo)
	s.lo += t.hi
	s = quickTwoSum(s.hi, s.lo)
	s.lo += t.lo
	return quickTwoSum(s.hi, s.lo)
}

// split cuts a into two halves of 26 bits (Dekker), so that products of
// halves are exact: math.FMA would do, but it is emulated in software on
// processors without the instruction, 100 times slower.
func split(a float64) (hi, lo float64) {
	t := 134217729.0 * a // 2^27 + 1
	hi = t - (t - a)
	return hi, a - hi
}

// twoProd returns a*b exactly as p + e.
func twoProd(a, b float64) (p, e float64) {
	p = a * b
	ah, al := split(a)
	bh, bl := split(b)
	e = ((ah*bh - p) + ah*bl + al*bh) + al*bl
	return p, e
}

func (a dd) mul(b dd) dd {
	p, e := twoProd(a.hi, b.hi)
	e += a.hi*b.lo + a.lo*b.hi
	return quickTwoSum(p, e)
}

func (a dd) divFloat(b float64) dd {
	q1 := a.hi / b
	p, e := twoProd(q1, b)
	r := ((a.hi - p) - e) + a.lo
	q2 := r / b
	return quickTwoSum(q1, q2)
}

func (a dd) neg() dd { return dd{-a.hi, -a.lo} }

// ddPi is pi to about 107 bits.
var ddPi = dd{3.141592653589793116e+00, 1.224646799147353207e-16}

// taylor evaluates 1 - x2/(d(1)) (1 - x2/d(2) (1 - ...)) with n terms,
// the shape of both series.
//
// Only the outer terms need double-double: from the sixth on, a term is
// below 2^-13 of the sum for |x| <= pi/2, so the inner ones, evaluated in
// float64, add an error under 2^-66; five double-double steps then carry
// the sum to about 2^-100.
func taylor(x2 dd, n int, d func(k int) float64) dd {
	const exact = 5
	f := 1.0
	for k := n; k > exact; k-- {
		f = 1 - x2.hi*f/d(k)
	}
	p := dd{f, 0}
	for k := min(n, exact); k >= 1; k-- {
		p = dd{1, 0}.add(x2.mul(p).divFloat(d(k)).neg())
	}
	return p
}

// taylorTerms returns how many terms of the series for |x| <= pi/2 bring
// the next one below 2^-110 of the first: 27 at pi/2, a handful for the
// small angles of nearby points.
func taylorTerms(x float64) int {
	x2 := x * x
	t := 1.0
	for k := 1; k < 30; k++ {
		t *= x2 / float64((2*k)*(2*k+1))
		if t < 0x1p-110 {
			return k
		}
	}
	return 30
}

func sinDD(x dd) dd {
	x2 := x.mul(x)
	n := taylorTerms(x.hi)
	return x.mul(taylor(x2, n, func(k int) float64 { return float64(2*k) * float64(2*k+1) }))
}

func cosDD(x dd) dd {
	x2 := x.mul(x)
	n := taylorTerms(x.hi) + 1
	return taylor(x2, n, func(k int) float64 { return float64(2*k-1) * float64(2*k) })
}

// geoSin is sin(x), correctly rounded for |x| <= pi.
func geoSin(x float64) float64 {
	a := math.Abs(x)
	if a > math.Pi || math.IsNaN(x) {
		return math.Sin(x)
	}
	var r dd
	if a > math.Pi/2 {
		r = sinDD(ddPi.add(dd{-a, 0})) // sin(pi - a)
	} else {
		r = sinDD(dd{a, 0})
	}
	v := r.hi + r.lo
	if x < 0 {
		return -v
	}
	return v
}

// geoCos is cos(x), correctly rounded for |x| <= pi.
func geoCos(x float64) float64 {
	a := math.Abs(x)
	if a > math.Pi || math.IsNaN(x) {
		return math.Cos(x)
	}
	if a > math.Pi/2 {
		r := cosDD(ddPi.add(dd{-a, 0})) // -cos(pi - a)
		return -(r.hi + r.lo)
	}
	r := cosDD(dd{a, 0})
	return r.hi + r.lo
}

// geoAsin is asin(x), correctly rounded for 0 <= x < 1: one Newton step
// in double-double from math.Asin's estimate.
func geoAsin(x float64) float64 {
	r0 := math.Asin(x)
	if x <= 0 || x >= 1 || math.IsNaN(x) {
		return r0
	}
	s := sinDD(dd{r0, 0})
	diff := s.add(dd{-x, 0})
	// The step is a few ulps of r0: its own few bits need no more than
	// math.Cos.
	delta := diff.hi / math.Cos(r0)
	return r0 - delta
}
