// Package commands runs requests: the handler of every command limitkv
// serves, one file per command family, each registering its commands at
// its top (commandTable lists the families); dispatch, which finds a
// request's spec, checks its arity, ACL rules and the server's state,
// takes the shard locks of its keys and calls its handler; and what
// handlers share: the clients, transactions, the blocking pops' and
// pub/sub's delivery, and the links to persistence and replication.
//
// Handlers parse arguments, call the engine on shards dispatch has
// locked, and reply through a resp.Writer; they never touch a socket.
// Subsystems that need no request live in packages of their own (acl,
// cmdspec, cmddocs, config, observe, scripting, blocking, pubsub,
// replication, ratelimit), which this package drives.
package commands
