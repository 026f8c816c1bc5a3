package commands

import "github.com/limitkv/limitkv/ratelimit"

// leaseCommands: concurrency limits, held as leases.
func leaseCommands() []*command {
	return []*command{
		cmd("rl.acquire", -5, "write denyoom fast", cmdRLAcquire),
		cmd("rl.acquire_ro", -4, "readonly fast", cmdRLAcquireRO),
		cmd("rl.release", 3, "write fast", cmdRLRelease),
	}
}

// RL.ACQUIRE key limit lease id [SHADOW] and RL.RELEASE key id: a
// concurrency limit, at most limit leases in flight per key, each freeing
// itself lease after it was last acquired or renewed. See
// ratelimit/lease.go for the decision and docs/commands.md for the
// contract.

// parseAcquireArgs reads "limit lease id [SHADOW]", the arguments of
// RL.ACQUIRE after the key.
func parseAcquireArgs(args [][]byte) (ratelimit.Lease, []byte, error) {
	if len(args) < 3 {
		return ratelimit.Lease{}, nil, ratelimit.ArgError("wrong number of arguments for 'rl.acquire' command")
	}
	a, err := ratelimit.ParseLease(args[0], args[1], args[3:])
	if err == nil {
		err = ratelimit.CheckLeaseID(args[2])
	}
	return a, args[2], err
}

func cmdRLAcquire(c *Ctx) {
	a, id, err := parseAcquireArgs(c.Args[2:])
	if err != nil {
		c.argError(err)
		return
	}
	d, err := c.Shard(c.Args[1]).Acquire(c.DB, c.Args[1], c.Now, a.Limit, a.Lease, id, &c.Client.rl.decide)
	if err != nil {
		c.Err(err)
		return
	}
	c.decided(rlAcquire, d, false, a.Shadow)
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
	a, err := ratelimit.ParseLease(c.Args[2], c.Args[3], nil)
	var id []byte
	if err == nil && len(c.Args) == 5 {
		id = c.Args[4]
		err = ratelimit.CheckLeaseID(id)
	}
	if err != nil {
		c.argError(err)
		return
	}
	d, err := c.Shard(c.Args[1]).PeekAcquire(c.DB, c.Args[1], c.Now, nil, a.Limit, a.Lease, id, &c.Client.rl.decide)
	if err != nil {
		c.Err(err)
		return
	}
	c.decided(rlAcquire, d, true, false)
}

// cmdRLRelease answers 1 if it freed id's lease, 0 if id held none. It is
// not a decision and is not counted.
func cmdRLRelease(c *Ctx) {
	if err := ratelimit.CheckLeaseID(c.Args[2]); err != nil {
		c.argError(err)
		return
	}
	freed, err := c.Shard(c.Args[1]).Release(c.DB, c.Args[1], c.Now, c.Args[2], &c.Client.rl.decide)
	if err != nil {
		c.Err(err)
		return
	}
	c.W.Int(b2i(freed))
}
