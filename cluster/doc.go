// Package cluster is the Redis Cluster bus of limitkv: the cluster bus
// message codec, the hash slots of keys and the nodes.conf file, each
// byte-compatible with Redis 7.0 so that limitkv and redis-server nodes
// can form one cluster and read each other's files, the cluster state
// (State) those messages change by Redis's rules, and the bus (Bus) that
// carries them between nodes.
//
// It sits below commands, which will drive it, and imports only the
// standard library. The state takes the time as an argument and does no
// I/O: the Bus's links feed it and act on what it returns, so every rule
// can be tested on a fake clock.
package cluster
