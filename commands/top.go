package commands

import (
	"strconv"

	"github.com/limitkv/limitkv/engine"
)

// topCommands: RL.TOP, the keys denied most.
func topCommands() []*command {
	return []*command{
		cmd("rl.top", -1, "admin loading stale", cmdRLTop),
	}
}

// RL.TOP [count] | RL.TOP RESET: the keys denied most often recently, from
// per-shard Space-Saving summaries (ratelimit/top.go). Like SLOWLOG
// it is the node's own operational state: not saved, not replicated, not
// cleared by CONFIG RESETSTAT or FLUSHALL.

const maxTopCount = 1000

// noteDenied counts a denial for RL.TOP against the decision's key, and
// reports it (rl.denied): the first key the command's key specs find,
// which is the key dispatch locked the shard of (RL.CHECK's second
// argument, RL.FIXED's first). A denial
// costs one hash and an O(log TopSlots) update under that lock; an allowed
// request costs nothing.
func (c *Ctx) noteDenied() {
	var pos [2]int
	keys := c.Spec.KeyPositions(c.Args, pos[:0])
	if len(keys) == 0 {
		return
	}
	key := c.Args[keys[0]]
	c.Shard(key).NoteDenial(c.DB, key, c.Now)
	c.notify(notifyRateLimit, "rl.denied", key)
}

// notifyFirstKey reports event on the command's first key.
func (c *Ctx) notifyFirstKey(class notifyClass, event string) {
	var pos [2]int
	if keys := c.Spec.KeyPositions(c.Args, pos[:0]); len(keys) > 0 {
		c.notify(class, event, c.Args[keys[0]])
	}
}

func cmdRLTop(c *Ctx) {
	count := int64(10)
	switch {
	case len(c.Args) == 1:
	case len(c.Args) > 2:
		c.W.Error("syntax error: unexpected argument '" + string(c.Args[2]) + "'")
		return
	case is(c.Args[1], "RESET"):
		c.Srv.Eng.ResetDenials(c.held)
		c.W.OK()
		return
	default:
		n, ok := engine.ParseInt(c.Args[1])
		if !ok || n < 1 || n > maxTopCount {
			c.W.Error("invalid count '" + string(c.Args[1]) + "': expected an integer from 1 to 1000, or RESET")
			return
		}
		count = n
	}
	top := c.Srv.Eng.TopDenials(int(count), c.Now, c.held)
	c.W.Array(len(top))
	for _, d := range top {
		c.W.Map(4)
		c.W.BulkString("key")
		if d.KeyLen > len(d.Key) {
			// Shown as SLOWLOG shows a long argument.
			b := strconv.AppendInt(append(d.Key, "... ("...), int64(d.KeyLen-len(d.Key)), 10)
			c.W.Bulk(append(b, " more bytes)"...))
		} else {
			c.W.Bulk(d.Key)
		}
		c.W.BulkString("db")
		c.W.Int(int64(d.DB))
		c.W.BulkString("denied")
		c.W.Int(d.Count)
		c.W.BulkString("error")
		c.W.Int(d.Err)
	}
}
