package ratelimit

import (
	"errors"
	"strconv"
	"strings"
	"sync"
	"time"
	_ "time/tzdata" // time zones work in a minimal container too
)

// Zone is a time zone that fixed windows align to: an IANA location, or a
// fixed offset from UTC.
type Zone struct {
	Name   string
	loc    *time.Location // nil for a fixed offset
	offset int64          // ms east of UTC, for a fixed offset
}

var zoneCache struct {
	sync.Mutex
	m map[string]*Zone
}

// ErrUnknownZone reports a time zone name that is neither an IANA zone nor
// an offset.
var ErrUnknownZone = errors.New("unknown time zone")

// ParseZone reads an IANA zone name ("Asia/Shanghai") or a fixed offset
// ("+08:00", "-0530", "+08", "UTC", "Z"). "Local" is refused: a window that
// depends on where the server runs is the bug of a daily cap that resets at
// midnight in the app server's time zone.
func ParseZone(name []byte) (*Zone, error) {
	zoneCache.Lock()
	if z, ok := zoneCache.m[string(name)]; ok {
		zoneCache.Unlock()
		return z, nil
	}
	zoneCache.Unlock()
	s := string(name)
	z := &Zone{Name: s}
	switch {
	case s == "UTC" || s == "Z" || s == "utc":
		z.offset = 0
	case len(s) > 0 && (s[0] == '+' || s[0] == '-'):
		off, ok := parseOffset(s)
		if !ok {
			return nil, ErrUnknownZone
		}
		z.offset = off
	case s == "" || strings.EqualFold(s, "local"):
		return nil, ErrUnknownZone
	default:
		loc, err := time.LoadLocation(s)
		if err != nil {
			return nil, ErrUnknownZone
		}
		z.loc = loc
	}
	zoneCache.Lock()
	if zoneCache.m == nil {
		zoneCache.m = make(map[string]*Zone)
	}
	if len(zoneCache.m) < 4096 {
		zoneCache.m[s] = z
	}
	zoneCache.Unlock()
	return z, nil
}

// parseOffset reads ±HH, ±HHMM or ±HH:MM (up to ±14:00).
func parseOffset(s string) (int64, bool) {
	sign := int64(1)
	if s[0] == '-' {
		sign = -1
	}
	s = strings.ReplaceAll(s[1:], ":", "")
	if len(s) != 2 && len(s) != 4 {
		return 0, false
	}
	for _, c := range s {
		if c < '0' || c > '9' {
			return 0, false
		}
	}
	h, _ := strconv.Atoi(s[:2])
	m := 0
	if len(s) == 4 {
		m, _ = strconv.Atoi(s[2:])
	}
	if m >= 60 || h*60+m > 14*60 {
		return 0, false
	}
	return sign * int64(h*3600+m*60) * 1000, true
}

// ErrZoneWindow reports a window that cannot be aligned to local time.
var ErrZoneWindow = errors.New("window cannot be aligned to local time")

// CheckWindow reports whether windows of w ms can be aligned in z: with a
// zone that changes its offset, a window must divide a day or be a whole
// number of days, so that it can start at local midnight and at wall-clock
// multiples of itself.
func (z *Zone) CheckWindow(w int64) error {
	if z == nil || z.loc == nil {
		return nil
	}
	if w%dayMs == 0 || dayMs%w == 0 {
		return nil
	}
	return ErrZoneWindow
}

func floorDiv(a, b int64) int64 {
	q := a / b
	if (a%b != 0) && ((a < 0) != (b < 0)) {
		q--
	}
	return q
}

// windowBounds returns the window of w ms that holds now, [start, end),
// aligned to the epoch in z (nil: UTC).
//
// In a zone with daylight-saving changes, whole-day windows run from local
// midnight to local midnight (a day of 23 or 25 hours where the clocks
// change), and shorter windows start at local wall-clock multiples of
// themselves counted from midnight; a window also ends where the offset
// changes, so no window is ever longer than w and none starts twice.
func windowBounds(now, w int64, z *Zone) (int64, int64) {
	switch {
	case z == nil:
		start := floorDiv(now, w) * w
		return start, start + w
	case z.loc == nil:
		start := floorDiv(now+z.offset, w)*w - z.offset
		return start, start + w
	case w%dayMs == 0:
		return dayWindow(now, w/dayMs, z.loc)
	default:
		return wallWindow(now, w, z.loc)
	}
}

// dayWindow is a window of k local days holding now.
func dayWindow(now, k int64, loc *time.Location) (int64, int64) {
	t := time.UnixMilli(now).In(loc)
	y, m, d := t.Date()
	day := time.Date(y, m, d, 0, 0, 0, 0, time.UTC).Unix() / 86400
	first := floorDiv(day, k) * k
	start := time.Date(1970, 1, 1+int(first), 0, 0, 0, 0, loc).UnixMilli()
	end := time.Date(1970, 1, 1+int(first+k), 0, 0, 0, 0, loc).UnixMilli()
	if start > now { // midnight fell in a clock change; never start after now
		start = now
	}
	if end <= now {
		end = now + 1
	}
	return start, end
}

// wallWindow is a window of w ms (dividing a day) holding now, aligned to
// local wall-clock time and cut at offset changes.
func wallWindow(now, w int64, loc *time.Location) (int64, int64) {
	t := time.UnixMilli(now).In(loc)
	_, offSec := t.Zone()
	off := int64(offSec) * 1000
	start := floorDiv(now+off, w)*w - off
	end := start + w
	zs, ze := t.ZoneBounds()
	if !zs.IsZero() {
		if b := zs.UnixMilli(); b > start && offsetAt(b-1, loc) != off {
			start = b
		}
	}
	if !ze.IsZero() {
		if b := ze.UnixMilli(); b < end && offsetAt(b, loc) != off {
			end = b
		}
	}
	return start, end
}

func offsetAt(ms int64, loc *time.Location) int64 {
	_, off := time.UnixMilli(ms).In(loc).Zone()
	return int64(off) * 1000
}
