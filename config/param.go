package config

import (
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"

	"github.com/limitkv/limitkv/engine"
	"github.com/limitkv/limitkv/resp"
)

type kind int

const (
	kString kind = iota
	kBool
	kInt
	kMemory
	kEnum
	kDuration
)

// param is one setting: a row of the table (params.go) and, once New has
// wired it, the effect its owner gave it.
type param struct {
	name      string
	alias     string
	kind      kind
	def       string
	min, max  int64
	enum      []string
	immutable bool
	protected bool // Redis refuses CONFIG SET for these ("protected config")
	help      string
	// merge, if set, validates a value against the current one and
	// returns the new one, for settings that change only what the value
	// names (client-output-buffer-limit), or whose text is kept in a form
	// of their own (save, bind).
	merge func(cur, v string) (string, error)
	// show, if set, gives the value as CONFIG GET and CONFIG REWRITE
	// show it, where that hides part of what is kept (see
	// showKeyspaceEvents).
	show func(v string) string
	// volatile: the value names a file, so setting it again to the same
	// value runs reconf, which reads the file again (a renewed certificate).
	volatile bool
	// lines: at start-up the first line replaces the default and each
	// further one adds to it, as Redis's save lines do; "" empties it.
	// CONFIG SET replaces the whole value.
	lines bool

	// From the Effect New wired to the setting.
	apply  func(v string, n int64)
	reconf *Reconfigurer
}

// parse validates v for p and returns its canonical text and number.
func (p *param) parse(v string) (string, int64, error) {
	switch p.kind {
	case kBool:
		switch strings.ToLower(v) {
		case "yes":
			return "yes", 1, nil
		case "no":
			return "no", 0, nil
		}
		return "", 0, errors.New("argument must be 'yes' or 'no'")
	case kInt:
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil {
			return "", 0, errors.New("argument couldn't be parsed into an integer")
		}
		if n < p.min || n > p.max {
			return "", 0, fmt.Errorf("argument must be between %d and %d inclusive", p.min, p.max)
		}
		return strconv.FormatInt(n, 10), n, nil
	case kMemory:
		n, ok := ParseMemory(v)
		if !ok {
			return "", 0, errors.New("argument must be a memory value")
		}
		if n < p.min || n > p.max {
			return "", 0, fmt.Errorf("argument must be between %d and %d inclusive", p.min, p.max)
		}
		return strconv.FormatInt(n, 10), n, nil
	case kEnum:
		lv := strings.ToLower(v)
		for _, e := range p.enum {
			if e == lv {
				return lv, 0, nil
			}
		}
		return "", 0, errors.New("argument(s) must be one of the following: " + strings.Join(p.enum, ", "))
	case kDuration:
		d, err := parseDuration(v)
		if err != nil || int64(d) < p.min || int64(d) > p.max {
			return "", 0, errors.New("argument must be a duration such as 500ms, 1s or 0")
		}
		return v, int64(d), nil
	}
	return v, 0, nil
}

func parseDuration(v string) (time.Duration, error) {
	if v == "0" {
		return 0, nil
	}
	if n, err := strconv.ParseInt(v, 10, 64); err == nil {
		return time.Duration(n) * time.Millisecond, nil
	}
	return time.ParseDuration(v)
}

// ParseMemory reads a memory value as Redis's memtoull does: digits with an
// optional unit b, k, kb, m, mb, g, gb (k = 1000, kb = 1024), any case.
func ParseMemory(v string) (int64, bool) {
	lv := strings.ToLower(v)
	mul := int64(1)
	for _, u := range []struct {
		s string
		m int64
	}{{"gb", 1 << 30}, {"mb", 1 << 20}, {"kb", 1 << 10}, {"g", 1e9}, {"m", 1e6}, {"k", 1e3}, {"b", 1}} {
		if strings.HasSuffix(lv, u.s) {
			lv, mul = lv[:len(lv)-len(u.s)], u.m
			break
		}
	}
	if lv == "" {
		return 0, false
	}
	for _, ch := range lv {
		if ch < '0' || ch > '9' {
			return 0, false
		}
	}
	n, err := strconv.ParseInt(lv, 10, 64)
	if err != nil || n > (1<<63-1)/mul {
		return 0, false
	}
	return n * mul, true
}

// mergeOutputLimits applies a client-output-buffer-limit value, which
// names some classes, to the current limits of all of them.
func mergeOutputLimits(cur, v string) (string, error) {
	l, err := resp.ParseOutputLimits(resp.OutputLimits{}, cur, ParseMemory)
	if err == nil {
		l, err = resp.ParseOutputLimits(l, v, ParseMemory)
	}
	if err != nil {
		return "", err
	}
	return l.String(), nil
}

// parseSave checks save's "<seconds> <changes>" pairs as Redis does
// (seconds at least 1, changes at least 0) and writes them as CONFIG GET
// shows them.
func parseSave(v string) (string, error) {
	f := strings.Fields(v)
	if len(f)%2 != 0 {
		return "", errors.New("Invalid save parameters")
	}
	for i, s := range f {
		n, err := strconv.ParseInt(s, 10, 64)
		if err != nil || i%2 == 0 && n < 1 || n < 0 {
			return "", errors.New("Invalid save parameters")
		}
		f[i] = strconv.FormatInt(n, 10)
	}
	return strings.Join(f, " "), nil
}

const (
	msgBindTooMany = "Too many bind addresses specified."
	maxBindAddrs   = 16 // Redis's CONFIG_BINDADDR_MAX
)

// mergeBind checks a bind value as Redis's setConfigBindOption does (16
// addresses at most) and keeps it with single spaces between addresses.
func mergeBind(_, v string) (string, error) {
	addrs := strings.Fields(v)
	if len(addrs) > maxBindAddrs {
		return "", errors.New(msgBindTooMany)
	}
	return strings.Join(addrs, " "), nil
}

// mergeMaxMemoryClients reads a maxmemory-clients value as Redis does: a
// memory value, or a percentage of maxmemory from 0% to 100%; it returns
// it as CONFIG GET shows it (bytes, or the percentage; 0% is 0).
func mergeMaxMemoryClients(_, v string) (string, error) {
	if n, ok := ParseMemory(v); ok {
		return strconv.FormatInt(n, 10), nil
	}
	if len(v) > 1 && v[len(v)-1] == '%' {
		if n, ok := engine.ParseInt([]byte(v[:len(v)-1])); ok && n >= 0 {
			if n > 100 {
				return "", errors.New("percentage argument must be less or equal to 100")
			}
			if n == 0 {
				return "0", nil
			}
			return strconv.FormatInt(n, 10) + "%", nil
		}
	}
	return "", errors.New("argument must be a memory or percent value")
}

// parseReplicaOf checks a replicaof value: "host port", or "" (none).
func parseReplicaOf(_, v string) (string, error) {
	f := strings.Fields(v)
	if len(f) == 0 {
		return "", nil
	}
	if len(f) != 2 {
		return "", errors.New("wrong number of arguments")
	}
	if strings.EqualFold(f[0], "no") && strings.EqualFold(f[1], "one") {
		return "", nil
	}
	p, err := strconv.Atoi(f[1])
	if err != nil || p < 0 || p > 65535 {
		return "", errors.New("Invalid master port")
	}
	return f[0] + " " + f[1], nil
}

// keyspaceEventsAll are the notify-keyspace-events classes "A" stands
// for, in the order Redis writes them back; n, K, E and m are not among
// them.
const keyspaceEventsAll = "g$lshzxetd"

// mergeKeyspaceEvents validates a notify-keyspace-events value and
// returns it as Redis keeps it (keyspaceEventsFlagsToString): the classes
// in its own order, "A" for all those it stands for (and then no n, as in
// Redis), then K, E and m; then r, limitkv's rate-limit class, which "A"
// does not stand for. Redis keeps n beside A though it does not show it:
// the value kept has it ("An"), and showKeyspaceEvents hides it.
func mergeKeyspaceEvents(_, v string) (string, error) {
	var on [256]bool
	for _, ch := range []byte(v) {
		switch {
		case ch == 'A':
			for _, c := range []byte(keyspaceEventsAll) {
				on[c] = true
			}
		case strings.IndexByte(keyspaceEventsAll+"nKEmr", ch) >= 0:
			on[ch] = true
		default:
			return "", errors.New("Invalid event class character. Use 'Ag$lshzxeKEtmdn'.")
		}
	}
	all := true
	for _, c := range []byte(keyspaceEventsAll) {
		all = all && on[c]
	}
	var b []byte
	if all {
		b = append(b, 'A')
		if on['n'] {
			b = append(b, 'n')
		}
	} else {
		for _, c := range []byte(keyspaceEventsAll + "n") {
			if on[c] {
				b = append(b, c)
			}
		}
	}
	for _, c := range []byte("KEmr") {
		if on[c] {
			b = append(b, c)
		}
	}
	return string(b), nil
}

// shown is v as the parameter shows it.
func (p *param) shown(v string) string {
	if p.show != nil {
		return p.show(v)
	}
	return v
}

// showKeyspaceEvents is a notify-keyspace-events value as Redis shows it:
// without the n it keeps beside A.
func showKeyspaceEvents(v string) string {
	if strings.HasPrefix(v, "An") {
		return "A" + v[2:]
	}
	return v
}

// ParsePercentiles reads latency-tracking-info-percentiles as Redis does:
// numbers from 0 to 100 separated by single spaces; "" is none.
func ParsePercentiles(v string) ([]float64, error) {
	if v == "" {
		return nil, nil
	}
	var out []float64
	for _, f := range strings.Split(v, " ") {
		p, err := strconv.ParseFloat(f, 64)
		if err != nil || f == "" || math.IsNaN(p) {
			return nil, errors.New("Invalid latency-tracking-info-percentiles parameters")
		}
		if p < 0 || p > 100 {
			return nil, errors.New("latency-tracking-info-percentiles parameters should sit between [0.0,100.0]")
		}
		out = append(out, p)
	}
	return out, nil
}

func formatPercentiles(p []float64) string {
	var b strings.Builder
	for i, f := range p {
		if i > 0 {
			b.WriteByte(' ')
		}
		b.WriteString(FormatPercentile(f))
	}
	return b.String()
}

// FormatPercentile writes a percentile as Redis does: "%f" without its
// trailing zeros (99.9, 50, 12.345678).
func FormatPercentile(f float64) string {
	s := strconv.FormatFloat(f, 'f', 6, 64)
	if strings.Contains(s, ".") {
		s = strings.TrimRight(strings.TrimRight(s, "0"), ".")
	}
	return s
}

// mergePercentiles keeps latency-tracking-info-percentiles as CONFIG GET
// shows it in Redis: each number without trailing zeros.
func mergePercentiles(_, v string) (string, error) {
	p, err := ParsePercentiles(v)
	return formatPercentiles(p), err
}
