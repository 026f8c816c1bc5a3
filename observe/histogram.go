package observe

import (
	"math/bits"
	"sync/atomic"
	"time"
)

// Histogram is one command's latency histogram, behind INFO latencystats,
// LATENCY HISTOGRAM and the metrics endpoint's duration histograms. Redis
// keeps an HdrHistogram per command; limitkv keeps a log-linear histogram
// of nanoseconds: exact below 64 ns, then each power of two split into 32
// equal buckets, so a bucket is at most 1/32 of its lower bound wide and a
// percentile read from it is within 3.2% of the true duration. Durations
// of 2^36 ns (about 69 s) or more count as 2^36-1. Recording is one atomic
// add, on one of histStripes copies picked by client ID, as CallCounter
// stripes its counts; a copy is allocated (8 KiB) the first time a command
// is timed on its stripe, so a command never timed costs nothing. Each
// copy also sums the durations, for the metrics endpoint's histograms.
// The zero value is empty and ready.
type Histogram struct {
	stripe [histStripes]atomic.Pointer[histCounts]
}

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

// Record counts one duration of ns nanoseconds for client who.
func (h *Histogram) Record(who, ns int64) {
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

// Reset forgets every duration, as Redis frees a command's histogram on
// CONFIG RESETSTAT.
func (h *Histogram) Reset() {
	for i := range h.stripe {
		h.stripe[i].Store(nil)
	}
}

// HistogramSnapshot is a histogram's counts summed over its stripes.
type HistogramSnapshot struct {
	counts [histBuckets]uint64
	Total  uint64 // durations recorded
	Sum    int64  // their total, in nanoseconds
}

// Snapshot sums the stripes into dst; it reports false when nothing was
// ever recorded (Redis then has no histogram for the command).
func (h *Histogram) Snapshot(dst *HistogramSnapshot) bool {
	*dst = HistogramSnapshot{}
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
			dst.Total += n
		}
		dst.Sum += p.sum.Load()
	}
	return seen
}

// Percentile returns the duration in nanoseconds at percentile p (0-100)
// as HdrHistogram's hdr_value_at_percentile does: the highest duration of
// the bucket holding that rank, or for p 0 the lowest.
func (s *HistogramSnapshot) Percentile(p float64) int64 {
	p = min(p, 100)
	rank := uint64(p/100*float64(s.Total) + 0.5)
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

// Below returns the number of durations shorter than d. It is exact when
// d is a bucket boundary, as every power of two from 64 ns is.
func (s *HistogramSnapshot) Below(d time.Duration) uint64 {
	var n uint64
	for i, c := range s.counts {
		if _, hi := histBounds(i); hi > int64(d) {
			break
		}
		n += c
	}
	return n
}

// CDFLevel is one point of LATENCY HISTOGRAM's cumulative distribution.
type CDFLevel struct {
	Usec  int64  // the label Redis gives the level
	Count uint64 // calls at or below it
}

// CDF returns LATENCY HISTOGRAM's points: levels 1024 ns, 2048 ns, and
// so on, each with the calls up to it (a level's own bucket included, as
// HdrHistogram's logarithmic iterator counts it), skipping levels that
// add none and stopping at the last call. A level is labelled as Redis
// labels it: its HdrHistogram bucket's highest value in microseconds
// (1, 2, 4, 8, 16, 33, 66, ...).
func (s *HistogramSnapshot) CDF() []CDFLevel {
	var out []CDFLevel
	var seen, prev uint64
	i := 0
	for level := int64(1024); prev < s.Total && level <= 1<<histMaxBits; level *= 2 {
		for ; i < histBuckets; i++ {
			if lo, _ := histBounds(i); lo > level {
				break
			}
			seen += s.counts[i]
		}
		if seen > prev {
			out = append(out, CDFLevel{Usec: (level + level>>7 - 1) / 1000, Count: seen})
			prev = seen
		}
	}
	return out
}
