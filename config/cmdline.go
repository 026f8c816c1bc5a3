package config

import (
	"flag"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
)

// Args is what limitkv's command line says: the config file, named first
// (limitkv /etc/limitkv.conf) or by --config, and the settings its flags
// set, in command-line order: a later one wins, except for settings whose
// lines add up (save).
type Args struct {
	File string
	Sets [][2]string
}

// ParseArgs reads limitkv's command line, each setting a flag of its
// name (--port 6380); -v and --help, which only a first argument asks
// for, are the caller's to answer before. A mistake is written to stderr,
// with the usage when a flag is wrong, and returned.
func (c *Config) ParseArgs(args []string, stderr io.Writer) (Args, error) {
	// A first argument that is not a flag names the config file, as in
	// redis-server /etc/redis.conf.
	var positional string
	if len(args) > 0 && !strings.HasPrefix(args[0], "-") {
		positional, args = args[0], args[1:]
	}
	args = joinMultiWordFlags(args)
	fs := flag.NewFlagSet("limitkv", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var out Args
	fs.StringVar(&out.File, "config", "", "")
	for _, p := range c.params {
		fs.Var(settingFlag{name: p.name, sets: &out.Sets}, p.name, "")
	}
	fs.Usage = func() {
		fmt.Fprintf(stderr, "%s(limitkv --help lists the settings)\n", usageLines)
	}
	if err := fs.Parse(args); err != nil {
		return Args{}, err
	}
	if fs.NArg() > 0 {
		err := fmt.Errorf("unexpected argument %q (a config file comes first, or after --config; settings are flags: --port 6380)", fs.Arg(0))
		fmt.Fprintf(stderr, "limitkv: %v\n", err)
		return Args{}, err
	}
	if positional != "" {
		if out.File != "" {
			err := fmt.Errorf("two config files, %s and --config %s", positional, out.File)
			fmt.Fprintf(stderr, "limitkv: %v\n", err)
			return Args{}, err
		}
		out.File = positional
	}
	return out, nil
}

// multiWordSettings are the settings whose value is several words, Redis's
// MULTI_ARG_CONFIGs.
var multiWordSettings = map[string]bool{
	"save": true, "bind": true, "replicaof": true, "slaveof": true,
	"client-output-buffer-limit": true, "latency-tracking-info-percentiles": true,
}

// joinMultiWordFlags joins the words after the flag of a setting whose
// value is several words into one value, as redis-server takes them:
// --replicaof host port, --save 900 1 300 10, --client-output-buffer-limit
// normal 1gb 512mb 20, --bind 127.0.0.1 ::1. The value ends at the next
// word that starts with '-'. After any other setting a second word stays
// an argument of its own, which ParseArgs refuses: --dir /data
// /etc/x.conf is a mistake, not a directory name with a space.
func joinMultiWordFlags(args []string) []string {
	out := make([]string, 0, len(args))
	for i := 0; i < len(args); i++ {
		a := args[i]
		name := strings.ToLower(strings.TrimLeft(a, "-"))
		if !strings.HasPrefix(a, "-") || !multiWordSettings[name] || i+1 >= len(args) {
			out = append(out, a)
			continue
		}
		words := []string{args[i+1]}
		i++
		for i+1 < len(args) && !strings.HasPrefix(args[i+1], "-") {
			words = append(words, args[i+1])
			i++
		}
		out = append(out, a, strings.Join(words, " "))
	}
	return out
}

// settingFlag is a setting's command-line flag: each occurrence is kept,
// in order, for the caller to apply.
type settingFlag struct {
	name string
	sets *[][2]string
}

func (f settingFlag) String() string { return "" }

func (f settingFlag) Set(v string) error {
	*f.sets = append(*f.sets, [2]string{f.name, v})
	return nil
}

// LoadEnv applies settings given in the environment, so that a container
// can take its password (or anything else) without a config file:
// LIMITKV_REQUIREPASS=... or LIMITKV_REQUIREPASS_FILE=/run/secrets/pw.
func (c *Config) LoadEnv(lookup func(string) (string, bool)) error {
	for _, p := range c.params {
		name := "LIMITKV_" + strings.ToUpper(strings.ReplaceAll(p.name, "-", "_"))
		v, ok := lookup(name)
		if path, fromFile := lookup(name + "_FILE"); fromFile {
			if ok {
				return fmt.Errorf("both %s and %s_FILE are set", name, name)
			}
			b, err := os.ReadFile(path)
			if err != nil {
				return fmt.Errorf("%s_FILE: %v", name, err)
			}
			v, ok = strings.TrimRight(string(b), "\r\n"), true
		}
		if !ok {
			continue
		}
		if err := c.Set([][2]string{{p.name, v}}, true); err != nil {
			return fmt.Errorf("%s: %v", name, err)
		}
	}
	return nil
}

const usageLines = `Usage: limitkv [/path/to/limitkv.conf] [--<setting> value ...]
       limitkv --config /path/to/limitkv.conf [--<setting> value ...]
       limitkv -v | --version
       limitkv -h | --help
`

// WriteHelp writes --help: the usage, then the settings by section, as
// redis.conf groups them, each with its type, unit and default.
func (c *Config) WriteHelp(w io.Writer) {
	fmt.Fprint(w, usageLines)
	fmt.Fprint(w, `
A Redis-protocol server with native rate-limit commands.

Settings use Redis's names; CONFIG GET/SET see the same ones. Each is a flag
(--port 6380, or --port=6380; a value of several words follows the flag:
--save 900 1 300 10) or a line of the config file (port 6380; include FILE
reads another file there). Each may also come from the environment:
LIMITKV_<NAME> (LIMITKV_REQUIREPASS), or LIMITKV_<NAME>_FILE naming a file
that holds it (a Docker secret). Flags override the environment, which
overrides the config file.

Types: an integer; bytes, with an optional unit (1k = 1000, 1kb = 1024, m,
mb, g, gb); a duration (500ms, 1s, 2m; a bare number is milliseconds);
yes|no or another list of choices; a string.
`)
	params := c.Params()
	byName := map[string]ParamInfo{}
	other := Group{Title: "Other"}
	for _, p := range params {
		byName[p.Name] = p
		if p.Group == "" {
			other.Names = append(other.Names, p.Name)
		}
	}
	groups := Groups()
	if len(other.Names) > 0 {
		groups = append(groups, other)
	}
	for _, g := range groups {
		fmt.Fprintf(w, "\n%s:\n", g.Title)
		for _, name := range g.Names {
			p := byName[name]
			typ := p.Type
			if p.Unit != "" {
				typ += ", " + p.Unit
			}
			def := p.DefaultText
			if def == "" || strings.ContainsAny(def, " \"") {
				def = strconv.Quote(def)
			}
			fmt.Fprintf(w, "  --%s <%s>, default %s\n", p.Name, typ, def)
			if p.Help != "" {
				fmt.Fprintf(w, "        %s\n", p.Help)
			}
		}
	}
}
