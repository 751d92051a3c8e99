package registration_test

import (
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/hookproxy/hookproxy/chain/registration"
	"github.com/hookproxy/hookproxy/internal/ahptest"
)

// hermetic options: no dependency on the machine's PATH or environment.
func testOptions() registration.Options {
	return registration.Options{
		Policies: map[string]bool{"secrets": true, "tools": true},
		CheckPolicyConfig: func(name string, cfg json.RawMessage) error {
			if name == "tools" && strings.Contains(string(cfg), `"bad"`) {
				return errors.New("bad config")
			}
			if name == "tools" && strings.Contains(string(cfg), `"deep"`) {
				return &registration.PolicyConfigError{Path: "$.deny[0]", Reason: "deep problem"}
			}
			return nil
		},
		LookPath: func(file string) (string, error) {
			if file == "present-tool" {
				return "/usr/bin/present-tool", nil
			}
			return "", errors.New("not found")
		},
		LookupEnv: func(key string) (string, bool) {
			switch key {
			case "SET_TOKEN":
				return "x", true
			case "EMPTY_TOKEN":
				return "", true
			}
			return "", false
		},
	}
}

// The expected error paths of every invalid registration fixture.
var fixtureErrorPaths = map[string][]string{
	"content-default-missing.invalid.json":   {"hooks[0].subscriptions[0].content"},
	"empty-hooks.invalid.json":               {"hooks"},
	"intercept-content-missing.invalid.json": {"hooks[0].subscriptions[0]"},
	"intercept-observation-event.invalid.json": {
		"hooks[0].subscriptions[0].events[0]", "hooks[0].subscriptions[0]",
	},
	"literal-token.invalid.json":           {"hooks[0].authentication.token", "hooks[0].subscriptions[0]"},
	"observe-content-missing.invalid.json": {"hooks[1].subscriptions[1]"},
	"observe-policy-fields.invalid.json": {
		"hooks[0].subscriptions[0].timeoutMs", "hooks[0].subscriptions[0].failurePolicy", "hooks[0].subscriptions[0]",
	},
}

func errorPaths(problems []registration.Problem) []string {
	var out []string
	for _, p := range problems {
		if !p.Warning {
			out = append(out, p.Path)
		}
	}
	return out
}

func TestRegistrationFixtures(t *testing.T) {
	files := ahptest.Fixtures(t, "registration")
	if len(files) != 9 {
		t.Errorf("%d registration fixtures, want 9", len(files))
	}
	for _, f := range files {
		name := filepath.Base(f)
		t.Run(name, func(t *testing.T) {
			doc, problems, err := registration.Load(f, testOptions())
			valid := strings.HasSuffix(name, ".valid.json")
			if valid {
				if err != nil {
					t.Fatalf("valid fixture refused: %v", err)
				}
				if doc == nil || len(doc.Hooks) == 0 {
					t.Fatalf("no document decoded")
				}
				return
			}
			if err == nil {
				t.Fatalf("invalid fixture accepted; problems: %v", problems)
			}
			var perr *registration.Error
			if !errors.As(err, &perr) || perr.File != f {
				t.Fatalf("error %T %v does not name the file", err, err)
			}
			want := fixtureErrorPaths[name]
			got := errorPaths(problems)
			if strings.Join(got, "|") != strings.Join(want, "|") {
				t.Errorf("error paths = %q, want %q\n%v", got, want, err)
			}
			for _, p := range want {
				if !strings.Contains(err.Error(), p+": ") {
					t.Errorf("error text lacks %q:\n%v", p, err)
				}
			}
		})
	}
}

func TestPortableFixtureDecodes(t *testing.T) {
	doc, problems, err := registration.Load(filepath.Join(ahptest.FixturesDir(t), "registration", "portable.valid.json"), testOptions())
	if err != nil {
		t.Fatal(err)
	}
	if doc.ProtocolVersion != "draft" || len(doc.Hooks) != 2 {
		t.Fatalf("doc = %+v", doc)
	}
	h0, h1 := doc.Hooks[0], doc.Hooks[1]
	if h0.ID != "com.example.policy" || h0.Transport.Type != "http" || h0.Authentication == nil || h0.Authentication.TokenEnv != "AHP_POLICY_TOKEN" {
		t.Errorf("hooks[0] = %+v", h0)
	}
	s := h0.Subscriptions[0]
	if s.Mode != "intercept" || s.TimeoutMs != 750 || s.FailurePolicy != "fail-closed" || s.Content["default"] != "metadata" {
		t.Errorf("hooks[0].subscriptions[0] = %+v", s)
	}
	if h1.Transport.Command != "/usr/local/bin/local-review" || h1.Transport.Lifecycle != "persistent" || len(h1.Transport.Args) != 1 {
		t.Errorf("hooks[1].transport = %+v", h1.Transport)
	}
	// Environment problems are warnings: the token variable is unset and the command absent.
	var warned []string
	for _, p := range problems {
		if !p.Warning {
			t.Errorf("unexpected error %v", p)
		}
		warned = append(warned, p.Path)
	}
	if strings.Join(warned, "|") != "hooks[0].authentication.tokenEnv|hooks[1].transport.command" {
		t.Errorf("warnings = %q", warned)
	}
}

const (
	httpT   = `{"type":"http","url":"https://policy.example.com/ahp"}`
	subI    = `{"events":["tool.before"],"mode":"intercept","timeoutMs":500,"failurePolicy":"fail-closed","content":{"default":"metadata"}}`
	subO    = `{"events":["tool.after"],"mode":"observe","content":{"default":"metadata"}}`
	bearerE = `{"type":"bearer","tokenEnv":"SET_TOKEN"}`
)

func backend(id, transport, auth string, subs ...string) string {
	b := `{"id":"` + id + `","transport":` + transport
	if auth != "" {
		b += `,"authentication":` + auth
	}
	return b + `,"subscriptions":[` + strings.Join(subs, ",") + `]}`
}

func doc(backends ...string) string {
	return `{"protocolVersion":"draft","hooks":[` + strings.Join(backends, ",") + `]}`
}

func one(sub string) string { return doc(backend("com.example.a", httpT, "", sub)) }

// TestParseTable covers the document shape (AHP-REG-001: protocolVersion and a non-empty,
// ordered hooks array) and every other load-time rule.
func TestParseTable(t *testing.T) {
	tests := []struct {
		desc string
		doc  string
		// errs are the expected error paths, in order; nil means valid.
		errs []string
		// msg, when set, must appear in the first error message.
		msg string
		// warns are expected warning paths (checked only when set).
		warns []string
		// beyondSchema marks hookproxy rules the portable JSON Schema does not express
		// (in_process, https-for-remote, literal secrets, ...): the schema is not consulted.
		beyondSchema bool
	}{
		{desc: "minimal valid", doc: one(subI)},
		{desc: "not an object", doc: `[]`, errs: []string{"$"}, msg: "must be an object"},
		{desc: "syntax error has line", doc: "{\n \"protocolVersion\": \"draft\",,\n}", errs: []string{"$"}, msg: "line 2"},
		{desc: "trailing data", doc: one(subI) + " {}", errs: []string{"$"}, msg: "after the document", beyondSchema: true},
		{desc: "protocolVersion missing", doc: `{"hooks":[` + backend("com.example.a", httpT, "", subI) + `]}`, errs: []string{"$"}, msg: `"protocolVersion" is required`},
		{desc: "protocolVersion 0.1", doc: strings.Replace(one(subI), `"draft"`, `"0.1"`, 1), errs: []string{"protocolVersion"}, msg: `must be "draft"`},
		{desc: "hooks missing", doc: `{"protocolVersion":"draft"}`, errs: []string{"$"}, msg: `"hooks" is required`},
		{desc: "hooks not array", doc: `{"protocolVersion":"draft","hooks":{}}`, errs: []string{"hooks"}},
		{desc: "id not reverse-DNS", doc: doc(backend("policy", httpT, "", subI)), errs: []string{"hooks[0].id"}, msg: "reverse-DNS"},
		{desc: "id missing", doc: doc(`{"transport":` + httpT + `,"subscriptions":[` + subI + `]}`), errs: []string{"hooks[0]"}, msg: `"id" is required`},
		{desc: "duplicate id", doc: doc(backend("com.example.a", httpT, "", subI), backend("com.example.a", httpT, "", subO)), errs: []string{"hooks[1].id"}, msg: "duplicate backend id", beyondSchema: true},
		{desc: "transport missing", doc: doc(`{"id":"com.example.a","subscriptions":[` + subI + `]}`), errs: []string{"hooks[0]"}, msg: `"transport" is required`},
		{desc: "transport array", doc: doc(backend("com.example.a", `[`+httpT+`]`, "", subI)), errs: []string{"hooks[0].transport"}},
		{desc: "transport unknown type", doc: doc(backend("com.example.a", `{"type":"grpc","url":"https://x.example"}`, "", subI)), errs: []string{"hooks[0].transport.type"}},
		{desc: "http and stdio members", doc: doc(backend("com.example.a", `{"type":"http","url":"https://x.example","command":"x"}`, "", subI)), errs: []string{"hooks[0].transport.command"}, msg: "exactly one transport", beyondSchema: true},
		{desc: "http url missing", doc: doc(backend("com.example.a", `{"type":"http"}`, "", subI)), errs: []string{"hooks[0].transport"}},
		{desc: "http url relative", doc: doc(backend("com.example.a", `{"type":"http","url":"/ahp"}`, "", subI)), errs: []string{"hooks[0].transport.url"}},
		{desc: "http url ftp", doc: doc(backend("com.example.a", `{"type":"http","url":"ftp://x.example/"}`, "", subI)), errs: []string{"hooks[0].transport.url"}},
		{desc: "remote plain http", doc: doc(backend("com.example.a", `{"type":"http","url":"http://policy.example.com/ahp"}`, "", subI)), errs: []string{"hooks[0].transport.url"}, msg: "must use https", beyondSchema: true},
		{desc: "loopback http localhost", doc: doc(backend("com.example.a", `{"type":"http","url":"http://localhost:8081/ahp"}`, "", subI))},
		{desc: "loopback http 127.0.0.2", doc: doc(backend("com.example.a", `{"type":"http","url":"http://127.0.0.2/ahp"}`, "", subI))},
		{desc: "loopback http ::1", doc: doc(backend("com.example.a", `{"type":"http","url":"http://[::1]:9/ahp"}`, "", subI))},
		{desc: "http 128.0.0.1 not loopback", doc: doc(backend("com.example.a", `{"type":"http","url":"http://128.0.0.1/ahp"}`, "", subI)), errs: []string{"hooks[0].transport.url"}, beyondSchema: true},
		{desc: "userinfo", doc: doc(backend("com.example.a", `{"type":"http","url":"https://u:p@x.example/ahp"}`, "", subI)), errs: []string{"hooks[0].transport.url"}, msg: "userinfo", beyondSchema: true},
		{desc: "fragment", doc: doc(backend("com.example.a", `{"type":"http","url":"https://x.example/ahp#f"}`, "", subI)), errs: []string{"hooks[0].transport.url"}, msg: "fragment", beyondSchema: true},
		{desc: "url with space", doc: doc(backend("com.example.a", `{"type":"http","url":"https://bad host/%zz"}`, "", subI)), errs: []string{"hooks[0].transport.url"}},
		{desc: "stdio valid", doc: doc(backend("com.example.a", `{"type":"stdio","command":"present-tool","lifecycle":"per_event","args":["a"]}`, "", subI))},
		{desc: "stdio empty command", doc: doc(backend("com.example.a", `{"type":"stdio","command":"","lifecycle":"persistent"}`, "", subI)), errs: []string{"hooks[0].transport.command"}},
		{desc: "stdio lifecycle missing", doc: doc(backend("com.example.a", `{"type":"stdio","command":"present-tool"}`, "", subI)), errs: []string{"hooks[0].transport"}, msg: `"lifecycle" is required`},
		{desc: "stdio lifecycle bad", doc: doc(backend("com.example.a", `{"type":"stdio","command":"present-tool","lifecycle":"forever"}`, "", subI)), errs: []string{"hooks[0].transport.lifecycle"}},
		{desc: "stdio args not strings", doc: doc(backend("com.example.a", `{"type":"stdio","command":"present-tool","lifecycle":"persistent","args":[1]}`, "", subI)), errs: []string{"hooks[0].transport.args[0]"}},
		{desc: "stdio command missing on PATH warns", doc: doc(backend("com.example.a", `{"type":"stdio","command":"absent-tool","lifecycle":"persistent"}`, "", subI)), warns: []string{"hooks[0].transport.command"}},
		{desc: "stdio with authentication", doc: doc(backend("com.example.a", `{"type":"stdio","command":"present-tool","lifecycle":"persistent"}`, bearerE, subI)), errs: []string{"hooks[0].authentication"}, msg: "only allowed with an http transport"},
		{desc: "in_process valid", doc: doc(backend("dev.hookproxy.secrets", `{"type":"in_process","policy":"secrets","config":{"mode":"redact"}}`, "", subI)), beyondSchema: true},
		{desc: "in_process unknown policy", doc: doc(backend("dev.hookproxy.x", `{"type":"in_process","policy":"nope"}`, "", subI)), errs: []string{"hooks[0].transport.policy"}, msg: "unknown built-in policy", beyondSchema: true},
		{desc: "in_process policy missing", doc: doc(backend("dev.hookproxy.x", `{"type":"in_process"}`, "", subI)), errs: []string{"hooks[0].transport"}, beyondSchema: true},
		{desc: "in_process config not object", doc: doc(backend("dev.hookproxy.x", `{"type":"in_process","policy":"secrets","config":[1]}`, "", subI)), errs: []string{"hooks[0].transport.config"}, beyondSchema: true},
		{desc: "in_process config refused by policy", doc: doc(backend("dev.hookproxy.x", `{"type":"in_process","policy":"tools","config":{"x":"bad"}}`, "", subI)), errs: []string{"hooks[0].transport.config"}, msg: "bad config", beyondSchema: true},
		{desc: "in_process config problem path", doc: doc(backend("dev.hookproxy.x", `{"type":"in_process","policy":"tools","config":{"deny":["deep"]}}`, "", subI)), errs: []string{"hooks[0].transport.config.deny[0]"}, msg: "policy tools: deep problem", beyondSchema: true},
		{desc: "in_process with authentication", doc: doc(backend("dev.hookproxy.x", `{"type":"in_process","policy":"secrets"}`, bearerE, subI)), errs: []string{"hooks[0].authentication"}, beyondSchema: true},
		{desc: "bearer tokenRef env", doc: doc(backend("com.example.a", httpT, `{"type":"bearer","tokenRef":"env:SET_TOKEN"}`, subI))},
		{desc: "bearer tokenRef file", doc: doc(backend("com.example.a", httpT, `{"type":"bearer","tokenRef":"file:/dev/null"}`, subI))},
		{desc: "bearer tokenRef bare path", doc: doc(backend("com.example.a", httpT, `{"type":"bearer","tokenRef":"/dev/null"}`, subI))},
		{desc: "bearer tokenRef of a secret provider hookproxy lacks", doc: doc(backend("com.example.a", httpT, `{"type":"bearer","tokenRef":"vault:ahp/token"}`, subI)),
			errs: []string{"hooks[0].authentication.tokenRef"}, msg: "not supported by hookproxy", beyondSchema: true},
		{desc: "bearer tokenRef relative file", doc: doc(backend("com.example.a", httpT, `{"type":"bearer","tokenRef":"file:token.txt"}`, subI)),
			errs: []string{"hooks[0].authentication.tokenRef"}, msg: "absolute", beyondSchema: true},
		{desc: "bearer tokenRef env unset warns", doc: doc(backend("com.example.a", httpT, `{"type":"bearer","tokenRef":"env:UNSET_TOKEN"}`, subI)), warns: []string{"hooks[0].authentication.tokenRef"}},
		{desc: "bearer tokenRef file missing warns", doc: doc(backend("com.example.a", httpT, `{"type":"bearer","tokenRef":"file:/nonexistent/hookproxy/token"}`, subI)), warns: []string{"hooks[0].authentication.tokenRef"}},
		{desc: "bearer both", doc: doc(backend("com.example.a", httpT, `{"type":"bearer","tokenEnv":"SET_TOKEN","tokenRef":"env:SET_TOKEN"}`, subI)), errs: []string{"hooks[0].authentication"}, msg: "not both"},
		{desc: "bearer neither", doc: doc(backend("com.example.a", httpT, `{"type":"bearer"}`, subI)), errs: []string{"hooks[0].authentication"}},
		{desc: "bearer bad env name", doc: doc(backend("com.example.a", httpT, `{"type":"bearer","tokenEnv":"1-TOKEN"}`, subI)), errs: []string{"hooks[0].authentication.tokenEnv"}},
		{desc: "bearer env unset warns", doc: doc(backend("com.example.a", httpT, `{"type":"bearer","tokenEnv":"UNSET_TOKEN"}`, subI)), warns: []string{"hooks[0].authentication.tokenEnv"}},
		{desc: "bearer env empty warns", doc: doc(backend("com.example.a", httpT, `{"type":"bearer","tokenEnv":"EMPTY_TOKEN"}`, subI)), warns: []string{"hooks[0].authentication.tokenEnv"}},
		{desc: "literal token", doc: doc(backend("com.example.a", httpT, `{"type":"bearer","tokenEnv":"SET_TOKEN","token":"abc"}`, subI)), errs: []string{"hooks[0].authentication.token"}, msg: "literal secrets", beyondSchema: true},
		{desc: "literal password", doc: doc(backend("com.example.a", httpT, `{"type":"bearer","tokenRef":"env:SET_TOKEN","password":"abc"}`, subI)), errs: []string{"hooks[0].authentication.password"}, beyondSchema: true},
		{desc: "literal clientSecret", doc: doc(backend("com.example.a", httpT, `{"type":"oauth","issuer":"https://login.example.com","resource":"https://x","clientId":"c","flow":"client_credentials","clientSecretRef":"env:SET_TOKEN","clientSecret":"s"}`, subI)), errs: []string{"hooks[0].authentication.clientSecret"}, beyondSchema: true},
		{desc: "nested literal secret", doc: doc(backend("com.example.a", httpT, `{"type":"bearer","tokenRef":"env:SET_TOKEN","extra":{"api_key":"k"}}`, subI)), errs: []string{"hooks[0].authentication.extra.api_key"}, beyondSchema: true},
		{desc: "oauth valid", doc: doc(backend("com.example.a", httpT, `{"type":"oauth","issuer":"https://login.example.com","resource":"https://x","clientId":"c","flow":"client_credentials","scopes":["a","b"],"clientSecretRef":"env:SET_TOKEN"}`, subI))},
		{desc: "oauth interactive flow unsupported", doc: doc(backend("com.example.a", httpT, `{"type":"oauth","issuer":"https://login.example.com","resource":"https://x","clientId":"c","flow":"authorization_code_pkce"}`, subI)),
			errs: []string{"hooks[0].authentication.flow"}, msg: "unattended", beyondSchema: true},
		{desc: "oauth client_credentials without secret", doc: doc(backend("com.example.a", httpT, `{"type":"oauth","issuer":"https://login.example.com","resource":"https://x","clientId":"c","flow":"client_credentials"}`, subI)),
			errs: []string{"hooks[0].authentication"}, msg: "clientSecretRef", beyondSchema: true},
		{desc: "oauth clientSecretRef of a secret provider hookproxy lacks", doc: doc(backend("com.example.a", httpT, `{"type":"oauth","issuer":"https://login.example.com","resource":"https://x","clientId":"c","flow":"client_credentials","clientSecretRef":"vault:s"}`, subI)),
			errs: []string{"hooks[0].authentication.clientSecretRef"}, msg: "not supported by hookproxy", beyondSchema: true},
		{desc: "oauth http issuer", doc: doc(backend("com.example.a", httpT, `{"type":"oauth","issuer":"http://login.example.com","resource":"r","clientId":"c","flow":"client_credentials","clientSecretRef":"env:SET_TOKEN"}`, subI)), errs: []string{"hooks[0].authentication.issuer"}},
		{desc: "oauth missing members", doc: doc(backend("com.example.a", httpT, `{"type":"oauth","issuer":"https://login.example.com"}`, subI)), errs: []string{"hooks[0].authentication", "hooks[0].authentication", "hooks[0].authentication"}},
		{desc: "oauth bad flow", doc: doc(backend("com.example.a", httpT, `{"type":"oauth","issuer":"https://l.example","resource":"r","clientId":"c","flow":"implicit"}`, subI)), errs: []string{"hooks[0].authentication.flow"}},
		{desc: "oauth duplicate scopes", doc: doc(backend("com.example.a", httpT, `{"type":"oauth","issuer":"https://l.example","resource":"r","clientId":"c","flow":"client_credentials","clientSecretRef":"env:SET_TOKEN","scopes":["a","a"]}`, subI)), errs: []string{"hooks[0].authentication.scopes[1]"}},
		{desc: "mtls type", doc: doc(backend("com.example.a", httpT, `{"type":"mtls"}`, subI)), errs: []string{"hooks[0].authentication.type"}, msg: "bearer and oauth"},
		{desc: "contentReceiver", doc: doc(`{"id":"com.example.a","transport":` + httpT + `,"contentReceiver":{},"subscriptions":[` + subI + `]}`), errs: []string{"hooks[0].contentReceiver"}},
		{desc: "subscriptions empty", doc: doc(backend("com.example.a", httpT, "")), errs: []string{"hooks[0].subscriptions"}},
		{desc: "subscriptions missing", doc: doc(`{"id":"com.example.a","transport":` + httpT + `}`), errs: []string{"hooks[0]"}},
		{desc: "mode missing", doc: one(`{"events":["tool.after"],"content":{"default":"omit"}}`), errs: []string{"hooks[0].subscriptions[0]"}, msg: `"mode" is required`},
		{desc: "mode unknown", doc: one(`{"events":["tool.after"],"mode":"watch","content":{"default":"omit"}}`), errs: []string{"hooks[0].subscriptions[0].mode"}},
		{desc: "events empty", doc: one(`{"events":[],"mode":"observe","content":{"default":"omit"}}`), errs: []string{"hooks[0].subscriptions[0].events"}},
		{desc: "events duplicate", doc: one(`{"events":["tool.after","tool.after"],"mode":"observe","content":{"default":"omit"}}`), errs: []string{"hooks[0].subscriptions[0].events[1]"}},
		{desc: "event unknown", doc: one(`{"events":["tool.error"],"mode":"observe","content":{"default":"omit"}}`), errs: []string{"hooks[0].subscriptions[0].events[0]"}, msg: "unknown event"},
		{desc: "event matcher language", doc: one(`{"events":["tool.b*"],"mode":"observe","content":{"default":"omit"}}`), errs: []string{"hooks[0].subscriptions[0].events[0]"}},
		{desc: "observe star", doc: one(`{"events":["*"],"mode":"observe","content":{"default":"omit"}}`)},
		{desc: "intercept star", doc: one(`{"events":["*"],"mode":"intercept","timeoutMs":100,"failurePolicy":"fail-open","content":{"default":"omit"}}`)},
		{desc: "intercept tool family", doc: one(`{"events":["tool.*"],"mode":"intercept","timeoutMs":100,"failurePolicy":"fail-open","content":{"default":"omit"}}`)},
		{desc: "intercept turn.end", doc: one(`{"events":["turn.end"],"mode":"intercept","timeoutMs":100,"failurePolicy":"fail-open","content":{"default":"omit"}}`), errs: []string{"hooks[0].subscriptions[0].events[0]"}, msg: "observe-only"},
		{desc: "intercept tool.progress", doc: one(`{"events":["tool.before","tool.progress"],"mode":"intercept","timeoutMs":100,"failurePolicy":"fail-open","content":{"default":"omit"}}`), errs: []string{"hooks[0].subscriptions[0].events[1]"}},
		{desc: "intercept family with no interceptable", doc: one(`{"events":["file.*"],"mode":"intercept","timeoutMs":100,"failurePolicy":"fail-open","content":{"default":"omit"}}`), errs: []string{"hooks[0].subscriptions[0].events[0]"}, msg: "selects no interceptable", beyondSchema: true},
		{desc: "intercept never emitted warns", doc: one(`{"events":["session.start"],"mode":"intercept","timeoutMs":100,"failurePolicy":"fail-open","content":{"default":"omit"}}`), warns: []string{"hooks[0].subscriptions[0].events[0]"}},
		{desc: "intercept session family warns", doc: one(`{"events":["session.*"],"mode":"intercept","timeoutMs":100,"failurePolicy":"fail-open","content":{"default":"omit"}}`), warns: []string{"hooks[0].subscriptions[0].events[0]"}},
		{desc: "observe unknown family warns", doc: one(`{"events":["zzz.*"],"mode":"observe","content":{"default":"omit"}}`), warns: []string{"hooks[0].subscriptions[0].events[0]"}},
		{desc: "timeoutMs missing", doc: one(`{"events":["tool.before"],"mode":"intercept","failurePolicy":"fail-open","content":{"default":"omit"}}`), errs: []string{"hooks[0].subscriptions[0]"}, msg: `"timeoutMs" is required`},
		{desc: "timeoutMs zero", doc: one(`{"events":["tool.before"],"mode":"intercept","timeoutMs":0,"failurePolicy":"fail-open","content":{"default":"omit"}}`), errs: []string{"hooks[0].subscriptions[0].timeoutMs"}},
		{desc: "timeoutMs fraction", doc: one(`{"events":["tool.before"],"mode":"intercept","timeoutMs":1.5,"failurePolicy":"fail-open","content":{"default":"omit"}}`), errs: []string{"hooks[0].subscriptions[0].timeoutMs"}},
		{desc: "timeoutMs 100.0 is integer", doc: one(`{"events":["tool.before"],"mode":"intercept","timeoutMs":100.0,"failurePolicy":"fail-open","content":{"default":"omit"}}`)},
		{desc: "timeoutMs string", doc: one(`{"events":["tool.before"],"mode":"intercept","timeoutMs":"100","failurePolicy":"fail-open","content":{"default":"omit"}}`), errs: []string{"hooks[0].subscriptions[0].timeoutMs"}},
		{desc: "failurePolicy missing", doc: one(`{"events":["tool.before"],"mode":"intercept","timeoutMs":100,"content":{"default":"omit"}}`), errs: []string{"hooks[0].subscriptions[0]"}, msg: `"failurePolicy" is required`},
		{desc: "failurePolicy bad", doc: one(`{"events":["tool.before"],"mode":"intercept","timeoutMs":100,"failurePolicy":"open","content":{"default":"omit"}}`), errs: []string{"hooks[0].subscriptions[0].failurePolicy"}},
		{desc: "observe timeoutMs", doc: one(`{"events":["tool.after"],"mode":"observe","timeoutMs":100,"content":{"default":"omit"}}`), errs: []string{"hooks[0].subscriptions[0].timeoutMs"}},
		{desc: "content not object", doc: one(`{"events":["tool.after"],"mode":"observe","content":"body"}`), errs: []string{"hooks[0].subscriptions[0].content"}},
		{desc: "content bad value", doc: one(`{"events":["tool.after"],"mode":"observe","content":{"default":"body","images":"full"}}`), errs: []string{"hooks[0].subscriptions[0].content.images"}},
		{desc: "content odd category", doc: one(`{"events":["tool.after"],"mode":"observe","content":{"default":"body","my cat":"omit"}}`)},
		{desc: "content odd category bad", doc: one(`{"events":["tool.after"],"mode":"observe","content":{"default":"body","my cat":1}}`), errs: []string{`hooks[0].subscriptions[0].content["my cat"]`}},
		{desc: "includeNative string", doc: one(`{"events":["tool.after"],"mode":"observe","includeNative":"yes","content":{"default":"omit"}}`), errs: []string{"hooks[0].subscriptions[0].includeNative"}},
		{desc: "managed scope is valid AHP but not honoured by hookproxy", doc: one(`{"events":["tool.after"],"mode":"observe","scope":"managed","disableable":false,"content":{"default":"omit"}}`),
			errs: []string{"hooks[0].subscriptions[0].disableable"}, msg: "does not enforce non-disableable", beyondSchema: true},
		{desc: "managed without disableable", doc: one(`{"events":["tool.after"],"mode":"observe","scope":"managed","content":{"default":"omit"}}`), errs: []string{"hooks[0].subscriptions[0]"}},
		{desc: "managed disableable true", doc: one(`{"events":["tool.after"],"mode":"observe","scope":"managed","disableable":true,"content":{"default":"omit"}}`), errs: []string{"hooks[0].subscriptions[0].disableable"}},
		{desc: "scope bad", doc: one(`{"events":["tool.after"],"mode":"observe","scope":"global","content":{"default":"omit"}}`), errs: []string{"hooks[0].subscriptions[0].scope"}},
		{desc: "filters", doc: one(`{"events":["tool.after"],"mode":"observe","filters":{"toolKinds":["shell"],"paths":[]},"content":{"default":"omit"}}`)},
		{desc: "filters duplicate", doc: one(`{"events":["tool.after"],"mode":"observe","filters":{"toolKinds":["shell","shell"]},"content":{"default":"omit"}}`), errs: []string{"hooks[0].subscriptions[0].filters.toolKinds[1]"}},
		{desc: "upload valid", doc: one(`{"events":["tool.after"],"mode":"observe","upload":{"endpoint":"https://u.example/up","timeoutMs":3000,"maxBytes":0,"auth":{"type":"bearer","tokenRef":"env:SET_TOKEN"}},"content":{"default":"body"}}`)},
		{desc: "upload auth is not resolved by hookproxy, so any reference passes", doc: one(`{"events":["tool.after"],"mode":"observe","upload":{"endpoint":"https://u.example/up","timeoutMs":3000,"maxBytes":0,"auth":{"type":"bearer","tokenRef":"vault:up"}},"content":{"default":"body"}}`)},
		{desc: "upload loopback", doc: one(`{"events":["tool.after"],"mode":"observe","upload":{"endpoint":"http://127.0.0.1:9000/up","timeoutMs":1,"maxBytes":10},"content":{"default":"body"}}`)},
		{desc: "upload remote http", doc: one(`{"events":["tool.after"],"mode":"observe","upload":{"endpoint":"http://u.example/up","timeoutMs":1,"maxBytes":10},"content":{"default":"body"}}`), errs: []string{"hooks[0].subscriptions[0].upload.endpoint"}},
		{desc: "upload bad numbers", doc: one(`{"events":["tool.after"],"mode":"observe","upload":{"endpoint":"https://u.example/up","timeoutMs":0,"maxBytes":-1},"content":{"default":"body"}}`), errs: []string{"hooks[0].subscriptions[0].upload.timeoutMs", "hooks[0].subscriptions[0].upload.maxBytes"}},
		{desc: "upload missing members", doc: one(`{"events":["tool.after"],"mode":"observe","upload":{},"content":{"default":"body"}}`), errs: []string{"hooks[0].subscriptions[0].upload", "hooks[0].subscriptions[0].upload", "hooks[0].subscriptions[0].upload"}},
		{desc: "upload auth literal secret", doc: one(`{"events":["tool.after"],"mode":"observe","upload":{"endpoint":"https://u.example/up","timeoutMs":1,"maxBytes":1,"auth":{"type":"bearer","tokenRef":"env:SET_TOKEN","secret":"s"}},"content":{"default":"body"}}`), errs: []string{"hooks[0].subscriptions[0].upload.auth.secret"}, beyondSchema: true},
		{desc: "unknown member warns", doc: one(`{"events":["tool.after"],"mode":"observe","content":{"default":"omit"},"failurepolicy":"x"}`), warns: []string{"hooks[0].subscriptions[0].failurepolicy"}},
		{desc: "subscription id tolerated", doc: one(`{"id":"sub-1","events":["tool.after"],"mode":"observe","content":{"default":"omit"}}`), warns: []string{}},
		{desc: "duplicate key", doc: one(`{"events":["tool.after"],"mode":"observe","mode":"observe","content":{"default":"omit"}}`), errs: []string{"hooks[0].subscriptions[0].mode"}, msg: "more than once", beyondSchema: true},
		{desc: "every problem at once", doc: doc(backend("bad", `{"type":"http","url":"http://x.example"}`, `{"type":"bearer"}`, `{"events":["turn.end"],"mode":"intercept"}`)),
			errs: []string{"hooks[0].id", "hooks[0].transport.url", "hooks[0].authentication", "hooks[0].subscriptions[0].events[0]", "hooks[0].subscriptions[0]", "hooks[0].subscriptions[0]", "hooks[0].subscriptions[0]"}},
	}
	for _, tc := range tests {
		t.Run(tc.desc, func(t *testing.T) {
			d, problems, err := registration.Parse([]byte(tc.doc), testOptions())
			got := errorPaths(problems)
			if tc.errs == nil {
				if err != nil || d == nil {
					t.Fatalf("want valid, got %v", err)
				}
			} else {
				var perr *registration.Error
				if !errors.As(err, &perr) || d != nil {
					t.Fatalf("want *Error and nil doc, got %v (doc %v)", err, d)
				}
				if strings.Join(got, "|") != strings.Join(tc.errs, "|") {
					t.Fatalf("error paths = %q, want %q\n%v", got, tc.errs, err)
				}
				if tc.msg != "" && !strings.Contains(perr.Problems[0].Message, tc.msg) {
					t.Errorf("first problem %q lacks %q", perr.Problems[0].Message, tc.msg)
				}
			}
			if tc.warns != nil {
				var warns []string
				for _, p := range problems {
					if p.Warning {
						warns = append(warns, p.Path)
					}
				}
				if strings.Join(warns, "|") != strings.Join(tc.warns, "|") {
					t.Errorf("warnings = %q, want %q (%v)", warns, tc.warns, problems)
				}
			}
			// Cross-check the reading of the portable rules against the draft JSON Schema.
			if !tc.beyondSchema {
				schemaErr := ahptest.Validate(t, "registration.schema.json", []byte(tc.doc))
				if (schemaErr == nil) != (tc.errs == nil) {
					t.Errorf("schema verdict valid=%v disagrees (schema: %v)", schemaErr == nil, schemaErr)
				}
			}
		})
	}
}

func TestTypedDecode(t *testing.T) {
	d, _, err := registration.Parse([]byte(doc(
		backend("dev.hookproxy.secrets", `{"type":"in_process","policy":"secrets","config":{"mode":"redact","n":2.0}}`, "",
			`{"events":["model.*"],"mode":"intercept","timeoutMs":750.0,"failurePolicy":"fail-open","content":{"default":"body","images":"omit"},"scope":"project","disableable":true}`),
	)), testOptions())
	if err != nil {
		t.Fatal(err)
	}
	b := d.Hooks[0]
	if b.Transport.Policy != "secrets" || !strings.Contains(string(b.Transport.Config), `"mode":"redact"`) {
		t.Errorf("transport = %+v (%s)", b.Transport, b.Transport.Config)
	}
	s := b.Subscriptions[0]
	if s.TimeoutMs != 750 || s.Disableable == nil || !*s.Disableable || s.Scope != "project" || s.Content["images"] != "omit" {
		t.Errorf("subscription = %+v", s)
	}
	if !s.Matches("model.response.after") || s.Matches("tool.before") {
		t.Errorf("Matches disagrees with model.*")
	}
}

func TestSelect(t *testing.T) {
	if got := registration.Select("tool.*"); len(got) != 6 {
		t.Errorf("tool.* = %v", got)
	}
	if got := registration.Select("*"); len(got) != 32 {
		t.Errorf("* = %d events", len(got))
	}
	if got := registration.Select("nope"); got != nil {
		t.Errorf("nope = %v", got)
	}
}

func TestCommandChecks(t *testing.T) {
	dir := t.TempDir()
	exe := filepath.Join(dir, "hook")
	plain := filepath.Join(dir, "plain")
	if err := os.WriteFile(exe, []byte("#!/bin/sh\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(plain, []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		desc, command, cwd string
		warn               string
	}{
		{desc: "absolute executable", command: exe},
		{desc: "relative to cwd", command: "./hook", cwd: dir},
		{desc: "not executable", command: plain, warn: "not executable"},
		{desc: "directory", command: dir, warn: "directory"},
		{desc: "missing", command: filepath.Join(dir, "nope"), warn: "not found"},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			tr, _ := json.Marshal(map[string]string{"type": "stdio", "command": tc.command, "cwd": tc.cwd, "lifecycle": "per_event"})
			_, problems, err := registration.Parse([]byte(doc(backend("com.example.a", string(tr), "", subI))), testOptions())
			if err != nil {
				t.Fatal(err)
			}
			var msgs []string
			for _, p := range problems {
				msgs = append(msgs, p.String())
			}
			all := strings.Join(msgs, "\n")
			if tc.warn == "" && all != "" {
				t.Errorf("unexpected problems: %s", all)
			}
			if tc.warn != "" && !strings.Contains(all, "warning: hooks[0].transport.command: ") || !strings.Contains(all, tc.warn) {
				t.Errorf("want warning %q, got %q", tc.warn, all)
			}
			// Environment checks can be turned off.
			opts := testOptions()
			opts.NoEnvironmentChecks = true
			if _, problems, _ := registration.Parse([]byte(doc(backend("com.example.a", string(tr), "", subI))), opts); len(problems) != 0 {
				t.Errorf("NoEnvironmentChecks still reported %v", problems)
			}
		})
	}
}

func TestErrorText(t *testing.T) {
	_, _, err := registration.Parse([]byte(`{"protocolVersion":"draft","hooks":[]}`), registration.Options{})
	if err == nil || err.Error() != "registration: hooks: must hold at least one backend (an empty registration intercepts nothing; omit the registration instead)" {
		t.Errorf("err = %v", err)
	}
	_, _, err = registration.Parse([]byte(`{}`), registration.Options{})
	if err == nil || !strings.Contains(err.Error(), "2 problems:\n  $: \"protocolVersion\" is required\n  $: \"hooks\" is required") {
		t.Errorf("err = %v", err)
	}
}

func FuzzParse(f *testing.F) {
	f.Add([]byte(one(subI)))
	f.Add([]byte(`{"protocolVersion":"draft","hooks":[{"transport":[],"subscriptions":[{"events":[1]}]}]}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		d, problems, err := registration.Parse(data, registration.Options{NoEnvironmentChecks: true})
		if (err == nil) != (d != nil) || (err != nil && !registration.HasErrors(problems)) {
			t.Fatalf("inconsistent result: doc=%v err=%v problems=%v", d, err, problems)
		}
	})
}
