package main

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/limitkv/limitkv/internal/testserver"
)

// The periodic-snapshot scenario: what persistence on by default costs the
// latency of a busy server. Two fresh limitkv servers, one with persistence
// on and its default snapshot-interval (1 s: a snapshot starts a second
// after the previous one ended), one with --persistence no, get the same
// open-loop load: RL.SLIDE at -paced-rate requests/s over -conns
// connections, each request on a new key (users drawn from 2^40, so that a
// repeat is rare), and, when -periodic-keys asks for more distinct keys
// changed per second than the requests give (one key each), one more
// connection that sends the rest as pipelined RL.SLIDE on new keys of
// their own, unmeasured. The servers alternate for -rounds rounds of
// -periodic-duration. The target: RL.SLIDE's p99 with persistence on at
// most 1.5 times its p99 with persistence off.
//
// On the persistent server INFO persistence is read every 100 ms during
// the window: each snapshot that ends in it is counted with its keys,
// bytes and duration, and its longest hold of a shard lock is read from
// the Prometheus endpoint (limitkv_snapshot_last_pause_seconds; INFO does
// not show it). The memory-only server's INFO is read as often, so that
// both see the same polling. The CPU of the snapshot worker, a child
// process, is read from /proc beside the server's.

// periodicRatio is the target: p99 with persistence on over p99 with
// persistence off.
const periodicRatio = 1.5

// fillBatch is how many requests the fill connection pipelines per batch.
const fillBatch = 100

// periodicPoll is how often INFO persistence is read during a window.
const periodicPoll = 100 * time.Millisecond

const (
	sideOn  = "persistence on"
	sideOff = "persistence off"
)

type periodicSnapshot struct {
	Round   int     `json:"round"`
	Keys    int64   `json:"keys"`  // INFO snapshot_last_keys
	Bytes   int64   `json:"bytes"` // INFO snapshot_last_bytes
	Ms      float64 `json:"duration_ms"`
	PauseUs float64 `json:"longest_shard_hold_us"` // limitkv_snapshot_last_pause_seconds
	// Missed: snapshots that ended between two readings besides this one
	// (their figures are not known); 0 normally.
	Missed int  `json:"missed,omitempty"`
	Failed bool `json:"failed,omitempty"`
}

type periodicRun struct {
	Round      int     `json:"round"`
	Server     string  `json:"server"`
	WindowSec  float64 `json:"window_seconds"`
	Ops        int64   `json:"ops"`
	OpsPerSec  float64 `json:"ops_per_sec"`
	Samples    uint64  `json:"latency_samples"`
	P50us      float64 `json:"p50_us"`
	P99us      float64 `json:"p99_us"`
	P999us     float64 `json:"p999_us"`
	MaxUs      float64 `json:"max_us"`
	SendLagP99 float64 `json:"send_lag_p99_us"`
	SentP99us  float64 `json:"p99_from_actual_send_us"`
	Errors     int64   `json:"error_replies"`
	FirstError string  `json:"first_error,omitempty"`
	FillKeys   int64   `json:"fill_requests"` // sent by the fill connection, warmup included
	FillErrors int64   `json:"fill_error_replies"`
	Snapshots  int     `json:"snapshots"`     // ended in the window
	SnapKeys   int64   `json:"snapshot_keys"` // their keys together
	CPU        cpuUse  `json:"cpu"`           // Server: the server process alone
	// WorkerCores: the snapshot worker's CPU, in cores, over the window.
	WorkerCores float64 `json:"worker_cores"`
	CPUPerOpUs  float64 `json:"server_cpu_us_per_request"`
	hist        histogram
	lag, sent   histogram
}

type periodicSide struct {
	Server      string  `json:"server"`
	Samples     uint64  `json:"latency_samples"`
	OpsPerSec   float64 `json:"median_ops_per_sec"`
	P50us       float64 `json:"p50_us"` // over every round's requests
	P99us       float64 `json:"p99_us"`
	P999us      float64 `json:"p999_us"`
	MaxUs       float64 `json:"max_us"`
	SendLagP99  float64 `json:"send_lag_p99_us"`
	SentP99us   float64 `json:"p99_from_actual_send_us"`
	Errors      int64   `json:"error_replies"`
	ServerCores float64 `json:"median_server_cores"`
	WorkerCores float64 `json:"median_worker_cores"`
	ClientCores float64 `json:"median_client_cores"`
	OtherCores  float64 `json:"median_other_cores"`
	CPUPerOpUs  float64 `json:"median_server_cpu_us_per_request"`
	BusyRuns    int     `json:"busy_runs"`
}

type periodicResult struct {
	Rate        float64            `json:"rate"`              // measured RL.SLIDE requests/s
	KeysPerSec  float64            `json:"keys_per_sec"`      // distinct keys asked to change per second
	FillRate    float64            `json:"fill_rate"`         // unmeasured requests/s on new keys making up the rest
	Conns       int                `json:"conns"`             // of the measured load
	Interval    string             `json:"snapshot_interval"` // CONFIG GET snapshot-interval on the persistent server
	DurationSec float64            `json:"window_seconds"`
	WarmupSec   float64            `json:"warmup_seconds"`
	Rounds      int                `json:"rounds"`
	On          *periodicSide      `json:"persistence_on"`
	Off         *periodicSide      `json:"persistence_off"`
	RatioP99    float64            `json:"p99_on_over_off"`
	Snapshots   []periodicSnapshot `json:"snapshots"`
	// Over the persistent server's windows: snapshots ended, keys they
	// wrote per second of window, and the medians of their keys,
	// durations and longest shard holds.
	SnapshotCount   int           `json:"snapshot_count"`
	KeysWrittenPerS float64       `json:"snapshot_keys_per_sec"`
	MedianKeys      float64       `json:"median_snapshot_keys"`
	MedianMs        float64       `json:"median_snapshot_ms"`
	MedianPauseUs   float64       `json:"median_longest_shard_hold_us"`
	MaxPauseUs      float64       `json:"max_longest_shard_hold_us"`
	ServerUsPerKey  float64       `json:"server_cpu_us_per_snapshot_key"` // the server's extra CPU over the memory-only one
	WorkerUsPerKey  float64       `json:"worker_cpu_us_per_snapshot_key"`
	Runs            []periodicRun `json:"runs"`
	SetAside        []periodicRun `json:"runs_set_aside,omitempty"`
	Quick           bool          `json:"quick,omitempty"`
	QuietCores      float64       `json:"quiet_cores"`
}

// periodicTarget judges the scenario (nil: not measured).
func periodicTarget(r *periodicResult, conns int, rate float64) targetResult {
	t := targetResult{
		Name: fmt.Sprintf("RL.SLIDE p99 with persistence on (1 s snapshots, %s distinct keys changed/s) over persistence off, %d connections, %s req/s",
			commas(periodicKeys(r)), conns, commas(rate)),
		Want: fmt.Sprintf("≤ %.1fx", periodicRatio), Status: "NOT MEASURED",
	}
	if r == nil || r.On == nil || r.Off == nil {
		return t
	}
	t.Got = fmt.Sprintf("%.2fx (%.0f µs vs %.0f µs; %d snapshots, median %s keys, %.0f ms, longest shard hold %.0f µs)",
		r.RatioP99, r.On.P99us, r.Off.P99us, r.SnapshotCount, commas(r.MedianKeys), r.MedianMs, r.MaxPauseUs)
	t.Status = status(r.Off.P99us > 0 && r.RatioP99 <= periodicRatio)
	if r.On.Errors+r.Off.Errors > 0 {
		t.Status = "INVALID"
	}
	return t
}

func periodicKeys(r *periodicResult) float64 {
	if r == nil {
		return 50_000
	}
	return r.KeysPerSec
}

// periodicServer is one side of the scenario.
type periodicServer struct {
	side    string
	s       *server
	info    *client
	metrics string // the Prometheus endpoint's address; "" on the memory-only server
	fill    int    // the fill connection's next user
}

func (b *bench) startPeriodic(side string) (*periodicServer, error) {
	dir := filepath.Join(b.tmp, "periodic-"+strings.ReplaceAll(side, " ", "-"))
	ps := &periodicServer{side: side}
	persistent := side == sideOn
	if persistent {
		port, err := testserver.FreePort()
		if err != nil {
			return nil, err
		}
		ps.metrics = "127.0.0.1:" + strconv.Itoa(port)
	}
	s, err := startServer(kindLimitkv, b.limitkvBin, dir, func(port int) []string {
		args := []string{"--bind", "127.0.0.1", "--port", strconv.Itoa(port), "--dir", filepath.Join(dir, "data"), "--loglevel", "warning"}
		if persistent {
			// snapshot-interval is left at the server's default: that is
			// what the scenario is about.
			return append(args, "--persistence", "yes", "--metrics-addr", ps.metrics)
		}
		return append(args, "--persistence", "no")
	})
	if err != nil {
		return nil, err
	}
	ps.s = s
	if ps.info, err = dial(s.Addr); err != nil {
		s.Stop()
		return nil, err
	}
	return ps, nil
}

func (ps *periodicServer) stop() {
	ps.info.close()
	ps.s.Stop()
}

func (b *bench) periodicScenario(ctx context.Context) (*periodicResult, error) {
	rate := b.cfg.pacedRate
	if rate <= 0 {
		return nil, errors.New("the periodic-snapshot scenario needs a -paced-rate")
	}
	res := &periodicResult{
		Rate: rate, KeysPerSec: b.cfg.periodicKeys, FillRate: max(0, b.cfg.periodicKeys-rate), Conns: b.cfg.conns,
		DurationSec: b.cfg.periodicDuration.Seconds(), WarmupSec: b.cfg.warmup.Seconds(), Rounds: b.cfg.rounds,
		Quick: b.cfg.quick, QuietCores: b.cfg.quietCores,
	}
	on, err := b.startPeriodic(sideOn)
	if err != nil {
		return nil, err
	}
	defer on.stop()
	off, err := b.startPeriodic(sideOff)
	if err != nil {
		return nil, err
	}
	defer off.stop()
	v, err := on.info.ok("CONFIG", "GET", "snapshot-interval")
	if err != nil {
		return nil, err
	}
	if len(v.Elems) != 2 {
		return nil, fmt.Errorf("CONFIG GET snapshot-interval answered %v", v)
	}
	res.Interval = string(v.Elems[1].Str)
	for _, x := range []struct {
		ps   *periodicServer
		want string
	}{{on, "1"}, {off, "0"}} {
		f, err := x.ps.info.info("persistence")
		if err != nil {
			return nil, err
		}
		if f["persistence_enabled"] != x.want {
			return nil, fmt.Errorf("%s: INFO persistence says persistence_enabled:%s", x.ps.side, f["persistence_enabled"])
		}
	}
	if _, err := on.pause(); err != nil {
		return nil, fmt.Errorf("reading the snapshot pause from %s/metrics: %v", on.metrics, err)
	}
	b.logf("periodic snapshots: RL.SLIDE on new keys at %s req/s over %d connections (+%s req/s on new keys, unmeasured), snapshot-interval %s; %d rounds of %v + %v warmup on each server",
		commas(rate), b.cfg.conns, commas(res.FillRate), res.Interval, b.cfg.rounds, b.cfg.periodicDuration, b.cfg.warmup)

	for round := 1; round <= b.cfg.rounds; round++ {
		order := []*periodicServer{on, off}
		if round%2 == 0 {
			order = []*periodicServer{off, on}
		}
		for _, ps := range order {
			for attempt := 1; ; attempt++ {
				if b.cfg.quietWait > 0 {
					b.waitQuiet(ctx)
				}
				run, snaps, err := b.periodicRun(ctx, ps, round, res.FillRate)
				if err != nil {
					return nil, fmt.Errorf("%s, round %d: %v", ps.side, round, err)
				}
				b.logf("  round %d, %s: achieved %s/s  p50 %.0fµs p99 %.0fµs p99.9 %.0fµs max %.0fµs  send lag p99 %.0fµs  %d snapshots, %s keys  cpu server %.2f worker %.2f client %.2f other %.2f%s",
					round, ps.side, commas(run.OpsPerSec), run.P50us, run.P99us, run.P999us, run.MaxUs, run.SendLagP99,
					run.Snapshots, commas(float64(run.SnapKeys)), run.CPU.Server, run.WorkerCores, run.CPU.Client, run.CPU.Other, periodicErrNote(run))
				if b.cfg.quietWait == 0 || run.CPU.Other <= b.cfg.quietCores || attempt == 3 {
					res.Runs = append(res.Runs, run)
					res.Snapshots = append(res.Snapshots, snaps...)
					break
				}
				res.SetAside = append(res.SetAside, run)
				b.logf("        set aside: other processes took %.2f cores; measuring again", run.CPU.Other)
			}
		}
	}
	summarizePeriodic(res)
	return res, nil
}

func periodicErrNote(r periodicRun) string {
	if r.Errors+r.FillErrors == 0 {
		return ""
	}
	return fmt.Sprintf("  !!! %d ERROR REPLIES, %d on the fill connection (first: %s)", r.Errors, r.FillErrors, r.FirstError)
}

// periodicRun measures one round on one server.
func (b *bench) periodicRun(ctx context.Context, ps *periodicServer, round int, fillRate float64) (periodicRun, []periodicSnapshot, error) {
	time.Sleep(100 * time.Millisecond) // as measureRun: let the previous run's connections close
	run := periodicRun{Round: round, Server: ps.side}
	var snaps []periodicSnapshot
	plans := []plan{{name: snapSlide, op: op{cmd("RL.SLIDE", keyArg("slide:"), lit("100"), lit("60s"))}, users: 1 << 40, decision: true}}
	seed := uint64(round*1000 + 700)
	if ps.side == sideOff {
		seed += 100
	}
	fctx, stopFill := context.WithCancel(ctx)
	fillDone := make(chan fillResult, 1)
	if fillRate > 0 {
		fc, err := net.DialTimeout("tcp", ps.s.Addr, 5*time.Second)
		if err != nil {
			stopFill()
			return run, nil, err
		}
		go func() {
			fillDone <- fill(fctx, fc, fillRate, ps.fill, seed)
			fc.Close()
		}()
	} else {
		fillDone <- fillResult{}
	}
	var workerTicks int64
	var workerSecs float64
	lr, err := runLoad(ctx, loadSpec{
		addr: ps.s.Addr, pid: ps.s.Pid(), conns: b.cfg.conns, depth: 1, plans: plans, warmup: b.cfg.warmup, seed: seed, rate: b.cfg.pacedRate,
		measure: func(ctx context.Context) error {
			w0, t0 := childTicks(ps.s.Pid()), time.Now()
			err := ps.watch(ctx, b.cfg.periodicDuration, round, &snaps)
			workerTicks, workerSecs = childTicks(ps.s.Pid())-w0, time.Since(t0).Seconds()
			return err
		},
	})
	stopFill()
	fr := <-fillDone
	ps.fill = max(ps.fill, fr.next) // the next round's fill keys are new too
	if err != nil {
		return run, nil, err
	}
	if fr.err != nil && !errors.Is(fr.err, net.ErrClosed) && !errors.Is(fr.err, context.Canceled) {
		return run, nil, fmt.Errorf("fill connection: %v", fr.err)
	}
	p := lr.plans[0]
	run.WindowSec = lr.window.Seconds()
	run.Ops, run.OpsPerSec = p.ops, float64(p.ops)/lr.window.Seconds()
	run.hist, run.lag, run.sent = p.hist, p.lag, p.sent
	run.Samples = p.hist.n
	run.P50us, run.P99us, run.P999us = us(p.hist.quantile(0.5)), us(p.hist.quantile(0.99)), us(p.hist.quantile(0.999))
	run.MaxUs = us(time.Duration(p.hist.max))
	run.SendLagP99, run.SentP99us = us(p.lag.quantile(0.99)), us(p.sent.quantile(0.99))
	run.Errors, run.FirstError = p.errors, p.firstErr
	if run.FirstError == "" {
		run.FirstError = fr.firstErr
	}
	run.FillKeys, run.FillErrors = fr.sent, fr.errors
	run.CPU = lr.cpu
	if workerSecs > 0 {
		run.WorkerCores = float64(workerTicks) / clockTick / workerSecs
	}
	run.CPUPerOpUs = cpuPerOpUs(lr.cpu.Server*lr.window.Seconds(), p.ops)
	for _, s := range snaps {
		if !s.Failed {
			run.Snapshots += 1 + s.Missed
			run.SnapKeys += s.Keys
		}
	}
	return run, snaps, nil
}

// watch reads INFO persistence every periodicPoll for d, recording the
// snapshots that end meanwhile.
func (ps *periodicServer) watch(ctx context.Context, d time.Duration, round int, snaps *[]periodicSnapshot) error {
	count := func() (int64, map[string]string, error) {
		f, err := ps.info.info("persistence")
		if err != nil {
			return 0, nil, err
		}
		n, _ := strconv.ParseInt(f["snapshot_count"], 10, 64)
		return n, f, nil
	}
	last, _, err := count()
	if err != nil {
		return err
	}
	tick := time.NewTicker(periodicPoll)
	defer tick.Stop()
	end := time.After(d)
	for {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-end:
			return nil
		case <-tick.C:
		}
		n, f, err := count()
		if err != nil {
			return err
		}
		if n == last || ps.metrics == "" {
			continue
		}
		s := periodicSnapshot{Round: round, Missed: int(n - last - 1)}
		s.Keys, _ = strconv.ParseInt(f["snapshot_last_keys"], 10, 64)
		s.Bytes, _ = strconv.ParseInt(f["snapshot_last_bytes"], 10, 64)
		s.Ms, _ = strconv.ParseFloat(f["snapshot_last_duration_ms"], 64)
		s.Failed = f["rdb_last_bgsave_status"] != "ok"
		// The pause is that of the snapshot INFO described unless another
		// ended in between, which 100 ms readings of 1 s snapshots rule out.
		pause, err := ps.pause()
		if err != nil {
			return err
		}
		s.PauseUs = us(pause)
		*snaps = append(*snaps, s)
		last = n
	}
}

// pause reads the longest shard hold of the last snapshot from the
// Prometheus endpoint.
func (ps *periodicServer) pause() (time.Duration, error) {
	hc := http.Client{Timeout: 5 * time.Second}
	resp, err := hc.Get("http://" + ps.metrics + "/metrics")
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return 0, fmt.Errorf("/metrics answered %s", resp.Status)
	}
	return parsePause(resp.Body)
}

const pauseMetric = "limitkv_snapshot_last_pause_seconds"

// parsePause finds limitkv_snapshot_last_pause_seconds in a Prometheus
// text exposition.
func parsePause(r io.Reader) (time.Duration, error) {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		name, val, ok := strings.Cut(sc.Text(), " ")
		if !ok || name != pauseMetric {
			continue
		}
		v, err := strconv.ParseFloat(strings.TrimSpace(val), 64)
		if err != nil {
			return 0, fmt.Errorf("%s: %v", pauseMetric, err)
		}
		return time.Duration(v * float64(time.Second)), nil
	}
	if err := sc.Err(); err != nil {
		return 0, err
	}
	return 0, fmt.Errorf("no %s in the exposition", pauseMetric)
}

// childTicks sums the CPU time, in clock ticks, of pid's child processes
// (the snapshot worker).
func childTicks(pid int) int64 {
	var total int64
	for _, c := range childPids(pid) {
		total += cpuTicks(c)
	}
	return total
}

// childPids lists the processes whose parent is pid, from /proc.
func childPids(pid int) []int {
	ents, err := os.ReadDir("/proc")
	if err != nil {
		return nil
	}
	var out []int
	for _, e := range ents {
		n, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", n))
		if err != nil {
			continue
		}
		if ppid, ok := statPPID(b); ok && ppid == pid {
			out = append(out, n)
		}
	}
	return out
}

// statPPID reads the parent's pid from a /proc/<pid>/stat line: the field
// after the state, which follows the parenthesised command name.
func statPPID(b []byte) (int, bool) {
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return 0, false
	}
	f := bytes.Fields(b[i+1:])
	if len(f) < 2 {
		return 0, false
	}
	n, err := strconv.Atoi(string(f[1]))
	return n, err == nil
}

type fillResult struct {
	sent, errors int64
	next         int // the first user not sent
	firstErr     string
	err          error
}

// fill sends RL.SLIDE on new keys (fill:<first>, fill:<first+1>, ...) at
// rate requests/s, in pipelined batches of fillBatch on one connection,
// until ctx ends. A late batch is sent at once, never two to catch up: the
// fill may fall short of its rate, never exceed it.
func fill(ctx context.Context, conn net.Conn, rate float64, first int, seed uint64) (res fillResult) {
	go func() {
		<-ctx.Done()
		conn.Close()
	}()
	o := op{cmd("RL.SLIDE", keyArg("fill:"), lit("100"), lit("60s"))}
	e := newEncoder(0, 1, seed)
	interval := time.Duration(float64(time.Second) * fillBatch / rate)
	out := make([]byte, 0, 8<<10)
	in := make([]byte, 64<<10)
	next := time.Now()
	user := first
	defer func() { res.next = user }()
	for ctx.Err() == nil {
		if wait := time.Until(next); wait > 0 {
			select {
			case <-ctx.Done():
				return res
			case <-time.After(wait):
			}
		}
		next = next.Add(interval)
		out = out[:0]
		for range fillBatch {
			out = e.appendOp(out, o, user)
			user++
		}
		if _, err := conn.Write(out); err != nil {
			res.err = err
			return res
		}
		r, w := 0, 0
		for got := 0; got < fillBatch; {
			n, info, err := skipReply(in[r:w])
			if errors.Is(err, errShort) {
				if r > 0 {
					w = copy(in, in[r:w])
					r = 0
				}
				if w == len(in) {
					in = append(in, make([]byte, len(in))...)
				}
				m, err := conn.Read(in[w:])
				if err != nil {
					res.err = err
					return res
				}
				w += m
				continue
			}
			if err != nil {
				res.err = err
				return res
			}
			if info.errors > 0 {
				res.errors += int64(info.errors)
				if res.firstErr == "" {
					line := in[r+info.firstErr:]
					if i := indexCRLF(line); i >= 0 {
						line = line[:i]
					}
					res.firstErr = string(line)
				}
			}
			r += n
			got++
		}
		res.sent += fillBatch
	}
	return res
}

func summarizePeriodic(r *periodicResult) {
	side := func(name string) *periodicSide {
		s := &periodicSide{Server: name}
		var hist, lag, sent histogram
		var rates, srv, wrk, cli, oth, perOp []float64
		for _, x := range r.Runs {
			if x.Server != name {
				continue
			}
			hist.merge(&x.hist)
			lag.merge(&x.lag)
			sent.merge(&x.sent)
			s.Errors += x.Errors + x.FillErrors
			rates = append(rates, x.OpsPerSec)
			srv, wrk = append(srv, x.CPU.Server), append(wrk, x.WorkerCores)
			cli, oth = append(cli, x.CPU.Client), append(oth, x.CPU.Other)
			perOp = append(perOp, x.CPUPerOpUs)
			if x.CPU.Other > r.QuietCores {
				s.BusyRuns++
			}
		}
		s.Samples = hist.n
		s.OpsPerSec = median(rates)
		s.P50us, s.P99us, s.P999us = us(hist.quantile(0.5)), us(hist.quantile(0.99)), us(hist.quantile(0.999))
		s.MaxUs = us(time.Duration(hist.max))
		s.SendLagP99, s.SentP99us = us(lag.quantile(0.99)), us(sent.quantile(0.99))
		s.ServerCores, s.WorkerCores, s.ClientCores, s.OtherCores = median(srv), median(wrk), median(cli), median(oth)
		s.CPUPerOpUs = median(perOp)
		return s
	}
	r.On, r.Off = side(sideOn), side(sideOff)
	if r.Off.P99us > 0 {
		r.RatioP99 = r.On.P99us / r.Off.P99us
	}
	var keys, ms, pauses []float64
	for _, s := range r.Snapshots {
		if s.Failed {
			continue
		}
		keys, ms, pauses = append(keys, float64(s.Keys)), append(ms, s.Ms), append(pauses, s.PauseUs)
		r.MaxPauseUs = max(r.MaxPauseUs, s.PauseUs)
	}
	r.MedianKeys, r.MedianMs, r.MedianPauseUs = median(keys), median(ms), median(pauses)
	// CPU per snapshot key: the persistent server's CPU per request above
	// the memory-only one's, times its requests, over the keys its
	// snapshots wrote; the worker's CPU over the same keys.
	var onCPU, onOps, offCPU, offOps, workerCPU, window float64
	var snapKeys int64
	for _, x := range r.Runs {
		cpu := x.CPU.Server * x.WindowSec
		if x.Server == sideOn {
			onCPU, onOps = onCPU+cpu, onOps+float64(x.Ops)
			workerCPU += x.WorkerCores * x.WindowSec
			window += x.WindowSec
			snapKeys += x.SnapKeys
			r.SnapshotCount += x.Snapshots
		} else {
			offCPU, offOps = offCPU+cpu, offOps+float64(x.Ops)
		}
	}
	if window > 0 {
		r.KeysWrittenPerS = float64(snapKeys) / window
	}
	if snapKeys > 0 && onOps > 0 && offOps > 0 {
		extra := onCPU - offCPU/offOps*onOps
		r.ServerUsPerKey = extra * 1e6 / float64(snapKeys)
		r.WorkerUsPerKey = workerCPU * 1e6 / float64(snapKeys)
	}
}

// periodicMarkdown is the scenario's section of results.md and of
// periodic.md.
func periodicMarkdown(b *strings.Builder, r *periodicResult) {
	p := func(format string, args ...any) { fmt.Fprintf(b, format+"\n", args...) }
	p("## Latency with periodic snapshots")
	p("")
	fillText := ""
	if r.FillRate > 0 {
		fillText = fmt.Sprintf(" One more connection sends %s requests/s of `RL.SLIDE fill:<n> 100 60s` on new keys too, pipelined %d at a time, unmeasured: %s req/s of one-key commands change at most %s keys a second, and this makes up the %s distinct keys changed per second asked for.",
			commas(r.FillRate), fillBatch, commas(r.Rate), commas(r.Rate), commas(r.KeysPerSec))
	}
	p("Two fresh limitkv servers: one with persistence on and its default `snapshot-interval` (`%s`: a snapshot starts that long after the previous one ended), one with `--persistence no`. The same open-loop load on both: `RL.SLIDE slide:<n> 100 60s` at %s requests/s over %d connections, unpipelined, timed as in *Latency at a fixed rate* (from the intended send, with the backlog), `<n>` drawn from 2^40 so that nearly every request creates a key.%s The servers alternate, %d round(s) of %s warmup + %s measured on each. Snapshots: those that ended in the measured windows, read from INFO persistence every %v (keys, bytes, duration) and from the Prometheus endpoint (`%s`, the longest time the snapshot held one shard's lock). CPU in cores: the server process, and its snapshot worker (a child process) apart.",
		r.Interval, commas(r.Rate), r.Conns, fillText, r.Rounds, time.Duration(r.WarmupSec*float64(time.Second)), time.Duration(r.DurationSec*float64(time.Second)), periodicPoll, pauseMetric)
	p("")
	p("| server | requests | achieved req/s | RL.SLIDE p50 / p99 / p99.9 / max µs | send lag p99 µs | p99 from the send µs | server CPU | worker CPU | server CPU µs/req | client CPU | other CPU | busy rounds |")
	p("|---|---:|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|")
	for _, s := range []*periodicSide{r.On, r.Off} {
		if s == nil {
			continue
		}
		ops := commas(s.OpsPerSec)
		if s.Errors > 0 {
			ops += fmt.Sprintf(" **INVALID: %d error replies**", s.Errors)
		}
		p("| %s | %s | %s | **%.0f / %.0f / %.0f / %.0f** | %.0f | %.0f | %.2f | %.2f | %.2f | %.2f | %.2f | %d of %d |", s.Server, commas(float64(s.Samples)), ops,
			s.P50us, s.P99us, s.P999us, s.MaxUs, s.SendLagP99, s.SentP99us, s.ServerCores, s.WorkerCores, s.CPUPerOpUs, s.ClientCores, s.OtherCores, s.BusyRuns, r.Rounds)
	}
	p("")
	if r.On != nil && r.Off != nil {
		p("p99 with persistence on / off: **%.2fx** (target ≤ %.1fx: **%s**).", r.RatioP99, periodicRatio, status(r.Off.P99us > 0 && r.RatioP99 <= periodicRatio))
		p("")
	}
	p("Snapshots in the windows: %d, writing %s keys per second of window; per snapshot, medians: %s keys, %.0f ms, longest shard hold %.0f µs (the longest of all: %.0f µs). CPU per key written: the server %.2f µs above the memory-only server's (its CPU per request above the other's, times its requests, over the keys), the worker %.2f µs.",
		r.SnapshotCount, commas(r.KeysWrittenPerS), commas(r.MedianKeys), r.MedianMs, r.MedianPauseUs, r.MaxPauseUs, r.ServerUsPerKey, r.WorkerUsPerKey)
	p("")
	p("| round | server | req/s | p50 / p99 / p99.9 / max µs | snapshots | keys each | ms each | longest shard hold µs each | server CPU | worker CPU | other CPU |")
	p("|---:|---|---:|---|---:|---|---|---|---:|---:|---:|")
	for _, x := range r.Runs {
		var keys, ms, pause []string
		for _, s := range r.Snapshots {
			if s.Round != x.Round || x.Server != sideOn {
				continue
			}
			k := commas(float64(s.Keys))
			if s.Failed {
				k += " (failed)"
			}
			if s.Missed > 0 {
				k += fmt.Sprintf(" (+%d unread)", s.Missed)
			}
			keys, ms, pause = append(keys, k), append(ms, fmt.Sprintf("%.0f", s.Ms)), append(pause, fmt.Sprintf("%.0f", s.PauseUs))
		}
		dash := func(v []string) string {
			if len(v) == 0 {
				return "–"
			}
			return strings.Join(v, ", ")
		}
		p("| %d | %s | %s | %.0f / %.0f / %.0f / %.0f | %d | %s | %s | %s | %.2f | %.2f | %.2f |", x.Round, x.Server, commas(x.OpsPerSec), x.P50us, x.P99us, x.P999us, x.MaxUs,
			x.Snapshots, dash(keys), dash(ms), dash(pause), x.CPU.Server, x.WorkerCores, x.CPU.Other)
	}
	p("")
	if len(r.SetAside) > 0 {
		p("%d run(s) were set aside because other processes took more than %.2f cores during them (in the JSON, `runs_set_aside`).", len(r.SetAside), r.QuietCores)
		p("")
	}
}

func periodicFlags(fs *flag.FlagSet, c *config) {
	fs.DurationVar(&c.periodicDuration, "periodic-duration", 10*time.Second, "measured time of each round of the periodic-snapshot scenario (several 1 s snapshots)")
	fs.Float64Var(&c.periodicKeys, "periodic-keys", 50_000, "distinct keys changed per second in the periodic-snapshot scenario: the measured requests each change a new key, and one more connection changes the rest (unmeasured)")
}

// runPeriodic is the scenario alone: periodic.md and .json.
func (b *bench) runPeriodic(ctx context.Context, started time.Time, redisVersion string) (int, error) {
	m := b.meta(started, redisVersion)
	b.logf("machine: %s, %d cores; load average %.2f %.2f %.2f", m.CPU, m.Cores, m.LoadStart[0], m.LoadStart[1], m.LoadStart[2])
	r, err := b.periodicScenario(ctx)
	if err != nil {
		return 1, fmt.Errorf("periodic snapshots: %v", err)
	}
	finish(&m, started)
	t := periodicTarget(r, m.Conns, m.PacedRate)
	rep := newReport("periodic", "limitkv: latency with periodic snapshots", m, "")
	rep.p("- Server: %s, commit %s, built with %s.", m.LimitkvVersion, m.Commit, m.GoVersion)
	rep.p("")
	periodicMarkdown(&rep.body, r)
	rep.data = struct {
		Meta     meta            `json:"meta"`
		Target   targetResult    `json:"target"`
		Periodic *periodicResult `json:"periodic"`
	}{m, t, r}
	if err := b.publish(rep, started); err != nil {
		return 1, err
	}
	b.logf("  %-4s  %s: %s", t.Status, t.Name, t.Got)
	if r.On.Errors+r.Off.Errors > 0 {
		b.logf("!!! INVALID: error replies during the measured loads")
		return 3, nil
	}
	return 0, nil
}
