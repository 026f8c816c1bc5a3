// Package scripting is the script runtime of Redis 7.0's EVAL and FCALL:
// the script cache (compiled scripts by SHA1, the flags of their shebang
// lines), the function libraries (their registry, FUNCTION DUMP's
// payload, the numbers FUNCTION STATS and INFO show), the Lua states that
// run both and when they are replaced, the state of the run in progress
// that other connections read (BUSY, SCRIPT KILL, FUNCTION KILL), and the
// combiner that runs the EVALs of many connections under one acquisition
// of the shard locks. Lua itself, with Redis's sandbox and libraries, is
// package lua51's.
//
// The package knows nothing of commands: what a script reaches of the
// server goes through the interfaces it defines and the server
// implements. Host takes and lets go of the shard locks and logs; a
// Session, one per Lua state, is the client a script's redis.call runs
// its commands as: it finds a command and checks that the script may
// call it (its ACL, replication and memory checks, with Redis's texts),
// runs it, and at a run's end sends its effects to the replicas. The
// request that runs a script or function travels through the runtime as
// an opaque Call.Caller, handed back to the Session untouched.
//
// # Threads and locks
//
// A script runs with every shard locked, so that no other command sees
// the keyspace between two of its calls, which is what Redis's single
// thread gives scripts. So only the holder of every shard lock runs Lua
// code, and one state for scripts and one for functions are enough: a
// second would never run beside the first. What other connections read
// while a script runs (is one running, since when, was it killed) is
// kept in atomics and under a mutex of its own; the cache and the
// registry have their own locks for readers that hold no shard (EVALSHA
// before it is queued, FUNCTION LIST).
package scripting
