package client

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"
)

// Policy is a named policy's definition: a type (FIXED, SLIDE, GCRA or
// CONCURRENCY) and the arguments of that command after the key, as
// RL.POLICY SET takes them and RL.POLICY GET gives them back (normalised:
// "1440m" comes back "1d"). Build one with FixedPolicy, SlidePolicy,
// GCRAPolicy or ConcurrencyPolicy.
type Policy struct {
	Type string
	Args []string
	err  error // from a builder, returned by SetPolicy
}

// String is the definition as RL.POLICY SET takes it after the name.
func (p Policy) String() string {
	return strings.Join(append([]string{p.Type}, p.Args...), " ")
}

// Err is the error a builder found (a window that cannot be written), or
// nil.
func (p Policy) Err() error { return p.err }

func rulesPolicy(typ string, rules []Rule, opts []Option) Policy {
	args, err := appendRules(nil, rules)
	if err == nil {
		args, err = appendOptions(args, opts)
	}
	return Policy{Type: typ, Args: words(args), err: err}
}

// FixedPolicy is a policy of RL.FIXED's rules and options (AlignFirst, TZ,
// Ban, Shadow).
func FixedPolicy(rules []Rule, opts ...Option) Policy { return rulesPolicy("FIXED", rules, opts) }

// SlidePolicy is a policy of RL.SLIDE's rules and options (Penalize, Ban,
// Shadow).
func SlidePolicy(rules []Rule, opts ...Option) Policy { return rulesPolicy("SLIDE", rules, opts) }

// GCRAPolicy is CL.THROTTLE's algorithm as a policy: bursts of maxBurst+1,
// countPerPeriod per period (whole seconds), answered in the RL reply's
// conventions (milliseconds, 1 = allowed). Options: Shadow.
func GCRAPolicy(maxBurst, countPerPeriod int64, period time.Duration, opts ...Option) Policy {
	p := Policy{Type: "GCRA"}
	w, err := FormatWindow(period)
	if err == nil && period%time.Second != 0 {
		err = fmt.Errorf("limitkv: GCRA period %v is not a whole number of seconds", period)
	}
	args := []any{maxBurst, countPerPeriod, w}
	if err == nil {
		args, err = appendOptions(args, opts)
	}
	p.Args, p.err = words(args), err
	return p
}

// ConcurrencyPolicy is RL.ACQUIRE's limit and lease as a policy; take a
// slot with CheckID and free it with Release. Options: Shadow.
func ConcurrencyPolicy(limit int64, lease time.Duration, opts ...Option) Policy {
	w, err := FormatWindow(lease)
	args := []any{limit, w}
	if err == nil {
		args, err = appendOptions(args, opts)
	}
	return Policy{Type: "CONCURRENCY", Args: words(args), err: err}
}

func words(args []any) []string {
	s := make([]string, len(args))
	for i, a := range args {
		switch v := a.(type) {
		case string:
			s[i] = v
		case int64:
			s[i] = strconv.FormatInt(v, 10)
		default:
			s[i] = fmt.Sprint(v)
		}
	}
	return s
}

// SetPolicy is RL.POLICY SET name type args...: it creates or replaces the
// policy, which applies at once to every key checked with it.
//
// Over a *redis.ClusterClient it goes to one master (go-redis picks one,
// the command having no key), which sends it over the cluster bus to
// every other node; a check on another master sees it once the bus has
// delivered it, normally within a round trip between the nodes.
func (c *Client) SetPolicy(ctx context.Context, name string, p Policy) error {
	if p.err != nil {
		return p.err
	}
	if p.Type == "" {
		return errors.New("limitkv: a policy needs a type")
	}
	args := make([]any, 0, 4+len(p.Args))
	args = append(args, "RL.POLICY", "SET", name, p.Type)
	for _, a := range p.Args {
		args = append(args, a)
	}
	return c.rdb.Do(ctx, args...).Err()
}

// GetPolicy is RL.POLICY GET name. An unknown name is limitkv's error
// "ERR no such policy 'name'".
//
// Over a *redis.ClusterClient it reads one node's copy: every node holds
// every policy, the bus bringing each SET and DEL to all of them.
func (c *Client) GetPolicy(ctx context.Context, name string) (Policy, error) {
	words, err := c.rdb.Do(ctx, "RL.POLICY", "GET", name).StringSlice()
	if err != nil {
		return Policy{}, err
	}
	if len(words) == 0 {
		return Policy{}, fmt.Errorf("limitkv: RL.POLICY GET %s answered an empty definition", name)
	}
	return Policy{Type: words[0], Args: words[1:]}, nil
}

// DelPolicy is RL.POLICY DEL name; it reports whether the policy existed.
// Over a *redis.ClusterClient it goes to one master, and the bus spreads
// it, as SetPolicy's.
func (c *Client) DelPolicy(ctx context.Context, name string) (bool, error) {
	n, err := c.rdb.Do(ctx, "RL.POLICY", "DEL", name).Int64()
	return n == 1, err
}

// ListPolicies is RL.POLICY LIST [pattern]: the names of the policies
// matching a glob pattern ("" for all). Over a *redis.ClusterClient it
// reads one node's list, which is every node's.
func (c *Client) ListPolicies(ctx context.Context, pattern string) ([]string, error) {
	if pattern == "" {
		return c.rdb.Do(ctx, "RL.POLICY", "LIST").StringSlice()
	}
	return c.rdb.Do(ctx, "RL.POLICY", "LIST", pattern).StringSlice()
}

// Check is RL.CHECK name key [COST n] [PEEK]: the named policy applied to
// key. Options: Cost, Peek, ReadOnly.
func (c *Client) Check(ctx context.Context, name, key string, opts ...Option) (Decision, error) {
	args := make([]any, 0, 3+2*len(opts))
	args = append(args, commandFor("RL.CHECK", opts), name, key)
	args, err := appendOptions(args, opts)
	if err != nil {
		return Decision{}, err
	}
	return c.decide(ctx, args)
}

// CheckID is RL.CHECK name key ID id, for a CONCURRENCY policy: a slot on
// key for holder id (renewed if id holds one already), freed by
// Release(key, id) or when its lease ends.
func (c *Client) CheckID(ctx context.Context, name, key, id string) (Decision, error) {
	return c.decide(ctx, []any{"RL.CHECK", name, key, "ID", id})
}
