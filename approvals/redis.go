package approvals

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"
)

// Redis is the Store shared by several replicas. A record is a hash (prefix+"approval:"+id:
// the record as created, its state, decider, time and reason, its expiry in ms); a sorted
// set (prefix+"approvals") indexes them by creation for listing. Every change is published
// on prefix+"approvals:changes" as the record's JSON, so the replica holding the call
// learns of a decision taken on another at once.
type Redis struct {
	c       *redis.Client
	prefix  string
	timeout time.Duration
}

var _ Store = (*Redis)(nil)

// NewRedis uses c (the state store's client; Close does not close it). timeout bounds
// each operation (0 = 1s).
func NewRedis(c *redis.Client, prefix string, timeout time.Duration) *Redis {
	if timeout <= 0 {
		timeout = time.Second
	}
	return &Redis{c: c, prefix: prefix, timeout: timeout}
}

func (r *Redis) key(id string) string { return r.prefix + "approval:" + id }
func (r *Redis) index() string        { return r.prefix + "approvals" }
func (r *Redis) channel() string      { return r.prefix + "approvals:changes" }

func (r *Redis) op(ctx context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeout(ctx, r.timeout)
}

func (r *Redis) Create(ctx context.Context, rec Record) error {
	ctx, cancel := r.op(ctx)
	defer cancel()
	body, err := json.Marshal(rec)
	if err != nil {
		return err
	}
	ttl := time.Until(rec.ExpiresAt) + keepDecided
	k := r.key(rec.ID)
	_, err = r.c.TxPipelined(ctx, func(p redis.Pipeliner) error {
		p.HSet(ctx, k, "rec", body, "state", StatePending, "exp", rec.ExpiresAt.UnixMilli())
		p.Expire(ctx, k, ttl)
		p.ZAdd(ctx, r.index(), redis.Z{Score: float64(rec.CreatedAt.UnixMilli()), Member: rec.ID})
		// Index entries older than the retention point at keys that are gone.
		p.ZRemRangeByScore(ctx, r.index(), "-inf", strconv.FormatInt(time.Now().Add(-keepDecided-10*time.Minute).UnixMilli(), 10))
		p.Publish(ctx, r.channel(), body)
		return nil
	})
	return err
}

func (r *Redis) Get(ctx context.Context, id string) (Record, error) {
	ctx, cancel := r.op(ctx)
	defer cancel()
	m, err := r.c.HGetAll(ctx, r.key(id)).Result()
	if err != nil {
		return Record{}, err
	}
	return fromHash(m)
}

func fromHash(m map[string]string) (Record, error) {
	if len(m) == 0 || m["rec"] == "" {
		return Record{}, ErrNotFound
	}
	var rec Record
	if err := json.Unmarshal([]byte(m["rec"]), &rec); err != nil {
		return Record{}, fmt.Errorf("approval record: %w", err)
	}
	rec.State = m["state"]
	rec.DecidedBy, rec.Reason = m["by"], m["reason"]
	if ms, err := strconv.ParseInt(m["at"], 10, 64); err == nil && ms > 0 {
		t := time.UnixMilli(ms).UTC()
		rec.DecidedAt = &t
	}
	return rec, nil
}

func (r *Redis) List(ctx context.Context) ([]Record, error) {
	ctx, cancel := r.op(ctx)
	defer cancel()
	ids, err := r.c.ZRangeArgs(ctx, redis.ZRangeArgs{Key: r.index(), Start: 0, Stop: -1, Rev: true}).Result()
	if err != nil {
		return nil, err
	}
	cmds := make([]*redis.MapStringStringCmd, len(ids))
	_, err = r.c.Pipelined(ctx, func(p redis.Pipeliner) error {
		for i, id := range ids {
			cmds[i] = p.HGetAll(ctx, r.key(id))
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	out := make([]Record, 0, len(ids))
	for _, c := range cmds {
		if rec, err := fromHash(c.Val()); err == nil {
			out = append(out, rec)
		}
	}
	sortNewestFirst(out)
	return out, nil
}

// settleScript is the compare-and-set out of pending: KEYS[1] the record, ARGV state,
// by, reason, now (ms). A decision at or after the expiry expires the record instead.
var settleScript = redis.NewScript(`
local st = redis.call('HGET', KEYS[1], 'state')
if not st then return 'missing' end
if st ~= 'pending' then return 'settled' end
local to, by, reason = ARGV[1], ARGV[2], ARGV[3]
local late = false
if to ~= 'expired' and tonumber(ARGV[4]) >= tonumber(redis.call('HGET', KEYS[1], 'exp')) then
  to, by, reason, late = 'expired', '', ARGV[5], true
end
redis.call('HSET', KEYS[1], 'state', to, 'by', by, 'reason', reason, 'at', ARGV[4])
if late then return 'late' end
return 'ok'
`)

func (r *Redis) Settle(ctx context.Context, id, state, by, reason string, now time.Time) (Record, error) {
	octx, cancel := r.op(ctx)
	res, err := settleScript.Run(octx, r.c, []string{r.key(id)}, state, by, reason, now.UnixMilli(), TimedOutReason).Text()
	cancel()
	if err != nil {
		return Record{}, err
	}
	if res == "missing" {
		return Record{}, ErrNotFound
	}
	rec, gerr := r.Get(ctx, id)
	if gerr != nil {
		return Record{}, gerr
	}
	if res == "settled" {
		return rec, ErrSettled
	}
	if body, err := json.Marshal(rec); err == nil {
		pctx, pcancel := r.op(ctx)
		_ = r.c.Publish(pctx, r.channel(), body).Err() // a lost message is caught by the waiter's re-read
		pcancel()
	}
	if res == "late" {
		return rec, ErrSettled
	}
	return rec, nil
}

// Watch subscribes to the change channel. go-redis re-subscribes after a reconnect;
// what was published meanwhile is lost, which the waiters' periodic re-read covers.
func (r *Redis) Watch(ctx context.Context) (<-chan Record, error) {
	sub := r.c.Subscribe(ctx, r.channel())
	sctx, cancel := r.op(ctx)
	_, err := sub.Receive(sctx) // the subscription confirmation
	cancel()
	if err != nil {
		_ = sub.Close()
		return nil, fmt.Errorf("approvals: subscribing to %s: %w", r.channel(), err)
	}
	out := make(chan Record, watchQueueSize)
	msgs := sub.Channel()
	go func() {
		defer close(out)
		defer sub.Close()
		for {
			select {
			case <-ctx.Done():
				return
			case m, ok := <-msgs:
				if !ok {
					return
				}
				var rec Record
				if json.Unmarshal([]byte(m.Payload), &rec) != nil || rec.ID == "" {
					continue
				}
				select {
				case out <- rec:
				default:
				}
			}
		}
	}()
	return out, nil
}

func (r *Redis) Close() error { return nil }

// IsStoreError reports an error of the store itself (not ErrNotFound / ErrSettled).
func IsStoreError(err error) bool {
	return err != nil && !errors.Is(err, ErrNotFound) && !errors.Is(err, ErrSettled)
}
