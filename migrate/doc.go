// Package migrate is MIGRATE's client: the connections limitkv opens to
// other nodes to hand them keys, and the exchange on them (AUTH, SELECT,
// the RESTORE commands, the replies matched to them).
//
// Connections are kept for reuse as Redis keeps them
// (migrate_cached_sockets): one per target, still authenticated and
// remembering its database, closed after ten seconds unused. What the
// keys are, reading them and deleting those the target took are the
// caller's: nothing here knows of requests or of the keyspace, so that
// slot migration can drive the same pool.
package migrate
