package app

import (
	"context"
	"fmt"
	"os"
	"time"

	"go.uber.org/zap"

	"github.com/hookproxy/hookproxy/config"
	"github.com/hookproxy/hookproxy/metrics"
	"github.com/hookproxy/hookproxy/proxy"
	"github.com/hookproxy/hookproxy/state"
)

// The admin listener's metrics count state store failures (an optional capability the
// proxy discovers by type assertion).
var _ proxy.StoreMetrics = (*metrics.Metrics)(nil)

// NewStateStore opens the conversation state store that cfg (state:) names. A Redis that
// does not answer at start is logged, not fatal: requests then follow
// state.onStoreFailure until it does, and the proxy recovers without a restart.
func NewStateStore(cfg config.State, log *zap.Logger) (state.Store, error) {
	switch cfg.Backend {
	case "", config.StateMemoryBackend:
		log.Info("conversation state in memory: several replicas do not share it, a restart forgets it (its hooks run again)",
			zap.Int("maxSessions", cfg.Memory.MaxSessions), zap.Duration("ttl", cfg.Memory.TTL))
		return state.NewMemory(cfg.Memory.MaxSessions, cfg.Memory.TTL), nil
	case config.StateRedisBackend:
	default:
		return nil, fmt.Errorf("state.backend: %q is not memory or redis", cfg.Backend)
	}
	r := cfg.Redis
	o := state.RedisOptions{URL: r.URL, KeyPrefix: r.KeyPrefix, TTL: r.TTL,
		Timeout: time.Duration(r.TimeoutMs) * time.Millisecond,
		TLS:     state.RedisTLS{Enabled: r.TLS.Enabled, CAFile: r.TLS.CAFile, ServerName: r.TLS.ServerName}}
	if r.PasswordEnv != "" {
		pw, ok := os.LookupEnv(r.PasswordEnv)
		if !ok {
			return nil, fmt.Errorf("state.redis.passwordEnv: environment variable %s is not set", r.PasswordEnv)
		}
		o.Password = pw
	}
	st, err := state.NewRedis(o)
	if err != nil {
		return nil, err
	}
	if err := st.Ping(context.Background()); err != nil {
		log.Error("state store (redis) does not answer at start; requests follow state.onStoreFailure until it does",
			zap.String("onStoreFailure", cfg.OnStoreFailure), zap.Error(err))
	} else {
		log.Info("conversation state on redis", zap.String("keyPrefix", r.KeyPrefix), zap.Duration("ttl", r.TTL),
			zap.Int("timeoutMs", r.TimeoutMs), zap.String("onStoreFailure", cfg.OnStoreFailure))
	}
	return st, nil
}
