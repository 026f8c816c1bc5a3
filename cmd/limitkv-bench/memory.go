package main

import (
	"context"
	"flag"
	"fmt"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"
)

// Memory per key is the growth of a fresh server's memory while N keys of
// one shape are loaded, divided by N, read two ways: INFO used_memory (what
// the allocator holds for live data: jemalloc's count on Redis; on
// limitkv its own count of what it holds, which maxmemory limits and which
// leaves out the arena's free space, as jemalloc's leaves out its
// fragmentation) and the process's RSS from /proc/<pid>/statm. Before
// each reading both servers get MEMORY PURGE: on limitkv it runs Go's
// garbage collector, so garbage is not counted; on Redis it asks jemalloc
// to return its dirty pages, so neither RSS holds freed memory the other
// would not.
//
// The stream shape is one key of many entries: its growth is divided by
// the entries, and its MEMORY USAGE is taken with SAMPLES 0, over every
// node (Redis's default samples five and extrapolates).

func memoryFlags(fs *flag.FlagSet, c *config) {
	fs.BoolVar(&c.bigKeys, "big-keys", true, "also measure RSS at 1M and 10M fixed-window keys")
	fs.IntVar(&c.memKeys, "mem-keys", 100_000, "keys per memory shape (the 100-request sliding window uses a tenth)")
	fs.IntVar(&c.streamEntries, "stream-entries", 1_000_000, "entries of the stream shape (XADD stream * f <n> into one key)")
	ids := memShapeIDs()
	fs.Func("mem-only", "comma list of memory shapes to measure: "+strings.Join(ids, ","), func(s string) error {
		c.memOnly = nil
		for _, id := range strings.Split(s, ",") {
			id = strings.TrimSpace(id)
			if !slices.Contains(ids, id) {
				return fmt.Errorf("unknown memory shape %q (known: %s)", id, strings.Join(ids, ","))
			}
			c.memOnly = append(c.memOnly, id)
		}
		return nil
	})
}

func memShapeIDs() []string {
	var ids []string
	for _, sh := range memShapes(1, 1) {
		ids = append(ids, sh.id)
	}
	return ids
}

// runMemory is the scenario alone: memory.md, .svg and .json.
func (b *bench) runMemory(ctx context.Context, started time.Time, redisVersion string) (int, error) {
	return b.runResults(ctx, started, redisVersion, "memory", "limitkv vs Redis: memory per key", resultParts{memory: true})
}

// memory measures every shape on a fresh server of each kind, then the
// large keyspaces.
func (b *bench) memory(ctx context.Context) error {
	shapes := memShapes(b.cfg.memKeys, b.cfg.streamEntries)
	for _, sh := range shapes {
		if b.cfg.memOnly != nil && !slices.Contains(b.cfg.memOnly, sh.id) {
			continue
		}
		m := memResult{Shape: sh.id, Name: sh.name, Keys: sh.keys, Unit: sh.unit}
		var err error
		if m.Limitkv, err = b.measureShape(ctx, sh, kindLimitkv); err != nil {
			return err
		}
		if m.Redis, err = b.measureShape(ctx, sh, kindRedis); err != nil {
			return err
		}
		b.res.Memory = append(b.res.Memory, m)
		b.logf("memory %-6s %7d %s: limitkv %6.1f B/%s used, %6.1f B/%s RSS; redis %6.1f B/%s used, %6.1f B/%s RSS",
			sh.id, sh.keys, sh.unitsName(), m.Limitkv.UsedPerKey, sh.unitName(), m.Limitkv.RSSPerKey, sh.unitName(),
			m.Redis.UsedPerKey, sh.unitName(), m.Redis.RSSPerKey, sh.unitName())
		if sh.unit != "" {
			b.logf("memory %-6s MEMORY USAGE %s SAMPLES 0: limitkv %d B (%.1f B/%s), redis %d B (%.1f B/%s)", sh.id, sh.usageKey(),
				m.Limitkv.KeyUsage, m.Limitkv.KeyUsagePer, sh.unit, m.Redis.KeyUsage, m.Redis.KeyUsagePer, sh.unit)
		}
	}
	if b.cfg.bigKeys && (b.cfg.memOnly == nil || slices.Contains(b.cfg.memOnly, "fixed")) {
		b.logf("large keyspaces: 1M then 10M fixed-window keys on each server")
		for _, kind := range []string{kindLimitkv, kindRedis} {
			r, err := b.measureBig(ctx, kind, []int{1_000_000, 10_000_000})
			if err != nil {
				return err
			}
			b.res.BigKeys = append(b.res.BigKeys, r)
		}
	}
	return nil
}

// memShape is one kind of key, loaded by passes over all users.
type memShape struct {
	id, name string
	// keys is how many users a pass covers: keys, or with unit set the
	// entries of one key (the stream), named by unit.
	keys     int
	unit     string
	key      string // with unit: the one key the passes fill
	limitkv  []op   // one op per pass
	redis    []op
	loadText string // how the passes read, when they differ from one another
	// verify checks a loaded key on each server (the window is full, the
	// list holds 5...), so that the figure is for the shape it names.
	verify func(kind string, c *client) (string, error)
}

// unitName is what the figures are per.
func (sh memShape) unitName() string {
	if sh.unit != "" {
		return sh.unit
	}
	return "key"
}

func (sh memShape) unitsName() string {
	if sh.unit == "entry" {
		return "entries"
	}
	return sh.unitName() + "s"
}

// usageKey is the key MEMORY USAGE reads.
func (sh memShape) usageKey() string {
	if sh.unit != "" {
		return sh.key
	}
	return "user:0"
}

type memReading struct {
	Command     string  `json:"command"`
	UsedBefore  int64   `json:"used_memory_before"`
	UsedAfter   int64   `json:"used_memory_after"`
	RSSBefore   int64   `json:"rss_before"`
	RSSAfter    int64   `json:"rss_after"`
	UsedPerKey  float64 `json:"used_memory_per_key"`
	RSSPerKey   float64 `json:"rss_per_key"`
	LoadSeconds float64 `json:"load_seconds"`
	Verified    string  `json:"verified"`
	KeyUsage    int64   `json:"memory_usage_user0"` // MEMORY USAGE user:0 (the stream shape: of the stream), the server's own estimate
	// KeyUsagePer is the stream's MEMORY USAGE per entry.
	KeyUsagePer float64 `json:"memory_usage_per_entry,omitempty"`
}

type memResult struct {
	Shape   string     `json:"shape"`
	Name    string     `json:"name"`
	Keys    int        `json:"keys"`
	Unit    string     `json:"unit,omitempty"` // what Keys counts when not keys: "entry"
	Limitkv memReading `json:"limitkv"`
	Redis   memReading `json:"redis"`
}

func repeatOp(o op, n int) []op {
	out := make([]op, n)
	for i := range out {
		out[i] = o
	}
	return out
}

func memShapes(n, streamEntries int) []memShape {
	// Windows long enough that no key expires while N keys load: the
	// fixed window starts at the first request, as the script's does.
	days := []string{"3649", "0", "365", "730", "1095"}
	var bitOps []op
	for _, d := range days {
		bitOps = append(bitOps, op{cmd("SETBIT", keyArg("user:"), lit(d), lit("1"))})
	}
	slideKeys := max(n/10, 1)
	return []memShape{
		{
			id: "fixed", name: "fixed-window key", keys: n,
			limitkv: []op{{cmd("RL.FIXED", keyArg("user:"), lit("100"), lit("1h"), lit("ALIGN"), lit("FIRST"))}},
			redis:   []op{{evalsha("fixed", "user:", lit("100"), lit("3600000"))}},
			verify: func(kind string, c *client) (string, error) {
				return expectInt(c, 1, 3_600_000, "PTTL", "user:0")
			},
		},
		{
			// 100 requests 100 per 60s on N/10 keys: the passes must end
			// within the 60 s window, and 100 passes over 100k keys would
			// take Redis minutes.
			id: "slide", name: "sliding window, 100 requests", keys: slideKeys,
			limitkv: repeatOp(op{cmd("RL.SLIDE", keyArg("user:"), lit("100"), lit("60s"))}, 100),
			redis:   repeatOp(op{evalsha("slide", "user:", lit("100"), lit("60000"), nonceArg())}, 100),
			verify: func(kind string, c *client) (string, error) {
				if kind == kindRedis {
					return expectInt(c, 100, 100, "ZCARD", "user:0")
				}
				v, err := c.ok("RL.SLIDE", "user:0", "100", "60s", "PEEK")
				if err != nil {
					return "", err
				}
				if len(v.Elems) != 5 || v.Elems[0].Int != 0 || v.Elems[2].Int != 0 {
					return "", fmt.Errorf("RL.SLIDE PEEK on a full window answered %v", v)
				}
				return "RL.SLIDE user:0 100 60s PEEK = " + v.String(), nil
			},
		},
		{
			id: "login", name: "login list of 5", keys: n,
			limitkv: repeatOp(op{cmd("RL.LOGIN", keyArg("user:"), lit("5"), lit("1h"))}, 5),
			redis:   repeatOp(op{evalsha("login", "user:", lit("5"), lit("3600000"))}, 5),
			verify: func(kind string, c *client) (string, error) {
				return expectInt(c, 5, 5, "LLEN", "user:0")
			},
		},
		{
			id: "bitmap", name: "10-year day bitmap, 5 days", keys: n,
			limitkv: bitOps, redis: bitOps,
			loadText: "SETBIT user:<n> <day> 1 for days " + strings.Join(days, ", "),
			verify: func(kind string, c *client) (string, error) {
				return expectInt(c, 457, 457, "STRLEN", "user:0")
			},
		},
		{
			// Small entries with automatic IDs, as an event log gets them:
			// the nodes hold 100 entries each (stream-node-max-entries)
			// with the field names kept once per node.
			id: "stream", name: "stream entry (XADD of 1 field)", keys: streamEntries, unit: "entry", key: "stream",
			limitkv: []op{{cmd("XADD", lit("stream"), lit("*"), lit("f"), numArg())}},
			redis:   []op{{cmd("XADD", lit("stream"), lit("*"), lit("f"), numArg())}},
			verify: func(kind string, c *client) (string, error) {
				return expectInt(c, int64(streamEntries), int64(streamEntries), "XLEN", "stream")
			},
		},
	}
}

func expectInt(c *client, lo, hi int64, args ...string) (string, error) {
	v, err := c.ok(args...)
	if err != nil {
		return "", err
	}
	if v.Type != ':' || v.Int < lo || v.Int > hi {
		return "", fmt.Errorf("%v answered %v, want %d..%d", args, v, lo, hi)
	}
	return fmt.Sprintf("%s = %d", strings.Join(args, " "), v.Int), nil
}

// memoryReading is used_memory and RSS after MEMORY PURGE.
func memoryReading(s *server, c *client) (used, rss int64, err error) {
	if _, err = c.ok("MEMORY", "PURGE"); err != nil {
		return
	}
	if used, err = c.infoInt("memory", "used_memory"); err != nil {
		return
	}
	rss, err = rssBytes(s.Pid())
	return
}

// measureShape loads one shape into a fresh server and reads its growth.
func (b *bench) measureShape(ctx context.Context, sh memShape, kind string) (memReading, error) {
	var r memReading
	s, err := b.startFresh(kind, "mem-"+sh.id)
	if err != nil {
		return r, err
	}
	defer s.Stop()
	c, err := dial(s.Addr)
	if err != nil {
		return r, err
	}
	defer c.close()
	ops := sh.limitkv
	if kind == kindRedis {
		ops = sh.redis
	}
	r.Command = describe(ops[0])
	switch {
	case sh.loadText != "":
		r.Command = sh.loadText
	case len(ops) > 1:
		r.Command = fmt.Sprintf("%d × %s", len(ops), r.Command)
	}
	if r.UsedBefore, r.RSSBefore, err = memoryReading(s, c); err != nil {
		return r, err
	}
	l, err := newLoader(s.Addr, 4, 256)
	if err != nil {
		return r, err
	}
	defer l.close()
	start := time.Now()
	var allowed, denied int64
	for _, o := range ops {
		passStart := time.Now()
		res, err := l.pass(ctx, o, 0, sh.keys)
		if err != nil {
			return r, err
		}
		allowed += res.allowed
		denied += res.denied
		// Passes at least 2 ms apart: a key's requests then fall in
		// different milliseconds, as real traffic does (limitkv merges
		// requests of one millisecond into one log entry).
		if d := 2*time.Millisecond - time.Since(passStart); d > 0 {
			time.Sleep(d)
		}
	}
	r.LoadSeconds = time.Since(start).Seconds()
	// The loader's connections hold buffers on both servers (query and
	// reply buffers grown by deep pipelines): close them and give the
	// server a moment to free them, so only the keys are counted.
	l.close()
	time.Sleep(200 * time.Millisecond)
	if sh.id != "bitmap" && denied > 0 {
		return r, fmt.Errorf("%s %s: %d of %d decisions denied while loading", kind, sh.id, denied, allowed+denied)
	}
	keys := int64(sh.keys)
	if sh.unit != "" {
		keys = 1
	}
	if _, err := expectInt(c, keys, keys, "DBSIZE"); err != nil {
		return r, fmt.Errorf("%s %s: keys lost while loading: %v", kind, sh.id, err)
	}
	if r.Verified, err = sh.verify(kind, c); err != nil {
		return r, fmt.Errorf("%s %s: %v", kind, sh.id, err)
	}
	usage := []string{"MEMORY", "USAGE", sh.usageKey()}
	if sh.unit != "" {
		usage = append(usage, "SAMPLES", "0")
	}
	v, err := c.ok(usage...)
	if err != nil {
		return r, err
	}
	r.KeyUsage = v.Int
	if sh.unit != "" {
		r.KeyUsagePer = float64(v.Int) / float64(sh.keys)
	}
	if r.UsedAfter, r.RSSAfter, err = memoryReading(s, c); err != nil {
		return r, err
	}
	r.UsedPerKey = float64(r.UsedAfter-r.UsedBefore) / float64(sh.keys)
	r.RSSPerKey = float64(r.RSSAfter-r.RSSBefore) / float64(sh.keys)
	return r, nil
}

// bigPoint is a server's memory once it holds a number of fixed-window keys.
type bigPoint struct {
	Keys        int     `json:"keys"`
	RSS         int64   `json:"rss"`
	Used        int64   `json:"used_memory"`
	RSSPerKey   float64 `json:"rss_growth_per_key"`
	UsedPerKey  float64 `json:"used_memory_growth_per_key"`
	LoadSeconds float64 `json:"load_seconds"` // to reach this point from the previous one
}

type bigResult struct {
	Server    string     `json:"server"`
	Command   string     `json:"command"`
	RSSEmpty  int64      `json:"rss_empty"`
	UsedEmpty int64      `json:"used_memory_empty"`
	Points    []bigPoint `json:"points"`
}

// measureBig loads fixed-window keys in steps and reads memory at each.
func (b *bench) measureBig(ctx context.Context, kind string, steps []int) (bigResult, error) {
	res := bigResult{Server: kind}
	sh := memShapes(1, 1)[0]
	o := sh.limitkv[0]
	if kind == kindRedis {
		o = sh.redis[0]
	}
	res.Command = describe(o)
	s, err := b.startFresh(kind, "big")
	if err != nil {
		return res, err
	}
	defer s.Stop()
	c, err := dial(s.Addr)
	if err != nil {
		return res, err
	}
	defer c.close()
	if res.UsedEmpty, res.RSSEmpty, err = memoryReading(s, c); err != nil {
		return res, err
	}
	l, err := newLoader(s.Addr, 4, 512)
	if err != nil {
		return res, err
	}
	defer l.close()
	loaded := 0
	for _, n := range steps {
		start := time.Now()
		if _, err := l.pass(ctx, o, loaded, n-loaded); err != nil {
			return res, err
		}
		p := bigPoint{Keys: n, LoadSeconds: time.Since(start).Seconds()}
		if err := l.reconnect(); err != nil { // frees the connections' buffers
			return res, err
		}
		time.Sleep(200 * time.Millisecond)
		loaded = n
		if _, err := expectInt(c, int64(n), int64(n), "DBSIZE"); err != nil {
			return res, err
		}
		if p.Used, p.RSS, err = memoryReading(s, c); err != nil {
			return res, err
		}
		p.RSSPerKey = float64(p.RSS-res.RSSEmpty) / float64(n)
		p.UsedPerKey = float64(p.Used-res.UsedEmpty) / float64(n)
		res.Points = append(res.Points, p)
		b.logf("  %s %s keys: RSS %s, used_memory %s (%.1f s to load)", kind, strconv.Itoa(n), mib(p.RSS), mib(p.Used), p.LoadSeconds)
	}
	return res, nil
}

func mib(n int64) string { return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20)) }

// startFresh starts a new server of the kind in a directory of its own.
func (b *bench) startFresh(kind, name string) (*server, error) {
	dir := filepath.Join(b.tmp, fmt.Sprintf("%s-%s-%d", name, kind, time.Now().UnixNano()))
	if kind == kindLimitkv {
		return startLimitkv(b.limitkvBin, dir, false)
	}
	s, err := startRedis(b.redisBin, dir)
	if err != nil {
		return nil, err
	}
	if err := loadScripts(s); err != nil {
		s.Stop()
		return nil, err
	}
	return s, nil
}
