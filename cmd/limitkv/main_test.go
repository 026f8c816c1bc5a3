package main

import (
	"bytes"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/limitkv/limitkv/commands"
)

func TestWarnIfOpen(t *testing.T) {
	public := []net.Addr{&net.TCPAddr{IP: net.IPv4(10, 0, 0, 1), Port: 6379}}
	loop := []net.Addr{&net.TCPAddr{IP: net.IPv4(127, 0, 0, 1), Port: 6379}}
	for _, c := range []struct {
		name     string
		addrs    []net.Addr
		settings [][2]string
		want     string
	}{
		{"loopback only", loop, nil, ""},
		{"exposed, protected", public, nil, "protected mode"},
		{"exposed, open", public, [][2]string{{"protected-mode", "no"}}, "anyone who can reach"},
		{"exposed, password", public, [][2]string{{"requirepass", "pw"}}, ""},
	} {
		cfg := commands.NewConfig()
		if err := cfg.Set(c.settings, true); err != nil {
			t.Fatal(err)
		}
		var out bytes.Buffer
		warnIfOpen(c.addrs, cfg, cfg.Get("requirepass") == "", slog.New(slog.NewTextHandler(&out, nil)))
		if got := out.String(); c.want == "" && got != "" || c.want != "" && !strings.Contains(got, c.want) {
			t.Errorf("%s: logged %q, want %q", c.name, got, c.want)
		}
	}
}

// --help lists every setting once, in redis.conf's sections, each with
// its type and default (and unit where it has one); -v and --version print
// the version alone.
func TestHelpAndVersion(t *testing.T) {
	var out, errs bytes.Buffer
	if code := run([]string{"--help"}, &out, &errs); code != 0 || errs.Len() != 0 {
		t.Fatalf("--help: exit %d, stderr %q", code, errs.String())
	}
	help := out.String()
	params := commands.NewConfig().Params()
	for _, g := range []string{"Network:", "TLS:", "Security:", "Limits: clients and memory:", "Persistence:", "Replication:", "Cluster", "Rate limiting:"} {
		if !strings.Contains(help, "\n"+g) {
			t.Errorf("--help has no section %q", g)
		}
	}
	if strings.Contains(help, "\nOther:") {
		t.Errorf("--help has settings in no section:\n%s", help[strings.Index(help, "\nOther:"):])
	}
	for _, p := range params {
		if n := strings.Count(help, "\n  --"+p.Name+" <"); n != 1 {
			t.Errorf("--help lists %s %d times", p.Name, n)
		}
	}
	for _, want := range []string{
		"  --port <integer>, default 6379\n",
		"  --timeout <integer, seconds>, default 0\n",
		"  --maxmemory <bytes>, default 0\n",
		"  --proto-max-bulk-len <bytes>, default 512mb\n",
		"  --protected-mode <yes|no>, default yes\n",
		"  --snapshot-interval <duration>, default 1s\n",
		"  --requirepass <string>, default \"\"\n",
		"  --busy-reply-threshold <integer, milliseconds>, default 5000\n",
	} {
		if !strings.Contains(help, want) {
			t.Errorf("--help lacks %q", want)
		}
	}
	if i, j := strings.Index(help, "\nNetwork:"), strings.Index(help, "\nReplication:"); i < 0 || j < i ||
		!strings.Contains(help[i:j], "--bind <") || strings.Contains(help[i:j], "--replicaof <") {
		t.Errorf("--help's Network section does not hold bind, or holds replicaof")
	}
	for _, arg := range []string{"-v", "--version"} {
		out.Reset()
		errs.Reset()
		if code := run([]string{arg}, &out, &errs); code != 0 || errs.Len() != 0 ||
			out.String() != "limitkv "+commands.Version+" (Redis "+commands.RedisVersion+" compatible)\n" {
			t.Errorf("%s: exit %d, stdout %q, stderr %q", arg, code, out.String(), errs.String())
		}
	}
	// A wrong flag gets a short usage, not the whole list.
	out.Reset()
	errs.Reset()
	if code := run([]string{"--nosuch", "1"}, &out, &errs); code != 2 || strings.Contains(errs.String(), "--port") || !strings.Contains(errs.String(), "--help") {
		t.Errorf("--nosuch: exit %d, stderr %q", code, errs.String())
	}
}

// TestReadmeGettingStarted: the README says which Go builds limitkv (the
// version go.mod asks for), how to get the binary, and every flag it and
// the other pages (CONTRIBUTING.md, docs/*.md) hand to limitkv is one
// limitkv takes.
func TestReadmeGettingStarted(t *testing.T) {
	readme, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	mod, err := os.ReadFile("../../go.mod")
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`(?m)^go (\d+\.\d+)`).FindSubmatch(mod)
	if m == nil {
		t.Fatal("go.mod has no go line")
	}
	top := string(readme)
	if i := strings.Index(top, "\n## "); i > 0 {
		top = top[:i]
	}
	for _, want := range []string{"Go " + string(m[1]) + " or newer", "go install ./cmd/limitkv", "--port 6380"} {
		if !strings.Contains(top, want) {
			t.Errorf("the README's opening lacks %q", want)
		}
	}
	known := map[string]bool{"config": true, "help": true, "version": true}
	for _, p := range commands.NewConfig().Params() {
		known[p.Name] = true
	}
	pages, err := filepath.Glob("../../docs/*.md")
	if err != nil {
		t.Fatal(err)
	}
	pages = append(pages, "../../CONTRIBUTING.md")
	texts := map[string]string{"README.md": string(readme)}
	for _, p := range pages {
		b, err := os.ReadFile(p)
		if err != nil && !os.IsNotExist(err) {
			t.Fatal(err)
		}
		texts[strings.TrimPrefix(p, "../../")] = string(b)
	}
	flagRe := regexp.MustCompile(`--([a-z][a-z-]*)`)
	for page, text := range texts {
		for _, line := range strings.Split(text, "\n") {
			_, after, ok := strings.Cut(line, "limitkv ")
			if !ok || !strings.Contains(after, "--") {
				continue
			}
			cmd, _, _ := strings.Cut(after, "#") // a shell comment after it
			cmd, _, _ = strings.Cut(cmd, "`")    // the end of inline code
			for _, f := range flagRe.FindAllStringSubmatch(cmd, -1) {
				if !known[f[1]] {
					t.Errorf("%s runs limitkv with --%s, which it does not take: %s", page, f[1], line)
				}
			}
		}
	}
}
