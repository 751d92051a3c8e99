package app

import (
	"fmt"
	"io"
	"net"
	"net/http"
	"path/filepath"
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

// TestStateSurvivesReload: the store is opened once and kept across reloads, so a tool
// result redacted before a reload is re-applied after it without settling it again; a
// reload that changes the state block says that it takes a restart.
func TestStateSurvivesReload(t *testing.T) {
	up := newUpstream(t)
	dir := t.TempDir()
	const key = "AKIAIOSFODNN7EXAMPLE"
	reg := `{"protocolVersion":"draft","hooks":[{"id":"org.example.secrets","transport":{"type":"in_process","policy":"secrets","config":{"action":"redact"}},` +
		`"subscriptions":[{"events":["tool.after"],"mode":"intercept","timeoutMs":2000,"failurePolicy":"fail-closed","content":{"default":"body"}}]}]}`
	cfgText := configYAML(t, up.URL, "state:\n  memory:\n    maxSessions: 100\n")
	s := startServer(t, dir, cfgText, reg)
	loop := func(n int) string {
		m := `{"role":"user","content":"deploy"}`
		for i := 1; i <= n; i++ {
			out := "ok"
			if i == 1 {
				out = "aws_access_key_id = " + key
			}
			m += fmt.Sprintf(`,{"role":"assistant","content":null,"tool_calls":[{"id":"call_%d","type":"function","function":{"name":"Bash","arguments":"{}"}}]},{"role":"tool","tool_call_id":"call_%d","content":%q}`, i, i, out)
		}
		return `{"model":"gpt-4o","messages":[` + m + `]}`
	}
	post := func(body string) {
		t.Helper()
		req, _ := http.NewRequest(http.MethodPost, s.proxy+"/openai/v1/chat/completions", strings.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("X-Hookproxy-Session", "reload-1")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 200 {
			t.Fatalf("status %d", resp.StatusCode)
		}
	}
	post(loop(1))
	writeFile(t, filepath.Join(dir, "hookproxy.yaml"), strings.Replace(cfgText, "maxSessions: 100", "maxSessions: 200", 1), 0o600)
	s.reload <- struct{}{}
	eventually(t, "the reload", func() bool {
		return s.metric(t, `hookproxy_config_reloads_total{result="success"}`) == 1
	})
	post(loop(2))
	if !strings.Contains(s.logs.String(), `"key":"state"`) {
		t.Error("a changed state block was not reported as needing a restart")
	}
	// call_1 was rewritten once, before the reload; after it the record was re-applied.
	if v := s.metric(t, `hookproxy_boundary_decisions_total{event="tool.after",outcome="rewritten"}`); v != 1 {
		t.Errorf("tool.after rewritten %v times, want 1: the reload lost the conversation state", v)
	}
	if !strings.Contains(loop(2), key) {
		t.Fatal("control: the client's body carries no secret")
	}
	for i, b := range up.received() {
		if strings.Contains(b, key) {
			t.Fatalf("upstream request %d carried the secret: %s", i+1, b)
		}
	}
}
