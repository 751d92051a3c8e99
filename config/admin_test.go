package config_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/hookproxy/hookproxy/config"
)

const adminRoutes = "routes:\n  - {prefix: /a, api: openai, upstream: https://a.example}\n"

func TestAdminMappingForm(t *testing.T) {
	secret := filepath.Join(t.TempDir(), "alice")
	if err := os.WriteFile(secret, []byte("alice-token\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	t.Setenv("HP_TEST_ADMIN_TOKEN", "env-token")
	cfg, err := config.Parse([]byte("admin:\n  listen: 127.0.0.1:9191\n  tokenRef: env:HP_TEST_ADMIN_TOKEN\n"+
		"  tokens:\n    - {name: alice, tokenRef: file:"+secret+"}\n    - {name: bob, token: literal}\n"+adminRoutes), "")
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Admin != "127.0.0.1:9191" {
		t.Fatalf("admin address = %q", cfg.Admin)
	}
	var got []string
	for _, tok := range cfg.AdminAuth.NamedTokens() {
		s, err := tok.Secret()
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, tok.Name+"="+s)
	}
	if strings.Join(got, ",") != "admin=env-token,alice=alice-token,bob=literal" {
		t.Fatalf("tokens = %v", got)
	}
	// The scalar form still means the address, with no token (loopback only).
	cfg, err = config.Parse([]byte("admin: 127.0.0.1:9192\n"+adminRoutes), "")
	if err != nil || cfg.Admin != "127.0.0.1:9192" || len(cfg.AdminAuth.NamedTokens()) != 0 {
		t.Fatalf("scalar admin: %+v, %v", cfg, err)
	}
}

func TestAdminTokenProblems(t *testing.T) {
	os.Unsetenv("HP_TEST_UNSET_TOKEN")
	for _, tc := range []struct{ yaml, want string }{
		{"admin:\n  listen: 127.0.0.1:9191\n  tokenRef: env:HP_TEST_UNSET_TOKEN\n", "admin.tokenRef: env:HP_TEST_UNSET_TOKEN is not set"},
		{"admin:\n  listen: 127.0.0.1:9191\n  tokenRef: file:relative/path\n", "must be absolute"},
		{"admin:\n  listen: 127.0.0.1:9191\n  tokenRef: vault:x\n", "not supported"},
		{"admin:\n  listen: 127.0.0.1:9191\n  token: a\n  tokenRef: env:X\n", "not both"},
		{"admin:\n  token: a\n", "no admin address"},
		{"admin:\n  listen: 127.0.0.1:9191\n  tokens:\n    - {token: a}\n", "admin.tokens[0].name: is required"},
		{"admin:\n  listen: 127.0.0.1:9191\n  token: a\n  tokens:\n    - {name: admin, token: b}\n", `"admin" is also admin.token`},
		{"admin:\n  listen: 127.0.0.1:9191\n  tokens:\n    - {name: x}\n", "token or tokenRef is required"},
		{"admin:\n  listen: 127.0.0.1:9191\n  tokn: a\n", "admin.tokn: unknown key"},
	} {
		_, err := config.Parse([]byte(tc.yaml+adminRoutes), "")
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%q: err = %v, want %q", tc.yaml, err, tc.want)
		}
	}
	// Control: the same shapes, corrected, load.
	t.Setenv("HP_TEST_UNSET_TOKEN", "now-set")
	if _, err := config.Parse([]byte("admin:\n  listen: 127.0.0.1:9191\n  tokenRef: env:HP_TEST_UNSET_TOKEN\n"+adminRoutes), ""); err != nil {
		t.Fatal(err)
	}
}

func TestApprovalsConfig(t *testing.T) {
	cfg, err := config.Parse([]byte(adminRoutes), "")
	if err != nil || cfg.Approvals.Timeout != config.DefaultApprovalTimeout {
		t.Fatalf("default timeout: %v %v", cfg.Approvals.Timeout, err)
	}
	cfg, err = config.Parse([]byte("admin: 127.0.0.1:9300\napprovals:\n  timeout: 5m\n  notify:\n    - {url: https://hooks.example/x}\n    - {url: http://127.0.0.1:1/y, format: slack}\n"+adminRoutes), "")
	if err != nil || cfg.Approvals.Timeout.Minutes() != 5 || cfg.Approvals.Notify[0].Format != "json" || cfg.ApprovalLinkBase() != "http://127.0.0.1:9300" {
		t.Fatalf("%+v %v", cfg.Approvals, err)
	}
	for _, tc := range []struct{ yaml, want string }{
		{"approvals: {timeout: 11m}\n", "approvals.timeout: 11m0s must be above 0 and at most 10m0s"},
		{"approvals: {timeout: -1s}\n", "approvals.timeout"},
		{"approvals:\n  notify: [{url: ftp://x/y}]\n", "approvals.notify[0].url"},
		{"approvals:\n  notify: [{url: https://x/y, format: teams}]\n", "approvals.notify[0].format"},
		{"approvals: {publicURL: nope}\n", "approvals.publicURL"},
	} {
		if _, err := config.Parse([]byte(tc.yaml+adminRoutes), ""); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%q: %v, want %q", tc.yaml, err, tc.want)
		}
	}
}
