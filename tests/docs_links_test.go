package tests

import (
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"unicode"
)

// TestDocsLinks follows every relative link of the Markdown pages (the
// root's README.md and CONTRIBUTING.md, docs/*.md, the examples' READMEs):
// the file or directory it names must exist, and a #fragment must be a
// heading of the page it points into, as GitHub names headings. Links to
// other sites are not followed.
func TestDocsLinks(t *testing.T) {
	var pages []string
	for _, pattern := range []string{"../*.md", "../docs/*.md", "../examples/*/README.md"} {
		m, err := filepath.Glob(pattern)
		if err != nil {
			t.Fatal(err)
		}
		pages = append(pages, m...)
	}
	if !contains(pages, filepath.Join("..", "README.md")) {
		t.Fatalf("no README.md among %q", pages)
	}
	anchors := map[string]map[string]bool{} // page → its anchors, read once
	anchorsOf := func(page string) (map[string]bool, error) {
		if a, ok := anchors[page]; ok {
			return a, nil
		}
		text, err := os.ReadFile(page)
		if err != nil {
			return nil, err
		}
		a := markdownAnchors(string(text))
		anchors[page] = a
		return a, nil
	}
	checked := 0
	for _, page := range pages {
		text, err := os.ReadFile(page)
		if err != nil {
			t.Fatal(err)
		}
		for _, l := range markdownLinks(string(text)) {
			if strings.Contains(l.target, "://") || strings.HasPrefix(l.target, "mailto:") {
				continue
			}
			checked++
			where := filepath.ToSlash(strings.TrimPrefix(page, "../")) + ":" + strconv.Itoa(l.line)
			path, frag, _ := strings.Cut(l.target, "#")
			if p, err := url.PathUnescape(path); err == nil {
				path = p
			}
			dest := page
			if path != "" {
				if strings.HasPrefix(path, "/") {
					dest = filepath.Join("..", path) // from the repository's root
				} else {
					dest = filepath.Join(filepath.Dir(page), path)
				}
				if _, err := os.Stat(dest); err != nil {
					t.Errorf("%s: link to %q: no such file or directory", where, l.target)
					continue
				}
			}
			if frag == "" || !strings.HasSuffix(dest, ".md") {
				continue // a fragment of another kind of file (a line of code) is not checked
			}
			a, err := anchorsOf(dest)
			if err != nil {
				t.Errorf("%s: link to %q: %v", where, l.target, err)
				continue
			}
			if !a[frag] {
				t.Errorf("%s: link to %q: %s has no heading whose anchor is #%s", where, l.target, filepath.ToSlash(strings.TrimPrefix(dest, "../")), frag)
			}
		}
	}
	if checked == 0 {
		t.Fatal("no relative link found: has the way links are found changed?")
	}
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// TestMarkdownAnchors pins the anchor rules TestDocsLinks relies on to
// GitHub's: lower case, spaces to '-', punctuation dropped (letters,
// digits, '-' and '_' kept), inline code and link syntax reduced to their
// text, and a repeated heading numbered -1, -2, ...
func TestMarkdownAnchors(t *testing.T) {
	page := strings.Join([]string{
		"# limitkv",
		"## RL.ACQUIRE / RL.RELEASE",
		"### Named policies: RL.POLICY and RL.CHECK",
		"#### `--rl-policies FILE`: policies deployed with the server",
		"## Worked: rolling out \"3 per minute\" behind the current \"100 per minute\"",
		"## The [wire](resp) layer ##",
		"## max_burst and_underscores",
		"```",
		"# Ratelimit",
		"```",
		"## Sets",
		"### Sets",
	}, "\n")
	got := markdownAnchors(page)
	for _, want := range []string{
		"limitkv", "rlacquire--rlrelease", "named-policies-rlpolicy-and-rlcheck",
		"--rl-policies-file-policies-deployed-with-the-server",
		"worked-rolling-out-3-per-minute-behind-the-current-100-per-minute",
		"the-wire-layer", "max_burst-and_underscores", "sets", "sets-1",
	} {
		if !got[want] {
			t.Errorf("no anchor #%s in %v", want, got)
		}
	}
	if got["ratelimit"] {
		t.Error("a line of a fenced block was taken for a heading")
	}
	links := markdownLinks("see [a](x.md#b), `[not](a link)`, ![img](c.svg \"title\")\n" +
		"[![badge](d.svg)](e/)\n```\n[no](code.md)\n```\n[ref]: f.md\n")
	var targets []string
	for _, l := range links {
		targets = append(targets, l.target)
	}
	if want := "x.md#b c.svg d.svg e/ f.md"; strings.Join(targets, " ") != want {
		t.Errorf("links %q, want %q", targets, want)
	}
}

// A markdownLink is the target of a link or image and its line.
type markdownLink struct {
	target string
	line   int
}

var (
	// linkTarget finds "](target)" and "](target "title")", which ends
	// every inline link and image, whatever its text holds.
	linkTarget = regexp.MustCompile(`\]\(\s*<?([^()<>\s]+)>?(?:\s+"[^"]*")?\s*\)`)
	// linkDef is a reference definition: "[name]: target".
	linkDef   = regexp.MustCompile(`^ {0,3}\[[^\]]+\]:\s*<?([^\s>]+)>?`)
	atxHeader = regexp.MustCompile(`^ {0,3}(#{1,6})(?:\s+(.*?))?(?:\s+#+)?\s*$`)
	mdLink    = regexp.MustCompile(`!?\[([^\]]*)\]\([^)]*\)`)
	htmlTag   = regexp.MustCompile(`<[^>]+>`)
	htmlID    = regexp.MustCompile(`<a\s+(?:name|id)="([^"]+)"`)
)

// markdownLinks returns the link and image targets of a page, outside
// fenced blocks and inline code.
func markdownLinks(text string) []markdownLink {
	var out []markdownLink
	lines := proseLines(text)
	for i, line := range stripCodeSpans(lines) {
		if line == "" {
			continue
		}
		if m := linkDef.FindStringSubmatch(line); m != nil {
			out = append(out, markdownLink{m[1], i + 1})
			continue
		}
		for _, m := range linkTarget.FindAllStringSubmatch(line, -1) {
			out = append(out, markdownLink{m[1], i + 1})
		}
	}
	return out
}

// markdownAnchors returns the anchors GitHub gives a page's headings,
// and those of its explicit <a name> or <a id> tags.
func markdownAnchors(text string) map[string]bool {
	out := map[string]bool{}
	seen := map[string]int{}
	for _, line := range proseLines(text) {
		for _, m := range htmlID.FindAllStringSubmatch(line, -1) {
			out[m[1]] = true
		}
		m := atxHeader.FindStringSubmatch(line)
		if m == nil {
			continue
		}
		a := headingAnchor(m[2])
		if n := seen[a]; n > 0 {
			out[a+"-"+strconv.Itoa(n)] = true
		} else {
			out[a] = true
		}
		seen[a]++
	}
	return out
}

// headingAnchor is GitHub's anchor for a heading's text.
func headingAnchor(heading string) string {
	s := strings.ReplaceAll(heading, "`", "")
	s = mdLink.ReplaceAllString(s, "$1")
	s = htmlTag.ReplaceAllString(s, "")
	var b strings.Builder
	for _, r := range strings.ToLower(s) {
		switch {
		case unicode.IsLetter(r) || unicode.IsDigit(r) || r == '-' || r == '_':
			b.WriteRune(r)
		case r == ' ':
			b.WriteByte('-')
		}
	}
	return b.String()
}

// proseLines returns the page's lines with those of fenced blocks (and
// their fences) blanked, so that line numbers stay the page's.
func proseLines(text string) []string {
	lines := strings.Split(text, "\n")
	fence := ""
	for i, l := range lines {
		t := strings.TrimLeft(l, " ")
		if fence != "" {
			if strings.HasPrefix(t, fence) {
				fence = ""
			}
			lines[i] = ""
			continue
		}
		for _, f := range []string{"```", "~~~"} {
			if len(l)-len(t) <= 3 && strings.HasPrefix(t, f) {
				fence = f
				lines[i] = ""
			}
		}
	}
	return lines
}

// stripCodeSpans blanks inline code (a run of backticks up to the next
// run of as many) in each paragraph, where a span may run over a line's
// end; it keeps the lines as they were counted.
func stripCodeSpans(lines []string) []string {
	out := make([]string, 0, len(lines))
	for start := 0; start < len(lines); {
		end := start
		for end < len(lines) && strings.TrimSpace(lines[end]) != "" {
			end++
		}
		if end == start { // a blank line
			out = append(out, lines[start])
			start++
			continue
		}
		para := []byte(strings.Join(lines[start:end], "\n"))
		for i := 0; i < len(para); {
			if para[i] != '`' {
				i++
				continue
			}
			n := 0
			for i+n < len(para) && para[i+n] == '`' {
				n++
			}
			close := strings.Index(string(para[i+n:]), strings.Repeat("`", n))
			if close < 0 {
				i += n // no closing run: the backticks are text
				continue
			}
			stop := i + n + close + n
			for j := i; j < stop; j++ {
				if para[j] != '\n' {
					para[j] = ' '
				}
			}
			i = stop
		}
		out = append(out, strings.Split(string(para), "\n")...)
		start = end
	}
	return out
}
