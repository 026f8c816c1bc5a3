package tests

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// The examples in examples/node (ioredis) and examples/python (redis-py)
// are run as a user would run them, against a real limitkv: on each of
// their endpoints (RL.SLIDE, and RL.CHECK of a named policy) they must let
// exactly the limit through, then answer 429 with Retry-After and the IETF
// RateLimit-Policy / RateLimit fields. The policy is the server's: the app
// creates it only where there is none, never redefines it (not when it
// restarts, nor when several instances start at once), and advertises the
// definition an operator gave it.

// exampleNeeds fails under CI (where .ci/run installs what the examples
// need) and skips elsewhere.
func exampleNeeds(t *testing.T, what string) {
	t.Helper()
	if os.Getenv("CI") == "true" {
		t.Fatalf("%s is required in CI (.ci/run installs it) but was not found", what)
	}
	t.Skipf("%s not installed; the example's test runs in CI", what)
}

// exampleApp is a running example, stopped by pid when the test ends.
type exampleApp struct {
	cmd   *exec.Cmd
	argv  []string
	base  string // http://host:port
	log   *syncBuffer
	ready chan string
	done  chan struct{}
}

type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// exampleRun says how to run one of the examples.
type exampleRun struct {
	dir  string
	argv []string
}

// start runs the example with PORT=0 (the app takes a free port and names
// it in its ready line) and the given environment, and waits for the line
// "ready: http://host:port ...".
func (r exampleRun) start(t *testing.T, env []string) *exampleApp {
	t.Helper()
	a := r.launch(t, env)
	a.awaitReady(t)
	return a
}

// launch runs the example without waiting for it to be ready.
func (r exampleRun) launch(t *testing.T, env []string) *exampleApp {
	t.Helper()
	argv := r.argv
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Dir = r.dir
	cmd.Env = append(append(os.Environ(), "PORT=0", "HOST=127.0.0.1"), env...)
	a := &exampleApp{cmd: cmd, argv: argv, log: &syncBuffer{}, ready: make(chan string, 1), done: make(chan struct{})}
	cmd.Stderr = a.log
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			line := sc.Text()
			fmt.Fprintln(a.log, line)
			if rest, ok := strings.CutPrefix(line, "ready: "); ok {
				select {
				case a.ready <- strings.Fields(rest)[0]:
				default:
				}
			}
		}
		io.Copy(io.Discard, stdout)
		cmd.Wait()
		close(a.done)
	}()
	t.Cleanup(a.stop)
	return a
}

func (a *exampleApp) awaitReady(t *testing.T) {
	t.Helper()
	select {
	case a.base = <-a.ready:
	case <-a.done:
		t.Fatalf("%s exited before it was ready:\n%s", a.argv, a.log.String())
	case <-time.After(30 * time.Second):
		t.Fatalf("%s not ready after 30s:\n%s", a.argv, a.log.String())
	}
}

// stop ends the app by its pid: SIGTERM, which the examples handle by
// closing their server and their connection; SIGKILL if they hang.
func (a *exampleApp) stop() {
	a.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-a.done:
	case <-time.After(10 * time.Second):
		a.cmd.Process.Kill()
		<-a.done
	}
}

// stopCleanly stops the app and checks that it handled SIGTERM: closed its
// server and its connection to limitkv, and exited with status 0.
func (a *exampleApp) stopCleanly(t *testing.T) {
	t.Helper()
	a.stop()
	if code := a.cmd.ProcessState.ExitCode(); code != 0 {
		t.Fatalf("after SIGTERM the app exited with %d (%s):\n%s", code, a.cmd.ProcessState, a.log.String())
	}
}

type exampleReply struct {
	status                       int
	policy, rateLimit, retryWait string
	hasRetry                     bool
}

func exampleGet(t *testing.T, c *http.Client, url, clientID string) exampleReply {
	t.Helper()
	req, err := http.NewRequest("GET", url, nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("X-Client-Id", clientID)
	res, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	io.Copy(io.Discard, res.Body)
	res.Body.Close()
	_, hasRetry := res.Header["Retry-After"]
	return exampleReply{
		status:    res.StatusCode,
		policy:    res.Header.Get("RateLimit-Policy"),
		rateLimit: res.Header.Get("RateLimit"),
		retryWait: res.Header.Get("Retry-After"),
		hasRetry:  hasRetry,
	}
}

// checkLimitedEndpoint drives one protected endpoint whose policy is
// `name` with `limit` requests per `window` seconds.
func checkLimitedEndpoint(t *testing.T, app *exampleApp, path, name string, limit, window int) {
	t.Helper()
	c := &http.Client{Timeout: 30 * time.Second}
	url := app.base + path
	wantPolicy := fmt.Sprintf(`"%s";q=%d;w=%d`, name, limit, window)

	// In sequence: exactly limit allowed, remaining counting down; a
	// sliding window is full again a whole window after the newest request.
	for i := 1; i <= limit; i++ {
		r := exampleGet(t, c, url, "seq")
		want := exampleReply{status: 200, policy: wantPolicy, rateLimit: fmt.Sprintf(`"%s";r=%d;t=%d`, name, limit-i, window)}
		if r != want {
			t.Fatalf("%s request %d: got %+v, want %+v\n%s", path, i, r, want, app.log.String())
		}
	}
	// Then refused, twice (a refusal is not counted), with Retry-After in
	// delay-seconds equal to RateLimit's t: the oldest request leaves the
	// window at most `window` seconds from now.
	for i := 0; i < 2; i++ {
		r := exampleGet(t, c, url, "seq")
		wait, err := strconv.Atoi(r.retryWait)
		if r.status != 429 || !r.hasRetry || err != nil || wait < 1 || wait > window || r.policy != wantPolicy ||
			r.rateLimit != fmt.Sprintf(`"%s";r=0;t=%d`, name, wait) {
			t.Fatalf("%s request %d: got %+v, want 429 with Retry-After in [1,%d] and RateLimit t equal to it\n%s",
				path, limit+1+i, r, window, app.log.String())
		}
	}
	// Another client has its own quota.
	if r := exampleGet(t, c, url, "other"); r.status != 200 || r.rateLimit != fmt.Sprintf(`"%s";r=%d;t=%d`, name, limit-1, window) {
		t.Fatalf("%s for another client: got %+v", path, r)
	}

	// At once, from many connections: exactly limit get through.
	const burst = 40
	var wg sync.WaitGroup
	statuses := make(chan int, burst)
	for i := 0; i < burst; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			req, _ := http.NewRequest("GET", url, nil)
			req.Header.Set("X-Client-Id", "burst")
			res, err := c.Do(req)
			if err != nil {
				t.Error(err)
				return
			}
			io.Copy(io.Discard, res.Body)
			res.Body.Close()
			statuses <- res.StatusCode
		}()
	}
	wg.Wait()
	close(statuses)
	counts := map[int]int{}
	for s := range statuses {
		counts[s]++
	}
	if counts[200] != limit || counts[429] != burst-limit {
		t.Fatalf("%s with %d concurrent requests of one client: got %v, want %d×200 and %d×429\n%s",
			path, burst, counts, limit, burst-limit, app.log.String())
	}
}

// trackExample lets go test's cache see the example's files, which the
// test reads only through the process it starts.
func trackExample(files ...string) {
	for _, f := range files {
		os.Stat(f)
	}
}

// The two endpoints get different limits and windows, so that a mix-up
// between them shows.
const (
	exampleLimit        = 5
	exampleWindow       = 60
	examplePolicy       = "example-api"
	examplePolicyLimit  = 3
	examplePolicyWindow = 30
)

// exampleEnv is the environment of an app on s. The app reads its policy
// again every second, so that the tests wait little for a change.
func exampleEnv(s *server) []string {
	return []string{
		"LIMITKV_ADDR=" + s.Addr,
		"SLIDE_LIMIT=" + strconv.Itoa(exampleLimit),
		"SLIDE_WINDOW=" + strconv.Itoa(exampleWindow),
		"POLICY_NAME=" + examplePolicy,
		"POLICY_LIMIT=" + strconv.Itoa(examplePolicyLimit),
		"POLICY_WINDOW=" + strconv.Itoa(examplePolicyWindow),
		"POLICY_REFRESH=1",
	}
}

// checkExample runs the example on a server with no policy: the app must
// create its own; drives both endpoints, then looks at what the app left
// in limitkv. Then an operator changes the policy: the app must apply it
// and advertise it without a restart, and a restart must not undo it.
// Last, instances starting at once on a fresh server create the policy
// once.
func checkExample(t *testing.T, run exampleRun) {
	t.Helper()
	s := startLimitkv(t)
	app := run.start(t, exampleEnv(s))
	ctx := context.Background()
	rdb := goRedis(t, s.Addr, 2)
	wantDef := fmt.Sprintf("[SLIDE %d %ds]", examplePolicyLimit, examplePolicyWindow)
	if def, err := rdb.Do(ctx, "RL.POLICY", "GET", examplePolicy).StringSlice(); err != nil || fmt.Sprint(def) != wantDef {
		t.Fatalf("on a server with no policy, the app left RL.POLICY GET %s: %v %v, want %s\n%s", examplePolicy, def, err, wantDef, app.log.String())
	}

	checkLimitedEndpoint(t, app, "/slide", "slide", exampleLimit, exampleWindow)
	checkLimitedEndpoint(t, app, "/policy", examplePolicy, examplePolicyLimit, examplePolicyWindow)

	d, err := rdb.Do(ctx, "RL.SLIDE", "example:slide:seq", exampleLimit, exampleWindow, "PEEK").Int64Slice()
	if err != nil || len(d) != 5 || d[0] != 0 || d[2] != 0 {
		t.Fatalf("RL.SLIDE example:slide:seq ... PEEK: %v %v, want a full window", d, err)
	}
	d, err = rdb.Do(ctx, "RL.CHECK", examplePolicy, "example:policy:seq", "PEEK").Int64Slice()
	if err != nil || len(d) != 5 || d[0] != 0 || d[1] != examplePolicyLimit || d[2] != 0 {
		t.Fatalf("RL.CHECK %s example:policy:seq PEEK: %v %v, want a full window", examplePolicy, d, err)
	}

	const raised = 10
	if err := rdb.Do(ctx, "RL.POLICY", "SET", examplePolicy, "SLIDE", raised, examplePolicyWindow).Err(); err != nil {
		t.Fatal(err)
	}
	c := &http.Client{Timeout: 30 * time.Second}
	r := exampleGet(t, c, app.base+"/policy", "seq")
	want := exampleReply{
		status:    200,
		policy:    fmt.Sprintf(`"%s";q=%d;w=%d`, examplePolicy, raised, examplePolicyWindow),
		rateLimit: fmt.Sprintf(`"%s";r=%d;t=%d`, examplePolicy, raised-examplePolicyLimit-1, examplePolicyWindow),
	}
	if r != want {
		t.Fatalf("/policy after RL.POLICY SET %s SLIDE %d %d: got %+v, want %+v", examplePolicy, raised, examplePolicyWindow, r, want)
	}

	// The operator changes the limit and the window, then the window
	// alone, which only a fresh read of the policy shows.
	for _, def := range [][2]int{{100, 10}, {100, 20}} {
		if err := rdb.Do(ctx, "RL.POLICY", "SET", examplePolicy, "SLIDE", def[0], def[1]).Err(); err != nil {
			t.Fatal(err)
		}
		awaitExamplePolicy(t, app, def[0], def[1])
	}

	// A restart keeps the operator's policy, and advertises it at once.
	app.stopCleanly(t)
	app = run.start(t, exampleEnv(s))
	if def, err := rdb.Do(ctx, "RL.POLICY", "GET", examplePolicy).StringSlice(); err != nil || fmt.Sprint(def) != "[SLIDE 100 20s]" {
		t.Fatalf("after the app restarted, RL.POLICY GET %s: %v %v, want the operator's SLIDE 100 20s\n%s", examplePolicy, def, err, app.log.String())
	}
	r = exampleGet(t, c, app.base+"/policy", "after-restart")
	if want := (exampleReply{status: 200, policy: `"example-api";q=100;w=20`, rateLimit: `"example-api";r=99;t=20`}); r != want {
		t.Fatalf("/policy after a restart: got %+v, want %+v\n%s", r, want, app.log.String())
	}
	app.stopCleanly(t)

	checkExampleCreatesOnce(t, run)
}

// awaitExamplePolicy polls /policy, as a new client each time (so that
// each answer is a first request: r = q-1, and t = w on a sliding window),
// until the app advertises limit q and window w. The app reads its policy
// every second; 20s is the bound.
func awaitExamplePolicy(t *testing.T, app *exampleApp, q, w int) {
	t.Helper()
	c := &http.Client{Timeout: 30 * time.Second}
	want := exampleReply{
		status:    200,
		policy:    fmt.Sprintf(`"%s";q=%d;w=%d`, examplePolicy, q, w),
		rateLimit: fmt.Sprintf(`"%s";r=%d;t=%d`, examplePolicy, q-1, w),
	}
	deadline := time.Now().Add(20 * time.Second)
	for i := 0; ; i++ {
		r := exampleGet(t, c, app.base+"/policy", fmt.Sprintf("poll-%d-%d-%d", q, w, i))
		if r == want {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("after RL.POLICY SET %s SLIDE %d %d, /policy still answers %+v after 20s, want %+v\n%s",
				examplePolicy, q, w, r, want, app.log.String())
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// checkExampleCreatesOnce starts two instances, with different limits, on
// a server with no policy, and holds their writes back (CLIENT PAUSE
// WRITE) until both have looked for the policy and are about to create
// it: exactly one may create it, the other must take it as it is, and
// both advertise the one the server has. An app that reads and then SETs
// would have both SET here, the last one winning.
func checkExampleCreatesOnce(t *testing.T, run exampleRun) {
	t.Helper()
	s := startLimitkv(t)
	ctx := context.Background()
	rdb := goRedis(t, s.Addr, 2)
	if err := rdb.Do(ctx, "CLIENT", "PAUSE", 60000, "WRITE").Err(); err != nil {
		t.Fatal(err)
	}
	limits := []int{examplePolicyLimit, examplePolicyLimit + 1}
	var apps []*exampleApp
	for _, limit := range limits {
		env := append(exampleEnv(s), "POLICY_LIMIT="+strconv.Itoa(limit))
		apps = append(apps, run.launch(t, env))
	}
	deadline := time.Now().Add(30 * time.Second)
	for replInfo(t, rdb, "clients", "blocked_clients") != strconv.Itoa(len(apps)) {
		if time.Now().After(deadline) {
			list, _ := rdb.ClientList(ctx).Result()
			t.Fatalf("the instances did not all wait on the pause within 30s:\n%s", list)
		}
		time.Sleep(20 * time.Millisecond)
	}
	if err := rdb.Do(ctx, "CLIENT", "UNPAUSE").Err(); err != nil {
		t.Fatal(err)
	}
	creator := -1
	for i, a := range apps {
		a.awaitReady(t)
		created := strings.Contains(a.log.String(), "(created)")
		if created && creator >= 0 {
			t.Fatalf("two instances created the policy:\n%s\n%s", apps[creator].log.String(), a.log.String())
		}
		if created {
			creator = i
		}
	}
	if creator < 0 {
		t.Fatalf("no instance says it created the policy:\n%s\n%s", apps[0].log.String(), apps[1].log.String())
	}
	limit := limits[creator]
	want := fmt.Sprintf("[SLIDE %d %ds]", limit, examplePolicyWindow)
	if def, err := rdb.Do(ctx, "RL.POLICY", "GET", examplePolicy).StringSlice(); err != nil || fmt.Sprint(def) != want {
		t.Fatalf("RL.POLICY GET %s after both started: %v %v, want the creator's %s", examplePolicy, def, err, want)
	}
	c := &http.Client{Timeout: 30 * time.Second}
	for _, a := range apps {
		if r := exampleGet(t, c, a.base+"/policy", "once"); r.policy != fmt.Sprintf(`"%s";q=%d;w=%d`, examplePolicy, limit, examplePolicyWindow) {
			t.Fatalf("an instance advertises %+v, not the server's %s\n%s", r, want, a.log.String())
		}
		a.stopCleanly(t)
	}
}

func TestExampleNode(t *testing.T) {
	dir, _ := filepath.Abs("../examples/node")
	trackExample(filepath.Join(dir, "server.js"), filepath.Join(dir, "package.json"), filepath.Join(dir, "package-lock.json"))
	node, err := exec.LookPath("node")
	if err != nil {
		exampleNeeds(t, "node")
	}
	if _, err := os.Stat(filepath.Join(dir, "node_modules", "ioredis", "package.json")); err != nil {
		exampleNeeds(t, "examples/node/node_modules (npm ci in examples/node)")
	}
	checkExample(t, exampleRun{dir, []string{node, "server.js"}})
}

// The Python example runs under Debian's python3 with Debian's
// python3-redis: /usr/bin/python3, not whatever python3 comes first in PATH.
const examplePython = "/usr/bin/python3"

func TestExamplePython(t *testing.T) {
	dir, _ := filepath.Abs("../examples/python")
	trackExample(filepath.Join(dir, "app.py"))
	if _, err := os.Stat(examplePython); err != nil {
		exampleNeeds(t, examplePython)
	}
	if out, err := exec.Command(examplePython, "-c", "import redis").CombinedOutput(); err != nil {
		exampleNeeds(t, "python3-redis ("+strings.TrimSpace(string(out))+")")
	}
	checkExample(t, exampleRun{dir, []string{examplePython, "app.py"}})
}
