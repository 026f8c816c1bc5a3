package cluster

import "github.com/limitkv/limitkv/engine"

// Slots is the number of hash slots the key space is cut into.
const Slots = engine.ClusterSlots

// KeySlot is the hash slot of key, as CLUSTER KEYSLOT answers: the
// engine's, which shards a cluster node's keys by it.
func KeySlot(key []byte) uint16 { return engine.KeySlot(key) }
