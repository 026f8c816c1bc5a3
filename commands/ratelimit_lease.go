package commands

import (
	"strconv"
	"strings"

	"github.com/limitkv/limitkv/engine"
	"github.com/limitkv/limitkv/ratelimit"
)

// RL.ACQUIRE key limit lease id [SHADOW] and RL.RELEASE key id: a
// concurrency limit, at most limit leases in flight per key, each freeing
// itself lease after it was last acquired or renewed. See
// ratelimit/lease.go for the decision and docs/commands.md for the
// contract.

// acquireArgs are RL.ACQUIRE's arguments after the key.
type acquireArgs struct {
	limit  int64
	lease  int64 // ms
	id     []byte
	shadow bool
}

const leaseLimitRange = "an integer from 1 to 10000"

// parseAcquireArgs reads "limit lease id [SHADOW]", the arguments of
// RL.ACQUIRE after the key. On bad input it returns the error text, which
// names the argument.
func parseAcquireArgs(args [][]byte) (acquireArgs, string) {
	if len(args) < 3 {
		return acquireArgs{}, "wrong number of arguments for 'rl.acquire' command"
	}
	a, msg := parseLease(args[0], args[1], args[3:])
	if msg == "" {
		msg = leaseIDError(args[2])
	}
	a.id = args[2]
	return a, msg
}

// parseLeasePolicy reads "limit lease [SHADOW]": RL.ACQUIRE's arguments
// without the id, which define a CONCURRENCY policy (its id comes with
// each request; check it with leaseIDError).
func parseLeasePolicy(args [][]byte) (acquireArgs, string) {
	if len(args) < 2 {
		return acquireArgs{}, "wrong number of arguments: expected limit lease [SHADOW]"
	}
	return parseLease(args[0], args[1], args[2:])
}

func parseLease(limitArg, leaseArg []byte, opts [][]byte) (acquireArgs, string) {
	var a acquireArgs
	limit, ok := engine.ParseInt(limitArg)
	if !ok || limit < 1 || limit > ratelimit.MaxLeases {
		return a, "invalid limit '" + string(limitArg) + "': expected " + leaseLimitRange +
			" (a semaphore wider than that is better split over several keys)"
	}
	lease, ok := ParseDuration(leaseArg)
	if !ok {
		return a, "invalid lease '" + string(leaseArg) +
			"': expected a whole number with unit ms, s, m, h or d (a bare number is seconds), from 1ms to 3650d"
	}
	a.limit, a.lease = limit, lease
	for _, opt := range opts {
		switch {
		case is(opt, "SHADOW") && !a.shadow:
			a.shadow = true
		case is(opt, "SHADOW") || isRLOption(opt):
			return a, "ERR " + strings.ToUpper(string(opt)) + " given twice or not valid for RL.ACQUIRE"
		default:
			return a, "syntax error: unexpected argument '" + string(opt) + "'"
		}
	}
	return a, ""
}

// leaseIDError checks an id: 1 to 256 bytes. An empty id is refused rather
// than taken as a name: it is what an unset variable sends, and every such
// caller would renew one shared lease.
func leaseIDError(id []byte) string {
	if len(id) == 0 || len(id) > ratelimit.MaxLeaseID {
		return "invalid id of " + strconv.Itoa(len(id)) + " bytes: expected 1 to 256 bytes"
	}
	return ""
}

func cmdRLAcquire(c *Ctx) {
	a, msg := parseAcquireArgs(c.Args[2:])
	if msg != "" {
		c.W.Error(msg)
		return
	}
	d, err := c.Shard(c.Args[1]).Acquire(c.DB, c.Args[1], c.Now, a.limit, a.lease, a.id, &c.Client.rl.decide)
	if err != nil {
		c.Err(err)
		return
	}
	c.decided(rlAcquire, d, false, a.shadow)
}

// cmdRLAcquireRO: RL.ACQUIRE_RO key limit lease [id], what RL.ACQUIRE
// would answer for id (without one, for a new holder), taking nothing:
// remaining is the free slots left after the acquire it would make, so a
// dashboard reads the leases held as limit - remaining - allowed.
func cmdRLAcquireRO(c *Ctx) {
	if len(c.Args) > 5 {
		c.W.Error("syntax error: unexpected argument '" + string(c.Args[5]) + "'")
		return
	}
	a, msg := parseLease(c.Args[2], c.Args[3], nil)
	var id []byte
	if msg == "" && len(c.Args) == 5 {
		id = c.Args[4]
		msg = leaseIDError(id)
	}
	if msg != "" {
		c.W.Error(msg)
		return
	}
	d, err := c.Shard(c.Args[1]).PeekAcquire(c.DB, c.Args[1], c.Now, nil, a.limit, a.lease, id, &c.Client.rl.decide)
	if err != nil {
		c.Err(err)
		return
	}
	c.decided(rlAcquire, d, true, false)
}

// cmdRLRelease answers 1 if it freed id's lease, 0 if id held none. It is
// not a decision and is not counted.
func cmdRLRelease(c *Ctx) {
	if msg := leaseIDError(c.Args[2]); msg != "" {
		c.W.Error(msg)
		return
	}
	freed, err := c.Shard(c.Args[1]).Release(c.DB, c.Args[1], c.Now, c.Args[2], &c.Client.rl.decide)
	if err != nil {
		c.Err(err)
		return
	}
	c.W.Int(b2i(freed))
}
