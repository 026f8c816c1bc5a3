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

func (a dd) mul(b dd) dd {
	p := a.hi * b.hi
	e := math.FMA(a.hi, b.hi, -p)
	e += a.hi*b.lo + a.lo*b.hi
	return quickTwoSum(p, e)
}

func (a dd) divFloat(b float64) dd {
	q1 := a.hi / b
	r := math.FMA(-q1, b, a.hi) + a.lo
	q2 := r / b
	return quickTwoSum(q1, q2)
}

func (a dd) neg() dd { return dd{-a.hi, -a.lo} }

// ddPi is pi to about 107 bits.
var ddPi = dd{3.141592653589793116e+00, 1.224646799147353207e-16}

// taylor evaluates 1 - x2/(d(1)) (1 - x2/d(2) (1 - ...)) with n terms,
// the shape of both series.
func taylor(x2 dd, n int, d func(k int) float64) dd {
	p := dd{1, 0}
	for k := n; k >= 1; k-- {
		p = dd{1, 0}.add(x2.mul(p).divFloat(d(k)).neg())
	}
	return p
}

const taylorTerms = 27 // enough below 2^-106 for |x| <= pi/2

func sinDD(x dd) dd {
	x2 := x.mul(x)
	return x.mul(taylor(x2, taylorTerms, func(k int) float64 { return float64(2*k) * float64(2*k+1) }))
}

func cosDD(x dd) dd {
	x2 := x.mul(x)
	return taylor(x2, taylorTerms, func(k int) float64 { return float64(2*k-1) * float64(2*k) })
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
	c := cosDD(dd{r0, 0})
	diff := s.add(dd{-x, 0})
	delta := diff.hi / (c.hi + c.lo)
	return r0 - delta
}
