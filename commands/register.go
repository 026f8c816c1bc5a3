package commands

import (
	"sync/atomic"

	"github.com/limitkv/limitkv/cmddocs"
	"github.com/limitkv/limitkv/cmdspec"
	"github.com/limitkv/limitkv/observe"
)

// command is a row of the command table (table.go): what a Go reader of
// the command needs, the handler that runs it included. The server's
// table is made of the rows' specs (package cmdspec); what the server
// keeps of a command beyond its spec, the handler and the statistics, it
// keeps at the spec's id (cmdState), so that specs know nothing of
// requests. The handler is typed here, where the row names it.
type command struct {
	Name  string // lower case; a subcommand's is its own word ("setname")
	Arity int    // as Redis: n exactly n arguments, -n at least n (name included)
	Flags cmdspec.Flag
	Run   func(*Ctx)
	// Prepare, if set, reads and checks the request's arguments before
	// dispatch takes the shard locks of its keys, keeping what Run needs
	// in the client's scratch; Run then replies, a refusal included. Work
	// that may be slow (RL.FIXED's TZ loads a zone's rules the first time)
	// so never runs under a lock that other clients, and the other
	// connections of an event loop, wait for. Inside EXEC and scripts,
	// where the locks are held already, it runs just before Run.
	Prepare  func(*Ctx)
	Sub      []*command
	Keys     func(args [][]byte, out []cmdspec.KeyRef) []cmdspec.KeyRef // see cmdspec.Spec
	LockAll  func(args [][]byte) bool                                   // see cmdspec.Spec
	KeyFlags func(args [][]byte) string                                 // see cmdspec.Spec
}

// spec returns the row's spec, with its subcommands'.
func (r *command) spec() *cmdspec.Spec {
	s := &cmdspec.Spec{Name: r.Name, Arity: r.Arity, Flags: r.Flags, Keys: r.Keys, LockAll: r.LockAll, KeyFlags: r.KeyFlags}
	for _, sub := range r.Sub {
		s.Sub = append(s.Sub, sub.spec())
	}
	return s
}

// attach sets, at the ids of s and its subcommands, the handlers of the
// row they were made of.
func (r *command) attach(s *cmdspec.Spec, cmds []cmdState) {
	cmds[s.ID()].run = r.Run
	cmds[s.ID()].prepare = r.Prepare
	for i, sub := range r.Sub {
		sub.attach(s.Sub[i], cmds)
	}
}

// cmdState is what the server keeps of one command of its table, at its
// spec's id: the handler, and the counters of INFO commandstats and
// latencystats.
type cmdState struct {
	run     func(*Ctx)
	prepare func(*Ctx)
	calls   observe.CallCounter
	failed  atomic.Int64
	reject  atomic.Int64
	hist    observe.Histogram
}

// newTable makes the table of rows with their entries in the data files
// (package cmddocs), and the state of each of its commands by id. It
// panics on a malformed table or data file, or on a command without data
// or data without a command: programming errors the tests catch.
func newTable(rows []*command) (*cmdspec.Table, []cmdState) {
	t, cmds, err := buildTable(rows, cmddocs.Load().SpecData())
	if err != nil {
		panic(err)
	}
	return t, cmds
}

func buildTable(rows []*command, data map[string]*cmdspec.Data) (*cmdspec.Table, []cmdState, error) {
	specs := make([]*cmdspec.Spec, len(rows))
	for i, r := range rows {
		specs[i] = r.spec()
	}
	t, err := cmdspec.NewTable(specs, data)
	if err != nil {
		return nil, nil, err
	}
	cmds := make([]cmdState, t.Count())
	for i, r := range rows {
		r.attach(specs[i], cmds)
	}
	return t, cmds, nil
}

// cmd returns the server's state of spec, a command of its table.
func (s *Server) cmd(spec *cmdspec.Spec) *cmdState { return &s.cmds[spec.ID()] }
