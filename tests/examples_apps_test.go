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
// their endpoints (RL.SLIDE, and RL.CHECK of the policy the app defines at
// start-up) they must let exactly the limit through, then answer 429 with
// Retry-After and the IETF RateLimit-Policy / RateLimit fields.

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
	cmd  *exec.Cmd
	base string // http://host:port
	log  *syncBuffer
	done chan struct{}
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

// startExample runs argv in dir with PORT=0 (the app takes a free port and
// names it in its ready line) and the given environment, and waits for the
// line "ready: http://host:port ...".
func startExample(t *testing.T, dir string, env []string, argv ...string) *exampleApp {
	t.Helper()
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Dir = dir
	cmd.Env = append(append(os.Environ(), "PORT=0", "HOST=127.0.0.1"), env...)
	a := &exampleApp{cmd: cmd, log: &syncBuffer{}, done: make(chan struct{})}
	cmd.Stderr = a.log
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	ready := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			line := sc.Text()
			fmt.Fprintln(a.log, line)
			if rest, ok := strings.CutPrefix(line, "ready: "); ok {
				select {
				case ready <- strings.Fields(rest)[0]:
				default:
				}
			}
		}
		io.Copy(io.Discard, stdout)
		cmd.Wait()
		close(a.done)
	}()
	t.Cleanup(a.stop)
	select {
	case a.base = <-ready:
	case <-a.done:
		t.Fatalf("%s exited before it was ready:\n%s", argv, a.log.String())
	case <-time.After(30 * time.Second):
		t.Fatalf("%s not ready after 30s:\n%s", argv, a.log.String())
	}
	return a
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

func exampleEnv(s *server) []string {
	return []string{
		"LIMITKV_ADDR=" + s.addr,
		"SLIDE_LIMIT=" + strconv.Itoa(exampleLimit),
		"SLIDE_WINDOW=" + strconv.Itoa(exampleWindow),
		"POLICY_NAME=" + examplePolicy,
		"POLICY_LIMIT=" + strconv.Itoa(examplePolicyLimit),
		"POLICY_WINDOW=" + strconv.Itoa(examplePolicyWindow),
	}
}

// checkExample drives both endpoints of a running example, then looks at
// what it left in limitkv, and changes the policy on the server: the app
// must apply the new limit at once, without a restart.
func checkExample(t *testing.T, s *server, app *exampleApp) {
	t.Helper()
	checkLimitedEndpoint(t, app, "/slide", "slide", exampleLimit, exampleWindow)
	checkLimitedEndpoint(t, app, "/policy", examplePolicy, examplePolicyLimit, examplePolicyWindow)

	ctx := context.Background()
	rdb := goRedis(t, s.addr, 2)
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
	s := startLimitkv(t)
	app := startExample(t, dir, exampleEnv(s), node, "server.js")
	checkExample(t, s, app)
	app.stopCleanly(t)
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
	s := startLimitkv(t)
	app := startExample(t, dir, exampleEnv(s), examplePython, "app.py")
	checkExample(t, s, app)
	app.stopCleanly(t)
}
