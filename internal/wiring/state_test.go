package wiring

import (
	"net"
	"strings"
	"testing"

	"go.uber.org/zap"
	"go.uber.org/zap/zaptest/observer"

	"github.com/hookproxy/hookproxy/config"
	"github.com/hookproxy/hookproxy/internal/redistest"
	"github.com/hookproxy/hookproxy/state"
)

func TestNewStateStore(t *testing.T) {
	redisCfg := func(url string) config.State {
		return config.State{Backend: config.StateRedisBackend, OnStoreFailure: config.StateReSettle,
			Redis: config.StateRedis{URL: url, KeyPrefix: "w:", TimeoutMs: 200}}
	}
	t.Run("memory", func(t *testing.T) {
		st, err := NewStateStore(config.State{Backend: config.StateMemoryBackend, Memory: config.StateMemory{MaxSessions: 3}}, zap.NewNop())
		if err != nil {
			t.Fatal(err)
		}
		if _, ok := st.(*state.Memory); !ok {
			t.Fatalf("store %T", st)
		}
	})
	t.Run("password variable unset", func(t *testing.T) {
		c := redisCfg("redis://127.0.0.1:6379/0")
		c.Redis.PasswordEnv = "HOOKPROXY_TEST_UNSET_PASSWORD_VAR"
		if _, err := NewStateStore(c, zap.NewNop()); err == nil || !strings.Contains(err.Error(), "HOOKPROXY_TEST_UNSET_PASSWORD_VAR") {
			t.Fatalf("err %v", err)
		}
	})
	t.Run("redis down at start is logged, not fatal", func(t *testing.T) {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		addr := ln.Addr().String()
		_ = ln.Close() // nothing listens there now
		core, logs := observer.New(zap.InfoLevel)
		st, err := NewStateStore(redisCfg("redis://"+addr+"/0"), zap.New(core))
		if err != nil {
			t.Fatal(err)
		}
		defer st.Close()
		if logs.FilterMessageSnippet("does not answer at start").Len() != 1 {
			t.Fatalf("logs %v", logs.All())
		}
	})
	t.Run("redis up", func(t *testing.T) {
		srv := redistest.Start(t)
		core, logs := observer.New(zap.InfoLevel)
		st, err := NewStateStore(redisCfg(srv.URL()), zap.New(core))
		if err != nil {
			t.Fatal(err)
		}
		defer st.Close()
		if _, ok := st.(*state.Redis); !ok || logs.FilterMessageSnippet("conversation state on redis").Len() != 1 {
			t.Fatalf("store %T, logs %v", st, logs.All())
		}
	})
}
