package cmddocs

import "github.com/limitkv/limitkv/cmdspec"

// Writer is what a COMMAND DOCS reply is written with (package resp's
// Writer, which knows RESP2 from RESP3).
type Writer interface {
	Map(n int)
	Array(n int)
	Set(n int)
	BulkString(s string)
	Simple(s string)
	Int(n int64)
}

// Write writes the COMMAND DOCS entry of s, a command of a table made
// with docs' SpecData, fields in Redis's order.
func (docs Docs) Write(w Writer, s *cmdspec.Spec) {
	d := docs.Of(s)
	docFlags := d.DocFlags
	n := 3
	for _, present := range []bool{d.Complexity != "", len(docFlags) > 0, d.DeprecatedSince != "", d.ReplacedBy != "",
		len(d.History) > 0, len(d.Args) > 0, len(s.Sub) > 0} {
		if present {
			n++
		}
	}
	w.Map(n)
	w.BulkString("summary")
	w.BulkString(d.Summary)
	w.BulkString("since")
	w.BulkString(d.Since)
	w.BulkString("group")
	w.BulkString(docs.Group(s))
	if d.Complexity != "" {
		w.BulkString("complexity")
		w.BulkString(d.Complexity)
	}
	if len(docFlags) > 0 {
		w.BulkString("doc_flags")
		w.Set(len(docFlags))
		for _, f := range docFlags {
			w.Simple(f)
		}
	}
	if d.DeprecatedSince != "" {
		w.BulkString("deprecated_since")
		w.BulkString(d.DeprecatedSince)
	}
	if d.ReplacedBy != "" {
		w.BulkString("replaced_by")
		w.BulkString(d.ReplacedBy)
	}
	if len(d.History) > 0 {
		w.BulkString("history")
		w.Array(len(d.History))
		for _, h := range d.History {
			w.Array(2)
			w.BulkString(h[0])
			w.BulkString(h[1])
		}
	}
	if len(d.Args) > 0 {
		w.BulkString("arguments")
		writeArgs(w, d.Args)
	}
	if len(s.Sub) > 0 {
		w.BulkString("subcommands")
		w.Map(len(s.Sub))
		for _, sub := range s.Sub {
			w.BulkString(sub.FullName())
			docs.Write(w, sub)
		}
	}
}

func writeArgs(w Writer, args []*Arg) {
	w.Array(len(args))
	for _, a := range args {
		var flags []string
		if a.Optional {
			flags = append(flags, "optional")
		}
		if a.Multiple {
			flags = append(flags, "multiple")
		}
		if a.MultipleToken {
			flags = append(flags, "multiple_token")
		}
		n := 2
		hasSpec := a.Type == "key" || a.Type == "pattern" && a.KeySpec > 0 // SORT's BY and GET
		for _, present := range []bool{hasSpec, a.Token != "", a.Since != "", len(flags) > 0, len(a.Args) > 0} {
			if present {
				n++
			}
		}
		w.Map(n)
		w.BulkString("name")
		w.BulkString(a.Name)
		w.BulkString("type")
		w.BulkString(a.Type)
		if hasSpec {
			w.BulkString("key_spec_index")
			w.Int(int64(a.KeySpec))
		}
		if a.Token != "" {
			w.BulkString("token")
			w.BulkString(a.Token)
		}
		if a.Since != "" {
			w.BulkString("since")
			w.BulkString(a.Since)
		}
		if len(flags) > 0 {
			w.BulkString("flags")
			w.Set(len(flags))
			for _, f := range flags {
				w.Simple(f)
			}
		}
		if len(a.Args) > 0 {
			w.BulkString("arguments")
			writeArgs(w, a.Args)
		}
	}
}
