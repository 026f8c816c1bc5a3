package main

import (
	"math"
	"math/bits"
	"time"
)

// histogram counts latencies in log-linear buckets: every power of two is
// split into 128 equal buckets, so a bucket is at most 1/128 (0.8%) of its
// values wide. Values below 256 ns get a bucket each. It covers 1 ns to
// 2^35 ns (34 s); longer values count in the last bucket (and in max).
// Recording is an index computation and an increment, cheap enough to do
// for every request; each connection has its own and they are merged at
// the end.
type histogram struct {
	counts [histBuckets]uint64
	n      uint64
	sum    int64 // ns
	min    int64
	max    int64
}

const (
	histSubBits = 7
	histSub     = 1 << histSubBits // buckets per power of two
	histMaxBits = 35               // values up to 2^35-1 ns
	// Shifts run from 0 to histMaxBits-histSubBits-1, each adding 128
	// buckets to the 256 that shift 0 covers.
	histBuckets = (histMaxBits - histSubBits + 1) * histSub
	histMaxNS   = 1<<histMaxBits - 1
)

// bucketOf maps a value in ns to its bucket: the value shifted right until
// it has 8 significant bits, offset by 128 buckets per shift.
func bucketOf(ns int64) int {
	if ns < 0 {
		ns = 0
	}
	if ns > histMaxNS {
		ns = histMaxNS
	}
	shift := bits.Len64(uint64(ns)) - (histSubBits + 1)
	if shift < 0 {
		shift = 0
	}
	return shift<<histSubBits + int(ns>>shift)
}

// bucketRange returns the smallest and largest value of a bucket.
func bucketRange(i int) (lo, hi int64) {
	shift := i>>histSubBits - 1
	if shift < 0 {
		shift = 0
	}
	lo = int64(i-shift<<histSubBits) << shift
	return lo, lo + 1<<shift - 1
}

func (h *histogram) record(d time.Duration) {
	ns := int64(d)
	h.counts[bucketOf(ns)]++
	if h.n == 0 || ns < h.min {
		h.min = ns
	}
	if ns > h.max {
		h.max = ns
	}
	h.n++
	h.sum += ns
}

func (h *histogram) merge(o *histogram) {
	if o.n == 0 {
		return
	}
	for i, c := range o.counts {
		h.counts[i] += c
	}
	if h.n == 0 || o.min < h.min {
		h.min = o.min
	}
	if o.max > h.max {
		h.max = o.max
	}
	h.n += o.n
	h.sum += o.sum
}

// quantile returns the value at quantile q (0.99 for p99): the largest
// value of the bucket holding the ceil(q*n)-th smallest recording, never
// above the largest recording. It overstates by at most a bucket's width.
func (h *histogram) quantile(q float64) time.Duration {
	if h.n == 0 {
		return 0
	}
	rank := uint64(math.Ceil(q * float64(h.n)))
	if rank < 1 {
		rank = 1
	}
	if rank > h.n {
		rank = h.n
	}
	var seen uint64
	for i, c := range h.counts {
		seen += c
		if seen >= rank {
			_, hi := bucketRange(i)
			return time.Duration(min(hi, h.max))
		}
	}
	return time.Duration(h.max)
}

func (h *histogram) mean() time.Duration {
	if h.n == 0 {
		return 0
	}
	return time.Duration(h.sum / int64(h.n))
}
