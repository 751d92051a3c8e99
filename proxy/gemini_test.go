package proxy

import (
	"bytes"
	"context"
	"encoding/json"
	"net"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/tidwall/gjson"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"

	"github.com/hookproxy/hookproxy/chain/ahp"
	"github.com/hookproxy/hookproxy/config"
	"github.com/hookproxy/hookproxy/enforcement"
	"github.com/hookproxy/hookproxy/internal/testsupport"
)

const geminiGenerate = "/gemini/v1beta/models/gemini-2.5-flash:generateContent"

func geminiConfig(upstream string) *config.Config {
	cfg := testConfig(upstream)
	cfg.Routes = append(cfg.Routes, config.Route{Prefix: "/gemini", API: config.APIGemini, Upstream: upstream})
	return cfg
}

func debugLogger(buf *testsupport.LockedBuffer) *zap.Logger {
	return zap.New(zapcore.NewCore(zapcore.NewJSONEncoder(zap.NewProductionEncoderConfig()), zapcore.AddSync(buf), zap.DebugLevel))
}

// TestGeminiQueryKeyNeverLeaks: a ?key= credential (and the x-goog-api-key header) reach
// the upstream, which echoes the key in its error, yet the key is in no log line, audit
// record or hook event — neither for an upstream error nor for an upstream that cannot be
// reached.
func TestGeminiQueryKeyNeverLeaks(t *testing.T) {
	const queryKey, headerKey = "AIzaQUERYKEY-0123456789abcdef", "AIzaHEADERKEY-fedcba9876543210"
	up := newUpstream(t, func(w http.ResponseWriter, r *http.Request, _ []byte) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusBadRequest)
		_, _ = w.Write([]byte(`{"error":{"code":400,"message":"API key not valid: ` + r.URL.Query().Get("key") + ` / ` + r.Header.Get("X-Goog-Api-Key") + `","status":"INVALID_ARGUMENT"}}`))
	})
	// an upstream that accepts and drops every connection: a transport error
	dead, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { dead.Close() })
	go func() {
		for {
			c, err := dead.Accept()
			if err != nil {
				return
			}
			c.Close()
		}
	}()

	for _, tc := range []struct{ desc, upstream string }{{"upstream error", up.URL}, {"transport error", "http://" + dead.Addr().String()}} {
		t.Run(tc.desc, func(t *testing.T) {
			pol := &fakePolicy{}
			var logs testsupport.LockedBuffer
			var audit testsupport.LockedBuffer
			px := startProxy(t, geminiConfig(tc.upstream), newTestChain(t, pol, intercept("model.request.before"), observe("model.error")),
				Options{Logger: debugLogger(&logs), Auditor: AuditorFunc(func(_ context.Context, r BoundaryRecord) {
					b, _ := json.Marshal(r)
					_, _ = audit.Write(b)
				})})
			status, _, raw := post(t, px.URL+geminiGenerate+"?key="+queryKey+"&alt=json",
				`{"contents":[{"parts":[{"text":"hello"}]}]}`, map[string]string{"X-Goog-Api-Key": headerKey})
			body := string(raw)
			if status < 400 {
				t.Fatalf("status %d: %s", status, body)
			}
			if tc.upstream == up.URL {
				// control: the key really went upstream and came back in the error
				if q := up.requests(); len(q) == 0 || !strings.Contains(q[len(q)-1].RawQuery, queryKey) {
					t.Fatal("the query key did not reach the upstream")
				}
				if !strings.Contains(body, queryKey) {
					t.Fatalf("the upstream's error did not reach the client unchanged: %s", body)
				}
				if len(pol.observedOf(ahp.EventModelError)) != 1 {
					t.Fatal("model.error was not observed")
				}
				if e := pol.observedOf(ahp.EventModelError)[0].Error; !strings.Contains(e.Message, "API key not valid") || e.Code != "INVALID_ARGUMENT" {
					t.Fatalf("model.error = %+v", e)
				}
			}
			var events bytes.Buffer
			for _, p := range pol.intercepted() {
				b, _ := json.Marshal(p)
				events.Write(b)
			}
			for _, e := range pol.observations() {
				b, _ := json.Marshal(e)
				events.Write(b)
			}
			if events.Len() == 0 || audit.String() == "" || logs.String() == "" {
				t.Fatalf("nothing to check: events %d audit %d logs %d", events.Len(), len(audit.String()), len(logs.String()))
			}
			for what, s := range map[string]string{"events": events.String(), "audit": audit.String(), "logs": logs.String()} {
				for _, k := range []string{queryKey, headerKey} {
					if strings.Contains(s, k) {
						t.Errorf("%s carry the key %s:\n%s", what, k, s)
					}
				}
			}
		})
	}
}

// TestGeminiRoutes: the endpoints a gemini route maps, passes and refuses, and its errors
// in Gemini's own format.
func TestGeminiRoutes(t *testing.T) {
	up := newUpstream(t, nil)
	pol := &fakePolicy{effects: func(ev *ahp.Event) []ahp.Effect {
		if ev.Type == ahp.EventModelRequestBefore && strings.Contains(string(itemsJSON(ev.Items)), "forbidden") {
			return []ahp.Effect{{Type: ahp.EffectDeny, Reason: "no forbidden words", Code: "com.example.words"}}
		}
		return nil
	}}
	px := startProxy(t, geminiConfig(up.URL), newTestChain(t, pol, intercept("model.request.before", "turn.start", "tool.before")), Options{})
	for _, tc := range []struct {
		desc, method, path, body string
		status                   int
		reason                   string
	}{
		{"deny generateContent", "POST", geminiGenerate, `{"contents":[{"parts":[{"text":"a forbidden word"}]}]}`, 403, "no forbidden words"},
		{"deny v1 stream", "POST", "/gemini/v1/models/gemini-2.5-pro:streamGenerateContent?alt=sse", `{"contents":[{"parts":[{"text":"forbidden"}]}]}`, 403, "no forbidden words"},
		{"deny countTokens", "POST", "/gemini/v1beta/models/m:countTokens", `{"contents":[{"parts":[{"text":"forbidden"}]}]}`, 403, "no forbidden words"},
		{"pass generateContent", "POST", geminiGenerate, `{"contents":[{"parts":[{"text":"fine"}]}]}`, 200, ""},
		{"models list passes", "GET", "/gemini/v1beta/models", "", 200, ""},
		{"unmapped POST refused", "POST", "/gemini/v1beta/models/m:embedContent", `{"content":{"parts":[{"text":"x"}]}}`, 403, "unexamined"},
		{"malformed body", "POST", geminiGenerate, `{"contents":{}}`, 400, "contents is not an array"},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			before := len(up.requests())
			req, _ := http.NewRequest(tc.method, px.URL+tc.path, strings.NewReader(tc.body))
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			var b bytes.Buffer
			_, _ = b.ReadFrom(resp.Body)
			if resp.StatusCode != tc.status {
				t.Fatalf("status %d: %s", resp.StatusCode, b.String())
			}
			reached := len(up.requests()) > before
			if tc.status == 200 != reached {
				t.Fatalf("upstream reached = %v", reached)
			}
			if tc.status != 200 {
				e := gjson.Get(b.String(), "error")
				if int(e.Get("code").Int()) != tc.status || e.Get("status").String() == "" || !strings.Contains(e.Get("message").String(), tc.reason) {
					t.Fatalf("error body = %s", b.String())
				}
			}
		})
	}
	// countTokens is examined at model.request.before only: no turn.start for it.
	for _, p := range pol.intercepted() {
		if p.Event.Type == ahp.EventTurnStart && p.Event.Model != nil && p.Event.Model.ID == "m" {
			t.Fatal("turn.start ran for countTokens")
		}
	}
	var models []string
	for _, p := range pol.callsOf(ahp.EventModelRequestBefore) {
		models = append(models, p.Event.Model.ID+"/"+p.Event.Model.Provider)
	}
	if got := strings.Join(models, ","); !strings.Contains(got, "gemini-2.5-flash/gemini") || !strings.Contains(got, "gemini-2.5-pro/gemini") {
		t.Fatalf("models = %s", got)
	}
	assertValidIntercepts(t, pol)
}

func itemsJSON(v any) []byte {
	b, _ := json.Marshal(v)
	return b
}

// TestGeminiKeysScopeTheStore: a next_turn injection goes to the Gemini tenant whose key
// (x-goog-api-key or ?key=) earned it, never to another tenant with the same session id.
// Control: the same tenant's next prompt does receive it.
func TestGeminiKeysScopeTheStore(t *testing.T) {
	for _, tc := range []struct {
		desc   string
		tenant func(key string) (query string, hdr map[string]string)
	}{
		{"header key", func(k string) (string, map[string]string) {
			return "", map[string]string{"X-Hookproxy-Session": "s-g", "X-Goog-Api-Key": k}
		}},
		{"query key", func(k string) (string, map[string]string) {
			return "?key=" + k, map[string]string{"X-Hookproxy-Session": "s-g"}
		}},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			up := newUpstream(t, nil)
			pol := &fakePolicy{effects: func(ev *ahp.Event) []ahp.Effect {
				if ev.Type != ahp.EventTurnStart || !strings.Contains(string(itemsJSON(ev.Items)), "first") {
					return nil
				}
				return []ahp.Effect{{Type: ahp.EffectInject, Target: "context", Operation: ahp.OpAppend, DeliverAt: ahp.DeliverNextTurn,
					Value: msgs(t, textMessage("n1", ahp.RoleUser, "Remember the budget."))}}
			}}
			px := startProxy(t, geminiConfig(up.URL), newTestChain(t, pol, intercept("turn.start")), Options{})
			send := func(key, body string) {
				q, hdr := tc.tenant(key)
				if status, _, b := post(t, px.URL+geminiGenerate+q, body, hdr); status != 200 {
					t.Fatalf("status %d %s", status, b)
				}
			}
			send("AIzaTENANT-ONE-000000", `{"contents":[{"role":"user","parts":[{"text":"first"}]}]}`)
			send("AIzaTENANT-TWO-000000", `{"contents":[{"role":"user","parts":[{"text":"other tenant"}]}]}`)
			send("AIzaTENANT-ONE-000000", `{"contents":[{"role":"user","parts":[{"text":"first"}]},{"role":"model","parts":[{"text":"ok"}]},{"role":"user","parts":[{"text":"second"}]}]}`)
			reqs := up.requests()
			if len(reqs) != 3 {
				t.Fatalf("%d upstream requests", len(reqs))
			}
			if strings.Contains(string(reqs[1].Body), "Remember") {
				t.Fatal("the injection went to another tenant")
			}
			if !strings.Contains(string(reqs[2].Body), "Remember the budget.") {
				t.Fatalf("the injection is missing from the tenant's next prompt: %s", reqs[2].Body)
			}
		})
	}
}

// TestGeminiReturnAnswersWithoutUpstream: a supplied result is answered in the form the
// endpoint asked for — JSON, an SSE stream, or the JSON array of a stream without alt=sse —
// and the events built on the way are valid AHP.
func TestGeminiReturnAnswersWithoutUpstream(t *testing.T) {
	for _, tc := range []struct{ desc, path, contentType string }{
		{"json", geminiGenerate, "application/json"},
		{"sse", "/gemini/v1beta/models/gemini-2.5-flash:streamGenerateContent?alt=sse", "text/event-stream"},
		{"array", "/gemini/v1beta/models/gemini-2.5-flash:streamGenerateContent", "application/json"},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			up := newUpstream(t, nil)
			pol := &fakePolicy{effects: func(ev *ahp.Event) []ahp.Effect {
				if ev.Type != ahp.EventModelRequestBefore {
					return nil
				}
				return []ahp.Effect{{Type: ahp.EffectReturn, Value: msgs(t, textMessage("r1", ahp.RoleAssistant, "cached answer"))}}
			}}
			px := startProxy(t, geminiConfig(up.URL), newTestChain(t, pol, intercept("model.request.before"), observe("model.response.after")), Options{})
			status, h, got := post(t, px.URL+tc.path, `{"contents":[{"role":"user","parts":[{"text":"hi"}]}]}`, nil)
			if status != 200 || !strings.HasPrefix(h.Get("Content-Type"), tc.contentType) {
				t.Fatalf("status %d, content type %q: %s", status, h.Get("Content-Type"), got)
			}
			answer := string(got)
			switch tc.desc {
			case "sse":
				data, ok := strings.CutPrefix(strings.TrimSpace(answer), "data: ")
				if !ok {
					t.Fatalf("not an SSE stream: %q", answer)
				}
				answer = data
			case "array":
				if !gjson.Parse(answer).IsArray() {
					t.Fatalf("not a JSON array: %s", answer)
				}
				answer = gjson.Get(answer, "0").Raw
			}
			if gjson.Get(answer, "candidates.0.content.parts.0.text").String() != "cached answer" || gjson.Get(answer, "candidates.0.finishReason").String() != "STOP" {
				t.Fatalf("answer = %s", got)
			}
			if len(up.requests()) != 0 {
				t.Fatal("the upstream was called despite a supplied result")
			}
			if mra := waitObserved(t, pol, "model.response.after", 1); len(mra) != 1 || mra[0].Usage != nil {
				t.Fatalf("model.response.after = %+v", mra)
			}
			assertValidIntercepts(t, pol)
			assertValidObservations(t, pol)
		})
	}
}

// TestGeminiStreamTextFlowsCallsHeld: on an alt=sse stream the text reaches the client
// while the upstream still holds the rest; the functionCall that follows is judged before
// the client sees it, and a denied one never arrives (audited held: tool_calls).
func TestGeminiStreamTextFlowsCallsHeld(t *testing.T) {
	release := make(chan struct{})
	up := newUpstream(t, func(w http.ResponseWriter, r *http.Request, _ []byte) {
		w.Header().Set("Content-Type", "text/event-stream")
		_, _ = w.Write([]byte("data: {\"candidates\":[{\"content\":{\"parts\":[{\"text\":\"Working on it.\"}],\"role\":\"model\"},\"index\":0}]}\r\n\r\n"))
		w.(http.Flusher).Flush()
		select {
		case <-release:
		case <-r.Context().Done():
			return
		}
		_, _ = w.Write([]byte("data: {\"candidates\":[{\"content\":{\"parts\":[{\"functionCall\":{\"name\":\"run\",\"args\":{\"cmd\":\"rm -rf /\"}}},{\"functionCall\":{\"name\":\"read\",\"args\":{\"path\":\"a\"}}}],\"role\":\"model\"},\"finishReason\":\"STOP\",\"index\":0}]}\r\n\r\n"))
	})
	pol := &fakePolicy{effects: func(ev *ahp.Event) []ahp.Effect {
		if ev.Type == ahp.EventToolBefore && ev.Tool.Name == "run" {
			return []ahp.Effect{{Type: ahp.EffectDeny, Reason: "no deletes"}}
		}
		return nil
	}}
	var mu sync.Mutex
	var held []enforcement.Held
	px := startProxy(t, geminiConfig(up.URL), newTestChain(t, pol, intercept("tool.before")), Options{Auditor: AuditorFunc(func(_ context.Context, r BoundaryRecord) {
		mu.Lock()
		held = append(held, r.Held)
		mu.Unlock()
	})})
	resp, err := http.Post(px.URL+"/gemini/v1beta/models/gemini-2.5-flash:streamGenerateContent?alt=sse", "application/json",
		strings.NewReader(`{"contents":[{"role":"user","parts":[{"text":"clean up"}]}]}`))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	// Read until the text is there, while the upstream is still gated (bounded: a proxy
	// that held the text would never deliver it before the gate opens).
	var got bytes.Buffer
	seen := make(chan error, 1)
	go func() {
		buf := make([]byte, 4096)
		for !strings.Contains(got.String(), "Working on it.") {
			n, err := resp.Body.Read(buf)
			got.Write(buf[:n])
			if err != nil {
				seen <- err
				return
			}
		}
		seen <- nil
	}()
	select {
	case err := <-seen:
		if err != nil {
			t.Fatalf("stream ended before the text: %v (%q)", err, got.String())
		}
	case <-time.After(5 * time.Second):
		close(release)
		t.Fatal("the text did not arrive while the upstream held the rest")
	}
	close(release)
	_, _ = got.ReadFrom(resp.Body)
	all := got.String()
	if strings.Contains(all, "rm -rf") || !strings.Contains(all, `"path":"a"`) || !strings.Contains(all, "Tool call run was blocked by policy: no deletes") {
		t.Fatalf("stream the client got:\n%s", all)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(held) != 2 || held[0] != enforcement.HeldToolCalls || held[1] != enforcement.HeldToolCalls {
		t.Fatalf("audit held = %v", held)
	}
}

// TestGeminiStreamByteOrderMarkCallJudged: a byte-order mark before the first event, whose
// data holds a functionCall. Clients that decode with TextDecoder (the @google/genai SDK)
// drop the mark and run the call. Control: straight to the upstream the call is there.
func TestGeminiStreamByteOrderMarkCallJudged(t *testing.T) {
	stream := "\ufeffdata: {\"candidates\":[{\"content\":{\"parts\":[{\"functionCall\":{\"name\":\"run\",\"args\":{\"cmd\":\"rm -rf /\"}}},{\"functionCall\":{\"name\":\"read\",\"args\":{\"path\":\"a\"}}}],\"role\":\"model\"},\"finishReason\":\"STOP\",\"index\":0}]}\r\n\r\n"
	up := newUpstream(t, func(w http.ResponseWriter, _ *http.Request, _ []byte) {
		w.Header().Set("Content-Type", "text/event-stream")
		_, _ = w.Write([]byte(stream))
	})
	const path = "/v1beta/models/gemini-2.5-flash:streamGenerateContent?alt=sse"
	body := `{"contents":[{"role":"user","parts":[{"text":"clean up"}]}]}`
	if _, _, raw := post(t, up.URL+path, body, nil); !strings.Contains(string(raw), "rm -rf") {
		t.Fatalf("control: %q", raw)
	}
	pol := &fakePolicy{effects: denyTool("run")}
	px := startProxy(t, geminiConfig(up.URL), newTestChain(t, pol, intercept("tool.before")), Options{})
	status, _, got := post(t, px.URL+"/gemini"+path, body, nil)
	if status != 200 || strings.Contains(string(got), "rm -rf") || !strings.Contains(string(got), `"read"`) {
		t.Fatalf("%d %s", status, got)
	}
}
