package state

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"

	"github.com/redis/go-redis/v9"

	"github.com/hookproxy/hookproxy/pinning"
)

// RedisPins keeps tool-definition pins (pinning.Store) in the Redis of the conversation
// state, so that every replica compares with the same pins and a tool pinned by one
// replica is not pinned differently by another. One hash per scope (field: tool name,
// value: the entry's JSON) and one set naming the scopes. Pins carry no TTL: they last
// until an operator forgets them.
type RedisPins struct{ r *Redis }

var _ pinning.Store = RedisPins{}

// Pins returns the pins store that shares r's connection, key prefix and timeout.
func (r *Redis) Pins() RedisPins { return RedisPins{r: r} }

func (p RedisPins) key(scope string) string { return p.r.prefix + "pins:" + scope }
func (p RedisPins) scopesKey() string       { return p.r.prefix + "pins-scopes" }

// Load implements pinning.Store.
func (p RedisPins) Load(ctx context.Context, scope string) (map[string]pinning.Entry, error) {
	ctx, cancel := context.WithTimeout(ctx, p.r.timeout)
	defer cancel()
	m, err := p.r.c.HGetAll(ctx, p.key(scope)).Result()
	if err != nil {
		return nil, fmt.Errorf("redis pins load: %w", err)
	}
	out := make(map[string]pinning.Entry, len(m))
	for name, v := range m {
		var e pinning.Entry
		if err := json.Unmarshal([]byte(v), &e); err != nil {
			// Not a pin hookproxy wrote: treated as absent, so it is pinned anew.
			continue
		}
		out[name] = e
	}
	return out, nil
}

// Add implements pinning.Store with HSETNX: the first replica to pin a name wins.
func (p RedisPins) Add(ctx context.Context, scope string, entries []pinning.Entry) error {
	return p.write(ctx, scope, entries, true)
}

// Put implements pinning.Store.
func (p RedisPins) Put(ctx context.Context, scope string, entries []pinning.Entry) error {
	return p.write(ctx, scope, entries, false)
}

func (p RedisPins) write(ctx context.Context, scope string, entries []pinning.Entry, onlyNew bool) error {
	ctx, cancel := context.WithTimeout(ctx, p.r.timeout)
	defer cancel()
	_, err := p.r.c.TxPipelined(ctx, func(pl redis.Pipeliner) error {
		for _, e := range entries {
			b, err := json.Marshal(e)
			if err != nil {
				return err
			}
			if len(b) > MaxValueBytes {
				return ErrTooLarge
			}
			if onlyNew {
				pl.HSetNX(ctx, p.key(scope), e.Name, b)
			} else {
				pl.HSet(ctx, p.key(scope), e.Name, b)
			}
		}
		pl.SAdd(ctx, p.scopesKey(), scope)
		return nil
	})
	if err != nil && !errors.Is(err, ErrTooLarge) {
		return fmt.Errorf("redis pins write: %w", err)
	}
	return err
}

// Delete implements pinning.Store.
func (p RedisPins) Delete(ctx context.Context, scope, name string) (bool, error) {
	ctx, cancel := context.WithTimeout(ctx, p.r.timeout)
	defer cancel()
	var del *redis.IntCmd
	var left *redis.IntCmd
	_, err := p.r.c.TxPipelined(ctx, func(pl redis.Pipeliner) error {
		del = pl.HDel(ctx, p.key(scope), name)
		left = pl.HLen(ctx, p.key(scope))
		return nil
	})
	if err != nil {
		return false, fmt.Errorf("redis pins delete: %w", err)
	}
	if left.Val() == 0 {
		_ = p.r.c.SRem(ctx, p.scopesKey(), scope).Err() // an empty scope is listed no longer
	}
	return del.Val() > 0, nil
}

// Scopes implements pinning.Store.
func (p RedisPins) Scopes(ctx context.Context) ([]string, error) {
	ctx, cancel := context.WithTimeout(ctx, p.r.timeout)
	defer cancel()
	s, err := p.r.c.SMembers(ctx, p.scopesKey()).Result()
	if err != nil {
		return nil, fmt.Errorf("redis pins scopes: %w", err)
	}
	slices.Sort(s)
	return s, nil
}
