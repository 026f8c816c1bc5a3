// Package cluster is the Redis Cluster bus of limitkv: the cluster bus
// message codec, the hash slots of keys and the nodes.conf file, each
// byte-compatible with Redis 7.0 so that limitkv and redis-server nodes
// can form one cluster and read each other's files.
//
// It sits below commands, which will drive it, and imports only the
// standard library: what a message or a configuration line is must not
// depend on how the server runs.
package cluster
