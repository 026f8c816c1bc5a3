package client

import (
	"context"
	"fmt"
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
func (c *Client) Top(ctx context.Context, count int) ([]Denied, error) {
	v, err := c.rdb.Do(ctx, "RL.TOP", count).Slice()
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

// TopReset is RL.TOP RESET: it clears the counts.
func (c *Client) TopReset(ctx context.Context) error {
	return c.rdb.Do(ctx, "RL.TOP", "RESET").Err()
}
