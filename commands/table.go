package commands

// commandTable is the one list of every command limitkv serves. A row
// states what Go code needs: name, arity, flags and handler (subcommands
// nest under Sub). What Redis publishes about a command (summary,
// complexity, since, group, arguments, key specs, the ACL categories its
// flags do not imply, tips, history) is its entry in the data files
// commands/docs/<family>.json, which NewTable loads; docs.go describes
// them. Rows are grouped by the file of their handlers, and each group's
// data is in the data file of the same name. Arity, flags, key specs, ACL
// categories and documentation follow Redis 7.0 for the commands Redis has.
//
// From the rows and the data come dispatch, the arity check, COMMAND and
// its subcommands (COMMAND DOCS is where redis-cli finds its hints), the
// legacy key range and movablekeys flag (from the key specs) and the full
// ACL categories (from the flags), and docs/command-list.md's command list
// (CommandList; TestDocsCommandList). docs/commands.md is written by hand.
//
// To add a command: one row here plus its entry in commands/docs/<family>.json.
// Then record the new replies with
//
//	go test ./commands -run 'TestCommandGolden|TestDocsCommandList' -update
//
// docs/architecture.md's "Adding a command" has every step, tests included.
func commandTable() []*Spec {
	return []*Spec{
		// Rate limiting (ratelimit.go, docs/ratelimit.json), limitkv's own;
		// CL.THROTTLE follows the redis-cell module, which registers it like
		// this.
		{
			Name:    "rl.fixed",
			Arity:   -4,
			Flags:   Write | DenyOOM | Fast,
			Prepare: prepareRLFixed,
			Run:     cmdRLFixed,
		},
		{
			Name:    "rl.fixed_ro",
			Arity:   -4,
			Flags:   ReadOnly | Fast,
			Prepare: prepareRLFixed,
			Run:     cmdRLFixedRO,
		},
		{
			Name:    "rl.slide",
			Arity:   -4,
			Flags:   Write | DenyOOM | Fast,
			Prepare: prepareRLSlide,
			Run:     cmdRLSlide,
		},
		{
			Name:    "rl.slide_ro",
			Arity:   -4,
			Flags:   ReadOnly | Fast,
			Prepare: prepareRLSlide,
			Run:     cmdRLSlideRO,
		},
		{
			Name:  "rl.login",
			Arity: -4,
			Flags: Write | DenyOOM | Fast,
			Run:   cmdRLLogin,
		},
		{
			Name:  "cl.throttle",
			Arity: -1,
			Flags: Write | DenyOOM | Fast,
			Run:   cmdCLThrottle,
		},
		{
			Name:  "cl.throttle_ro",
			Arity: -1,
			Flags: ReadOnly | Fast,
			Run:   cmdCLThrottleRO,
		},
		{
			Name:  "rl.acquire",
			Arity: -5,
			Flags: Write | DenyOOM | Fast,
			Run:   cmdRLAcquire,
		},
		{
			Name:  "rl.acquire_ro",
			Arity: -4,
			Flags: ReadOnly | Fast,
			Run:   cmdRLAcquireRO,
		},
		{
			Name:  "rl.release",
			Arity: 3,
			Flags: Write | Fast,
			Run:   cmdRLRelease,
		},
		// Named policies (policy.go). RL.POLICY SET and DEL change every
		// application's limits: they are @admin and @dangerous as well as
		// @ratelimit, so that "+@ratelimit -@admin" lets a user apply
		// policies with RL.CHECK and read them without redefining them.
		{
			Name:    "rl.check",
			Arity:   -3,
			Flags:   Write | DenyOOM | Fast,
			Prepare: prepareRLCheck,
			Run:     cmdRLCheck,
		},
		{
			Name:    "rl.check_ro",
			Arity:   -3,
			Flags:   ReadOnly | Fast,
			Prepare: prepareRLCheckRO,
			Run:     cmdRLCheckRO,
		},
		{
			Name:  "rl.policy",
			Arity: -2,
			Sub: []*Spec{
				{
					Name:  "del",
					Arity: 3,
					Flags: Write | Admin | Fast,
					Run:   cmdPolicyDel,
				},
				{
					Name:  "get",
					Arity: 3,
					Flags: ReadOnly | Fast,
					Run:   cmdPolicyGet,
				},
				{
					Name:  "help",
					Arity: 2,
					Flags: Loading | Stale,
					Run:   cmdPolicyHelp,
				},
				{
					Name:  "list",
					Arity: -2,
					Flags: ReadOnly,
					Run:   cmdPolicyList,
				},
				{
					Name:  "set",
					Arity: -4,
					Flags: Write | Admin | DenyOOM,
					Run:   cmdPolicySet,
				},
			},
		},
		{
			Name:  "rl.top",
			Arity: -1,
			Flags: Admin | Loading | Stale,
			Run:   cmdRLTop,
		},

		// Strings (strings.go, docs/strings.json)
		{
			Name:  "get",
			Arity: 2,
			Flags: ReadOnly | Fast,
			Run:   cmdGet,
		},
		{
			Name:  "set",
			Arity: -3,
			Flags: Write | DenyOOM,
			Run:   cmdSet,
		},
		{
			Name:  "setnx",
			Arity: 3,
			Flags: Write | DenyOOM | Fast,
			Run:   cmdSetNX,
		},
		{
			Name:  "setex",
			Arity: 4,
			Flags: Write | DenyOOM,
			Run:   cmdSetEX,
		},
		{
			Name:  "psetex",
			Arity: 4,
			Flags: Write | DenyOOM,
			Run:   cmdPSetEX,
		},
		{
			Name:  "getset",
			Arity: 3,
			Flags: Write | DenyOOM | Fast,
			Run:   cmdGetSet,
		},
		{
			Name:  "getdel",
			Arity: 2,
			Flags: Write | Fast,
			Run:   cmdGetDel,
		},
		{
			Name:  "getex",
			Arity: -2,
			Flags: Write | Fast | TTLOnly,
			Run:   cmdGetEx,
		},
		{
			Name:  "mget",
			Arity: -2,
			Flags: ReadOnly | Fast,
			Run:   cmdMGet,
		},
		{
			Name:  "mset",
			Arity: -3,
			Flags: Write | DenyOOM,
			Run:   cmdMSet,
		},
		{
			Name:  "msetnx",
			Arity: -3,
			Flags: Write | DenyOOM,
			Run:   cmdMSetNX,
		},
		{
			Name:  "incr",
			Arity: 2,
			Flags: Write | DenyOOM | Fast | AsIs,
			Run:   cmdIncr,
		},
		{
			Name:  "decr",
			Arity: 2,
			Flags: Write | DenyOOM | Fast | AsIs,
			Run:   cmdDecr,
		},
		{
			Name:  "incrby",
			Arity: 3,
			Flags: Write | DenyOOM | Fast | AsIs,
			Run:   cmdIncrBy,
		},
		{
			Name:  "decrby",
			Arity: 3,
			Flags: Write | DenyOOM | Fast | AsIs,
			Run:   cmdDecrBy,
		},
		{
			Name:  "incrbyfloat",
			Arity: 3,
			Flags: Write | DenyOOM | Fast,
			Run:   cmdIncrByFloat,
		},
		{
			Name:  "append",
			Arity: 3,
			Flags: Write | DenyOOM | Fast | AsIs,
			Run:   cmdAppend,
		},
		{
			Name:  "strlen",
			Arity: 2,
			Flags: ReadOnly | Fast,
			Run:   cmdStrLen,
		},
		{
			Name:  "getrange",
			Arity: 4,
			Flags: ReadOnly,
			Run:   cmdGetRange,
		},
		{
			Name:  "setrange",
			Arity: 4,
			Flags: Write | DenyOOM | AsIs,
			Run:   cmdSetRange,
		},

		// Keyspace (keys.go, docs/keys.json)
		{
			Name:  "del",
			Arity: -2,
			Flags: Write,
			Run:   cmdDel,
		},
		{
			Name:  "unlink",
			Arity: -2,
			Flags: Write | Fast,
			Run:   cmdDel,
		},
		{
			Name:  "exists",
			Arity: -2,
			Flags: ReadOnly | Fast,
			Run:   cmdExists,
		},
		{
			Name:  "touch",
			Arity: -2,
			Flags: ReadOnly | Fast,
			Run:   cmdExists,
		},
		{
			Name:  "expire",
			Arity: -3,
			Flags: Write | Fast | TTLOnly,
			Run:   cmdExpire,
		},
		{
			Name:  "pexpire",
			Arity: -3,
			Flags: Write | Fast | TTLOnly,
			Run:   cmdPExpire,
		},
		{
			Name:  "expireat",
			Arity: -3,
			Flags: Write | Fast | TTLOnly,
			Run:   cmdExpireAt,
		},
		{
			Name:  "pexpireat",
			Arity: -3,
			Flags: Write | Fast | TTLOnly,
			Run:   cmdPExpireAt,
		},
		{
			Name:  "ttl",
			Arity: 2,
			Flags: ReadOnly | Fast,
			Run:   cmdTTL,
		},
		{
			Name:  "pttl",
			Arity: 2,
			Flags: ReadOnly | Fast,
			Run:   cmdPTTL,
		},
		{
			Name:  "expiretime",
			Arity: 2,
			Flags: ReadOnly | Fast,
			Run:   cmdExpireTime,
		},
		{
			Name:  "pexpiretime",
			Arity: 2,
			Flags: ReadOnly | Fast,
			Run:   cmdPExpireTime,
		},
		{
			Name:  "persist",
			Arity: 2,
			Flags: Write | Fast | TTLOnly,
			Run:   cmdPersist,
		},
		{
			Name:  "type",
			Arity: 2,
			Flags: ReadOnly | Fast,
			Run:   cmdType,
		},
		{
			Name:  "keys",
			Arity: 2,
			Flags: ReadOnly,
			Run:   cmdKeys,
		},
		{
			Name:  "scan",
			Arity: -2,
			Flags: ReadOnly,
			Run:   cmdScan,
		},
		{
			Name:  "randomkey",
			Arity: 1,
			Flags: ReadOnly,
			Run:   cmdRandomKey,
		},
		{
			Name:  "rename",
			Arity: 3,
			Flags: Write | AsIs,
			Run:   cmdRename,
		},
		{
			Name:  "renamenx",
			Arity: 3,
			Flags: Write | Fast | AsIs,
			Run:   cmdRenameNX,
		},
		{
			Name:  "dbsize",
			Arity: 1,
			Flags: ReadOnly | Fast,
			Run:   cmdDBSize,
		},
		{
			Name:  "flushdb",
			Arity: -1,
			Flags: Write,
			Run:   cmdFlushDB,
		},
		{
			Name:  "flushall",
			Arity: -1,
			Flags: Write,
			Run:   cmdFlushAll,
		},
		{
			Name:  "select",
			Arity: 2,
			Flags: Loading | Stale | Fast,
			Run:   cmdSelect,
		},
		{
			Name:  "swapdb",
			Arity: 3,
			Flags: Write | Fast,
			Run:   cmdSwapDB,
		},

		// Keys as values (dump.go, docs/dump.json): DUMP and RESTORE in
		// Redis's RDB format, MIGRATE, COPY, MOVE.
		{
			Name:  "dump",
			Arity: 2,
			Flags: ReadOnly,
			Run:   cmdDump,
		},
		{
			Name:  "restore",
			Arity: -4,
			Flags: Write | DenyOOM | SelfLock,
			Run:   cmdRestore,
		},
		{
			Name:  "migrate",
			Arity: -6,
			Flags: Write | SelfLock | MayWait,
			Run:   cmdMigrate,
			Keys:  migrateKeys,
		},
		{
			Name:  "copy",
			Arity: -3,
			Flags: Write | DenyOOM,
			Run:   cmdCopy,
		},
		{
			Name:  "move",
			Arity: 3,
			Flags: Write | Fast,
			Run:   cmdMove,
		},

		// LCS (lcs.go, docs/lcs.json): computed with no lock held.
		{
			Name:  "lcs",
			Arity: -3,
			Flags: ReadOnly | SelfLock | MayWait,
			Run:   cmdLCS,
		},

		// Connection (connection.go, docs/connection.json)
		{
			Name:  "ping",
			Arity: -1,
			Flags: Fast,
			Run:   cmdPing,
		},
		{
			Name:  "echo",
			Arity: 2,
			Flags: Loading | Stale | Fast,
			Run:   cmdEcho,
		},
		{
			Name:  "hello",
			Arity: -1,
			Flags: NoScript | Loading | Stale | Fast | NoAuth | AllowBusy,
			Run:   cmdHello,
		},
		{
			Name:  "auth",
			Arity: -2,
			Flags: NoScript | Loading | Stale | Fast | NoAuth | AllowBusy,
			Run:   cmdAuth,
		},
		{
			Name:  "quit",
			Arity: -1,
			Flags: NoScript | Loading | Stale | Fast | NoAuth | AllowBusy,
			Run:   cmdQuit,
		},
		{
			Name:  "reset",
			Arity: 1,
			Flags: NoScript | Loading | Stale | Fast | NoAuth | AllowBusy,
			Run:   cmdReset,
		},
		{
			Name:  "client",
			Arity: -2,
			Sub: []*Spec{
				{
					Name:  "getname",
					Arity: 2,
					Flags: NoScript | Loading | Stale,
					Run:   cmdClientGetName,
				},
				{
					Name:  "help",
					Arity: 2,
					Flags: Loading | Stale,
					Run:   cmdClientHelp,
				},
				{
					Name:  "id",
					Arity: 2,
					Flags: NoScript | Loading | Stale,
					Run:   cmdClientID,
				},
				{
					Name:  "info",
					Arity: 2,
					Flags: NoScript | Loading | Stale,
					Run:   cmdClientInfo,
				},
				{
					Name:  "kill",
					Arity: -3,
					Flags: Admin | NoScript | Loading | Stale,
					Run:   cmdClientKill,
				},
				{
					Name:  "list",
					Arity: -2,
					Flags: Admin | NoScript | Loading | Stale,
					Run:   cmdClientList,
				},
				{
					Name:  "no-evict",
					Arity: 3,
					Flags: Admin | NoScript | Loading | Stale,
					Run:   cmdClientNoEvict,
				},
				{
					Name:  "pause",
					Arity: -3,
					Flags: Admin | NoScript | Loading | Stale,
					Run:   cmdClientPause,
				},
				{
					Name:  "setname",
					Arity: 3,
					Flags: NoScript | Loading | Stale,
					Run:   cmdClientSetName,
				},
				{
					Name:  "setinfo",
					Arity: 4,
					Flags: NoScript | Loading | Stale,
					Run:   cmdClientSetInfo,
				},
				{
					Name:  "unblock",
					Arity: -3,
					Flags: Admin | NoScript | Loading | Stale,
					Run:   cmdClientUnblock,
				},
				{
					Name:  "unpause",
					Arity: 2,
					Flags: Admin | NoScript | Loading | Stale,
					Run:   cmdClientUnpause,
				},
			},
		},

		// Pub/sub (pubsub.go, docs/pubsub.json)
		{
			Name:  "publish",
			Arity: 3,
			Flags: PubSub | Loading | Stale | Fast | MayReplicate,
			Run:   cmdPublish,
		},
		{
			Name:  "subscribe",
			Arity: -2,
			Flags: PubSub | NoScript | Loading | Stale,
			Run:   cmdSubscribe,
		},
		{
			Name:  "unsubscribe",
			Arity: -1,
			Flags: PubSub | NoScript | Loading | Stale,
			Run:   cmdUnsubscribe,
		},
		{
			Name:  "psubscribe",
			Arity: -2,
			Flags: PubSub | NoScript | Loading | Stale,
			Run:   cmdPSubscribe,
		},
		{
			Name:  "punsubscribe",
			Arity: -1,
			Flags: PubSub | NoScript | Loading | Stale,
			Run:   cmdPUnsubscribe,
		},
		{
			Name:  "spublish",
			Arity: 3,
			Flags: PubSub | Loading | Stale | Fast | MayReplicate,
			Run:   cmdSPublish,
		},
		{
			Name:  "ssubscribe",
			Arity: -2,
			Flags: PubSub | NoScript | Loading | Stale,
			Run:   cmdSSubscribe,
		},
		{
			Name:  "sunsubscribe",
			Arity: -1,
			Flags: PubSub | NoScript | Loading | Stale,
			Run:   cmdSUnsubscribe,
		},
		{
			Name:  "pubsub",
			Arity: -2,
			Sub: []*Spec{
				{
					Name:  "channels",
					Arity: -2,
					Flags: PubSub | Loading | Stale,
					Run:   cmdPubsubChannels,
				},
				{
					Name:  "help",
					Arity: 2,
					Flags: Loading | Stale,
					Run:   cmdPubsubHelp,
				},
				{
					Name:  "numpat",
					Arity: 2,
					Flags: PubSub | Loading | Stale,
					Run:   cmdPubsubNumPat,
				},
				{
					Name:  "numsub",
					Arity: -2,
					Flags: PubSub | Loading | Stale,
					Run:   cmdPubsubNumSub,
				},
				{
					Name:  "shardchannels",
					Arity: -2,
					Flags: PubSub | Loading | Stale,
					Run:   cmdPubsubShardChannels,
				},
				{
					Name:  "shardnumsub",
					Arity: -2,
					Flags: PubSub | Loading | Stale,
					Run:   cmdPubsubShardNumSub,
				},
			},
		},

		// Users and permissions (acl.go, docs/acl.json)
		{
			Name:  "acl",
			Arity: -2,
			Sub: []*Spec{
				{
					Name:  "cat",
					Arity: -2,
					Flags: NoScript | Loading | Stale,
					Run:   cmdACLCat,
				},
				{
					Name:  "deluser",
					Arity: -3,
					Flags: Admin | NoScript | Loading | Stale,
					Run:   cmdACLDelUser,
				},
				{
					Name:  "dryrun",
					Arity: -4,
					Flags: Admin | NoScript | Loading | Stale,
					Run:   cmdACLDryRun,
				},
				{
					Name:  "genpass",
					Arity: -2,
					Flags: NoScript | Loading | Stale,
					Run:   cmdACLGenPass,
				},
				{
					Name:  "getuser",
					Arity: 3,
					Flags: Admin | NoScript | Loading | Stale,
					Run:   cmdACLGetUser,
				},
				{
					Name:  "help",
					Arity: 2,
					Flags: Loading | Stale,
					Run:   cmdACLHelp,
				},
				{
					Name:  "list",
					Arity: 2,
					Flags: Admin | NoScript | Loading | Stale,
					Run:   cmdACLList,
				},
				{
					Name:  "load",
					Arity: 2,
					Flags: Admin | NoScript | Loading | Stale | MayWait,
					Run:   cmdACLLoad,
				},
				{
					Name:  "log",
					Arity: -2,
					Flags: Admin | NoScript | Loading | Stale,
					Run:   cmdACLLog,
				},
				{
					Name:  "save",
					Arity: 2,
					Flags: Admin | NoScript | Loading | Stale | MayWait | MayWait,
					Run:   cmdACLSave,
				},
				{
					Name:  "setuser",
					Arity: -3,
					Flags: Admin | NoScript | Loading | Stale,
					Run:   cmdACLSetUser,
				},
				{
					Name:  "users",
					Arity: 2,
					Flags: Admin | NoScript | Loading | Stale,
					Run:   cmdACLUsers,
				},
				{
					Name:  "whoami",
					Arity: 2,
					Flags: NoScript | Loading | Stale,
					Run:   cmdACLWhoami,
				},
			},
		},

		// Introspection (command.go, docs/command.json)
		{
			Name:  "command",
			Arity: -1,
			Flags: Loading | Stale,
			Run:   cmdCommand,
			Sub: []*Spec{
				{
					Name:  "count",
					Arity: 2,
					Flags: Loading | Stale,
					Run:   cmdCommandCount,
				},
				{
					Name:  "docs",
					Arity: -2,
					Flags: Loading | Stale,
					Run:   cmdCommandDocs,
				},
				{
					Name:  "getkeys",
					Arity: -4,
					Flags: Loading | Stale,
					Run:   cmdCommandGetKeys,
				},
				{
					Name:  "getkeysandflags",
					Arity: -4,
					Flags: Loading | Stale,
					Run:   cmdCommandGetKeysAndFlags,
				},
				{
					Name:  "help",
					Arity: 2,
					Flags: Loading | Stale,
					Run:   cmdCommandHelp,
				},
				{
					Name:  "info",
					Arity: -2,
					Flags: Loading | Stale,
					Run:   cmdCommandInfo,
				},
				{
					Name:  "list",
					Arity: -2,
					Flags: Loading | Stale,
					Run:   cmdCommandList,
				},
			},
		},

		// Server (server.go, docs/server.json)
		{
			Name:  "info",
			Arity: -1,
			Flags: Loading | Stale,
			Run:   cmdInfo,
		},
		{
			Name:  "config",
			Arity: -2,
			Sub: []*Spec{
				{
					Name:  "get",
					Arity: -3,
					Flags: Admin | NoScript | Loading | Stale,
					Run:   cmdConfigGet,
				},
				{
					Name:  "help",
					Arity: 2,
					Flags: Loading | Stale,
					Run:   cmdConfigHelp,
				},
				{
					Name:  "resetstat",
					Arity: 2,
					Flags: Admin | NoScript | Loading | Stale,
					Run:   cmdConfigResetStat,
				},
				{
					Name:  "rewrite",
					Arity: 2,
					Flags: Admin | NoScript | Loading | Stale | MayWait,
					Run:   cmdConfigRewrite,
				},
				{
					Name:  "set",
					Arity: -4,
					Flags: Admin | NoScript | Loading | Stale | MayWait,
					Run:   cmdConfigSet,
				},
			},
		},
		{
			Name:  "time",
			Arity: 1,
			Flags: Loading | Stale | Fast,
			Run:   cmdTime,
		},
		{
			Name:  "shutdown",
			Arity: -1,
			Flags: Admin | NoScript | Loading | Stale | NoMulti | AllowBusy | MayWait,
			Run:   cmdShutdown,
		},
		{
			Name:  "debug",
			Arity: -2,
			Flags: Admin | NoScript | Loading | Stale | Protected | MayWait,
			Run:   cmdDebug,
		},
		{
			Name:  "memory",
			Arity: -2,
			Sub: []*Spec{
				{
					Name:  "doctor",
					Arity: 2,
					Run:   cmdMemoryDoctor,
				},
				{
					Name:  "help",
					Arity: 2,
					Flags: Loading | Stale,
					Run:   cmdMemoryHelp,
				},
				{
					Name:  "malloc-stats",
					Arity: 2,
					Run:   cmdMemoryMallocStats,
				},
				{
					Name:  "purge",
					Arity: 2,
					Flags: MayWait,
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
					Flags: ReadOnly,
					Run:   cmdMemoryUsage,
				},
			},
		},
		{
			Name:  "object",
			Arity: -2,
			Sub: []*Spec{
				{
					Name:  "encoding",
					Arity: 3,
					Flags: ReadOnly,
					Run:   cmdObjectEncoding,
				},
				{
					Name:  "freq",
					Arity: 3,
					Flags: ReadOnly,
					Run:   cmdObjectFreq,
				},
				{
					Name:  "help",
					Arity: 2,
					Flags: Loading | Stale,
					Run:   cmdObjectHelp,
				},
				{
					Name:  "idletime",
					Arity: 3,
					Flags: ReadOnly,
					Run:   cmdObjectIdleTime,
				},
				{
					Name:  "refcount",
					Arity: 3,
					Flags: ReadOnly,
					Run:   cmdObjectRefCount,
				},
			},
		},
		// Slow log (slowlog.go, docs/slowlog.json)
		{
			Name:  "slowlog",
			Arity: -2,
			Sub: []*Spec{
				{
					Name:  "get",
					Arity: -2,
					Flags: Admin | Loading | Stale,
					Run:   cmdSlowlogGet,
				},
				{
					Name:  "help",
					Arity: 2,
					Flags: Loading | Stale,
					Run:   cmdSlowlogHelp,
				},
				{
					Name:  "len",
					Arity: 2,
					Flags: Admin | Loading | Stale,
					Run:   cmdSlowlogLen,
				},
				{
					Name:  "reset",
					Arity: 2,
					Flags: Admin | Loading | Stale,
					Run:   cmdSlowlogReset,
				},
			},
		},

		// Latency monitor (latency.go, docs/latency.json)
		{
			Name:  "latency",
			Arity: -2,
			Sub: []*Spec{
				{
					Name:  "doctor",
					Arity: 2,
					Flags: Admin | NoScript | Loading | Stale,
					Run:   cmdLatencyDoctor,
				},
				{
					Name:  "graph",
					Arity: 3,
					Flags: Admin | NoScript | Loading | Stale,
					Run:   cmdLatencyGraph,
				},
				{
					Name:  "help",
					Arity: 2,
					Flags: Loading | Stale,
					Run:   cmdLatencyHelp,
				},
				{
					Name:  "histogram",
					Arity: -2,
					Flags: Admin | NoScript | Loading | Stale,
					Run:   cmdLatencyHistogram,
				},
				{
					Name:  "history",
					Arity: 3,
					Flags: Admin | NoScript | Loading | Stale,
					Run:   cmdLatencyHistory,
				},
				{
					Name:  "latest",
					Arity: 2,
					Flags: Admin | NoScript | Loading | Stale,
					Run:   cmdLatencyLatest,
				},
				{
					Name:  "reset",
					Arity: -2,
					Flags: Admin | NoScript | Loading | Stale,
					Run:   cmdLatencyReset,
				},
			},
		},

		// Persistence (persistence.go, docs/persistence.json)
		{
			Name:  "save",
			Arity: 1,
			Flags: Admin | NoScript | NoAsyncLoading | NoMulti,
			Run:   cmdSave,
		},
		{
			Name:  "bgsave",
			Arity: -1,
			Flags: Admin | NoScript | NoAsyncLoading,
			Run:   cmdBgSave,
		},
		{
			Name:  "lastsave",
			Arity: 1,
			Flags: Loading | Stale | Fast,
			Run:   cmdLastSave,
		},

		// Replication (replication.go, docs/replication.json)
		{
			Name:  "replicaof",
			Arity: 3,
			Flags: Admin | NoScript | Stale | NoAsyncLoading | MayWait,
			Run:   cmdReplicaOf,
		},
		{
			Name:  "slaveof",
			Arity: 3,
			Flags: Admin | NoScript | Stale | NoAsyncLoading | MayWait,
			Run:   cmdReplicaOf,
		},
		{
			Name:  "role",
			Arity: 1,
			Flags: NoScript | Loading | Stale | Fast,
			Run:   cmdRole,
		},
		{
			Name:  "replconf",
			Arity: -1,
			Flags: Admin | NoScript | Loading | Stale | AllowBusy,
			Run:   cmdReplConf,
		},
		{
			Name:  "psync",
			Arity: -3,
			Flags: Admin | NoScript | NoAsyncLoading | NoMulti | MayWait,
			Run:   cmdSync,
		},
		{
			Name:  "sync",
			Arity: 1,
			Flags: Admin | NoScript | NoAsyncLoading | NoMulti | MayWait,
			Run:   cmdSync,
		},
		{
			Name:  "wait",
			Arity: 3,
			Flags: NoScript | MayWait,
			Run:   cmdWait,
		},

		// Transactions (tx.go, docs/tx.json)
		{
			Name:  "multi",
			Arity: 1,
			Flags: NoScript | Loading | Stale | Fast | AllowBusy,
			Run:   cmdMulti,
		},
		{
			Name:  "exec",
			Arity: 1,
			Flags: NoScript | Loading | Stale | SkipSlowlog,
			Run:   cmdExec,
		},
		{
			Name:  "discard",
			Arity: 1,
			Flags: NoScript | Loading | Stale | Fast | AllowBusy,
			Run:   cmdDiscard,
		},
		{
			Name:  "watch",
			Arity: -2,
			Flags: NoScript | Loading | Stale | Fast | AllowBusy | SelfLock,
			Run:   cmdWatch,
		},
		{
			Name:  "unwatch",
			Arity: 1,
			Flags: NoScript | Loading | Stale | Fast | AllowBusy,
			Run:   cmdUnwatch,
		},

		// Lists (lists.go, docs/lists.json)
		{
			Name:  "lpush",
			Arity: -3,
			Flags: Write | DenyOOM | Fast | AsIs,
			Run:   cmdLPush,
		},
		{
			Name:  "rpush",
			Arity: -3,
			Flags: Write | DenyOOM | Fast | AsIs,
			Run:   cmdRPush,
		},
		{
			Name:  "lpushx",
			Arity: -3,
			Flags: Write | DenyOOM | Fast | AsIs,
			Run:   cmdLPushX,
		},
		{
			Name:  "rpushx",
			Arity: -3,
			Flags: Write | DenyOOM | Fast | AsIs,
			Run:   cmdRPushX,
		},
		{
			Name:  "lpop",
			Arity: -2,
			Flags: Write | Fast | AsIs,
			Run:   cmdLPop,
		},
		{
			Name:  "rpop",
			Arity: -2,
			Flags: Write | Fast | AsIs,
			Run:   cmdRPop,
		},
		{
			Name:  "lindex",
			Arity: 3,
			Flags: ReadOnly,
			Run:   cmdLIndex,
		},
		{
			Name:  "llen",
			Arity: 2,
			Flags: ReadOnly | Fast,
			Run:   cmdLLen,
		},
		{
			Name:  "lrange",
			Arity: 4,
			Flags: ReadOnly,
			Run:   cmdLRange,
		},
		{
			Name:  "ltrim",
			Arity: 4,
			Flags: Write | AsIs,
			Run:   cmdLTrim,
		},
		{
			Name:  "lset",
			Arity: 4,
			Flags: Write | DenyOOM | AsIs,
			Run:   cmdLSet,
		},
		{
			Name:  "lrem",
			Arity: 4,
			Flags: Write | AsIs,
			Run:   cmdLRem,
		},
		{
			Name:  "linsert",
			Arity: 5,
			Flags: Write | DenyOOM | AsIs,
			Run:   cmdLInsert,
		},
		{
			Name:  "lpos",
			Arity: -3,
			Flags: ReadOnly,
			Run:   cmdLPos,
		},
		{
			Name:  "lmove",
			Arity: 5,
			Flags: Write | DenyOOM | AsIs,
			Run:   cmdLMove,
		},
		{
			Name:  "rpoplpush",
			Arity: 3,
			Flags: Write | DenyOOM | AsIs,
			Run:   cmdRPopLPush,
		},

		// Hashes (hashes.go, docs/hashes.json)
		{
			Name:  "hset",
			Arity: -4,
			Flags: Write | DenyOOM | Fast | AsIs,
			Run:   cmdHSet,
		},
		{
			Name:  "hsetnx",
			Arity: 4,
			Flags: Write | DenyOOM | Fast | AsIs,
			Run:   cmdHSetNX,
		},
		{
			Name:  "hget",
			Arity: 3,
			Flags: ReadOnly | Fast,
			Run:   cmdHGet,
		},
		{
			Name:  "hmget",
			Arity: -3,
			Flags: ReadOnly | Fast,
			Run:   cmdHMGet,
		},
		{
			Name:  "hmset",
			Arity: -4,
			Flags: Write | DenyOOM | Fast | AsIs,
			Run:   cmdHMSet,
		},
		{
			Name:  "hdel",
			Arity: -3,
			Flags: Write | Fast | AsIs,
			Run:   cmdHDel,
		},
		{
			Name:  "hexists",
			Arity: 3,
			Flags: ReadOnly | Fast,
			Run:   cmdHExists,
		},
		{
			Name:  "hlen",
			Arity: 2,
			Flags: ReadOnly | Fast,
			Run:   cmdHLen,
		},
		{
			Name:  "hstrlen",
			Arity: 3,
			Flags: ReadOnly | Fast,
			Run:   cmdHStrLen,
		},
		{
			Name:  "hgetall",
			Arity: 2,
			Flags: ReadOnly,
			Run:   cmdHGetAll,
		},
		{
			Name:  "hkeys",
			Arity: 2,
			Flags: ReadOnly,
			Run:   cmdHKeys,
		},
		{
			Name:  "hvals",
			Arity: 2,
			Flags: ReadOnly,
			Run:   cmdHVals,
		},
		{
			Name:  "hincrby",
			Arity: 4,
			Flags: Write | DenyOOM | Fast | AsIs,
			Run:   cmdHIncrBy,
		},
		{
			Name:  "hincrbyfloat",
			Arity: 4,
			Flags: Write | DenyOOM | Fast | AsIs,
			Run:   cmdHIncrByFloat,
		},
		{
			Name:  "hscan",
			Arity: -3,
			Flags: ReadOnly,
			Run:   cmdHScan,
		},

		// Bitmaps (bitmaps.go, docs/bitmaps.json)
		{
			Name:  "setbit",
			Arity: 4,
			Flags: Write | DenyOOM | AsIs,
			Run:   cmdSetBit,
		},
		{
			Name:  "getbit",
			Arity: 3,
			Flags: ReadOnly | Fast,
			Run:   cmdGetBit,
		},
		{
			Name:  "bitcount",
			Arity: -2,
			Flags: ReadOnly,
			Run:   cmdBitCount,
		},
		{
			Name:  "bitpos",
			Arity: -3,
			Flags: ReadOnly,
			Run:   cmdBitPos,
		},
		{
			Name:  "bitop",
			Arity: -4,
			Flags: Write | DenyOOM | AsIs,
			Run:   cmdBitOp,
		},

		// SORT (sort.go, docs/sort.json): key functions find the STORE key,
		// and BY and GET patterns lock every shard.
		{
			Name:    "sort",
			Arity:   -2,
			Flags:   Write | DenyOOM | MayWait,
			Run:     cmdSort,
			Keys:    sortKeys,
			LockAll: sortReadsPatterns(false),
		},
		{
			Name:    "sort_ro",
			Arity:   -2,
			Flags:   ReadOnly | MayWait,
			Run:     cmdSortRO,
			Keys:    sortROKeys,
			LockAll: sortReadsPatterns(true),
		},

		// BITFIELD (bitfield.go, docs/bitfield.json)
		{
			Name:  "bitfield",
			Arity: -2,
			Flags: Write | DenyOOM | AsIs,
			Run:   cmdBitfield,
		},
		{
			Name:  "bitfield_ro",
			Arity: -2,
			Flags: ReadOnly | Fast,
			Run:   cmdBitfieldRO,
		},

		// HyperLogLog (hll.go, docs/hll.json)
		{
			Name:  "pfadd",
			Arity: -2,
			Flags: Write | DenyOOM | Fast | AsIs,
			Run:   cmdPFAdd,
		},
		{
			Name:  "pfcount",
			Arity: -2,
			Flags: ReadOnly | MayReplicate | AsIs,
			Run:   cmdPFCount,
		},
		{
			Name:  "pfmerge",
			Arity: -2,
			Flags: Write | DenyOOM | AsIs,
			Run:   cmdPFMerge,
		},

		// Sorted sets (zsets.go, docs/zsets.json)
		{
			Name:  "zadd",
			Arity: -4,
			Flags: Write | DenyOOM | Fast | AsIs,
			Run:   cmdZAdd,
		},
		{
			Name:  "zrem",
			Arity: -3,
			Flags: Write | Fast | AsIs,
			Run:   cmdZRem,
		},
		{
			Name:  "zcard",
			Arity: 2,
			Flags: ReadOnly | Fast,
			Run:   cmdZCard,
		},
		{
			Name:  "zcount",
			Arity: 4,
			Flags: ReadOnly | Fast,
			Run:   cmdZCount,
		},
		{
			Name:  "zscore",
			Arity: 3,
			Flags: ReadOnly | Fast,
			Run:   cmdZScore,
		},
		{
			Name:  "zmscore",
			Arity: -3,
			Flags: ReadOnly | Fast,
			Run:   cmdZMScore,
		},
		{
			Name:  "zincrby",
			Arity: 4,
			Flags: Write | DenyOOM | Fast | AsIs,
			Run:   cmdZIncrBy,
		},
		{
			Name:  "zrank",
			Arity: 3,
			Flags: ReadOnly | Fast,
			Run:   cmdZRank,
		},
		{
			Name:  "zrevrank",
			Arity: 3,
			Flags: ReadOnly | Fast,
			Run:   cmdZRevRank,
		},
		{
			Name:  "zrange",
			Arity: -4,
			Flags: ReadOnly,
			Run:   cmdZRange,
		},
		{
			Name:  "zrangebyscore",
			Arity: -4,
			Flags: ReadOnly,
			Run:   cmdZRangeByScore,
		},
		{
			Name:  "zrevrangebyscore",
			Arity: -4,
			Flags: ReadOnly,
			Run:   cmdZRevRangeByScore,
		},
		{
			Name:  "zrevrange",
			Arity: -4,
			Flags: ReadOnly,
			Run:   cmdZRevRange,
		},
		{
			Name:  "zrangebylex",
			Arity: -4,
			Flags: ReadOnly,
			Run:   cmdZRangeByLex,
		},
		{
			Name:  "zrevrangebylex",
			Arity: -4,
			Flags: ReadOnly,
			Run:   cmdZRevRangeByLex,
		},
		{
			Name:  "zlexcount",
			Arity: 4,
			Flags: ReadOnly | Fast,
			Run:   cmdZLexCount,
		},
		{
			Name:  "zremrangebyscore",
			Arity: 4,
			Flags: Write | AsIs,
			Run:   cmdZRemRangeByScore,
		},
		{
			Name:  "zremrangebyrank",
			Arity: 4,
			Flags: Write | AsIs,
			Run:   cmdZRemRangeByRank,
		},
		{
			Name:  "zremrangebylex",
			Arity: 4,
			Flags: Write | AsIs,
			Run:   cmdZRemRangeByLex,
		},
		{
			Name:  "zpopmin",
			Arity: -2,
			Flags: Write | Fast | AsIs,
			Run:   cmdZPopMin,
		},
		{
			Name:  "zpopmax",
			Arity: -2,
			Flags: Write | Fast | AsIs,
			Run:   cmdZPopMax,
		},
		{
			Name:  "zscan",
			Arity: -3,
			Flags: ReadOnly,
			Run:   cmdZScan,
		},

		// Sets (sets.go, docs/sets.json). SPOP is AsIs but replicates the
		// SREM (or DEL) of what it chose, not itself (Ctx.replicateAs).
		{
			Name:  "sadd",
			Arity: -3,
			Flags: Write | DenyOOM | Fast | AsIs,
			Run:   cmdSAdd,
		},
		{
			Name:  "srem",
			Arity: -3,
			Flags: Write | Fast | AsIs,
			Run:   cmdSRem,
		},
		{
			Name:  "scard",
			Arity: 2,
			Flags: ReadOnly | Fast,
			Run:   cmdSCard,
		},
		{
			Name:  "sismember",
			Arity: 3,
			Flags: ReadOnly | Fast,
			Run:   cmdSIsMember,
		},
		{
			Name:  "smismember",
			Arity: -3,
			Flags: ReadOnly | Fast,
			Run:   cmdSMIsMember,
		},
		{
			Name:  "smembers",
			Arity: 2,
			Flags: ReadOnly,
			Run:   cmdSMembers,
		},
		{
			Name:  "srandmember",
			Arity: -2,
			Flags: ReadOnly,
			Run:   cmdSRandMember,
		},
		{
			Name:  "spop",
			Arity: -2,
			Flags: Write | Fast | AsIs,
			Run:   cmdSPop,
		},
		{
			Name:  "smove",
			Arity: 4,
			Flags: Write | Fast | AsIs,
			Run:   cmdSMove,
		},
		{
			Name:  "sscan",
			Arity: -3,
			Flags: ReadOnly,
			Run:   cmdSScan,
		},
		{
			Name:  "sdiff",
			Arity: -2,
			Flags: ReadOnly,
			Run:   cmdSDiff,
		},
		{
			Name:  "sinter",
			Arity: -2,
			Flags: ReadOnly,
			Run:   cmdSInter,
		},
		{
			Name:  "sunion",
			Arity: -2,
			Flags: ReadOnly,
			Run:   cmdSUnion,
		},
		{
			Name:  "sdiffstore",
			Arity: -3,
			Flags: Write | DenyOOM | AsIs,
			Run:   cmdSDiffStore,
		},
		{
			Name:  "sinterstore",
			Arity: -3,
			Flags: Write | DenyOOM | AsIs,
			Run:   cmdSInterStore,
		},
		{
			Name:  "sunionstore",
			Arity: -3,
			Flags: Write | DenyOOM | AsIs,
			Run:   cmdSUnionStore,
		},
		{
			Name:  "sintercard",
			Arity: -3,
			Flags: ReadOnly,
			Run:   cmdSInterCard,
		},

		// Sorted-set algebra and random members (zalgebra.go,
		// docs/zalgebra.json); HRANDFIELD shares ZRANDMEMBER's rules.
		{
			Name:  "zunion",
			Arity: -3,
			Flags: ReadOnly,
			Run:   cmdZUnion,
		},
		{
			Name:  "zinter",
			Arity: -3,
			Flags: ReadOnly,
			Run:   cmdZInter,
		},
		{
			Name:  "zdiff",
			Arity: -3,
			Flags: ReadOnly,
			Run:   cmdZDiff,
		},
		{
			Name:  "zunionstore",
			Arity: -4,
			Flags: Write | DenyOOM | AsIs,
			Run:   cmdZUnionStore,
		},
		{
			Name:  "zinterstore",
			Arity: -4,
			Flags: Write | DenyOOM | AsIs,
			Run:   cmdZInterStore,
		},
		{
			Name:  "zdiffstore",
			Arity: -4,
			Flags: Write | DenyOOM | AsIs,
			Run:   cmdZDiffStore,
		},
		{
			Name:  "zintercard",
			Arity: -3,
			Flags: ReadOnly,
			Run:   cmdZInterCard,
		},
		{
			Name:  "zrangestore",
			Arity: -5,
			Flags: Write | DenyOOM | AsIs,
			Run:   cmdZRangeStore,
		},
		{
			Name:  "zrandmember",
			Arity: -2,
			Flags: ReadOnly,
			Run:   cmdZRandMember,
		},
		{
			Name:  "hrandfield",
			Arity: -2,
			Flags: ReadOnly,
			Run:   cmdHRandField,
		},

		// Geo, on sorted sets (geo.go, docs/geo.json)
		{
			Name:  "geoadd",
			Arity: -5,
			Flags: Write | DenyOOM | AsIs,
			Run:   cmdGeoAdd,
		},
		{
			Name:  "geopos",
			Arity: -2,
			Flags: ReadOnly,
			Run:   cmdGeoPos,
		},
		{
			Name:  "geodist",
			Arity: -4,
			Flags: ReadOnly,
			Run:   cmdGeoDist,
		},
		{
			Name:  "geohash",
			Arity: -2,
			Flags: ReadOnly,
			Run:   cmdGeoHash,
		},
		{
			Name:  "geosearch",
			Arity: -7,
			Flags: ReadOnly,
			Run:   cmdGeoSearch,
		},
		{
			Name:  "geosearchstore",
			Arity: -8,
			Flags: Write | DenyOOM | AsIs,
			Run:   cmdGeoSearchStore,
		},
		{
			Name:  "georadius",
			Arity: -6,
			Flags: Write | DenyOOM | AsIs,
			Run:   cmdGeoRadius,
		},
		{
			Name:  "georadius_ro",
			Arity: -6,
			Flags: ReadOnly,
			Run:   cmdGeoRadiusRO,
		},
		{
			Name:  "georadiusbymember",
			Arity: -5,
			Flags: Write | DenyOOM | AsIs,
			Run:   cmdGeoRadiusByMember,
		},
		{
			Name:  "georadiusbymember_ro",
			Arity: -5,
			Flags: ReadOnly,
			Run:   cmdGeoRadiusByMemberRO,
		},

		// Blocking pops and the multi-key pops (blocking.go,
		// docs/blocking.json); CLIENT PAUSE, UNPAUSE, UNBLOCK and NO-EVICT
		// are under CLIENT, their handlers in blocking.go and pause.go.
		{
			Name:  "blpop",
			Arity: -3,
			Flags: Write | NoScript | Blocking,
			Run:   cmdBLPop,
		},
		{
			Name:  "brpop",
			Arity: -3,
			Flags: Write | NoScript | Blocking,
			Run:   cmdBRPop,
		},
		{
			Name:  "brpoplpush",
			Arity: 4,
			Flags: Write | DenyOOM | NoScript | Blocking,
			Run:   cmdBRPopLPush,
		},
		{
			Name:  "blmove",
			Arity: 6,
			Flags: Write | DenyOOM | NoScript | Blocking,
			Run:   cmdBLMove,
		},
		{
			Name:  "blmpop",
			Arity: -5,
			Flags: Write | Blocking,
			Run:   cmdBLMPop,
		},
		{
			Name:  "lmpop",
			Arity: -4,
			Flags: Write,
			Run:   cmdLMPop,
		},
		{
			Name:  "bzpopmin",
			Arity: -3,
			Flags: Write | NoScript | Fast | Blocking,
			Run:   cmdBZPopMin,
		},
		{
			Name:  "bzpopmax",
			Arity: -3,
			Flags: Write | NoScript | Fast | Blocking,
			Run:   cmdBZPopMax,
		},
		{
			Name:  "bzmpop",
			Arity: -5,
			Flags: Write | Blocking,
			Run:   cmdBZMPop,
		},
		{
			Name:  "zmpop",
			Arity: -4,
			Flags: Write,
			Run:   cmdZMPop,
		},

		// Functions (functions.go, docs/functions.json)
		{
			Name:  "fcall",
			Arity: -3,
			Flags: NoScript | Stale | SkipMonitor | NoMandatoryKeys | MayReplicate | SelfLock | RunsScript,
			Run:   cmdFCall,
		},
		{
			Name:  "fcall_ro",
			Arity: -3,
			Flags: ReadOnly | NoScript | Stale | SkipMonitor | NoMandatoryKeys | SelfLock | RunsScript,
			Run:   cmdFCallRO,
		},
		{
			Name:  "function",
			Arity: -2,
			Sub: []*Spec{
				{
					Name:  "delete",
					Arity: 3,
					Flags: Write | NoScript | SelfLock,
					Run:   cmdFunctionDelete,
				},
				{
					Name:  "dump",
					Arity: 2,
					Flags: NoScript,
					Run:   cmdFunctionDump,
				},
				{
					Name:  "flush",
					Arity: -2,
					Flags: Write | NoScript | SelfLock,
					Run:   cmdFunctionFlush,
				},
				{
					Name:  "help",
					Arity: 2,
					Flags: Loading | Stale,
					Run:   cmdFunctionHelp,
				},
				{
					Name:  "kill",
					Arity: 2,
					Flags: NoScript | AllowBusy,
					Run:   cmdFunctionKill,
				},
				{
					Name:  "list",
					Arity: -2,
					Flags: NoScript,
					Run:   cmdFunctionList,
				},
				{
					Name:  "load",
					Arity: -3,
					Flags: Write | DenyOOM | NoScript | SelfLock | MayWait,
					Run:   cmdFunctionLoad,
				},
				{
					Name:  "restore",
					Arity: -3,
					Flags: Write | DenyOOM | NoScript | SelfLock | MayWait,
					Run:   cmdFunctionRestore,
				},
				{
					Name:  "stats",
					Arity: 2,
					Flags: NoScript | AllowBusy,
					Run:   cmdFunctionStats,
				},
			},
		},

		// Scripting (scripting.go, docs/scripting.json)
		{
			Name:  "eval",
			Arity: -3,
			Flags: NoScript | Stale | SkipMonitor | NoMandatoryKeys | MayReplicate | SelfLock | RunsScript,
			Run:   cmdEval,
		},
		{
			Name:  "evalsha",
			Arity: -3,
			Flags: NoScript | Stale | SkipMonitor | NoMandatoryKeys | MayReplicate | SelfLock | RunsScript,
			Run:   cmdEvalSha,
		},
		{
			Name:  "eval_ro",
			Arity: -3,
			Flags: ReadOnly | NoScript | Stale | SkipMonitor | NoMandatoryKeys | SelfLock | RunsScript,
			Run:   cmdEvalRO,
		},
		{
			Name:  "evalsha_ro",
			Arity: -3,
			Flags: ReadOnly | NoScript | Stale | SkipMonitor | NoMandatoryKeys | SelfLock | RunsScript,
			Run:   cmdEvalShaRO,
		},
		{
			Name:  "script",
			Arity: -2,
			Sub: []*Spec{
				{
					Name:  "debug",
					Arity: 3,
					Flags: NoScript,
					Run:   cmdScriptDebug,
				},
				{
					Name:  "exists",
					Arity: -3,
					Flags: NoScript,
					Run:   cmdScriptExists,
				},
				{
					Name:  "flush",
					Arity: -2,
					Flags: NoScript,
					Run:   cmdScriptFlush,
				},
				{
					Name:  "help",
					Arity: 2,
					Flags: Loading | Stale,
					Run:   cmdScriptHelp,
				},
				{
					Name:  "kill",
					Arity: 2,
					Flags: NoScript | AllowBusy,
					Run:   cmdScriptKill,
				},
				{
					Name:  "load",
					Arity: 3,
					Flags: NoScript | Stale,
					Run:   cmdScriptLoad,
				},
			},
		},
	}
}
