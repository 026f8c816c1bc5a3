package client

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"

	"github.com/redis/go-redis/v9"
)

// Denied is one line of RL.TOP: a key among those denied most often in
// the last one to two minutes.
type Denied struct {
	Key string
	DB  int64
	// Denials is the count of denials, at most Error too many (the sketch
	// behind RL.TOP is bounded in memory, so its counts are estimates
	// with a known error).
	Denials int64
	Error   int64
}

// Top is RL.TOP count: the keys denied most often recently, most denied
// first (count from 1 to 1000).
//
// Over a *redis.ClusterClient, RL.TOP counts per node, so Top asks every
// master and merges the replies: a key lives on one master only, so the
// union, sorted as RL.TOP sorts (by Denials, then Denials-Error, most
// first, then by DB and Key) and cut to count, is the top of the whole
// cluster. Replicas make no decisions and have nothing to add.
func (c *Client) Top(ctx context.Context, count int) ([]Denied, error) {
	cc, ok := c.cluster()
	if !ok {
		return top(ctx, c.rdb, count)
	}
	var mu sync.Mutex
	var all []Denied
	err := cc.ForEachMaster(ctx, func(ctx context.Context, node *redis.Client) error {
		part, err := top(ctx, node, count)
		if err != nil {
			return err
		}
		mu.Lock()
		all = append(all, part...)
		mu.Unlock()
		return nil
	})
	if err != nil {
		return nil, err
	}
	slices.SortFunc(all, compareDenied)
	return all[:min(len(all), count)], nil
}

// compareDenied is RL.TOP's order.
func compareDenied(a, b Denied) int {
	switch {
	case a.Denials != b.Denials:
		return compareInt(b.Denials, a.Denials)
	case a.Denials-a.Error != b.Denials-b.Error:
		return compareInt(b.Denials-b.Error, a.Denials-a.Error)
	case a.DB != b.DB:
		return compareInt(a.DB, b.DB)
	}
	return strings.Compare(a.Key, b.Key)
}

func compareInt(a, b int64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// doer is the one call a node's client and any UniversalClient share.
type doer interface {
	Do(ctx context.Context, args ...any) *redis.Cmd
}

func top(ctx context.Context, rdb doer, count int) ([]Denied, error) {
	v, err := rdb.Do(ctx, "RL.TOP", count).Slice()
	if err != nil {
		return nil, err
	}
	top := make([]Denied, 0, len(v))
	for _, e := range v {
		// RESP2 gives each entry as a flat array of field, value; RESP3
		// as a map.
		fields := map[string]any{}
		switch e := e.(type) {
		case []any:
			for i := 0; i+1 < len(e); i += 2 {
				if k, ok := e[i].(string); ok {
					fields[k] = e[i+1]
				}
			}
		case map[any]any:
			for k, v := range e {
				if k, ok := k.(string); ok {
					fields[k] = v
				}
			}
		default:
			return nil, fmt.Errorf("limitkv: RL.TOP answered an entry of type %T", e)
		}
		key, ok1 := fields["key"].(string)
		db, ok2 := fields["db"].(int64)
		denied, ok3 := fields["denied"].(int64)
		errBound, ok4 := fields["error"].(int64)
		if !ok1 || !ok2 || !ok3 || !ok4 {
			return nil, fmt.Errorf("limitkv: RL.TOP answered an entry without key, db, denied and error: %v", e)
		}
		top = append(top, Denied{Key: key, DB: db, Denials: denied, Error: errBound})
	}
	return top, nil
}

// TopReset is RL.TOP RESET: it clears the counts. Over a
// *redis.ClusterClient it clears them on every master.
func (c *Client) TopReset(ctx context.Context) error {
	cc, ok := c.cluster()
	if !ok {
		return c.rdb.Do(ctx, "RL.TOP", "RESET").Err()
	}
	return cc.ForEachMaster(ctx, func(ctx context.Context, node *redis.Client) error {
		return node.Do(ctx, "RL.TOP", "RESET").Err()
	})
}
