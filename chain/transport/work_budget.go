package transport

import (
	"context"
	"sync/atomic"
)

// WorkBudget bounds the work in-process policies do for one request, over all of them and
// every boundary of the request: the bytes their scanners examine, counting each window a
// detector re-reads and weighting regular-expression passes by what they cost. A deadline
// stops one policy call; the budget bounds what a request can make the proxy do in total,
// so a crafted prompt cannot keep a core busy after its refusal. It is safe for concurrent
// use: a policy abandoned at its deadline may still be spending while the next one runs.
type WorkBudget struct {
	limit int64
	spent atomic.Int64
}

// NewWorkBudget returns a budget of limit units (bytes examined).
func NewWorkBudget(limit int64) *WorkBudget { return &WorkBudget{limit: limit} }

// Spend counts n units and reports whether the budget still holds. Once it is exceeded it
// stays exceeded.
func (b *WorkBudget) Spend(n int64) bool { return b.spent.Add(n) <= b.limit }

// Spent is what has been counted so far (it may exceed the limit by the last Spend).
func (b *WorkBudget) Spent() int64 { return b.spent.Load() }

// Limit is the budget's size.
func (b *WorkBudget) Limit() int64 { return b.limit }

type workBudgetKey struct{}

// WithWorkBudget returns ctx carrying b, for the in-process policies the request reaches.
func WithWorkBudget(ctx context.Context, b *WorkBudget) context.Context {
	return context.WithValue(ctx, workBudgetKey{}, b)
}

// WorkBudgetFrom returns the budget ctx carries, or nil.
func WorkBudgetFrom(ctx context.Context) *WorkBudget {
	b, _ := ctx.Value(workBudgetKey{}).(*WorkBudget)
	return b
}

// DefaultWorkBudget is the budget of a policy call whose context carries none (the
// built-in policies served by `hookproxy backend`): the default of the proxy's
// limits.maxPolicyScanBytes (config.DefaultMaxPolicyScanBytes), 1 GiB of examined bytes.
const DefaultWorkBudget = 1 << 30
