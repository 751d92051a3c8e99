package backend_test

import (
	"context"
	"encoding/json"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/hookproxy/hookproxy/chain"
	"github.com/hookproxy/hookproxy/chain/ahp"
	"github.com/hookproxy/hookproxy/chain/registration"
	"github.com/hookproxy/hookproxy/cmd/hookproxy/cli"
	"github.com/hookproxy/hookproxy/internal/hookproxybin"
)

// harnessCaps is what hookproxy's proxy advertises at these boundaries (modify with
// replace and merge, deny where the event allows it).
func harnessCaps(eventType string) ahp.Capabilities {
	return *fullCaps(eventType)
}

// harnessChain is hookproxy's own chain with the standalone backend registered as one
// remote backend, fail-closed, on every event the backend serves.
func harnessChain(t *testing.T, transport registration.Transport) *chain.Chain {
	t.Helper()
	return harnessChainAuth(t, transport, nil)
}

// harnessChainAuth is harnessChain with the backend's authentication.
func harnessChainAuth(t *testing.T, transport registration.Transport, auth *registration.Authentication) *chain.Chain {
	t.Helper()
	doc := &registration.Document{ProtocolVersion: ahp.ProtocolVersion, Hooks: []registration.Backend{{
		ID:             "com.example.policy_server",
		Transport:      transport,
		Authentication: auth,
		Subscriptions: []registration.Subscription{{
			Events: []string{"model.request.before", "tool.before", "tool.after"}, Mode: registration.ModeIntercept,
			TimeoutMs: 10000, FailurePolicy: registration.FailClosed, Content: map[string]string{"default": "body"},
		}},
	}}}
	ch, err := chain.New(doc, chain.Options{Source: "urn:hookproxy:test", ObserveTimeout: 2 * time.Second})
	if err != nil {
		t.Fatalf("chain.New: %v", err)
	}
	t.Cleanup(func() { _ = ch.Close() })
	return ch
}

// exerciseChain runs the boundaries a user relies on through the chain and checks the
// settlements.
func exerciseChain(t *testing.T, ch *chain.Chain) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()

	t.Run("model.request.before with an AWS key is redacted", func(t *testing.T) {
		ev := requestEvent("evt_chain_req", "Deploy with key "+awsKeyID+" to staging.")
		st := ch.Intercept(ctx, ev, harnessCaps(ev.Type))
		defer st.Wait()
		if st.Refused() || !st.Modified {
			t.Fatalf("settlement: permission %s, modified %v, records %+v", st.Permission, st.Modified, st.Records)
		}
		got := textsOf(st.Event.Items)
		if strings.Contains(got, awsKeyID) || !strings.Contains(got, "[REDACTED:aws_access_key_id:") ||
			!strings.Contains(got, "Deploy with key ") || !strings.Contains(got, " to staging.") {
			t.Errorf("effective request %q: want only the key redacted", got)
		}
		if len(st.Records) != 1 || st.Records[0].Outcome != chain.OutcomeAccepted {
			t.Errorf("records %+v", st.Records)
		}
	})
	t.Run("tool.before rm -rf / is denied", func(t *testing.T) {
		ev := toolEvent("evt_chain_rm", "Bash", `{"command":"rm -rf /"}`)
		st := ch.Intercept(ctx, ev, harnessCaps(ev.Type))
		defer st.Wait()
		if !st.Refused() || st.Denial == nil || st.Denial.Synthetic || st.Denial.Code != "hookproxy.tools.destructive" {
			t.Fatalf("settlement: permission %s, denial %+v, records %+v", st.Permission, st.Denial, st.Records)
		}
	})
	t.Run("tool.before Read is left alone", func(t *testing.T) {
		ev := toolEvent("evt_chain_read", "Read", `{"path":"README.md"}`)
		st := ch.Intercept(ctx, ev, harnessCaps(ev.Type))
		defer st.Wait()
		if st.Refused() || st.Modified || len(st.Records) != 1 || st.Records[0].Outcome != chain.OutcomeNoEffect {
			t.Fatalf("settlement: permission %s, modified %v, records %+v", st.Permission, st.Modified, st.Records)
		}
	})
	t.Run("tool.after output with a secret is redacted", func(t *testing.T) {
		ev := toolAfterEvent("evt_chain_out", "aws_access_key_id = "+awsKeyID+"\nregion = eu-west-1")
		st := ch.Intercept(ctx, ev, harnessCaps(ev.Type))
		defer st.Wait()
		got := textsOf(st.Event.Items)
		if !st.Modified || strings.Contains(got, awsKeyID) || !strings.Contains(got, "region = eu-west-1") {
			t.Fatalf("effective output %q, records %+v", got, st.Records)
		}
	})
	t.Run("tool.before with a secret in the input is rewritten", func(t *testing.T) {
		ev := toolEvent("evt_chain_in", "Bash", `{"command":"aws configure set aws_access_key_id `+awsKeyID+`"}`)
		st := ch.Intercept(ctx, ev, harnessCaps(ev.Type))
		defer st.Wait()
		var in map[string]string
		if err := json.Unmarshal(st.Event.Tool.Input, &in); err != nil {
			t.Fatal(err)
		}
		if st.Refused() || !st.Modified || strings.Contains(in["command"], awsKeyID) || !strings.HasPrefix(in["command"], "aws configure set") {
			t.Fatalf("effective input %s, records %+v", st.Event.Tool.Input, st.Records)
		}
	})
}

// TestFromChainOverHTTP: hookproxy's chain calls the standalone backend over real HTTP on
// loopback.
func TestFromChainOverHTTP(t *testing.T) {
	srv := httptest.NewServer(newDefaultServer(t).Handler())
	defer srv.Close()
	if !strings.HasPrefix(srv.URL, "http://127.0.0.1:") {
		t.Fatalf("test server is not on loopback: %s", srv.URL)
	}
	exerciseChain(t, harnessChain(t, registration.Transport{Type: registration.TransportHTTP, URL: srv.URL + "/ahp"}))
}

// TestFromChainOverStdio: hookproxy's chain runs `hookproxy backend --config F --stdio` as
// a persistent stdio backend, the test binary itself started as hookproxy.
func TestFromChainOverStdio(t *testing.T) {
	if testing.Short() {
		t.Skip("starts the hookproxy binary as a child process")
	}
	dir := t.TempDir()
	bin := hookproxybin.Path(t)
	reg := filepath.Join(dir, "policies.json")
	if err := os.WriteFile(reg, defaultRegistrationBytes(t), 0o600); err != nil {
		t.Fatal(err)
	}
	ch := harnessChain(t, registration.Transport{Type: registration.TransportStdio, Command: bin,
		Args: []string{"backend", "--config", reg, "--stdio", "--log-level", "warn"}, Lifecycle: registration.LifecyclePersistent})
	if err := ch.Ready(); err != nil {
		t.Fatalf("the stdio backend does not start: %v", err)
	}
	exerciseChain(t, ch)
}

func defaultRegistrationBytes(t testing.TB) []byte {
	t.Helper()
	b, err := json.Marshal(defaultDocument(t))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestMain makes this test binary a hookproxy binary for the stdio backend test
// (hookproxybin), so that no go build is needed.
func TestMain(m *testing.M) {
	hookproxybin.RunIfInvoked(cli.Main)
	os.Exit(m.Run())
}
