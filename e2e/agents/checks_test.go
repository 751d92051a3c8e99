//go:build unix

package agents

import (
	"strconv"
	"strings"
	"testing"
)

// checkControl: without the proxy the scripted conversation runs to its end, the
// destructive command runs and both secrets reach the model. This proves each check of
// checkProxied can fail.
func checkControl(t *testing.T, res result, im *imitation, s scratch) {
	t.Helper()
	reqs := im.requests()
	if res.exitCode != 0 {
		t.Errorf("control: agent exit code %d, want 0", res.exitCode)
	}
	if s.survived() {
		t.Errorf("control: %s still exists: the destructive command did not run, so the proxied check proves nothing", s.sentinel)
	}
	for _, key := range []string{promptKeyID, fileKeyID} {
		if !sawSecret(reqs, key) {
			t.Errorf("control: the upstream never received %s: the secret check would pass without a proxy", key)
		}
	}
	if !answered(reqs, answerFinal) {
		t.Errorf("control: the conversation never reached its final turn (turns: %v)", turns(reqs))
	}
	if !strings.Contains(res.stdout, finalText) {
		t.Errorf("control: agent output lacks the final text %q", finalText)
	}
}

// checkProxied: through the proxy the agent still completes (exit 0), the destructive
// command never runs, the upstream never sees either secret, the agent did read the file
// (turn 2 was reached: the redacted tool result went upstream), and the agent is told why
// the command was refused.
func checkProxied(t *testing.T, res result, im *imitation, s scratch) {
	t.Helper()
	checkRefused(t, res, im, s, denyReason)
}

// checkRefused is checkProxied with the reason the agent must be shown.
func checkRefused(t *testing.T, res result, im *imitation, s scratch, reason string) {
	t.Helper()
	reqs := im.requests()
	if res.exitCode != 0 || res.timedOut {
		t.Errorf("agent exit code %d (timed out: %v), want 0: the agent must complete through the proxy", res.exitCode, res.timedOut)
	}
	if !s.survived() {
		t.Errorf("%s was deleted: the destructive command ran through the proxy", s.sentinel)
	}
	for _, key := range []string{promptKeyID, fileKeyID} {
		if where := secretAt(reqs, key); where != "" {
			t.Errorf("the upstream received the secret %s unredacted (%s)", key, where)
		}
	}
	if !strings.Contains(bodies(reqs), redactedKeyID) {
		t.Errorf("no request carried a redaction marker %q: the secrets were not redacted (refused or dropped instead?)", redactedKeyID)
	}
	if !answered(reqs, answerDestroy) {
		t.Errorf("the conversation never reached turn 2 (the destructive call, sent after the file's redacted content came back); turns: %v", turns(reqs))
	}
	if answered(reqs, answerFinal) {
		t.Errorf("the upstream got the result of the destructive call: the call reached the agent")
	}
	if !strings.Contains(res.stdout, reason) {
		t.Errorf("the agent's output does not say the command was blocked:\n%s", tail(res.stdout, 2<<10))
	}
}

// redactedKeyID starts what the secrets policy puts in place of an AWS access key id.
const redactedKeyID = "[REDACTED:aws_access_key_id:"

// bodies joins every request body.
func bodies(reqs []request) string {
	var b strings.Builder
	for _, r := range reqs {
		b.WriteString(r.raw())
		b.WriteByte('\n')
	}
	return b.String()
}

// sawSecret reports whether any request carried key.
func sawSecret(reqs []request, key string) bool { return secretAt(reqs, key) != "" }

// secretAt names the first request (and header) that carried key, or "".
func secretAt(reqs []request, key string) string {
	for i, r := range reqs {
		if strings.Contains(r.raw(), key) || strings.Contains(r.URI, key) {
			return "request " + strconv.Itoa(i) + " " + r.Method + " " + r.URI + " body"
		}
		for h, vs := range r.Header {
			for _, v := range vs {
				if strings.Contains(v, key) {
					return "request " + strconv.Itoa(i) + " header " + h
				}
			}
		}
	}
	return ""
}

func answered(reqs []request, turn string) bool {
	for _, r := range reqs {
		if r.Answer == turn {
			return true
		}
	}
	return false
}

// turns lists what each request got, for failure messages.
func turns(reqs []request) []string {
	out := make([]string, 0, len(reqs))
	for _, r := range reqs {
		out = append(out, r.Method+" "+r.URI+" -> "+r.Answer)
	}
	return out
}

// checkNoEgress: with the settings each run uses (Claude Code:
// CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC=1; Codex: plugins off; Gemini CLI: update
// checks, usage statistics and telemetry off), the model API is the
// only thing the agent talks to, so nothing bypasses the proxy. Without them Claude Code
// connects to api.anthropic.com itself (not to ANTHROPIC_BASE_URL), and Codex to
// github.com, api.github.com and chatgpt.com.
func checkNoEgress(t *testing.T, trap *egressTrap) {
	t.Helper()
	if a := trap.attempts(); len(a) > 0 {
		t.Errorf("the agent tried to reach hosts other than the model API (refused by the trap): %v", a)
	}
}

// checkWithheldSentBack: the agent sent the model's opaque reasoning (marker: a
// redacted_thinking block's data, a reasoning item's encrypted_content) back, unchanged,
// in the request that carried the result of turn 1 and got turn 2 — the request whose
// history also holds the prompt's key. Through the proxy that request had to be redacted
// in place (the list cannot be replaced whole), not refused; in the control it shows the
// agent really sends the shape, so the proxied run exercises it.
func checkWithheldSentBack(t *testing.T, im *imitation, marker string) {
	t.Helper()
	for _, r := range im.requests() {
		if r.Answer == answerDestroy {
			if !strings.Contains(r.raw(), marker) {
				t.Errorf("the request answered with turn 2 does not carry the model's opaque reasoning %q back", marker)
			}
			return
		}
	}
	t.Errorf("no request reached turn 2 (turns: %v)", turns(im.requests()))
}
