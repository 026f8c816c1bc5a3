// Package config is limitkv's settings: the table of them (Redis's names
// and aliases, kinds, defaults, bounds, choices, and the sections and
// units of --help), their values, and every way to set and read them: a
// redis.conf-style file (include, save lines), the command line, the
// environment (LIMITKV_*), CONFIG GET's matching, CONFIG SET's checks and
// its all-or-nothing apply, CONFIG REWRITE's rewriting of the file, and
// --help.
//
// What a setting does to the running server is not here: the package
// that owns what it changes gives New an Effect for it, so config knows
// the server by callbacks only and sits below the packages that run it.
package config

import (
	"errors"
	"log/slog"
	"slices"
	"strconv"
	"strings"
	"sync"

	"github.com/limitkv/limitkv/engine"
)

// Config holds the settings' values. Its methods are safe for concurrent
// use; effects run with its lock held.
type Config struct {
	mu     sync.Mutex
	params []*param
	byName map[string]*param
	values map[*param]string
	file   string
	// loaded: the parameters a start-up line (file, environment, flag)
	// set already, for those whose lines add up (param.lines).
	loaded     map[*param]bool
	directives []Directive
	log        *slog.Logger
}

// An Effect is what setting a parameter does beyond holding its value,
// given to New by the package that owns what it changes.
type Effect struct {
	// Merge, if set, validates a value against the current one and returns
	// the value to hold, for settings whose syntax is their owner's.
	Merge func(cur, v string) (string, error)
	// Apply makes a validated value take effect: v as it is held, n its
	// number (bytes for memory, nanoseconds for durations). It runs with
	// the config's lock held: with each value CONFIG SET or a start-up
	// line sets, with the default in New, and with every value in
	// Reapply.
	Apply func(v string, n int64)
	// Reconf, if set, makes the new values take effect where that may
	// fail. See Reconfigurer.
	Reconf *Reconfigurer
}

// A Reconfigurer is one of Redis's apply functions: it runs once per CONFIG
// SET, after every value is set, if a parameter that names it changed;
// when it fails, every value goes back and the reconfigurers that ran
// before it run again to undo theirs. It runs with the config lock held,
// and not at start-up, where the caller applies the whole configuration.
// It returns the reason CONFIG SET's error gives.
type Reconfigurer struct {
	Apply func(v Values) error
}

// Values reads the current values where the config's lock is held already:
// in a Reconfigurer, or in Do.
type Values struct{ c *Config }

// Get returns a parameter's value ("" for no parameter).
func (v Values) Get(name string) string {
	if p, ok := v.c.byName[strings.ToLower(name)]; ok {
		return p.shown(v.c.values[p])
	}
	return ""
}

// Int returns a numeric parameter (memory and durations in bytes and ns).
func (v Values) Int(name string) int64 {
	p := v.c.byName[name]
	_, n, _ := p.parse(v.c.values[p])
	return n
}

// New returns the default configuration, with the effects wired: each
// applied at once to its default. An effect for no parameter, or a second
// merge for one, is a mistake of the caller's, and panics.
func New(effects map[string]Effect) *Config {
	c := &Config{byName: map[string]*param{}, values: map[*param]string{}, loaded: map[*param]bool{}}
	c.params = table()
	for _, p := range c.params {
		c.byName[p.name] = p
		if p.alias != "" {
			c.byName[p.alias] = p
		}
	}
	for name, e := range effects {
		p, ok := c.byName[name]
		if !ok || p.name != name {
			panic("config: an effect for " + name + ", which is no parameter's name")
		}
		if e.Merge != nil {
			if p.merge != nil {
				panic("config: a second merge for " + name)
			}
			p.merge = e.Merge
		}
		p.apply, p.reconf = e.Apply, e.Reconf
	}
	for _, p := range c.params {
		v, n, err := p.parse(p.def)
		if err != nil {
			panic("config default " + p.name + ": " + err.Error())
		}
		c.values[p] = v
		if p.apply != nil {
			p.apply(v, n)
		}
	}
	return c
}

// Do runs fn with the config's lock held, so that what it reads of the
// values, and what it changes that effects read, is as one.
func (c *Config) Do(fn func(v Values)) {
	c.mu.Lock()
	defer c.mu.Unlock()
	fn(Values{c})
}

// Reapply runs every effect's Apply again with the current value, for an
// owner that has come to be since (the server the settings drive).
func (c *Config) Reapply() {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, p := range c.params {
		if p.apply != nil {
			v := c.values[p]
			_, n, _ := p.parse(v)
			p.apply(v, n)
		}
	}
}

// SetLogger sets where CONFIG SET logs what it undid.
func (c *Config) SetLogger(l *slog.Logger) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.log = l
}

// Get returns the current value of a parameter.
func (c *Config) Get(name string) string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return Values{c}.Get(name)
}

// Int returns a numeric parameter (memory and durations in bytes and ns).
func (c *Config) Int(name string) int64 {
	_, n, _ := c.byName[name].parse(c.Get(name))
	return n
}

// Record sets a parameter's value as it is, with no check and no effect,
// for a setting the server changed itself: replicaof, which names the
// master REPLICAOF chose, for CONFIG GET and CONFIG REWRITE to read, as
// Redis reads its current master there.
func (c *Config) Record(name, v string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.values[c.byName[name]] = v
}

// File returns the config file LoadFile read, "" when there is none.
func (c *Config) File() string { return c.file }

// setError is a CONFIG SET failure in Redis's words.
type setError struct {
	name, reason string
}

func (e *setError) Error() string {
	return "ERR CONFIG SET failed (possibly related to argument '" + e.name + "') - " + e.reason
}

// Set changes several parameters at once, all or none, as CONFIG SET does.
// startup allows immutable and protected parameters, makes the lines of
// a setting such as save add up, and runs no reconfigurer: the caller
// applies the whole configuration once it is read.
func (c *Config) Set(pairs [][2]string, startup bool) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	type change struct {
		p *param
		v string
		n int64
	}
	var changes []change
	seen := map[*param]bool{}
	for _, kv := range pairs {
		p, ok := c.byName[strings.ToLower(kv[0])]
		if !ok {
			return errors.New("ERR Unknown option or number of arguments for CONFIG SET - '" + kv[0] + "'")
		}
		if seen[p] {
			return &setError{kv[0], "duplicate parameter"}
		}
		seen[p] = true
		if !startup && p.immutable {
			return &setError{kv[0], "can't set immutable config"}
		}
		if !startup && p.protected {
			return &setError{kv[0], "can't set protected config"}
		}
		v, n, err := p.parse(kv[1])
		if p.merge != nil {
			v, err = p.merge(c.values[p], kv[1])
		}
		if err != nil {
			return &setError{kv[0], err.Error()}
		}
		if startup && p.lines {
			if c.loaded[p] && v != "" && c.values[p] != "" {
				v = c.values[p] + " " + v
			}
			c.loaded[p] = true
		}
		changes = append(changes, change{p, v, n})
	}
	old := make([]string, len(changes))
	for i, ch := range changes {
		old[i] = c.values[ch.p]
		c.values[ch.p] = ch.v
	}
	if !startup {
		var ran []*Reconfigurer
		for i, ch := range changes {
			r := ch.p.reconf
			if r == nil || slices.Contains(ran, r) || (old[i] == ch.v && !ch.p.volatile) {
				continue
			}
			if err := r.Apply(Values{c}); err != nil {
				c.warn("Failed applying new configuration. Possibly related to new " + ch.p.name + " setting. Restoring previous settings.")
				for i, ch := range changes {
					c.values[ch.p] = old[i]
				}
				for _, r := range ran {
					if err := r.Apply(Values{c}); err != nil {
						c.warn("Failed applying restored failed CONFIG SET command: " + err.Error())
					}
				}
				return &setError{ch.p.name, err.Error()}
			}
			ran = append(ran, r)
		}
	}
	for _, ch := range changes {
		if ch.p.apply != nil {
			ch.p.apply(ch.v, ch.n)
		}
	}
	return nil
}

func (c *Config) warn(msg string) {
	if c.log != nil {
		c.log.Warn(msg)
	}
}

// Matching returns name/value pairs of the parameters matching any of the
// patterns, each once, aliases included where they match. A name without
// glob characters is answered under the spelling it was asked with, as
// Redis does.
func (c *Config) Matching(patterns []string) [][2]string {
	c.mu.Lock()
	defer c.mu.Unlock()
	var out [][2]string
	seen := map[string]bool{}
	var globs []string
	for _, pat := range patterns {
		if strings.ContainsAny(pat, "[*?") {
			globs = append(globs, pat)
			continue
		}
		p, ok := c.byName[strings.ToLower(pat)]
		if ok && !seen[pat] {
			seen[pat] = true
			out = append(out, [2]string{pat, p.shown(c.values[p])})
		}
	}
	patterns = globs
	for _, p := range c.params {
		for _, name := range []string{p.name, p.alias} {
			if name == "" || seen[name] {
				continue
			}
			for _, pat := range patterns {
				if engine.Match([]byte(pat), []byte(name), true) {
					seen[name] = true
					out = append(out, [2]string{name, p.shown(c.values[p])})
					break
				}
			}
		}
	}
	return out
}

// ReplicaOf returns the replicaof setting's master, if any.
func (c *Config) ReplicaOf() (string, int, bool) {
	f := strings.Fields(c.Get("replicaof"))
	if len(f) != 2 {
		return "", 0, false
	}
	p, _ := strconv.Atoi(f[1])
	return f[0], p, true
}

// Params lists the parameters, for command-line flags and documentation.
func (c *Config) Params() []ParamInfo {
	var out []ParamInfo
	for _, p := range c.params {
		out = append(out, ParamInfo{Name: p.name, Default: p.def, Help: p.help,
			Group: groupOf(p.name), Type: p.typeOf(), Unit: p.unitOf(), DefaultText: p.defaultText()})
	}
	return out
}

// ParamInfo describes one parameter.
type ParamInfo struct {
	Name, Default, Help string
	// For --help: its section (Groups), the type of its value (integer,
	// bytes, duration, yes|no, its choices, string), the unit of an
	// integer, and the default as it is best read (512mb).
	Group, Type, Unit, DefaultText string
}
