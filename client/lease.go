package client

import (
	"context"
	"fmt"
	"time"
)

// Acquire is RL.ACQUIRE key limit lease id [SHADOW]: take one of limit
// slots on key for the holder id (a request id, 1 to 256 bytes), which
// frees itself after lease unless released or renewed before. Acquiring
// again with an id that holds a slot renews it without taking another.
// In the Decision, Remaining is the free slots, RetryAfter (when denied)
// the time until the earliest lease ends, which a release may make sooner,
// and ResetAfter the time until every lease has ended. Options: Shadow.
func (c *Client) Acquire(ctx context.Context, key string, limit int64, lease time.Duration, id string, opts ...Option) (Decision, error) {
	w, err := FormatWindow(lease)
	if err != nil {
		return Decision{}, fmt.Errorf("%w (lease)", err)
	}
	args := make([]any, 0, 6)
	args = append(args, "RL.ACQUIRE", key, limit, w, id)
	args, err = appendOptions(args, opts)
	if err != nil {
		return Decision{}, err
	}
	return c.decide(ctx, args)
}

// Release is RL.RELEASE key id: it frees id's slot and says whether id
// held one (false if it was released already, expired, or never
// acquired).
func (c *Client) Release(ctx context.Context, key, id string) (bool, error) {
	n, err := c.rdb.Do(ctx, "RL.RELEASE", key, id).Int64()
	return n == 1, err
}
