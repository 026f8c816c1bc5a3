package commands

import (
	"slices"
	"sync/atomic"

	"github.com/limitkv/limitkv/cmddocs"
	"github.com/limitkv/limitkv/cmdspec"
	"github.com/limitkv/limitkv/observe"
)

// commandTable is every command limitkv serves, family by family. Each
// family registers its commands at the top of the file of its handlers,
// one line each: name, arity, flags and handler (cmd), with subcommands
// nested (withSub) and, for the few commands that need them, the
// functions that find keys or read arguments before the locks are taken.
// What Redis publishes about a command (summary, complexity, since,
// group, arguments, key specs, the ACL categories its flags do not imply,
// tips, history) is its entry in the data file of the family's name,
// cmddocs/docs/<file>.json, which package cmddocs reads. A row and its
// entry make the command's spec (package cmdspec); the handler stays
// here, attached by the spec's id. Arity, flags, key specs, ACL
// categories and documentation follow Redis 7.0 for the commands Redis
// has.
//
// From the rows and the data come dispatch, the arity check, COMMAND and
// its subcommands (COMMAND DOCS is where redis-cli finds its hints), the
// legacy key range and movablekeys flag (from the key specs), the full
// ACL categories (from the flags) and docs/command-list.md
// (TestDocsCommandList). The table is sorted by name, so the order of
// families and rows means nothing to a client.
//
// To add a command: its line in its family's list and its entry in the
// family's data file; docs/architecture.md has every step, tests
// included.
func commandTable() []*command {
	return slices.Concat(
		ratelimitCommands(), leaseCommands(), policyCommands(), topCommands(),
		stringCommands(), bitmapCommands(), bitfieldCommands(), hllCommands(), lcsCommands(),
		listCommands(), hashCommands(), setCommands(), zsetCommands(), zalgebraCommands(), geoCommands(),
		streamCommands(), streamGroupCommands(),
		keyspaceCommands(), dumpCommands(), migrateCommands(), sortCommands(),
		connectionCommands(), pubsubCommands(), transactionCommands(), scriptingCommands(), functionCommands(),
		aclCommands(), introspectionCommands(), serverCommands(), slowlogCommands(), latencyCommands(),
		persistenceCommands(), replicationCommands(), clusterCommands(), monitorCommands(),
	)
}

// command is a row of the command table: what a Go reader of the command
// needs, the handler that runs it included. The server's table is made of
// the rows' specs (package cmdspec); what the server keeps of a command
// beyond its spec, the handler and the statistics, it keeps at the spec's
// id (cmdState), so that specs know nothing of requests. The handler is
// typed here, where the row names it.
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

// cmd is a command's row on one line: flags are named as COMMAND names
// them, with limitkv's internal ones (cmdspec.ParseFlags), and run is nil
// only for a container that cannot run without a subcommand. A flag the
// parser does not know is a programming error, which the first test that
// builds the table reports.
func cmd(name string, arity int, flags string, run func(*Ctx)) *command {
	f, err := cmdspec.ParseFlags(flags)
	if err != nil {
		panic("command " + name + ": " + err.Error())
	}
	return &command{Name: name, Arity: arity, Flags: f, Run: run}
}

// withSub nests subcommands under a container (CLIENT, CONFIG ...).
func (r *command) withSub(sub ...*command) *command { r.Sub = sub; return r }

// withPrepare sets the step that reads the arguments before the locks.
func (r *command) withPrepare(f func(*Ctx)) *command { r.Prepare = f; return r }

// withKeys sets the function that finds the keys the key specs cannot.
func (r *command) withKeys(f func([][]byte, []cmdspec.KeyRef) []cmdspec.KeyRef) *command {
	r.Keys = f
	return r
}

// withLockAll sets the test of a request that locks every shard.
func (r *command) withLockAll(f func([][]byte) bool) *command { r.LockAll = f; return r }

// withKeyFlags sets the function that narrows the key flags by request.
func (r *command) withKeyFlags(f func([][]byte) string) *command { r.KeyFlags = f; return r }

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
