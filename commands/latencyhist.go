package commands

import (
	"math/bits"
	"sync/atomic"
	"time"
)

// Per-command latency histograms, behind INFO latencystats, LATENCY
// HISTOGRAM and the metrics endpoint's duration histograms. Redis keeps
// an HdrHistogram per command; limitkv keeps a log-linear histogram of
// nanoseconds: exact below 64 ns, then each power of two split into 32
// equal buckets, so a bucket is at most 1/32 of its lower bound wide and
// a percentile read from it is within 3.2% of the true duration. Durations
// of 2^36 ns (about 69 s) or more count as 2^36-1. Recording is one atomic
// add, on one of histStripes copies picked by client ID, as the call
// counters are striped; a copy is allocated (8 KiB) the first time a
// command is timed on its stripe. Each copy also sums the durations, for
// the metrics endpoint's histograms.

const (
	histSubBits = 5
	histSub     = 1 << histSubBits
	histMaxBits = 36
	// histBuckets: 2*histSub exact buckets, then histSub per power of two
	// from 2^(histSubBits+1) to 2^histMaxBits.
	histBuckets = 2*histSub + (histMaxBits-histSubBits-1)*histSub
	histStripes = 4
	histMax     = 1<<histMaxBits - 1
)

// histCounts is one stripe: the counts, and the nanoseconds they sum to.
type histCounts struct {
	counts [histBuckets]atomic.Uint64
	sum    atomic.Int64
}

type latencyHist struct {
	stripe [histStripes]atomic.Pointer[histCounts]
}

// histIndex returns the bucket of a duration in nanoseconds.
func histIndex(ns int64) int {
	if ns < 2*histSub {
		return int(max(ns, 0))
	}
	v := uint64(min(ns, histMax))
	shift := bits.Len64(v) - histSubBits - 1
	return 2*histSub + (shift-1)*histSub + int(v>>shift) - histSub
}

// histBounds returns the durations bucket i holds: lo <= d < hi.
func histBounds(i int) (lo, hi int64) {
	if i < 2*histSub {
		return int64(i), int64(i) + 1
	}
	shift := (i-2*histSub)/histSub + 1
	m := int64((i-2*histSub)%histSub + histSub)
	return m << shift, (m + 1) << shift
}

// record counts one duration of ns nanoseconds for client who.
func (h *latencyHist) record(who, ns int64) {
	s := &h.stripe[who&(histStripes-1)]
	p := s.Load()
	if p == nil {
		p = new(histCounts)
		if !s.CompareAndSwap(nil, p) {
			p = s.Load()
		}
	}
	p.counts[histIndex(ns)].Add(1)
	p.sum.Add(ns)
}

// reset forgets every duration, as Redis frees a command's histogram on
// CONFIG RESETSTAT.
func (h *latencyHist) reset() {
	for i := range h.stripe {
		h.stripe[i].Store(nil)
	}
}

// histSnapshot is a histogram's counts summed over its stripes.
type histSnapshot struct {
	counts [histBuckets]uint64
	total  uint64
	sum    int64 // nanoseconds
}

// snapshot sums the stripes into dst; it reports false when nothing was
// ever recorded (Redis then has no histogram for the command).
func (h *latencyHist) snapshot(dst *histSnapshot) bool {
	*dst = histSnapshot{}
	seen := false
	for i := range h.stripe {
		p := h.stripe[i].Load()
		if p == nil {
			continue
		}
		seen = true
		for j := range p.counts {
			n := p.counts[j].Load()
			dst.counts[j] += n
			dst.total += n
		}
		dst.sum += p.sum.Load()
	}
	return seen
}

// percentile returns the duration in nanoseconds at percentile p (0-100)
// as HdrHistogram's hdr_value_at_percentile does: the highest duration of
// the bucket holding that rank, or for p 0 the lowest.
func (s *histSnapshot) percentile(p float64) int64 {
	p = min(p, 100)
	rank := uint64(p/100*float64(s.total) + 0.5)
	rank = max(rank, 1)
	var seen uint64
	for i, n := range s.counts {
		seen += n
		if seen >= rank {
			lo, hi := histBounds(i)
			if p == 0 {
				return lo
			}
			return hi - 1
		}
	}
	return 0
}

// below returns the number of durations shorter than d.
func (s *histSnapshot) below(d time.Duration) uint64 {
	var n uint64
	for i, c := range s.counts {
		if _, hi := histBounds(i); hi > int64(d) {
			break
		}
		n += c
	}
	return n
}

// cdfLevel is one point of LATENCY HISTOGRAM's cumulative distribution.
type cdfLevel struct {
	usec  int64  // the label Redis gives the level
	count uint64 // calls at or below it
}

// cdf returns LATENCY HISTOGRAM's points: levels 1024 ns, 2048 ns, and
// so on, each with the calls up to it (a level's own bucket included, as
// HdrHistogram's logarithmic iterator counts it), skipping levels that
// add none and stopping at the last call. A level is labelled as Redis
// labels it: its HdrHistogram bucket's highest value in microseconds
// (1, 2, 4, 8, 16, 33, 66, ...).
func (s *histSnapshot) cdf() []cdfLevel {
	var out []cdfLevel
	var seen, prev uint64
	i := 0
	for level := int64(1024); prev < s.total && level <= 1<<histMaxBits; level *= 2 {
		for ; i < histBuckets; i++ {
			if lo, _ := histBounds(i); lo > level {
				break
			}
			seen += s.counts[i]
		}
		if seen > prev {
			out = append(out, cdfLevel{usec: (level + level>>7 - 1) / 1000, count: seen})
			prev = seen
		}
	}
	return out
}
