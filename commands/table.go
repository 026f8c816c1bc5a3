package commands

import "github.com/limitkv/limitkv/cmdspec"

// commandTable is the one list of every command limitkv serves. A row
// states what Go code needs: name, arity, flags and handler (subcommands
// nest under Sub). What Redis publishes about a command (summary,
// complexity, since, group, arguments, key specs, the ACL categories its
// flags do not imply, tips, history) is its entry in the data files
// cmddocs/docs/<family>.json, which package cmddocs reads and describes.
// A row and its entry make the command's spec (package cmdspec); the
// handler stays here, attached by the spec's id (register.go). Rows are
// grouped by the file of their handlers, and each group's data is in the
// data file of the same name. Arity, flags, key specs, ACL categories and
// documentation follow Redis 7.0 for the commands Redis has.
//
// From the rows and the data come dispatch, the arity check, COMMAND and
// its subcommands (COMMAND DOCS is where redis-cli finds its hints), the
// legacy key range and movablekeys flag (from the key specs) and the full
// ACL categories (from the flags), and README.md's command list
// (cmddocs.Docs.CommandList; TestReadmeCommandList). docs/commands.md is
// written by hand.
//
// To add a command: one row here plus its entry in
// cmddocs/docs/<family>.json. Then record the new replies with
//
//	go test ./commands -run 'TestCommandGolden|TestReadmeCommandList' -update
//
// README.md's "Adding a command" has every step, tests included.
func commandTable() []*command {
	return []*command{
		// Rate limiting (ratelimit.go, docs/ratelimit.json), limitkv's own;
		// CL.THROTTLE follows the redis-cell module, which registers it like
		// this.
		{
			Name:    "rl.fixed",
			Arity:   -4,
			Flags:   cmdspec.Write | cmdspec.DenyOOM | cmdspec.Fast,
			Run:     cmdRLFixed,
			Prepare: prepareRLFixed,
		},
		{
			Name:    "rl.fixed_ro",
			Arity:   -4,
			Flags:   cmdspec.ReadOnly | cmdspec.Fast,
			Run:     cmdRLFixedRO,
			Prepare: prepareRLFixed,
		},
		{
			Name:    "rl.slide",
			Arity:   -4,
			Flags:   cmdspec.Write | cmdspec.DenyOOM | cmdspec.Fast,
			Run:     cmdRLSlide,
			Prepare: prepareRLSlide,
		},
		{
			Name:    "rl.slide_ro",
			Arity:   -4,
			Flags:   cmdspec.ReadOnly | cmdspec.Fast,
			Run:     cmdRLSlideRO,
			Prepare: prepareRLSlide,
		},
		{
			Name:  "rl.login",
			Arity: -4,
			Flags: cmdspec.Write | cmdspec.DenyOOM | cmdspec.Fast,
			Run:   cmdRLLogin,
		},
		{
			Name:  "cl.throttle",
			Arity: -1,
			Flags: cmdspec.Write | cmdspec.DenyOOM | cmdspec.Fast,
			Run:   cmdCLThrottle,
		},
		{
			Name:  "cl.throttle_ro",
			Arity: -1,
			Flags: cmdspec.ReadOnly | cmdspec.Fast,
			Run:   cmdCLThrottleRO,
		},
		{
			Name:  "rl.acquire",
			Arity: -5,
			Flags: cmdspec.Write | cmdspec.DenyOOM | cmdspec.Fast,
			Run:   cmdRLAcquire,
		},
		{
			Name:  "rl.acquire_ro",
			Arity: -4,
			Flags: cmdspec.ReadOnly | cmdspec.Fast,
			Run:   cmdRLAcquireRO,
		},
		{
			Name:  "rl.release",
			Arity: 3,
			Flags: cmdspec.Write | cmdspec.Fast,
			Run:   cmdRLRelease,
		},
		// Named policies (policy.go). RL.POLICY SET and DEL change every
		// application's limits: they are @admin and @dangerous as well as
		// @ratelimit, so that "+@ratelimit -@admin" lets a user apply
		// policies with RL.CHECK and read them without redefining them.
		{
			Name:    "rl.check",
			Arity:   -3,
			Flags:   cmdspec.Write | cmdspec.DenyOOM | cmdspec.Fast,
			Run:     cmdRLCheck,
			Prepare: prepareRLCheck,
		},
		{
			Name:    "rl.check_ro",
			Arity:   -3,
			Flags:   cmdspec.ReadOnly | cmdspec.Fast,
			Run:     cmdRLCheckRO,
			Prepare: prepareRLCheckRO,
		},
		{
			Name:  "rl.policy",
			Arity: -2,
			Sub: []*command{
				{
					Name:  "del",
					Arity: 3,
					Flags: cmdspec.Write | cmdspec.Admin | cmdspec.Fast,
					Run:   cmdPolicyDel,
				},
				{
					Name:  "get",
					Arity: 3,
					Flags: cmdspec.ReadOnly | cmdspec.Fast,
					Run:   cmdPolicyGet,
				},
				{
					Name:  "help",
					Arity: 2,
					Flags: cmdspec.Loading | cmdspec.Stale,
					Run:   cmdHelp,
				},
				{
					Name:  "list",
					Arity: -2,
					Flags: cmdspec.ReadOnly,
					Run:   cmdPolicyList,
				},
				{
					Name:  "set",
					Arity: -4,
					Flags: cmdspec.Write | cmdspec.Admin | cmdspec.DenyOOM,
					Run:   cmdPolicySet,
				},
			},
		},
		{
			Name:  "rl.top",
			Arity: -1,
			Flags: cmdspec.Admin | cmdspec.Loading | cmdspec.Stale,
			Run:   cmdRLTop,
		},

		// Strings (strings.go, docs/strings.json)
		{
			Name:  "get",
			Arity: 2,
			Flags: cmdspec.ReadOnly | cmdspec.Fast,
			Run:   cmdGet,
		},
		{
			Name:     "set",
			Arity:    -3,
			Flags:    cmdspec.Write | cmdspec.DenyOOM,
			Run:      cmdSet,
			KeyFlags: setKeyFlags,
		},
		{
			Name:  "setnx",
			Arity: 3,
			Flags: cmdspec.Write | cmdspec.DenyOOM | cmdspec.Fast,
			Run:   cmdSetNX,
		},
		{
			Name:  "setex",
			Arity: 4,
			Flags: cmdspec.Write | cmdspec.DenyOOM,
			Run:   cmdSetEX,
		},
		{
			Name:  "psetex",
			Arity: 4,
			Flags: cmdspec.Write | cmdspec.DenyOOM,
			Run:   cmdPSetEX,
		},
		{
			Name:  "getset",
			Arity: 3,
			Flags: cmdspec.Write | cmdspec.DenyOOM | cmdspec.Fast,
			Run:   cmdGetSet,
		},
		{
			Name:  "getdel",
			Arity: 2,
			Flags: cmdspec.Write | cmdspec.Fast,
			Run:   cmdGetDel,
		},
		{
			Name:  "getex",
			Arity: -2,
			Flags: cmdspec.Write | cmdspec.Fast | cmdspec.TTLOnly,
			Run:   cmdGetEx,
		},
		{
			Name:  "mget",
			Arity: -2,
			Flags: cmdspec.ReadOnly | cmdspec.Fast,
			Run:   cmdMGet,
		},
		{
			Name:  "mset",
			Arity: -3,
			Flags: cmdspec.Write | cmdspec.DenyOOM,
			Run:   cmdMSet,
		},
		{
			Name:  "msetnx",
			Arity: -3,
			Flags: cmdspec.Write | cmdspec.DenyOOM,
			Run:   cmdMSetNX,
		},
		{
			Name:  "incr",
			Arity: 2,
			Flags: cmdspec.Write | cmdspec.DenyOOM | cmdspec.Fast | cmdspec.AsIs,
			Run:   cmdIncr,
		},
		{
			Name:  "decr",
			Arity: 2,
			Flags: cmdspec.Write | cmdspec.DenyOOM | cmdspec.Fast | cmdspec.AsIs,
			Run:   cmdDecr,
		},
		{
			Name:  "incrby",
			Arity: 3,
			Flags: cmdspec.Write | cmdspec.DenyOOM | cmdspec.Fast | cmdspec.AsIs,
			Run:   cmdIncrBy,
		},
		{
			Name:  "decrby",
			Arity: 3,
			Flags: cmdspec.Write | cmdspec.DenyOOM | cmdspec.Fast | cmdspec.AsIs,
			Run:   cmdDecrBy,
		},
		{
			Name:  "incrbyfloat",
			Arity: 3,
			Flags: cmdspec.Write | cmdspec.DenyOOM | cmdspec.Fast,
			Run:   cmdIncrByFloat,
		},
		{
			Name:  "append",
			Arity: 3,
			Flags: cmdspec.Write | cmdspec.DenyOOM | cmdspec.Fast | cmdspec.AsIs,
			Run:   cmdAppend,
		},
		{
			Name:  "strlen",
			Arity: 2,
			Flags: cmdspec.ReadOnly | cmdspec.Fast,
			Run:   cmdStrLen,
		},
		{
			Name:  "getrange",
			Arity: 4,
			Flags: cmdspec.ReadOnly,
			Run:   cmdGetRange,
		},
		{
			Name:  "setrange",
			Arity: 4,
			Flags: cmdspec.Write | cmdspec.DenyOOM | cmdspec.AsIs,
			Run:   cmdSetRange,
		},

		// Keyspace (keys.go, docs/keys.json)
		{
			Name:  "del",
			Arity: -2,
			Flags: cmdspec.Write,
			Run:   cmdDel,
		},
		{
			Name:  "unlink",
			Arity: -2,
			Flags: cmdspec.Write | cmdspec.Fast,
			Run:   cmdDel,
		},
		{
			Name:  "exists",
			Arity: -2,
			Flags: cmdspec.ReadOnly | cmdspec.Fast,
			Run:   cmdExists,
		},
		{
			Name:  "touch",
			Arity: -2,
			Flags: cmdspec.ReadOnly | cmdspec.Fast,
			Run:   cmdExists,
		},
		{
			Name:  "expire",
			Arity: -3,
			Flags: cmdspec.Write | cmdspec.Fast | cmdspec.TTLOnly,
			Run:   cmdExpire,
		},
		{
			Name:  "pexpire",
			Arity: -3,
			Flags: cmdspec.Write | cmdspec.Fast | cmdspec.TTLOnly,
			Run:   cmdPExpire,
		},
		{
			Name:  "expireat",
			Arity: -3,
			Flags: cmdspec.Write | cmdspec.Fast | cmdspec.TTLOnly,
			Run:   cmdExpireAt,
		},
		{
			Name:  "pexpireat",
			Arity: -3,
			Flags: cmdspec.Write | cmdspec.Fast | cmdspec.TTLOnly,
			Run:   cmdPExpireAt,
		},
		{
			Name:  "ttl",
			Arity: 2,
			Flags: cmdspec.ReadOnly | cmdspec.Fast,
			Run:   cmdTTL,
		},
		{
			Name:  "pttl",
			Arity: 2,
			Flags: cmdspec.ReadOnly | cmdspec.Fast,
			Run:   cmdPTTL,
		},
		{
			Name:  "expiretime",
			Arity: 2,
			Flags: cmdspec.ReadOnly | cmdspec.Fast,
			Run:   cmdExpireTime,
		},
		{
			Name:  "pexpiretime",
			Arity: 2,
			Flags: cmdspec.ReadOnly | cmdspec.Fast,
			Run:   cmdPExpireTime,
		},
		{
			Name:  "persist",
			Arity: 2,
			Flags: cmdspec.Write | cmdspec.Fast | cmdspec.TTLOnly,
			Run:   cmdPersist,
		},
		{
			Name:  "type",
			Arity: 2,
			Flags: cmdspec.ReadOnly | cmdspec.Fast,
			Run:   cmdType,
		},
		{
			Name:  "keys",
			Arity: 2,
			Flags: cmdspec.ReadOnly,
			Run:   cmdKeys,
		},
		{
			Name:  "scan",
			Arity: -2,
			Flags: cmdspec.ReadOnly,
			Run:   cmdScan,
		},
		{
			Name:  "randomkey",
			Arity: 1,
			Flags: cmdspec.ReadOnly,
			Run:   cmdRandomKey,
		},
		{
			Name:  "rename",
			Arity: 3,
			Flags: cmdspec.Write | cmdspec.AsIs,
			Run:   cmdRename,
		},
		{
			Name:  "renamenx",
			Arity: 3,
			Flags: cmdspec.Write | cmdspec.Fast | cmdspec.AsIs,
			Run:   cmdRenameNX,
		},
		{
			Name:  "dbsize",
			Arity: 1,
			Flags: cmdspec.ReadOnly | cmdspec.Fast,
			Run:   cmdDBSize,
		},
		{
			Name:  "flushdb",
			Arity: -1,
			Flags: cmdspec.Write,
			Run:   cmdFlushDB,
		},
		{
			Name:  "flushall",
			Arity: -1,
			Flags: cmdspec.Write,
			Run:   cmdFlushAll,
		},
		{
			Name:  "select",
			Arity: 2,
			Flags: cmdspec.Loading | cmdspec.Stale | cmdspec.Fast,
			Run:   cmdSelect,
		},
		{
			Name:  "swapdb",
			Arity: 3,
			Flags: cmdspec.Write | cmdspec.Fast,
			Run:   cmdSwapDB,
		},

		// Keys as values (dump.go, docs/dump.json): DUMP and RESTORE in
		// Redis's RDB format, MIGRATE, COPY, MOVE.
		{
			Name:  "dump",
			Arity: 2,
			Flags: cmdspec.ReadOnly,
			Run:   cmdDump,
		},
		{
			Name:  "restore",
			Arity: -4,
			Flags: cmdspec.Write | cmdspec.DenyOOM | cmdspec.SelfLock,
			Run:   cmdRestore,
		},
		{
			Name:  "migrate",
			Arity: -6,
			Flags: cmdspec.Write | cmdspec.SelfLock | cmdspec.MayWait,
			Run:   cmdMigrate,
			Keys:  migrateKeys,
		},
		{
			Name:  "copy",
			Arity: -3,
			Flags: cmdspec.Write | cmdspec.DenyOOM,
			Run:   cmdCopy,
		},
		{
			Name:  "move",
			Arity: 3,
			Flags: cmdspec.Write | cmdspec.Fast,
			Run:   cmdMove,
		},

		// LCS (lcs.go, docs/lcs.json): computed with no lock held.
		{
			Name:  "lcs",
			Arity: -3,
			Flags: cmdspec.ReadOnly | cmdspec.SelfLock | cmdspec.MayWait,
			Run:   cmdLCS,
		},

		// Connection (connection.go, docs/connection.json)
		{
			Name:  "ping",
			Arity: -1,
			Flags: cmdspec.Fast,
			Run:   cmdPing,
		},
		{
			Name:  "echo",
			Arity: 2,
			Flags: cmdspec.Loading | cmdspec.Stale | cmdspec.Fast,
			Run:   cmdEcho,
		},
		{
			Name:  "hello",
			Arity: -1,
			Flags: cmdspec.NoScript | cmdspec.Loading | cmdspec.Stale | cmdspec.Fast | cmdspec.NoAuth | cmdspec.AllowBusy,
			Run:   cmdHello,
		},
		{
			Name:  "auth",
			Arity: -2,
			Flags: cmdspec.NoScript | cmdspec.Loading | cmdspec.Stale | cmdspec.Fast | cmdspec.NoAuth | cmdspec.AllowBusy,
			Run:   cmdAuth,
		},
		{
			Name:  "quit",
			Arity: -1,
			Flags: cmdspec.NoScript | cmdspec.Loading | cmdspec.Stale | cmdspec.Fast | cmdspec.NoAuth | cmdspec.AllowBusy,
			Run:   cmdQuit,
		},
		{
			Name:  "reset",
			Arity: 1,
			Flags: cmdspec.NoScript | cmdspec.Loading | cmdspec.Stale | cmdspec.Fast | cmdspec.NoAuth | cmdspec.AllowBusy,
			Run:   cmdReset,
		},
		{
			Name:  "client",
			Arity: -2,
			Sub: []*command{
				{
					Name:  "getname",
					Arity: 2,
					Flags: cmdspec.NoScript | cmdspec.Loading | cmdspec.Stale,
					Run:   cmdClientGetName,
				},
				{
					Name:  "help",
					Arity: 2,
					Flags: cmdspec.Loading | cmdspec.Stale,
					Run:   cmdHelp,
				},
				{
					Name:  "id",
					Arity: 2,
					Flags: cmdspec.NoScript | cmdspec.Loading | cmdspec.Stale,
					Run:   cmdClientID,
				},
				{
					Name:  "info",
					Arity: 2,
					Flags: cmdspec.NoScript | cmdspec.Loading | cmdspec.Stale,
					Run:   cmdClientInfo,
				},
				{
					Name:  "kill",
					Arity: -3,
					Flags: cmdspec.Admin | cmdspec.NoScript | cmdspec.Loading | cmdspec.Stale,
					Run:   cmdClientKill,
				},
				{
					Name:  "list",
					Arity: -2,
					Flags: cmdspec.Admin | cmdspec.NoScript | cmdspec.Loading | cmdspec.Stale,
					Run:   cmdClientList,
				},
				{
					Name:  "no-evict",
					Arity: 3,
					Flags: cmdspec.Admin | cmdspec.NoScript | cmdspec.Loading | cmdspec.Stale,
					Run:   cmdClientNoEvict,
				},
				{
					Name:  "pause",
					Arity: -3,
					Flags: cmdspec.Admin | cmdspec.NoScript | cmdspec.Loading | cmdspec.Stale,
					Run:   cmdClientPause,
				},
				{
					Name:  "setname",
					Arity: 3,
					Flags: cmdspec.NoScript | cmdspec.Loading | cmdspec.Stale,
					Run:   cmdClientSetName,
				},
				{
					Name:  "setinfo",
					Arity: 4,
					Flags: cmdspec.NoScript | cmdspec.Loading | cmdspec.Stale,
					Run:   cmdClientSetInfo,
				},
				{
					Name:  "unblock",
					Arity: -3,
					Flags: cmdspec.Admin | cmdspec.NoScript | cmdspec.Loading | cmdspec.Stale,
					Run:   cmdClientUnblock,
				},
				{
					Name:  "unpause",
					Arity: 2,
					Flags: cmdspec.Admin | cmdspec.NoScript | cmdspec.Loading | cmdspec.Stale,
					Run:   cmdClientUnpause,
				},
			},
		},

		// Pub/sub (pubsub.go, docs/pubsub.json)
		{
			Name:  "publish",
			Arity: 3,
			Flags: cmdspec.PubSub | cmdspec.Loading | cmdspec.Stale | cmdspec.Fast | cmdspec.MayReplicate,
			Run:   cmdPublish,
		},
		{
			Name:  "subscribe",
			Arity: -2,
			Flags: cmdspec.PubSub | cmdspec.NoScript | cmdspec.Loading | cmdspec.Stale,
			Run:   cmdSubscribe,
		},
		{
			Name:  "unsubscribe",
			Arity: -1,
			Flags: cmdspec.PubSub | cmdspec.NoScript | cmdspec.Loading | cmdspec.Stale,
			Run:   cmdUnsubscribe,
		},
		{
			Name:  "psubscribe",
			Arity: -2,
			Flags: cmdspec.PubSub | cmdspec.NoScript | cmdspec.Loading | cmdspec.Stale,
			Run:   cmdPSubscribe,
		},
		{
			Name:  "punsubscribe",
			Arity: -1,
			Flags: cmdspec.PubSub | cmdspec.NoScript | cmdspec.Loading | cmdspec.Stale,
			Run:   cmdPUnsubscribe,
		},
		{
			Name:  "spublish",
			Arity: 3,
			Flags: cmdspec.PubSub | cmdspec.Loading | cmdspec.Stale | cmdspec.Fast | cmdspec.MayReplicate,
			Run:   cmdSPublish,
		},
		{
			Name:  "ssubscribe",
			Arity: -2,
			Flags: cmdspec.PubSub | cmdspec.NoScript | cmdspec.Loading | cmdspec.Stale,
			Run:   cmdSSubscribe,
		},
		{
			Name:  "sunsubscribe",
			Arity: -1,
			Flags: cmdspec.PubSub | cmdspec.NoScript | cmdspec.Loading | cmdspec.Stale,
			Run:   cmdSUnsubscribe,
		},
		{
			Name:  "pubsub",
			Arity: -2,
			Sub: []*command{
				{
					Name:  "channels",
					Arity: -2,
					Flags: cmdspec.PubSub | cmdspec.Loading | cmdspec.Stale,
					Run:   cmdPubsubChannels,
				},
				{
					Name:  "help",
					Arity: 2,
					Flags: cmdspec.Loading | cmdspec.Stale,
					Run:   cmdPubsubHelp,
				},
				{
					Name:  "numpat",
					Arity: 2,
					Flags: cmdspec.PubSub | cmdspec.Loading | cmdspec.Stale,
					Run:   cmdPubsubNumPat,
				},
				{
					Name:  "numsub",
					Arity: -2,
					Flags: cmdspec.PubSub | cmdspec.Loading | cmdspec.Stale,
					Run:   cmdPubsubNumSub,
				},
				{
					Name:  "shardchannels",
					Arity: -2,
					Flags: cmdspec.PubSub | cmdspec.Loading | cmdspec.Stale,
					Run:   cmdPubsubShardChannels,
				},
				{
					Name:  "shardnumsub",
					Arity: -2,
					Flags: cmdspec.PubSub | cmdspec.Loading | cmdspec.Stale,
					Run:   cmdPubsubShardNumSub,
				},
			},
		},

		// Users and permissions (acl.go, docs/acl.json)
		{
			Name:  "acl",
			Arity: -2,
			Sub: []*command{
				{
					Name:  "cat",
					Arity: -2,
					Flags: cmdspec.NoScript | cmdspec.Loading | cmdspec.Stale,
					Run:   cmdACLCat,
				},
				{
					Name:  "deluser",
					Arity: -3,
					Flags: cmdspec.Admin | cmdspec.NoScript | cmdspec.Loading | cmdspec.Stale,
					Run:   cmdACLDelUser,
				},
				{
					Name:  "dryrun",
					Arity: -4,
					Flags: cmdspec.Admin | cmdspec.NoScript | cmdspec.Loading | cmdspec.Stale,
					Run:   cmdACLDryRun,
				},
				{
					Name:  "genpass",
					Arity: -2,
					Flags: cmdspec.NoScript | cmdspec.Loading | cmdspec.Stale,
					Run:   cmdACLGenPass,
				},
				{
					Name:  "getuser",
					Arity: 3,
					Flags: cmdspec.Admin | cmdspec.NoScript | cmdspec.Loading | cmdspec.Stale,
					Run:   cmdACLGetUser,
				},
				{
					Name:  "help",
					Arity: 2,
					Flags: cmdspec.Loading | cmdspec.Stale,
					Run:   cmdHelp,
				},
				{
					Name:  "list",
					Arity: 2,
					Flags: cmdspec.Admin | cmdspec.NoScript | cmdspec.Loading | cmdspec.Stale,
					Run:   cmdACLList,
				},
				{
					Name:  "load",
					Arity: 2,
					Flags: cmdspec.Admin | cmdspec.NoScript | cmdspec.Loading | cmdspec.Stale | cmdspec.MayWait,
					Run:   cmdACLLoad,
				},
				{
					Name:  "log",
					Arity: -2,
					Flags: cmdspec.Admin | cmdspec.NoScript | cmdspec.Loading | cmdspec.Stale,
					Run:   cmdACLLog,
				},
				{
					Name:  "save",
					Arity: 2,
					Flags: cmdspec.Admin | cmdspec.NoScript | cmdspec.Loading | cmdspec.Stale | cmdspec.MayWait | cmdspec.MayWait,
					Run:   cmdACLSave,
				},
				{
					Name:  "setuser",
					Arity: -3,
					Flags: cmdspec.Admin | cmdspec.NoScript | cmdspec.Loading | cmdspec.Stale,
					Run:   cmdACLSetUser,
				},
				{
					Name:  "users",
					Arity: 2,
					Flags: cmdspec.Admin | cmdspec.NoScript | cmdspec.Loading | cmdspec.Stale,
					Run:   cmdACLUsers,
				},
				{
					Name:  "whoami",
					Arity: 2,
					Flags: cmdspec.NoScript | cmdspec.Loading | cmdspec.Stale,
					Run:   cmdACLWhoami,
				},
			},
		},

		// Introspection (command.go, docs/command.json)
		{
			Name:  "command",
			Arity: -1,
			Flags: cmdspec.Loading | cmdspec.Stale,
			Run:   cmdCommand,
			Sub: []*command{
				{
					Name:  "count",
					Arity: 2,
					Flags: cmdspec.Loading | cmdspec.Stale,
					Run:   cmdCommandCount,
				},
				{
					Name:  "docs",
					Arity: -2,
					Flags: cmdspec.Loading | cmdspec.Stale,
					Run:   cmdCommandDocs,
				},
				{
					Name:  "getkeys",
					Arity: -4,
					Flags: cmdspec.Loading | cmdspec.Stale,
					Run:   cmdCommandGetKeys,
				},
				{
					Name:  "getkeysandflags",
					Arity: -4,
					Flags: cmdspec.Loading | cmdspec.Stale,
					Run:   cmdCommandGetKeysAndFlags,
				},
				{
					Name:  "help",
					Arity: 2,
					Flags: cmdspec.Loading | cmdspec.Stale,
					Run:   cmdHelp,
				},
				{
					Name:  "info",
					Arity: -2,
					Flags: cmdspec.Loading | cmdspec.Stale,
					Run:   cmdCommandInfo,
				},
				{
					Name:  "list",
					Arity: -2,
					Flags: cmdspec.Loading | cmdspec.Stale,
					Run:   cmdCommandList,
				},
			},
		},

		// Server (server.go, docs/server.json)
		{
			Name:  "info",
			Arity: -1,
			Flags: cmdspec.Loading | cmdspec.Stale,
			Run:   cmdInfo,
		},
		{
			Name:  "config",
			Arity: -2,
			Sub: []*command{
				{
					Name:  "get",
					Arity: -3,
					Flags: cmdspec.Admin | cmdspec.NoScript | cmdspec.Loading | cmdspec.Stale,
					Run:   cmdConfigGet,
				},
				{
					Name:  "help",
					Arity: 2,
					Flags: cmdspec.Loading | cmdspec.Stale,
					Run:   cmdHelp,
				},
				{
					Name:  "resetstat",
					Arity: 2,
					Flags: cmdspec.Admin | cmdspec.NoScript | cmdspec.Loading | cmdspec.Stale,
					Run:   cmdConfigResetStat,
				},
				{
					Name:  "rewrite",
					Arity: 2,
					Flags: cmdspec.Admin | cmdspec.NoScript | cmdspec.Loading | cmdspec.Stale | cmdspec.MayWait,
					Run:   cmdConfigRewrite,
				},
				{
					Name:  "set",
					Arity: -4,
					Flags: cmdspec.Admin | cmdspec.NoScript | cmdspec.Loading | cmdspec.Stale | cmdspec.MayWait,
					Run:   cmdConfigSet,
				},
			},
		},
		{
			Name:  "time",
			Arity: 1,
			Flags: cmdspec.Loading | cmdspec.Stale | cmdspec.Fast,
			Run:   cmdTime,
		},
		{
			Name:  "shutdown",
			Arity: -1,
			Flags: cmdspec.Admin | cmdspec.NoScript | cmdspec.Loading | cmdspec.Stale | cmdspec.NoMulti | cmdspec.AllowBusy | cmdspec.MayWait,
			Run:   cmdShutdown,
		},
		{
			Name:  "debug",
			Arity: -2,
			Flags: cmdspec.Admin | cmdspec.NoScript | cmdspec.Loading | cmdspec.Stale | cmdspec.Protected | cmdspec.MayWait,
			Run:   cmdDebug,
		},
		{
			Name:  "memory",
			Arity: -2,
			Sub: []*command{
				{
					Name:  "doctor",
					Arity: 2,
					Run:   cmdMemoryDoctor,
				},
				{
					Name:  "help",
					Arity: 2,
					Flags: cmdspec.Loading | cmdspec.Stale,
					Run:   cmdHelp,
				},
				{
					Name:  "malloc-stats",
					Arity: 2,
					Run:   cmdMemoryMallocStats,
				},
				{
					Name:  "purge",
					Arity: 2,
					Flags: cmdspec.MayWait,
					Run:   cmdMemoryPurge,
				},
				{
					Name:  "stats",
					Arity: 2,
					Run:   cmdMemoryStats,
				},
				{
					Name:  "usage",
					Arity: -3,
					Flags: cmdspec.ReadOnly,
					Run:   cmdMemoryUsage,
				},
			},
		},
		{
			Name:  "object",
			Arity: -2,
			Sub: []*command{
				{
					Name:  "encoding",
					Arity: 3,
					Flags: cmdspec.ReadOnly,
					Run:   cmdObjectEncoding,
				},
				{
					Name:  "freq",
					Arity: 3,
					Flags: cmdspec.ReadOnly,
					Run:   cmdObjectFreq,
				},
				{
					Name:  "help",
					Arity: 2,
					Flags: cmdspec.Loading | cmdspec.Stale,
					Run:   cmdHelp,
				},
				{
					Name:  "idletime",
					Arity: 3,
					Flags: cmdspec.ReadOnly,
					Run:   cmdObjectIdleTime,
				},
				{
					Name:  "refcount",
					Arity: 3,
					Flags: cmdspec.ReadOnly,
					Run:   cmdObjectRefCount,
				},
			},
		},
		// Slow log (slowlog.go, docs/slowlog.json)
		{
			Name:  "slowlog",
			Arity: -2,
			Sub: []*command{
				{
					Name:  "get",
					Arity: -2,
					Flags: cmdspec.Admin | cmdspec.Loading | cmdspec.Stale,
					Run:   cmdSlowlogGet,
				},
				{
					Name:  "help",
					Arity: 2,
					Flags: cmdspec.Loading | cmdspec.Stale,
					Run:   cmdHelp,
				},
				{
					Name:  "len",
					Arity: 2,
					Flags: cmdspec.Admin | cmdspec.Loading | cmdspec.Stale,
					Run:   cmdSlowlogLen,
				},
				{
					Name:  "reset",
					Arity: 2,
					Flags: cmdspec.Admin | cmdspec.Loading | cmdspec.Stale,
					Run:   cmdSlowlogReset,
				},
			},
		},

		// Latency monitor (latency.go, docs/latency.json)
		{
			Name:  "latency",
			Arity: -2,
			Sub: []*command{
				{
					Name:  "doctor",
					Arity: 2,
					Flags: cmdspec.Admin | cmdspec.NoScript | cmdspec.Loading | cmdspec.Stale,
					Run:   cmdLatencyDoctor,
				},
				{
					Name:  "graph",
					Arity: 3,
					Flags: cmdspec.Admin | cmdspec.NoScript | cmdspec.Loading | cmdspec.Stale,
					Run:   cmdLatencyGraph,
				},
				{
					Name:  "help",
					Arity: 2,
					Flags: cmdspec.Loading | cmdspec.Stale,
					Run:   cmdHelp,
				},
				{
					Name:  "histogram",
					Arity: -2,
					Flags: cmdspec.Admin | cmdspec.NoScript | cmdspec.Loading | cmdspec.Stale,
					Run:   cmdLatencyHistogram,
				},
				{
					Name:  "history",
					Arity: 3,
					Flags: cmdspec.Admin | cmdspec.NoScript | cmdspec.Loading | cmdspec.Stale,
					Run:   cmdLatencyHistory,
				},
				{
					Name:  "latest",
					Arity: 2,
					Flags: cmdspec.Admin | cmdspec.NoScript | cmdspec.Loading | cmdspec.Stale,
					Run:   cmdLatencyLatest,
				},
				{
					Name:  "reset",
					Arity: -2,
					Flags: cmdspec.Admin | cmdspec.NoScript | cmdspec.Loading | cmdspec.Stale,
					Run:   cmdLatencyReset,
				},
			},
		},

		// Persistence (persistence.go, docs/persistence.json)
		{
			Name:  "save",
			Arity: 1,
			Flags: cmdspec.Admin | cmdspec.NoScript | cmdspec.NoAsyncLoading | cmdspec.NoMulti,
			Run:   cmdSave,
		},
		{
			Name:  "bgsave",
			Arity: -1,
			Flags: cmdspec.Admin | cmdspec.NoScript | cmdspec.NoAsyncLoading,
			Run:   cmdBgSave,
		},
		{
			Name:  "lastsave",
			Arity: 1,
			Flags: cmdspec.Loading | cmdspec.Stale | cmdspec.Fast,
			Run:   cmdLastSave,
		},

		// Replication (replication.go, docs/replication.json)
		{
			Name:  "replicaof",
			Arity: 3,
			Flags: cmdspec.Admin | cmdspec.NoScript | cmdspec.Stale | cmdspec.NoAsyncLoading | cmdspec.MayWait,
			Run:   cmdReplicaOf,
		},
		{
			Name:  "slaveof",
			Arity: 3,
			Flags: cmdspec.Admin | cmdspec.NoScript | cmdspec.Stale | cmdspec.NoAsyncLoading | cmdspec.MayWait,
			Run:   cmdReplicaOf,
		},
		{
			Name:  "role",
			Arity: 1,
			Flags: cmdspec.NoScript | cmdspec.Loading | cmdspec.Stale | cmdspec.Fast,
			Run:   cmdRole,
		},
		{
			Name:  "replconf",
			Arity: -1,
			Flags: cmdspec.Admin | cmdspec.NoScript | cmdspec.Loading | cmdspec.Stale | cmdspec.AllowBusy,
			Run:   cmdReplConf,
		},
		{
			Name:  "psync",
			Arity: -3,
			Flags: cmdspec.Admin | cmdspec.NoScript | cmdspec.NoAsyncLoading | cmdspec.NoMulti | cmdspec.MayWait,
			Run:   cmdSync,
		},
		{
			Name:  "sync",
			Arity: 1,
			Flags: cmdspec.Admin | cmdspec.NoScript | cmdspec.NoAsyncLoading | cmdspec.NoMulti | cmdspec.MayWait,
			Run:   cmdSync,
		},
		{
			Name:  "wait",
			Arity: 3,
			Flags: cmdspec.NoScript | cmdspec.MayWait,
			Run:   cmdWait,
		},

		// Transactions (tx.go, docs/tx.json)
		{
			Name:  "multi",
			Arity: 1,
			Flags: cmdspec.NoScript | cmdspec.Loading | cmdspec.Stale | cmdspec.Fast | cmdspec.AllowBusy,
			Run:   cmdMulti,
		},
		{
			Name:  "exec",
			Arity: 1,
			Flags: cmdspec.NoScript | cmdspec.Loading | cmdspec.Stale | cmdspec.SkipSlowlog,
			Run:   cmdExec,
		},
		{
			Name:  "discard",
			Arity: 1,
			Flags: cmdspec.NoScript | cmdspec.Loading | cmdspec.Stale | cmdspec.Fast | cmdspec.AllowBusy,
			Run:   cmdDiscard,
		},
		{
			Name:  "watch",
			Arity: -2,
			Flags: cmdspec.NoScript | cmdspec.Loading | cmdspec.Stale | cmdspec.Fast | cmdspec.AllowBusy | cmdspec.SelfLock,
			Run:   cmdWatch,
		},
		{
			Name:  "unwatch",
			Arity: 1,
			Flags: cmdspec.NoScript | cmdspec.Loading | cmdspec.Stale | cmdspec.Fast | cmdspec.AllowBusy,
			Run:   cmdUnwatch,
		},

		// Lists (lists.go, docs/lists.json)
		{
			Name:  "lpush",
			Arity: -3,
			Flags: cmdspec.Write | cmdspec.DenyOOM | cmdspec.Fast | cmdspec.AsIs,
			Run:   cmdLPush,
		},
		{
			Name:  "rpush",
			Arity: -3,
			Flags: cmdspec.Write | cmdspec.DenyOOM | cmdspec.Fast | cmdspec.AsIs,
			Run:   cmdRPush,
		},
		{
			Name:  "lpushx",
			Arity: -3,
			Flags: cmdspec.Write | cmdspec.DenyOOM | cmdspec.Fast | cmdspec.AsIs,
			Run:   cmdLPushX,
		},
		{
			Name:  "rpushx",
			Arity: -3,
			Flags: cmdspec.Write | cmdspec.DenyOOM | cmdspec.Fast | cmdspec.AsIs,
			Run:   cmdRPushX,
		},
		{
			Name:  "lpop",
			Arity: -2,
			Flags: cmdspec.Write | cmdspec.Fast | cmdspec.AsIs,
			Run:   cmdLPop,
		},
		{
			Name:  "rpop",
			Arity: -2,
			Flags: cmdspec.Write | cmdspec.Fast | cmdspec.AsIs,
			Run:   cmdRPop,
		},
		{
			Name:  "lindex",
			Arity: 3,
			Flags: cmdspec.ReadOnly,
			Run:   cmdLIndex,
		},
		{
			Name:  "llen",
			Arity: 2,
			Flags: cmdspec.ReadOnly | cmdspec.Fast,
			Run:   cmdLLen,
		},
		{
			Name:  "lrange",
			Arity: 4,
			Flags: cmdspec.ReadOnly,
			Run:   cmdLRange,
		},
		{
			Name:  "ltrim",
			Arity: 4,
			Flags: cmdspec.Write | cmdspec.AsIs,
			Run:   cmdLTrim,
		},
		{
			Name:  "lset",
			Arity: 4,
			Flags: cmdspec.Write | cmdspec.DenyOOM | cmdspec.AsIs,
			Run:   cmdLSet,
		},
		{
			Name:  "lrem",
			Arity: 4,
			Flags: cmdspec.Write | cmdspec.AsIs,
			Run:   cmdLRem,
		},
		{
			Name:  "linsert",
			Arity: 5,
			Flags: cmdspec.Write | cmdspec.DenyOOM | cmdspec.AsIs,
			Run:   cmdLInsert,
		},
		{
			Name:  "lpos",
			Arity: -3,
			Flags: cmdspec.ReadOnly,
			Run:   cmdLPos,
		},
		{
			Name:  "lmove",
			Arity: 5,
			Flags: cmdspec.Write | cmdspec.DenyOOM | cmdspec.AsIs,
			Run:   cmdLMove,
		},
		{
			Name:  "rpoplpush",
			Arity: 3,
			Flags: cmdspec.Write | cmdspec.DenyOOM | cmdspec.AsIs,
			Run:   cmdRPopLPush,
		},

		// Hashes (hashes.go, docs/hashes.json)
		{
			Name:  "hset",
			Arity: -4,
			Flags: cmdspec.Write | cmdspec.DenyOOM | cmdspec.Fast | cmdspec.AsIs,
			Run:   cmdHSet,
		},
		{
			Name:  "hsetnx",
			Arity: 4,
			Flags: cmdspec.Write | cmdspec.DenyOOM | cmdspec.Fast | cmdspec.AsIs,
			Run:   cmdHSetNX,
		},
		{
			Name:  "hget",
			Arity: 3,
			Flags: cmdspec.ReadOnly | cmdspec.Fast,
			Run:   cmdHGet,
		},
		{
			Name:  "hmget",
			Arity: -3,
			Flags: cmdspec.ReadOnly | cmdspec.Fast,
			Run:   cmdHMGet,
		},
		{
			Name:  "hmset",
			Arity: -4,
			Flags: cmdspec.Write | cmdspec.DenyOOM | cmdspec.Fast | cmdspec.AsIs,
			Run:   cmdHMSet,
		},
		{
			Name:  "hdel",
			Arity: -3,
			Flags: cmdspec.Write | cmdspec.Fast | cmdspec.AsIs,
			Run:   cmdHDel,
		},
		{
			Name:  "hexists",
			Arity: 3,
			Flags: cmdspec.ReadOnly | cmdspec.Fast,
			Run:   cmdHExists,
		},
		{
			Name:  "hlen",
			Arity: 2,
			Flags: cmdspec.ReadOnly | cmdspec.Fast,
			Run:   cmdHLen,
		},
		{
			Name:  "hstrlen",
			Arity: 3,
			Flags: cmdspec.ReadOnly | cmdspec.Fast,
			Run:   cmdHStrLen,
		},
		{
			Name:  "hgetall",
			Arity: 2,
			Flags: cmdspec.ReadOnly,
			Run:   cmdHGetAll,
		},
		{
			Name:  "hkeys",
			Arity: 2,
			Flags: cmdspec.ReadOnly,
			Run:   cmdHKeys,
		},
		{
			Name:  "hvals",
			Arity: 2,
			Flags: cmdspec.ReadOnly,
			Run:   cmdHVals,
		},
		{
			Name:  "hincrby",
			Arity: 4,
			Flags: cmdspec.Write | cmdspec.DenyOOM | cmdspec.Fast | cmdspec.AsIs,
			Run:   cmdHIncrBy,
		},
		{
			Name:  "hincrbyfloat",
			Arity: 4,
			Flags: cmdspec.Write | cmdspec.DenyOOM | cmdspec.Fast | cmdspec.AsIs,
			Run:   cmdHIncrByFloat,
		},
		{
			Name:  "hscan",
			Arity: -3,
			Flags: cmdspec.ReadOnly,
			Run:   cmdHScan,
		},

		// Bitmaps (bitmaps.go, docs/bitmaps.json)
		{
			Name:  "setbit",
			Arity: 4,
			Flags: cmdspec.Write | cmdspec.DenyOOM | cmdspec.AsIs,
			Run:   cmdSetBit,
		},
		{
			Name:  "getbit",
			Arity: 3,
			Flags: cmdspec.ReadOnly | cmdspec.Fast,
			Run:   cmdGetBit,
		},
		{
			Name:  "bitcount",
			Arity: -2,
			Flags: cmdspec.ReadOnly,
			Run:   cmdBitCount,
		},
		{
			Name:  "bitpos",
			Arity: -3,
			Flags: cmdspec.ReadOnly,
			Run:   cmdBitPos,
		},
		{
			Name:  "bitop",
			Arity: -4,
			Flags: cmdspec.Write | cmdspec.DenyOOM | cmdspec.AsIs,
			Run:   cmdBitOp,
		},

		// SORT (sort.go, docs/sort.json): key functions find the STORE key,
		// and BY and GET patterns lock every shard.
		{
			Name:    "sort",
			Arity:   -2,
			Flags:   cmdspec.Write | cmdspec.DenyOOM | cmdspec.MayWait,
			Run:     cmdSort,
			Keys:    sortKeys,
			LockAll: sortReadsPatterns(false),
		},
		{
			Name:    "sort_ro",
			Arity:   -2,
			Flags:   cmdspec.ReadOnly | cmdspec.MayWait,
			Run:     cmdSortRO,
			Keys:    sortROKeys,
			LockAll: sortReadsPatterns(true),
		},

		// BITFIELD (bitfield.go, docs/bitfield.json)
		{
			Name:     "bitfield",
			Arity:    -2,
			Flags:    cmdspec.Write | cmdspec.DenyOOM | cmdspec.AsIs,
			Run:      cmdBitfield,
			KeyFlags: bitfieldKeyFlags,
		},
		{
			Name:  "bitfield_ro",
			Arity: -2,
			Flags: cmdspec.ReadOnly | cmdspec.Fast,
			Run:   cmdBitfieldRO,
		},

		// HyperLogLog (hll.go, docs/hll.json)
		{
			Name:  "pfadd",
			Arity: -2,
			Flags: cmdspec.Write | cmdspec.DenyOOM | cmdspec.Fast | cmdspec.AsIs,
			Run:   cmdPFAdd,
		},
		{
			Name:  "pfcount",
			Arity: -2,
			Flags: cmdspec.ReadOnly | cmdspec.MayReplicate | cmdspec.AsIs,
			Run:   cmdPFCount,
		},
		{
			Name:  "pfmerge",
			Arity: -2,
			Flags: cmdspec.Write | cmdspec.DenyOOM | cmdspec.AsIs,
			Run:   cmdPFMerge,
		},

		// Sorted sets (zsets.go, docs/zsets.json)
		{
			Name:  "zadd",
			Arity: -4,
			Flags: cmdspec.Write | cmdspec.DenyOOM | cmdspec.Fast | cmdspec.AsIs,
			Run:   cmdZAdd,
		},
		{
			Name:  "zrem",
			Arity: -3,
			Flags: cmdspec.Write | cmdspec.Fast | cmdspec.AsIs,
			Run:   cmdZRem,
		},
		{
			Name:  "zcard",
			Arity: 2,
			Flags: cmdspec.ReadOnly | cmdspec.Fast,
			Run:   cmdZCard,
		},
		{
			Name:  "zcount",
			Arity: 4,
			Flags: cmdspec.ReadOnly | cmdspec.Fast,
			Run:   cmdZCount,
		},
		{
			Name:  "zscore",
			Arity: 3,
			Flags: cmdspec.ReadOnly | cmdspec.Fast,
			Run:   cmdZScore,
		},
		{
			Name:  "zmscore",
			Arity: -3,
			Flags: cmdspec.ReadOnly | cmdspec.Fast,
			Run:   cmdZMScore,
		},
		{
			Name:  "zincrby",
			Arity: 4,
			Flags: cmdspec.Write | cmdspec.DenyOOM | cmdspec.Fast | cmdspec.AsIs,
			Run:   cmdZIncrBy,
		},
		{
			Name:  "zrank",
			Arity: 3,
			Flags: cmdspec.ReadOnly | cmdspec.Fast,
			Run:   cmdZRank,
		},
		{
			Name:  "zrevrank",
			Arity: 3,
			Flags: cmdspec.ReadOnly | cmdspec.Fast,
			Run:   cmdZRevRank,
		},
		{
			Name:  "zrange",
			Arity: -4,
			Flags: cmdspec.ReadOnly,
			Run:   cmdZRange,
		},
		{
			Name:  "zrangebyscore",
			Arity: -4,
			Flags: cmdspec.ReadOnly,
			Run:   cmdZRangeByScore,
		},
		{
			Name:  "zrevrangebyscore",
			Arity: -4,
			Flags: cmdspec.ReadOnly,
			Run:   cmdZRevRangeByScore,
		},
		{
			Name:  "zrevrange",
			Arity: -4,
			Flags: cmdspec.ReadOnly,
			Run:   cmdZRevRange,
		},
		{
			Name:  "zrangebylex",
			Arity: -4,
			Flags: cmdspec.ReadOnly,
			Run:   cmdZRangeByLex,
		},
		{
			Name:  "zrevrangebylex",
			Arity: -4,
			Flags: cmdspec.ReadOnly,
			Run:   cmdZRevRangeByLex,
		},
		{
			Name:  "zlexcount",
			Arity: 4,
			Flags: cmdspec.ReadOnly | cmdspec.Fast,
			Run:   cmdZLexCount,
		},
		{
			Name:  "zremrangebyscore",
			Arity: 4,
			Flags: cmdspec.Write | cmdspec.AsIs,
			Run:   cmdZRemRangeByScore,
		},
		{
			Name:  "zremrangebyrank",
			Arity: 4,
			Flags: cmdspec.Write | cmdspec.AsIs,
			Run:   cmdZRemRangeByRank,
		},
		{
			Name:  "zremrangebylex",
			Arity: 4,
			Flags: cmdspec.Write | cmdspec.AsIs,
			Run:   cmdZRemRangeByLex,
		},
		{
			Name:  "zpopmin",
			Arity: -2,
			Flags: cmdspec.Write | cmdspec.Fast | cmdspec.AsIs,
			Run:   cmdZPopMin,
		},
		{
			Name:  "zpopmax",
			Arity: -2,
			Flags: cmdspec.Write | cmdspec.Fast | cmdspec.AsIs,
			Run:   cmdZPopMax,
		},
		{
			Name:  "zscan",
			Arity: -3,
			Flags: cmdspec.ReadOnly,
			Run:   cmdZScan,
		},

		// Sets (sets.go, docs/sets.json). SPOP is AsIs but replicates the
		// SREM (or DEL) of what it chose, not itself (Ctx.replicateAs).
		{
			Name:  "sadd",
			Arity: -3,
			Flags: cmdspec.Write | cmdspec.DenyOOM | cmdspec.Fast | cmdspec.AsIs,
			Run:   cmdSAdd,
		},
		{
			Name:  "srem",
			Arity: -3,
			Flags: cmdspec.Write | cmdspec.Fast | cmdspec.AsIs,
			Run:   cmdSRem,
		},
		{
			Name:  "scard",
			Arity: 2,
			Flags: cmdspec.ReadOnly | cmdspec.Fast,
			Run:   cmdSCard,
		},
		{
			Name:  "sismember",
			Arity: 3,
			Flags: cmdspec.ReadOnly | cmdspec.Fast,
			Run:   cmdSIsMember,
		},
		{
			Name:  "smismember",
			Arity: -3,
			Flags: cmdspec.ReadOnly | cmdspec.Fast,
			Run:   cmdSMIsMember,
		},
		{
			Name:  "smembers",
			Arity: 2,
			Flags: cmdspec.ReadOnly,
			Run:   cmdSMembers,
		},
		{
			Name:  "srandmember",
			Arity: -2,
			Flags: cmdspec.ReadOnly,
			Run:   cmdSRandMember,
		},
		{
			Name:  "spop",
			Arity: -2,
			Flags: cmdspec.Write | cmdspec.Fast | cmdspec.AsIs,
			Run:   cmdSPop,
		},
		{
			Name:  "smove",
			Arity: 4,
			Flags: cmdspec.Write | cmdspec.Fast | cmdspec.AsIs,
			Run:   cmdSMove,
		},
		{
			Name:  "sscan",
			Arity: -3,
			Flags: cmdspec.ReadOnly,
			Run:   cmdSScan,
		},
		{
			Name:  "sdiff",
			Arity: -2,
			Flags: cmdspec.ReadOnly,
			Run:   cmdSDiff,
		},
		{
			Name:  "sinter",
			Arity: -2,
			Flags: cmdspec.ReadOnly,
			Run:   cmdSInter,
		},
		{
			Name:  "sunion",
			Arity: -2,
			Flags: cmdspec.ReadOnly,
			Run:   cmdSUnion,
		},
		{
			Name:  "sdiffstore",
			Arity: -3,
			Flags: cmdspec.Write | cmdspec.DenyOOM | cmdspec.AsIs,
			Run:   cmdSDiffStore,
		},
		{
			Name:  "sinterstore",
			Arity: -3,
			Flags: cmdspec.Write | cmdspec.DenyOOM | cmdspec.AsIs,
			Run:   cmdSInterStore,
		},
		{
			Name:  "sunionstore",
			Arity: -3,
			Flags: cmdspec.Write | cmdspec.DenyOOM | cmdspec.AsIs,
			Run:   cmdSUnionStore,
		},
		{
			Name:  "sintercard",
			Arity: -3,
			Flags: cmdspec.ReadOnly,
			Run:   cmdSInterCard,
		},

		// Sorted-set algebra and random members (zalgebra.go,
		// docs/zalgebra.json); HRANDFIELD shares ZRANDMEMBER's rules.
		{
			Name:  "zunion",
			Arity: -3,
			Flags: cmdspec.ReadOnly,
			Run:   cmdZUnion,
		},
		{
			Name:  "zinter",
			Arity: -3,
			Flags: cmdspec.ReadOnly,
			Run:   cmdZInter,
		},
		{
			Name:  "zdiff",
			Arity: -3,
			Flags: cmdspec.ReadOnly,
			Run:   cmdZDiff,
		},
		{
			Name:  "zunionstore",
			Arity: -4,
			Flags: cmdspec.Write | cmdspec.DenyOOM | cmdspec.AsIs,
			Run:   cmdZUnionStore,
		},
		{
			Name:  "zinterstore",
			Arity: -4,
			Flags: cmdspec.Write | cmdspec.DenyOOM | cmdspec.AsIs,
			Run:   cmdZInterStore,
		},
		{
			Name:  "zdiffstore",
			Arity: -4,
			Flags: cmdspec.Write | cmdspec.DenyOOM | cmdspec.AsIs,
			Run:   cmdZDiffStore,
		},
		{
			Name:  "zintercard",
			Arity: -3,
			Flags: cmdspec.ReadOnly,
			Run:   cmdZInterCard,
		},
		{
			Name:  "zrangestore",
			Arity: -5,
			Flags: cmdspec.Write | cmdspec.DenyOOM | cmdspec.AsIs,
			Run:   cmdZRangeStore,
		},
		{
			Name:  "zrandmember",
			Arity: -2,
			Flags: cmdspec.ReadOnly,
			Run:   cmdZRandMember,
		},
		{
			Name:  "hrandfield",
			Arity: -2,
			Flags: cmdspec.ReadOnly,
			Run:   cmdHRandField,
		},

		// Geo, on sorted sets (geo.go, docs/geo.json)
		{
			Name:  "geoadd",
			Arity: -5,
			Flags: cmdspec.Write | cmdspec.DenyOOM | cmdspec.AsIs,
			Run:   cmdGeoAdd,
		},
		{
			Name:  "geopos",
			Arity: -2,
			Flags: cmdspec.ReadOnly,
			Run:   cmdGeoPos,
		},
		{
			Name:  "geodist",
			Arity: -4,
			Flags: cmdspec.ReadOnly,
			Run:   cmdGeoDist,
		},
		{
			Name:  "geohash",
			Arity: -2,
			Flags: cmdspec.ReadOnly,
			Run:   cmdGeoHash,
		},
		{
			Name:  "geosearch",
			Arity: -7,
			Flags: cmdspec.ReadOnly,
			Run:   cmdGeoSearch,
		},
		{
			Name:  "geosearchstore",
			Arity: -8,
			Flags: cmdspec.Write | cmdspec.DenyOOM | cmdspec.AsIs,
			Run:   cmdGeoSearchStore,
		},
		{
			Name:  "georadius",
			Arity: -6,
			Flags: cmdspec.Write | cmdspec.DenyOOM | cmdspec.AsIs,
			Run:   cmdGeoRadius,
		},
		{
			Name:  "georadius_ro",
			Arity: -6,
			Flags: cmdspec.ReadOnly,
			Run:   cmdGeoRadiusRO,
		},
		{
			Name:  "georadiusbymember",
			Arity: -5,
			Flags: cmdspec.Write | cmdspec.DenyOOM | cmdspec.AsIs,
			Run:   cmdGeoRadiusByMember,
		},
		{
			Name:  "georadiusbymember_ro",
			Arity: -5,
			Flags: cmdspec.ReadOnly,
			Run:   cmdGeoRadiusByMemberRO,
		},

		// Blocking pops and the multi-key pops (blocking.go,
		// docs/blocking.json); CLIENT PAUSE, UNPAUSE, UNBLOCK and NO-EVICT
		// are under CLIENT, their handlers in blocking.go and pause.go.
		{
			Name:  "blpop",
			Arity: -3,
			Flags: cmdspec.Write | cmdspec.NoScript | cmdspec.Blocking,
			Run:   cmdBLPop,
		},
		{
			Name:  "brpop",
			Arity: -3,
			Flags: cmdspec.Write | cmdspec.NoScript | cmdspec.Blocking,
			Run:   cmdBRPop,
		},
		{
			Name:  "brpoplpush",
			Arity: 4,
			Flags: cmdspec.Write | cmdspec.DenyOOM | cmdspec.NoScript | cmdspec.Blocking,
			Run:   cmdBRPopLPush,
		},
		{
			Name:  "blmove",
			Arity: 6,
			Flags: cmdspec.Write | cmdspec.DenyOOM | cmdspec.NoScript | cmdspec.Blocking,
			Run:   cmdBLMove,
		},
		{
			Name:  "blmpop",
			Arity: -5,
			Flags: cmdspec.Write | cmdspec.Blocking,
			Run:   cmdBLMPop,
		},
		{
			Name:  "lmpop",
			Arity: -4,
			Flags: cmdspec.Write,
			Run:   cmdLMPop,
		},
		{
			Name:  "bzpopmin",
			Arity: -3,
			Flags: cmdspec.Write | cmdspec.NoScript | cmdspec.Fast | cmdspec.Blocking,
			Run:   cmdBZPopMin,
		},
		{
			Name:  "bzpopmax",
			Arity: -3,
			Flags: cmdspec.Write | cmdspec.NoScript | cmdspec.Fast | cmdspec.Blocking,
			Run:   cmdBZPopMax,
		},
		{
			Name:  "bzmpop",
			Arity: -5,
			Flags: cmdspec.Write | cmdspec.Blocking,
			Run:   cmdBZMPop,
		},
		{
			Name:  "zmpop",
			Arity: -4,
			Flags: cmdspec.Write,
			Run:   cmdZMPop,
		},

		// Functions (functions.go, docs/functions.json)
		{
			Name:  "fcall",
			Arity: -3,
			Flags: cmdspec.NoScript | cmdspec.Stale | cmdspec.SkipMonitor | cmdspec.NoMandatoryKeys | cmdspec.MayReplicate | cmdspec.SelfLock | cmdspec.RunsScript,
			Run:   cmdFCall,
		},
		{
			Name:  "fcall_ro",
			Arity: -3,
			Flags: cmdspec.ReadOnly | cmdspec.NoScript | cmdspec.Stale | cmdspec.SkipMonitor | cmdspec.NoMandatoryKeys | cmdspec.SelfLock | cmdspec.RunsScript,
			Run:   cmdFCallRO,
		},
		{
			Name:  "function",
			Arity: -2,
			Sub: []*command{
				{
					Name:  "delete",
					Arity: 3,
					Flags: cmdspec.Write | cmdspec.NoScript | cmdspec.SelfLock,
					Run:   cmdFunctionDelete,
				},
				{
					Name:  "dump",
					Arity: 2,
					Flags: cmdspec.NoScript,
					Run:   cmdFunctionDump,
				},
				{
					Name:  "flush",
					Arity: -2,
					Flags: cmdspec.Write | cmdspec.NoScript | cmdspec.SelfLock,
					Run:   cmdFunctionFlush,
				},
				{
					Name:  "help",
					Arity: 2,
					Flags: cmdspec.Loading | cmdspec.Stale,
					Run:   cmdHelp,
				},
				{
					Name:  "kill",
					Arity: 2,
					Flags: cmdspec.NoScript | cmdspec.AllowBusy,
					Run:   cmdFunctionKill,
				},
				{
					Name:  "list",
					Arity: -2,
					Flags: cmdspec.NoScript,
					Run:   cmdFunctionList,
				},
				{
					Name:  "load",
					Arity: -3,
					Flags: cmdspec.Write | cmdspec.DenyOOM | cmdspec.NoScript | cmdspec.SelfLock | cmdspec.MayWait,
					Run:   cmdFunctionLoad,
				},
				{
					Name:  "restore",
					Arity: -3,
					Flags: cmdspec.Write | cmdspec.DenyOOM | cmdspec.NoScript | cmdspec.SelfLock | cmdspec.MayWait,
					Run:   cmdFunctionRestore,
				},
				{
					Name:  "stats",
					Arity: 2,
					Flags: cmdspec.NoScript | cmdspec.AllowBusy,
					Run:   cmdFunctionStats,
				},
			},
		},

		// Scripting (scripting.go, docs/scripting.json)
		{
			Name:  "eval",
			Arity: -3,
			Flags: cmdspec.NoScript | cmdspec.Stale | cmdspec.SkipMonitor | cmdspec.NoMandatoryKeys | cmdspec.MayReplicate | cmdspec.SelfLock | cmdspec.RunsScript,
			Run:   cmdEval,
		},
		{
			Name:  "evalsha",
			Arity: -3,
			Flags: cmdspec.NoScript | cmdspec.Stale | cmdspec.SkipMonitor | cmdspec.NoMandatoryKeys | cmdspec.MayReplicate | cmdspec.SelfLock | cmdspec.RunsScript,
			Run:   cmdEvalSha,
		},
		{
			Name:  "eval_ro",
			Arity: -3,
			Flags: cmdspec.ReadOnly | cmdspec.NoScript | cmdspec.Stale | cmdspec.SkipMonitor | cmdspec.NoMandatoryKeys | cmdspec.SelfLock | cmdspec.RunsScript,
			Run:   cmdEvalRO,
		},
		{
			Name:  "evalsha_ro",
			Arity: -3,
			Flags: cmdspec.ReadOnly | cmdspec.NoScript | cmdspec.Stale | cmdspec.SkipMonitor | cmdspec.NoMandatoryKeys | cmdspec.SelfLock | cmdspec.RunsScript,
			Run:   cmdEvalShaRO,
		},
		{
			Name:  "script",
			Arity: -2,
			Sub: []*command{
				{
					Name:  "debug",
					Arity: 3,
					Flags: cmdspec.NoScript,
					Run:   cmdScriptDebug,
				},
				{
					Name:  "exists",
					Arity: -3,
					Flags: cmdspec.NoScript,
					Run:   cmdScriptExists,
				},
				{
					Name:  "flush",
					Arity: -2,
					Flags: cmdspec.NoScript,
					Run:   cmdScriptFlush,
				},
				{
					Name:  "help",
					Arity: 2,
					Flags: cmdspec.Loading | cmdspec.Stale,
					Run:   cmdHelp,
				},
				{
					Name:  "kill",
					Arity: 2,
					Flags: cmdspec.NoScript | cmdspec.AllowBusy,
					Run:   cmdScriptKill,
				},
				{
					Name:  "load",
					Arity: 3,
					Flags: cmdspec.NoScript | cmdspec.Stale,
					Run:   cmdScriptLoad,
				},
			},
		},
	}
}
