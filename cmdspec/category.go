package cmdspec

import "math/bits"

// Category is a set of ACL categories, one bit each. The bits follow the
// order in which Redis lists its categories (ACL CAT, and COMMAND's
// acl_categories of each command), with limitkv's ratelimit after the data
// types.
type Category uint64

const (
	CatKeyspace Category = 1 << iota
	CatRead
	CatWrite
	CatSet
	CatSortedSet
	CatList
	CatHash
	CatString
	CatBitmap
	CatHyperLogLog
	CatGeo
	CatStream
	CatRateLimit
	CatPubSub
	CatAdmin
	CatFast
	CatSlow
	CatBlocking
	CatDangerous
	CatConnection
	CatTransaction
	CatScripting
	numCategories = iota
)

// categoryNames are the names of the bits, in bit order.
var categoryNames = [numCategories]string{
	"keyspace", "read", "write", "set", "sortedset", "list", "hash", "string",
	"bitmap", "hyperloglog", "geo", "stream", "ratelimit", "pubsub", "admin",
	"fast", "slow", "blocking", "dangerous", "connection", "transaction",
	"scripting",
}

// CategoryByName returns the category called name (lower case, without
// "@"), or 0 if there is none.
func CategoryByName(name string) Category {
	for i, n := range categoryNames {
		if n == name {
			return 1 << i
		}
	}
	return 0
}

// Names returns the names of the categories in c, without "@", in order.
func (c Category) Names() []string {
	names := make([]string, 0, bits.OnesCount64(uint64(c)))
	for i, n := range categoryNames {
		if c&(1<<i) != 0 {
			names = append(names, n)
		}
	}
	return names
}

// implicitCategories adds to the categories a command states those its
// flags imply, as Redis 7.0's setImplicitACLCategories does: write,
// readonly (except for scripting commands), admin (also dangerous),
// pubsub, fast and blocking each bring their category, and a command not
// in @fast is in @slow.
func implicitCategories(f Flag, c Category) Category {
	if f&Write != 0 {
		c |= CatWrite
	}
	if f&ReadOnly != 0 && c&CatScripting == 0 {
		c |= CatRead
	}
	if f&Admin != 0 {
		c |= CatAdmin | CatDangerous
	}
	if f&PubSub != 0 {
		c |= CatPubSub
	}
	if f&Fast != 0 {
		c |= CatFast
	}
	if f&Blocking != 0 {
		c |= CatBlocking
	}
	if c&CatFast == 0 {
		c |= CatSlow
	}
	return c
}
