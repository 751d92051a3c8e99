package policies

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"syscall"
	"testing"

	"github.com/hookproxy/hookproxy/chain/ahp"
)

// benchChunks is the kind of text a coding agent sends: prose, code, logs with
// timestamps, IPs, UUIDs and hashes, JSON tool results, diffs and shell transcripts.
// None of it holds a credential, personal data or an injection.
var benchChunks = []string{
	"Can you look at why the integration tests started failing after the dependency bump? " +
		"The token bucket rate limiter seems to reject requests earlier than before, and the " +
		"retry logic in the client does not back off. I think the secret is in how the window " +
		"is computed; please check the password reset flow too, since it uses the same limiter.\n",
	"```go\nfunc (l *Limiter) Allow(now time.Time) bool {\n\tl.mu.Lock()\n\tdefer l.mu.Unlock()\n" +
		"\telapsed := now.Sub(l.last).Seconds()\n\tl.tokens = math.Min(l.burst, l.tokens+elapsed*l.rate)\n" +
		"\tl.last = now\n\tif l.tokens < 1 {\n\t\treturn false\n\t}\n\tl.tokens--\n\treturn true\n}\n```\n",
	"2026-09-15T12:00:03.412Z INFO  server started addr=10.0.3.17:8443 pid=48213 version=v2.14.3 build=1.2.3456.789\n" +
		"2026-09-15T12:00:04.019Z WARN  retrying request id=550e8400-e29b-41d4-a716-446655440000 attempt=2 backoff=250ms\n" +
		"2026-09-15T12:00:04.533Z ERROR upstream 503 trace=4bf92f3577b34da6a3ce929d0e0e4736 span=00f067aa0ba902b7\n",
	`{"ok":true,"files":[{"path":"internal/limiter/limiter.go","sha256":"e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855","size":2048},` +
		`{"path":"internal/limiter/limiter_test.go","sha256":"9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08","size":4096}],"count":2}` + "\n",
	"commit 9fceb02d0ae598e95dc970b74767f19372d61af8\nAuthor: CI Bot <ci-bot>\nDate:   Tue Sep 15 11:58:01 2026 +0000\n\n" +
		"    limiter: compute the refill window from the monotonic clock (#4821)\n\n",
	"diff --git a/internal/limiter/limiter.go b/internal/limiter/limiter.go\nindex 3b18e51..a94c2f0 100644\n" +
		"--- a/internal/limiter/limiter.go\n+++ b/internal/limiter/limiter.go\n@@ -41,7 +41,7 @@ func (l *Limiter) Allow(now time.Time) bool {\n" +
		"-\telapsed := now.Sub(l.last).Seconds()\n+\telapsed := now.Sub(l.last).Seconds() // monotonic\n",
	"$ go test ./internal/limiter/...\n--- FAIL: TestAllowBurst (0.00s)\n    limiter_test.go:88: Allow() = false after 3 of 5 burst tokens\nFAIL\n" +
		"FAIL\tgithub.com/acme/gateway/internal/limiter\t0.412s\nok  \tgithub.com/acme/gateway/internal/server\t1.093s\n",
	"The configuration lives in deploy/values.yaml: replicas: 3, resources.limits.memory: 512Mi, " +
		"max_tokens: 4096, timeoutSeconds: 30, image: registry.example.com/gateway@sha256:0d17b565c37bcbd895e9d92315a05c1c3c9a29f762b011a10c54a66cd53c9b31.\n",
	"Order #A-10482 shipped on 2026-09-14 to warehouse 7; invoice 2026-000482 totals $1,234.50 (tax 19%). " +
		"Tracking 1Z999AA10123456784, estimated delivery 09/18/2026 between 10:00 and 14:00.\n",
	"| metric | p50 | p95 | p99 |\n|---|---|---|---|\n| latency_ms | 12.4 | 48.9 | 131.0 |\n| rps | 1820 | 2410 | 2675 |\n",
}

// benchSecrets are sprinkled into the "with findings" variants.
var benchSecrets = []string{
	"export AWS_ACCESS_KEY_ID=" + testAWSKeyID + "\n",
	"git remote set-url origin https://" + testGitHubPAT + "@github.com/acme/gateway.git\n",
	"curl -H 'Authorization: Bearer " + testBearer + "' https://api.example.com/v1/limits\n",
}

var benchPII = []string{
	"Escalated by " + testEmail + ", phone +1 415 555 2671.\n",
	"Customer paid with card " + testCard + ".\n",
}

// benchRequest builds a model.request.before event of about size bytes of text spread
// over messages of every role, with extra text mixed in near the start, middle and end.
func benchRequest(size int, extra []string) *ahp.Event {
	var items []ahp.Message
	total, n := 0, 0
	roles := []string{ahp.RoleUser, ahp.RoleAssistant, ahp.RoleTool}
	items = append(items, msg("m0", ahp.RoleSystem, text("m0p0", "You are a careful coding agent working in the acme/gateway repository.")))
	for total < size {
		var b strings.Builder
		for b.Len() < 2048 {
			b.WriteString(benchChunks[n%len(benchChunks)])
			n++
		}
		s := b.String()
		total += len(s)
		i := len(items)
		role := roles[i%len(roles)]
		p := text(fmt.Sprintf("m%dp0", i), s)
		if role == ahp.RoleTool {
			p.Category = ahp.CategoryToolResult
		}
		items = append(items, msg(fmt.Sprintf("m%d", i), role, p))
	}
	for k, e := range extra {
		i := 1 + k*(len(items)-1)/len(extra)
		t := *items[i].Parts[0].Text + e
		items[i].Parts[0].Text = &t
	}
	ev := requestEvent(items...)
	ev.Params = json.RawMessage(`{"model":"claude-sonnet-4-5","max_tokens":8192,"temperature":0.2,"stream":true,` +
		`"tools":[{"name":"Bash","description":"Run a shell command","input_schema":{"type":"object","properties":{"command":{"type":"string"}},"required":["command"]}},` +
		`{"name":"Read","description":"Read a file","input_schema":{"type":"object","properties":{"file_path":{"type":"string"}}}}]}`)
	return ev
}

func benchIntercept(b *testing.B, p ahp.Interceptor, ev *ahp.Event, caps *ahp.Capabilities, wantEffects bool) {
	b.Helper()
	req := &ahp.InterceptRequest{ID: ev.ID, Params: &ahp.InterceptParams{ProtocolVersion: ahp.ProtocolVersion, Event: ev, Capabilities: caps}}
	ctx := context.Background()
	res, err := p.Intercept(ctx, req)
	if err != nil {
		b.Fatal(err)
	}
	if got := len(res.Effects) > 0; got != wantEffects {
		b.Fatalf("effects = %s; want effects: %v", describeEffects(res), wantEffects)
	}
	bytes := 0
	for _, m := range ev.Items {
		for _, pt := range m.Parts {
			bytes += len(pt.TextOf())
		}
	}
	b.SetBytes(int64(bytes))
	b.ReportAllocs()
	b.ResetTimer()
	cpu0 := processCPU()
	for i := 0; i < b.N; i++ {
		if _, err := p.Intercept(ctx, req); err != nil {
			b.Fatal(err)
		}
	}
	// CPU time of the process per evaluation: unlike ns/op it is not inflated when the
	// machine is shared with other work (it does include GC work the policy causes).
	b.ReportMetric(float64(processCPU()-cpu0)/float64(b.N), "cpu-ns/op")
}

func processCPU() int64 {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return ru.Utime.Nano() + ru.Stime.Nano()
}

const benchSize = 32 << 10

func BenchmarkPolicies(b *testing.B) {
	caps := proxyCaps(ahp.EventModelRequestBefore)
	clean := benchRequest(benchSize, nil)
	withSecrets := benchRequest(benchSize, benchSecrets)
	withPII := benchRequest(benchSize, benchPII)
	withInjection := benchRequest(benchSize, []string{"\n" + testInjection + "\n"})
	injection, err := NewInjection(InjectionConfig{Requests: true})
	if err != nil {
		b.Fatal(err)
	}
	tools, err := NewTools(ToolsConfig{Destructive: true, Deny: []ToolRule{{Tool: "Bash", InputPattern: "rm -rf"}}})
	if err != nil {
		b.Fatal(err)
	}
	models, err := NewModels(ModelsConfig{Allow: []string{"claude-*", "gpt-4.1*"}, MaxOutputTokens: 16384})
	if err != nil {
		b.Fatal(err)
	}

	// These rows measure a scan: every iteration evaluates the same event, which the
	// scanners' result cache (scan_cache.go) would otherwise answer from the second on.
	// The -cached rows measure that: every text of the event already scanned.
	secrets := func() *Secrets { p := mustSecrets(b); p.scan.cache = nil; return p }
	pii := func() *PII { p := mustPII(b); p.scan.cache = nil; return p }
	cachedInjection := injection
	injection, err = NewInjection(InjectionConfig{Requests: true})
	if err != nil {
		b.Fatal(err)
	}
	injection.scan.cache = nil
	b.Run("secrets/clean", func(b *testing.B) { benchIntercept(b, secrets(), clean, caps, false) })
	b.Run("secrets/3-secrets", func(b *testing.B) { benchIntercept(b, secrets(), withSecrets, caps, true) })
	b.Run("pii/clean", func(b *testing.B) { benchIntercept(b, pii(), clean, caps, false) })
	b.Run("pii/3-values", func(b *testing.B) { benchIntercept(b, pii(), withPII, caps, true) })
	b.Run("injection/clean", func(b *testing.B) { benchIntercept(b, injection, clean, caps, false) })
	b.Run("injection/1-phrase", func(b *testing.B) { benchIntercept(b, injection, withInjection, caps, true) })
	b.Run("secrets/clean-cached", func(b *testing.B) { benchIntercept(b, mustSecrets(b), clean, caps, false) })
	b.Run("secrets/3-secrets-cached", func(b *testing.B) { benchIntercept(b, mustSecrets(b), withSecrets, caps, true) })
	b.Run("pii/clean-cached", func(b *testing.B) { benchIntercept(b, mustPII(b), clean, caps, false) })
	b.Run("injection/clean-cached", func(b *testing.B) { benchIntercept(b, cachedInjection, clean, caps, false) })
	b.Run("tools/model.request.before", func(b *testing.B) { benchIntercept(b, tools, clean, caps, false) })
	b.Run("models/clean", func(b *testing.B) { benchIntercept(b, models, clean, caps, false) })

	// tool.before, where the tools policy does its work: a typical command and a 32 KiB
	// file write through every destructive rule.
	tbCaps := proxyCaps(ahp.EventToolBefore)
	cmd := toolBeforeEvent("Bash", `{"command":"go test ./internal/limiter/... -run TestAllowBurst -count=1","description":"Run the limiter tests"}`)
	content, _ := json.Marshal(map[string]string{"file_path": "docs/limiter.md", "content": *clean.Items[1].Parts[0].Text + *clean.Items[2].Parts[0].Text})
	write := toolBeforeEvent("Write", string(content))
	b.Run("tools/tool.before-command", func(b *testing.B) { benchIntercept(b, tools, cmd, tbCaps, false) })
	b.Run("tools/tool.before-4KiB-write", func(b *testing.B) { benchIntercept(b, tools, write, tbCaps, false) })
	b.Run("secrets/tool.before-command", func(b *testing.B) { benchIntercept(b, secrets(), cmd, tbCaps, false) })
}

// BenchmarkBaselineByteLoop is the floor the policies are measured against: one compare
// per byte over the same 32 KiB of text. On a shared machine it shows how much of a
// number is the machine.
func BenchmarkBaselineByteLoop(b *testing.B) {
	var sb strings.Builder
	for _, m := range benchRequest(benchSize, nil).Items {
		sb.WriteString(m.Parts[0].TextOf())
	}
	s := sb.String()
	b.SetBytes(int64(len(s)))
	b.ReportAllocs()
	n := 0
	cpu0 := processCPU()
	for i := 0; i < b.N; i++ {
		for j := 0; j < len(s); j++ {
			if s[j] == '"' {
				n++
			}
		}
	}
	b.ReportMetric(float64(processCPU()-cpu0)/float64(b.N), "cpu-ns/op")
	if n < 0 {
		b.Fatal(n)
	}
}
