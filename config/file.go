package config

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"github.com/limitkv/limitkv/resp"
)

// A Directive is a kind of config-file line that sets no parameter (user
// lines), read and written by the package it belongs to.
type Directive struct {
	// Name is the line's first word.
	Name string
	// Load takes one such line: its words after the first, and where it
	// is. Its error stops the loading, prefixed with the place.
	Load func(args []string, file string, line int) error
	// Rewrite returns the lines CONFIG REWRITE writes where the first
	// such line was (at the end if none was), in place of them all. It
	// runs before the rewrite takes the config's lock, so it may read
	// the settings.
	Rewrite func() []string
}

// AddDirective makes the config file's lines named d.Name d's.
func (c *Config) AddDirective(d Directive) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.directives = append(c.directives, d)
}

// LoadFile reads a redis.conf-style file: one "name value..." per line,
// # for comments, quoting as in inline requests. "include PATH" reads
// another file there, as Redis does: PATH relative to the working
// directory; a pattern (conf.d/*.conf) reads the files it matches, in
// order, and none if it matches none. CONFIG REWRITE writes path.
func (c *Config) LoadFile(path string) error {
	c.file = path
	return c.loadFile(path, 0)
}

// maxIncludeDepth bounds nested includes: a file that includes itself,
// directly or not, is refused rather than read forever.
const maxIncludeDepth = 16

func (c *Config) loadFile(path string, depth int) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	return c.load(f, path, depth)
}

// include reads the files an include line names.
func (c *Config) include(pattern string, depth int) error {
	if depth >= maxIncludeDepth {
		return fmt.Errorf("includes nested more than %d deep (does a file include itself?)", maxIncludeDepth)
	}
	if !strings.ContainsAny(pattern, "*?[") {
		return c.loadFile(pattern, depth+1)
	}
	paths, err := filepath.Glob(pattern)
	if err != nil {
		return err
	}
	for _, p := range paths {
		if err := c.loadFile(p, depth+1); err != nil {
			return err
		}
	}
	return nil
}

func (c *Config) load(r io.Reader, path string, depth int) error {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64*1024), 1<<20)
	line := 0
	for sc.Scan() {
		line++
		text := strings.TrimSpace(sc.Text())
		if text == "" || text[0] == '#' {
			continue
		}
		args, ok := resp.SplitArgs([]byte(text))
		if !ok {
			return fmt.Errorf("%s:%d: unbalanced quotes", path, line)
		}
		if len(args) == 0 {
			continue
		}
		name := string(args[0])
		var vals []string
		for _, a := range args[1:] {
			vals = append(vals, string(a))
		}
		if d, ok := c.directive(name); ok {
			if err := d.Load(vals, path, line); err != nil {
				return fmt.Errorf("%s:%d: %v", path, line, err)
			}
			continue
		}
		if strings.EqualFold(name, "include") && len(vals) == 1 {
			if err := c.include(vals[0], depth); err != nil {
				return fmt.Errorf("%s:%d: include: %v", path, line, err)
			}
			continue
		}
		if err := c.Set([][2]string{{name, strings.Join(vals, " ")}}, true); err != nil {
			return fmt.Errorf("%s:%d: %v", path, line, err)
		}
	}
	return sc.Err()
}

func (c *Config) directive(name string) (Directive, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if i := directiveIndex(c.directives, name); i >= 0 {
		return c.directives[i], true
	}
	return Directive{}, false
}

func directiveIndex(ds []Directive, name string) int {
	return slices.IndexFunc(ds, func(d Directive) bool { return strings.EqualFold(d.Name, name) })
}

// Rewrite writes the current settings back to the config file, as CONFIG
// REWRITE does: lines naming a parameter get its current value, comments
// and unknown lines stay, and parameters changed from their default that
// the file did not mention are appended.
func (c *Config) Rewrite() error {
	c.mu.Lock()
	directives := slices.Clone(c.directives)
	c.mu.Unlock()
	// A directive's lines go where its first line was (or at the end).
	lines := make([][]string, len(directives))
	for i, d := range directives {
		lines[i] = d.Rewrite()
	}
	done := make([]bool, len(directives))
	c.mu.Lock()
	defer c.mu.Unlock()
	old, err := os.ReadFile(c.file)
	if err != nil {
		return err
	}
	written := map[*param]bool{}
	var out []string
	for _, line := range strings.Split(strings.TrimRight(string(old), "\n"), "\n") {
		t := strings.TrimSpace(line)
		if t == "" || t[0] == '#' {
			out = append(out, line)
			continue
		}
		name, _, _ := strings.Cut(t, " ")
		if i := directiveIndex(directives, name); i >= 0 {
			if !done[i] {
				out = append(out, lines[i]...)
				done[i] = true
			}
			continue
		}
		p, ok := c.byName[strings.ToLower(name)]
		if !ok {
			out = append(out, line)
			continue
		}
		if written[p] {
			continue
		}
		written[p] = true
		if l := rewriteLine(p, p.shown(c.values[p])); l != "" {
			out = append(out, l)
		}
	}
	for _, p := range c.params {
		if !written[p] && c.values[p] != p.def {
			out = append(out, rewriteLine(p, p.shown(c.values[p])))
		}
	}
	for i := range directives {
		if !done[i] {
			out = append(out, lines[i]...)
		}
	}
	tmp := c.file + ".tmp"
	if err := os.WriteFile(tmp, []byte(strings.Join(out, "\n")+"\n"), 0o644); err != nil {
		return err
	}
	return os.Rename(tmp, c.file)
}

// rewriteLine is a parameter's line in a rewritten config file; replicaof
// is written as its two words, and not at all when there is no master.
func rewriteLine(p *param, v string) string {
	if p.name == "replicaof" {
		if v == "" {
			return ""
		}
		return p.name + " " + v
	}
	if p.lines && v != "" {
		// One line per pair, as Redis writes save lines.
		f := strings.Fields(v)
		var out []string
		for i := 0; i+1 < len(f); i += 2 {
			out = append(out, p.name+" "+f[i]+" "+f[i+1])
		}
		return strings.Join(out, "\n")
	}
	return p.name + " " + quoteValue(v)
}

func quoteValue(v string) string {
	if v == "" || strings.ContainsAny(v, " \"'\\") {
		return strconv.Quote(v)
	}
	return v
}
