package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/limitkv/limitkv/internal/testserver"
	"github.com/limitkv/limitkv/resp"
)

// Failover under the real redis-sentinel, as tests/sentinel_test.go runs
// it: a limitkv master, two replicas and three sentinels (quorum 2); go-redis's
// failover client writes through them from a few goroutines, each write a
// key of its own; the master is killed (SIGKILL); the time until the
// sentinels switch and until the client's first write succeeds on the new
// master is measured, and every write the client was told succeeded is
// looked for on the new master. Rounds without and with WAIT 1 100 after
// each write alternate, on a fresh group each time.

type failoverResult struct {
	DownAfterMs int             `json:"down_after_ms"`
	Writers     int             `json:"writers"`
	Rounds      []failoverRound `json:"rounds"`
	Modes       []failoverMode  `json:"modes"`
}

type failoverRound struct {
	Mode     string `json:"mode"` // "SET" or "SET + WAIT 1 100"
	Round    int    `json:"round"`
	Promoted string `json:"promoted"`
	// Milliseconds from the kill until the first sentinel's event of each
	// kind (+sdown, +odown, +selected-slave, +promoted-slave, +switch-master).
	Events map[string]float64 `json:"sentinel_events_ms"`
	// From the kill: the switch (+switch-master), the client's first
	// write sent after the kill that succeeded, and (with WAIT) the first
	// such write WAIT confirmed; the other replica's link to the new
	// master up.
	ToSwitchMs         float64 `json:"to_switch_master_ms"`
	ToFirstWriteMs     float64 `json:"to_first_write_ms"`
	ToFirstConfirmedMs float64 `json:"to_first_confirmed_write_ms,omitempty"`
	ToReplicaFollowsMs float64 `json:"to_other_replica_following_ms"`
	// Writes: acknowledged (with WAIT: SET answered OK and WAIT at least
	// 1), of which before the kill; with WAIT, those whose WAIT answered 0.
	Acked           int64 `json:"acknowledged"`
	AckedBeforeKill int64 `json:"acknowledged_before_kill"`
	Unconfirmed     int64 `json:"unconfirmed,omitempty"`
	Failed          int64 `json:"failed_attempts"` // errors while the master was away
	// Acknowledged writes missing on the new master, and how long before
	// the kill the earliest of them was acknowledged (negative: its reply,
	// sent before the master died, was read after the kill).
	Lost            int64   `json:"acknowledged_lost"`
	LostWindowMs    float64 `json:"lost_acknowledged_before_kill_ms,omitempty"`
	LostUnconfirmed int64   `json:"unconfirmed_lost,omitempty"`
}

type failoverMode struct {
	Mode               string  `json:"mode"`
	Rounds             int     `json:"rounds"`
	ToSwitchMs         float64 `json:"median_to_switch_master_ms"`
	ToFirstWriteMs     float64 `json:"median_to_first_write_ms"`
	ToFirstConfirmedMs float64 `json:"median_to_first_confirmed_write_ms,omitempty"`
	Acked              int64   `json:"acknowledged"`
	Lost               int64   `json:"acknowledged_lost"`
	MaxLost            int64   `json:"max_lost_in_a_round"`
}

const (
	modePlain = "SET"
	modeWait  = "SET + WAIT 1 100"
	// downAfter is Sentinel's down-after-milliseconds: the least time a
	// failover can take.
	downAfter      = 1000
	failoverWriter = 4
)

// sentinelEvents are the events whose first time after the kill is
// recorded, in the order a failover goes through them.
var sentinelEvents = []string{"+sdown", "+odown", "+selected-slave", "+promoted-slave", "+switch-master"}

type quietLogger struct{}

func (quietLogger) Printf(context.Context, string, ...any) {}

func (b *bench) failoverScenario(ctx context.Context, sentinelBin string) (*failoverResult, error) {
	// go-redis reports every failed dial and sentinel query on stderr;
	// the outage is what is measured here.
	redis.SetLogger(quietLogger{})
	res := &failoverResult{DownAfterMs: downAfter, Writers: failoverWriter}
	b.logf("failover: a master, 2 replicas and 3 redis-sentinels (quorum 2, down-after-milliseconds %d); %d writers through go-redis's FailoverClient; kill -9 of the master; %d round(s) without and with WAIT 1 100, alternating",
		downAfter, failoverWriter, b.cfg.failovers)
	for round := 1; round <= b.cfg.failovers; round++ {
		modes := []string{modePlain, modeWait}
		if round%2 == 0 {
			modes = []string{modeWait, modePlain}
		}
		for _, mode := range modes {
			fr, err := b.failoverRound(ctx, sentinelBin, mode, round)
			if err != nil {
				return nil, fmt.Errorf("%s, round %d: %v", mode, round, err)
			}
			res.Rounds = append(res.Rounds, fr)
			confirmed := ""
			if mode == modeWait {
				confirmed = fmt.Sprintf(", first confirmed write %.0f ms (%d writes unconfirmed, %d of them lost)", fr.ToFirstConfirmedMs, fr.Unconfirmed, fr.LostUnconfirmed)
			}
			b.logf("  %-16s round %d: switch %.0f ms, first write %.0f ms%s, other replica following %.0f ms; %d writes acknowledged (%d before the kill), %d lost; events %s",
				mode, round, fr.ToSwitchMs, fr.ToFirstWriteMs, confirmed, fr.ToReplicaFollowsMs, fr.Acked, fr.AckedBeforeKill, fr.Lost, eventLine(fr.Events))
		}
	}
	for _, mode := range []string{modePlain, modeWait} {
		fm := failoverMode{Mode: mode}
		var sw, first, conf []float64
		for _, r := range res.Rounds {
			if r.Mode != mode {
				continue
			}
			fm.Rounds++
			sw, first, conf = append(sw, r.ToSwitchMs), append(first, r.ToFirstWriteMs), append(conf, r.ToFirstConfirmedMs)
			fm.Acked += r.Acked
			fm.Lost += r.Lost
			fm.MaxLost = max(fm.MaxLost, r.Lost)
		}
		fm.ToSwitchMs, fm.ToFirstWriteMs = median(sw), median(first)
		if mode == modeWait {
			fm.ToFirstConfirmedMs = median(conf)
		}
		res.Modes = append(res.Modes, fm)
	}
	return res, nil
}

func eventLine(ev map[string]float64) string {
	var parts []string
	for _, e := range sentinelEvents {
		if t, ok := ev[e]; ok {
			parts = append(parts, fmt.Sprintf("%s %.0f", e, t))
		}
	}
	return strings.Join(parts, ", ")
}

// startSentinel starts redis-sentinel watching master as mymaster.
func (b *bench) startSentinel(bin string, master *server) (*server, error) {
	dir := filepath.Join(b.tmp, fmt.Sprintf("sentinel-%d", nodeSeq.Add(1)))
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	var confErr error
	s, err := startServer(testserver.Sentinel, bin, dir, func(p int) []string {
		var args []string
		args, confErr = testserver.SentinelArgs(p, dir, master.Addr,
			fmt.Sprintf("sentinel down-after-milliseconds mymaster %d", downAfter),
			"sentinel failover-timeout mymaster 10000",
			"sentinel parallel-syncs mymaster 1")
		return args
	})
	if confErr != nil {
		if s != nil {
			s.Stop()
		}
		return nil, confErr
	}
	return s, err
}

func failoverFlags(fs *flag.FlagSet, c *config) {
	fs.IntVar(&c.failovers, "repl-failovers", 3, "failover rounds without, and as many with, WAIT 1 100; 0 skips them in replication")
	fs.StringVar(&c.sentinelBin, "sentinel-bin", "", "redis-sentinel to use (default: from PATH)")
}

// runFailover is the failover rounds alone: failover.md and .json, the
// failover section of replication.md.
func (b *bench) runFailover(ctx context.Context, started time.Time, redisVersion string) (int, error) {
	sentinel, sentinelVersion, err := findSentinel(b.cfg.sentinelBin)
	if err != nil {
		return 1, err
	}
	res := &replResults{Meta: b.meta(started, redisVersion)}
	res.Settings = replSettings{Failovers: b.cfg.failovers, SentinelVersion: sentinelVersion}
	b.logf("machine: %s, %d cores; load average %.2f %.2f %.2f", res.Meta.CPU, res.Meta.Cores,
		res.Meta.LoadStart[0], res.Meta.LoadStart[1], res.Meta.LoadStart[2])
	if res.Failover, err = b.failoverScenario(ctx, sentinel); err != nil {
		return 1, fmt.Errorf("failover: %v", err)
	}
	finish(&res.Meta, started)
	if err := b.publish(replReport("failover", "limitkv failover under redis-sentinel: benchmark results", res), started); err != nil {
		return 1, err
	}
	for _, line := range replSummary(res) {
		b.logf("  %s", line)
	}
	return 0, nil
}

// written is one write the client was told succeeded.
type written struct {
	key       string
	done      time.Time
	confirmed bool // WAIT answered at least 1 (always true without WAIT)
}

func (b *bench) failoverRound(ctx context.Context, sentinelBin, mode string, round int) (failoverRound, error) {
	fr := failoverRound{Mode: mode, Round: round, Events: map[string]float64{}}
	m, reps, err := b.startGroup("failover", 2)
	if err != nil {
		return fr, err
	}
	nodes := append([]*server{m}, reps...)
	var sentinels []*server
	defer func() {
		for _, s := range sentinels {
			s.Stop()
		}
		for _, n := range nodes {
			n.Stop()
		}
	}()
	var sentinelAddrs []string
	for range 3 {
		s, err := b.startSentinel(sentinelBin, m)
		if err != nil {
			return fr, err
		}
		sentinels = append(sentinels, s)
		sentinelAddrs = append(sentinelAddrs, s.Addr)
	}
	if err := waitSentinels(sentinels, 30*time.Second); err != nil {
		return fr, err
	}

	// Every sentinel's events, the first time each kind is seen.
	var evMu sync.Mutex
	var killed time.Time
	first := map[string]time.Time{}
	var evWG sync.WaitGroup
	var evConns []*client
	defer func() {
		for _, c := range evConns {
			c.conn.SetReadDeadline(time.Now())
		}
		evWG.Wait()
		for _, c := range evConns {
			c.close()
		}
	}()
	for _, s := range sentinels {
		c, err := dial(s.Addr)
		if err != nil {
			return fr, err
		}
		evConns = append(evConns, c)
		if v, err := c.do("PSUBSCRIBE", "*"); err != nil || v.Type != '*' {
			return fr, fmt.Errorf("PSUBSCRIBE on a sentinel: %v %v", v, err)
		}
		c.conn.SetReadDeadline(time.Now().Add(5 * time.Minute))
		evWG.Add(1)
		go func() {
			defer evWG.Done()
			for {
				v, err := resp.ReadValue(c.r)
				at := time.Now()
				if err != nil {
					return
				}
				if v.Type != '*' || len(v.Elems) != 4 {
					continue
				}
				ch, payload := string(v.Elems[2].Str), string(v.Elems[3].Str)
				if (ch == "+sdown" || ch == "+odown") && !strings.HasPrefix(payload, "master ") {
					continue
				}
				evMu.Lock()
				if !killed.IsZero() && at.After(killed) {
					if _, ok := first[ch]; !ok {
						first[ch] = at
					}
				}
				evMu.Unlock()
			}
		}()
	}

	client := redis.NewFailoverClient(&redis.FailoverOptions{
		MasterName: "mymaster", SentinelAddrs: sentinelAddrs,
		DialTimeout: 500 * time.Millisecond, ReadTimeout: time.Second, WriteTimeout: time.Second,
		MaxRetries: -1,
	})
	defer client.Close()

	var stop atomic.Bool
	var failed, succeeded atomic.Int64
	writes := make([][]written, failoverWriter)
	var firstAfter, firstConfirmed atomic.Int64 // Unix ns
	var killNs atomic.Int64
	var wg sync.WaitGroup
	for w := range failoverWriter {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for seq := 0; !stop.Load(); seq++ {
				key := "fo:" + strconv.Itoa(w) + ":" + strconv.Itoa(seq)
				t0 := time.Now()
				confirmed := true
				var err error
				if mode == modeWait {
					pipe := client.Pipeline()
					set := pipe.Set(ctx, key, seq, 0)
					wait := pipe.Do(ctx, "WAIT", 1, 100)
					pipe.Exec(ctx)
					err = set.Err()
					n, werr := wait.Int()
					confirmed = werr == nil && n >= 1
				} else {
					err = client.Set(ctx, key, seq, 0).Err()
				}
				if err != nil {
					if k := killNs.Load(); k != 0 {
						failed.Add(1)
					}
					time.Sleep(10 * time.Millisecond)
					continue
				}
				now := time.Now()
				writes[w] = append(writes[w], written{key: key, done: now, confirmed: confirmed})
				succeeded.Add(1)
				if k := killNs.Load(); k != 0 && t0.UnixNano() > k {
					firstAfter.CompareAndSwap(0, now.UnixNano())
					if confirmed {
						firstConfirmed.CompareAndSwap(0, now.UnixNano())
					}
				}
			}
		}()
	}
	stopWriters := func() {
		stop.Store(true)
		wg.Wait()
	}
	defer stopWriters()

	// Writes flow for a second before the kill.
	if err := waitUntil(ctx, 10*time.Second, func() bool { return succeeded.Load() > 0 }); err != nil {
		return fr, errors.New("the client's first writes did not succeed")
	}
	time.Sleep(time.Second)

	evMu.Lock()
	m.Cmd.Process.Kill()
	killed = time.Now()
	evMu.Unlock()
	killNs.Store(killed.UnixNano())

	if err := waitUntil(ctx, 60*time.Second, func() bool {
		evMu.Lock()
		defer evMu.Unlock()
		_, ok := first["+switch-master"]
		return ok
	}); err != nil {
		return fr, errors.New("no +switch-master 60 s after the kill")
	}
	if err := waitUntil(ctx, 30*time.Second, func() bool {
		return firstAfter.Load() != 0 && (mode != modeWait || firstConfirmed.Load() != 0)
	}); err != nil {
		return fr, errors.New("the client did not write to the new master in 30 s")
	}
	newAddr, err := sentinelMasterAddr(sentinels[0])
	if err != nil {
		return fr, err
	}
	fr.Promoted = newAddr
	var other *server
	for _, r := range reps {
		if r.Addr != newAddr {
			other = r
		}
	}
	if other == nil || newAddr == m.Addr {
		return fr, fmt.Errorf("the sentinels promoted %s, which is not one of the replicas", newAddr)
	}
	if err := waitUntil(ctx, 30*time.Second, func() bool {
		c, err := dial(other.Addr)
		if err != nil {
			return false
		}
		defer c.close()
		f, err := c.info("replication")
		return err == nil && f["master_link_status"] == "up" && f["master_host"]+":"+f["master_port"] == newAddr
	}); err != nil {
		return fr, errors.New("the other replica does not follow the new master after 30 s")
	}
	fr.ToReplicaFollowsMs = ms(time.Since(killed))
	time.Sleep(300 * time.Millisecond)
	stopWriters()

	evMu.Lock()
	for ch, t := range first {
		fr.Events[ch] = ms(t.Sub(killed))
	}
	evMu.Unlock()
	fr.ToSwitchMs = fr.Events["+switch-master"]
	fr.ToFirstWriteMs = ms(time.Unix(0, firstAfter.Load()).Sub(killed))
	if mode == modeWait {
		fr.ToFirstConfirmedMs = ms(time.Unix(0, firstConfirmed.Load()).Sub(killed))
	}
	fr.Failed = failed.Load()

	// Every acknowledged write is looked for on the new master.
	c, err := dial(newAddr)
	if err != nil {
		return fr, err
	}
	defer c.close()
	var all []written
	for _, ws := range writes {
		all = append(all, ws...)
	}
	missing, err := missingKeys(c, all)
	if err != nil {
		return fr, err
	}
	var earliestLost time.Time
	for i, wr := range all {
		if wr.confirmed {
			fr.Acked++
			if wr.done.Before(killed) {
				fr.AckedBeforeKill++
			}
		} else {
			fr.Unconfirmed++
		}
		if !missing[i] {
			continue
		}
		if !wr.confirmed {
			fr.LostUnconfirmed++
			continue
		}
		fr.Lost++
		if earliestLost.IsZero() || wr.done.Before(earliestLost) {
			earliestLost = wr.done
		}
	}
	if fr.Lost > 0 {
		fr.LostWindowMs = ms(killed.Sub(earliestLost))
	}
	return fr, nil
}

// missingKeys reports, for each write, whether its key is missing.
func missingKeys(c *client, all []written) ([]bool, error) {
	missing := make([]bool, len(all))
	const batch = 500
	for i := 0; i < len(all); i += batch {
		end := min(i+batch, len(all))
		args := []string{"MGET"}
		for _, w := range all[i:end] {
			args = append(args, w.key)
		}
		v, err := c.ok(args...)
		if err != nil {
			return nil, err
		}
		if v.Type != '*' || len(v.Elems) != end-i {
			return nil, fmt.Errorf("MGET answered %v", v.Type)
		}
		for j, e := range v.Elems {
			missing[i+j] = e.Null
		}
	}
	return missing, nil
}

// waitSentinels waits until every sentinel knows both replicas and the
// two other sentinels.
func waitSentinels(sentinels []*server, limit time.Duration) error {
	return waitUntil(context.Background(), limit, func() bool {
		for _, s := range sentinels {
			c, err := dial(s.Addr)
			if err != nil {
				return false
			}
			reps, err1 := c.do("SENTINEL", "REPLICAS", "mymaster")
			sens, err2 := c.do("SENTINEL", "SENTINELS", "mymaster")
			c.close()
			if err1 != nil || err2 != nil || len(reps.Elems) != 2 || len(sens.Elems) != 2 {
				return false
			}
		}
		return true
	})
}

func sentinelMasterAddr(s *server) (string, error) {
	c, err := dial(s.Addr)
	if err != nil {
		return "", err
	}
	defer c.close()
	v, err := c.ok("SENTINEL", "GET-MASTER-ADDR-BY-NAME", "mymaster")
	if err != nil {
		return "", err
	}
	if len(v.Elems) != 2 {
		return "", fmt.Errorf("SENTINEL GET-MASTER-ADDR-BY-NAME answered %v", v)
	}
	return string(v.Elems[0].Str) + ":" + string(v.Elems[1].Str), nil
}

// waitUntil polls ok every 10 ms until it holds, for at most limit.
func waitUntil(ctx context.Context, limit time.Duration, ok func() bool) error {
	deadline := time.Now().Add(limit)
	for !ok() {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		if time.Now().After(deadline) {
			return errors.New("timed out")
		}
		time.Sleep(10 * time.Millisecond)
	}
	return nil
}
