package state

import (
	"context"
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"slices"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/hookproxy/hookproxy/chain/ahp"
	"github.com/hookproxy/hookproxy/config"
)

// RedisOptions configure a Redis store (config state.redis).
type RedisOptions struct {
	URL       string        // redis:// or rediss:// (TLS); no password in it
	Password  string        // from the environment variable the configuration names
	KeyPrefix string        // every key starts with it (default config.DefaultStateKeyPrefix)
	TTL       time.Duration // from a conversation's last use (default config.DefaultStateTTL)
	Timeout   time.Duration // bounds each store operation, one round trip (default 250ms)
	TLS       RedisTLS
}

// RedisTLS configures TLS to Redis; a rediss:// URL turns it on as well.
type RedisTLS struct {
	Enabled    bool
	CAFile     string // PEM bundle of the CAs to trust ("" = the system roots)
	ServerName string // expected name in the server's certificate ("" = the URL's host)
}

// Redis is the shared Store. One conversation's state is three keys with a common hash
// tag (so a Redis Cluster keeps them on one slot): a hash of records by message id and two
// lists of deferred injections. A request reads only the records of the messages it
// carries. Reads and takes are one MULTI/EXEC transaction, so a
// request costs one round trip before its boundaries run, and an injection is taken by
// exactly one replica. Every key carries the TTL, renewed on use.
type Redis struct {
	c       *redis.Client
	prefix  string
	ttl     time.Duration
	timeout time.Duration
}

var _ Store = (*Redis)(nil)

// NewRedis returns a Redis store. It does not connect: an unreachable Redis is reported
// by the first operation, which the proxy handles per state.onStoreFailure.
func NewRedis(o RedisOptions) (*Redis, error) {
	ro, err := redis.ParseURL(o.URL)
	if err != nil {
		return nil, fmt.Errorf("state.redis.url: %w", err)
	}
	if ro.Password != "" {
		return nil, errors.New("state.redis.url: carries a password; name an environment variable in state.redis.passwordEnv instead")
	}
	ro.Password = o.Password
	if o.TLS.Enabled || o.TLS.CAFile != "" || o.TLS.ServerName != "" {
		if ro.TLSConfig == nil {
			ro.TLSConfig = &tls.Config{MinVersion: tls.VersionTLS12}
		}
	}
	if ro.TLSConfig != nil {
		if o.TLS.ServerName != "" {
			ro.TLSConfig.ServerName = o.TLS.ServerName
		}
		if o.TLS.CAFile != "" {
			pem, err := os.ReadFile(o.TLS.CAFile)
			if err != nil {
				return nil, fmt.Errorf("state.redis.tls.caFile: %w", err)
			}
			pool := x509.NewCertPool()
			if !pool.AppendCertsFromPEM(pem) {
				return nil, fmt.Errorf("state.redis.tls.caFile: %s holds no PEM certificate", o.TLS.CAFile)
			}
			ro.TLSConfig.RootCAs = pool
		}
	}
	if o.Timeout <= 0 {
		o.Timeout = config.DefaultStateTimeoutMs * time.Millisecond
	}
	if o.TTL <= 0 {
		o.TTL = config.DefaultStateTTL
	}
	if o.KeyPrefix == "" {
		o.KeyPrefix = config.DefaultStateKeyPrefix
	}
	// The operation's own deadline bounds it; the client's timeouts only keep a dead
	// connection from holding a pool slot longer than that.
	ro.DialTimeout, ro.ReadTimeout, ro.WriteTimeout = o.Timeout, o.Timeout, o.Timeout
	ro.MaxRetries = 1
	ro.ContextTimeoutEnabled = true
	return &Redis{c: redis.NewClient(ro), prefix: o.KeyPrefix, ttl: o.TTL, timeout: o.Timeout}, nil
}

// keys of one scope. The tenant and session are hashed: session ids come from clients
// (X-Hookproxy-Session), so keys stay short, printable and free of the raw values.
func (r *Redis) keys(scope Scope) (records string, pending func(Deferral) string) {
	h := sha256.Sum256([]byte(scope.Tenant + "\x00" + scope.Session))
	base := r.prefix + "{" + hex.EncodeToString(h[:16]) + "}:"
	return base + "rec", func(k Deferral) string { return base + string(k) }
}

// Load implements Store: HMGET of the request's ids and PEXPIRE of the records, LRANGE
// and DEL of each queue taken, PEXPIRE of the others, in one transaction.
func (r *Redis) Load(ctx context.Context, scope Scope, ids []string, take ...Deferral) (Snapshot, error) {
	ctx, cancel := context.WithTimeout(ctx, r.timeout)
	defer cancel()
	recKey, pendKey := r.keys(scope)
	var recs *redis.SliceCmd
	queues := make([]*redis.StringSliceCmd, len(take))
	_, err := r.c.TxPipelined(ctx, func(p redis.Pipeliner) error {
		if len(ids) > 0 {
			recs = p.HMGet(ctx, recKey, ids...)
		}
		p.PExpire(ctx, recKey, r.ttl)
		for i, k := range take {
			queues[i] = p.LRange(ctx, pendKey(k), 0, -1)
			p.Del(ctx, pendKey(k))
		}
		// A queue left waiting (next_turn during a tool loop) is used too.
		for _, k := range [...]Deferral{NextCall, NextTurn} {
			if !slices.Contains(take, k) {
				p.PExpire(ctx, pendKey(k), r.ttl)
			}
		}
		return nil
	})
	if err != nil {
		return Snapshot{}, fmt.Errorf("redis load: %w", err)
	}
	var snap Snapshot
	if recs != nil {
		for _, v := range recs.Val() {
			str, ok := v.(string) // nil: no record of that id
			var rec Record
			// A value that does not decode is skipped: its content is settled again.
			if ok && json.Unmarshal([]byte(str), &rec) == nil && rec.ID != "" {
				snap.Records = append(snap.Records, rec)
			}
		}
	}
	for i, k := range take {
		var msgs []ahp.Message
		for _, v := range queues[i].Val() {
			var m ahp.Message
			if json.Unmarshal([]byte(v), &m) == nil {
				msgs = append(msgs, m)
			}
		}
		snap.put(k, msgs)
	}
	return snap, nil
}

// Record implements Store: HSET and PEXPIRE in one transaction; past
// MaxRecordsPerScope, random records are dropped (a dropped record costs a repeated hook
// call, so which ones go does not matter for safety).
func (r *Redis) Record(ctx context.Context, scope Scope, recs []Record) error {
	if len(recs) == 0 {
		return nil
	}
	ctx, cancel := context.WithTimeout(ctx, r.timeout)
	defer cancel()
	recKey, _ := r.keys(scope)
	fields := make([]any, 0, 2*len(recs))
	written := make(map[string]bool, len(recs))
	var tooLarge error
	for _, rec := range recs {
		b, err := json.Marshal(rec)
		if err != nil {
			return fmt.Errorf("redis record: %w", err)
		}
		if len(b) > MaxValueBytes {
			tooLarge = ErrTooLarge
			continue
		}
		fields = append(fields, rec.ID, b)
		written[rec.ID] = true
	}
	if len(fields) == 0 {
		return tooLarge
	}
	var n *redis.IntCmd
	_, err := r.c.TxPipelined(ctx, func(p redis.Pipeliner) error {
		p.HSet(ctx, recKey, fields...)
		p.PExpire(ctx, recKey, r.ttl)
		n = p.HLen(ctx, recKey)
		return nil
	})
	if err != nil {
		return fmt.Errorf("redis record: %w", err)
	}
	if over := n.Val() - MaxRecordsPerScope; over > 0 {
		drop, err := r.c.HRandField(ctx, recKey, int(over)+len(written)).Result()
		if err != nil {
			return fmt.Errorf("redis record trim: %w", err)
		}
		var del []string
		for _, f := range drop {
			if !written[f] && int64(len(del)) < over {
				del = append(del, f)
			}
		}
		if len(del) > 0 {
			if err := r.c.HDel(ctx, recKey, del...).Err(); err != nil {
				return fmt.Errorf("redis record trim: %w", err)
			}
		}
	}
	return tooLarge
}

// Defer implements Store: RPUSH, LTRIM to MaxPendingPerKind and PEXPIRE in one
// transaction.
func (r *Redis) Defer(ctx context.Context, scope Scope, kind Deferral, msgs []ahp.Message) error {
	if len(msgs) == 0 {
		return nil
	}
	ctx, cancel := context.WithTimeout(ctx, r.timeout)
	defer cancel()
	_, pendKey := r.keys(scope)
	key := pendKey(kind)
	vals := make([]any, 0, len(msgs))
	var tooLarge error
	for _, m := range msgs {
		b, err := json.Marshal(m)
		if err != nil {
			return fmt.Errorf("redis defer: %w", err)
		}
		if len(b) > MaxValueBytes {
			tooLarge = ErrTooLarge
			continue
		}
		vals = append(vals, b)
	}
	if len(vals) == 0 {
		return tooLarge
	}
	_, err := r.c.TxPipelined(ctx, func(p redis.Pipeliner) error {
		p.RPush(ctx, key, vals...)
		p.LTrim(ctx, key, -MaxPendingPerKind, -1)
		p.PExpire(ctx, key, r.ttl)
		return nil
	})
	if err != nil {
		return fmt.Errorf("redis defer: %w", err)
	}
	return tooLarge
}

// Ping checks that Redis answers (readiness, startup log).
func (r *Redis) Ping(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, r.timeout)
	defer cancel()
	return r.c.Ping(ctx).Err()
}

// Close implements Store.
func (r *Redis) Close() error { return r.c.Close() }

// Client is the store's Redis client, for the approvals sharing its connection settings.
func (r *Redis) Client() *redis.Client { return r.c }

// KeyPrefix is the prefix every key of the store starts with.
func (r *Redis) KeyPrefix() string { return r.prefix }
