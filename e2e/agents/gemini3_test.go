//go:build unix

package agents

import (
	"encoding/base64"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/tidwall/gjson"
	"github.com/tidwall/sjson"
)

// Gemini 3 thought signatures with a real agent. Gemini 3 puts an opaque thoughtSignature
// on the first functionCall part of each step that calls functions (only the first of
// parallel calls is signed) and validates the signatures of the current turn — every
// model step since the last user message that is text rather than function responses —
// refusing with 400 INVALID_ARGUMENT a request in which a step's first call has none
// ("Function call is missing a thought_signature in functionCall parts…"). Steps of
// earlier turns are not validated. The API's documentation names a placeholder a client
// may put on a call it has no signature for, which the API accepts in place of one;
// Gemini CLI uses it (its history patch, see geminiSkipSignature).
//
// With script.gemini3 the imitation behaves so: it signs every step it answers with a
// signature of its own making, recorded, and checks each request before it answers it.

// geminiSkipSignature is the placeholder signature the Gemini API accepts in place of a
// real one. Gemini CLI puts it on the first call of every step of the current turn that
// arrived without a signature, before each request.
const geminiSkipSignature = "skip_thought_signature_validator"

// issue makes the signature of the step answered with turn (uid makes it unique) and
// records it.
func (im *imitation) issue(turn, uid string) string {
	sig := base64.StdEncoding.EncodeToString([]byte("hookproxy-e2e-thought-signature:" + uid))
	im.mu.Lock()
	defer im.mu.Unlock()
	im.issued[sig] = turn
	return sig
}

// signatureOf returns the signature issued with turn ("" when none was).
func (im *imitation) signatureOf(turn string) string {
	im.mu.Lock()
	defer im.mu.Unlock()
	for sig, t := range im.issued {
		if t == turn {
			return sig
		}
	}
	return ""
}

// checkSignatures applies Gemini 3's rule to a request: it describes what the first call
// of each model step of the current turn carries (request.Signatures) and returns the
// API's error message for the first step that breaks the rule ("" when none does).
func (im *imitation) checkSignatures(body []byte) (steps []string, problem string) {
	contents := gjson.GetBytes(body, "contents").Array()
	start := 0 // the current turn starts at the last user message with text and no function response
	for i, c := range contents {
		if c.Get("role").String() != "user" {
			continue
		}
		text, responses := false, false
		for _, p := range c.Get("parts").Array() {
			text = text || p.Get("text").Exists()
			responses = responses || p.Get("functionResponse").Exists()
		}
		if text && !responses {
			start = i
		}
	}
	im.mu.Lock()
	defer im.mu.Unlock()
	for _, c := range contents[start:] {
		if c.Get("role").String() != "model" {
			continue
		}
		for j, p := range c.Get("parts").Array() {
			if !p.Get("functionCall").Exists() {
				continue
			}
			sig := p.Get("thoughtSignature")
			if !sig.Exists() {
				sig = p.Get("thought_signature")
			}
			switch {
			case sig.String() == "":
				steps = append(steps, "missing")
				if problem == "" {
					problem = fmt.Sprintf("Function call is missing a thought_signature in functionCall parts. This is required "+
						"for tools to work correctly, and missing thought_signature may lead to degraded model performance. "+
						"Additional data, function call `default_api:%s` , position %d. Please refer to "+
						"https://ai.google.dev/gemini-api/docs/thought-signatures for more details.",
						p.Get("functionCall.name").String(), j+1)
				}
			case sig.String() == geminiSkipSignature:
				steps = append(steps, geminiSkipSignature)
			case im.issued[sig.String()] != "":
				steps = append(steps, "issued:"+im.issued[sig.String()])
			default:
				steps = append(steps, "unknown")
				if problem == "" {
					problem = "Corrupted thought signature."
				}
			}
			break // only the step's first call is signed
		}
	}
	return steps, problem
}

// requestWith returns the first request answered with turn.
func requestWith(reqs []request, turn string) (request, bool) {
	for _, r := range reqs {
		if r.Answer == turn {
			return r, true
		}
	}
	return request{}, false
}

// logSignatures logs what the agent sent back on each request: the record of what Gemini
// CLI really does with signatures (it sends a signature it got back unchanged, and patches
// in geminiSkipSignature where a step's first call arrived without one).
func logSignatures(t *testing.T, reqs []request) {
	t.Helper()
	for i, r := range reqs {
		t.Logf("request %d %s -> %d %s; current-turn steps' first calls carried: %v", i, r.URI, r.Status, r.Answer, r.Signatures)
	}
}

// callPart returns the first functionCall part of req that runs cmd, and its path.
func callPart(req request, cmd string) (gjson.Result, string) {
	for i, c := range gjson.Get(req.raw(), "contents").Array() {
		for j, p := range c.Get("parts").Array() {
			if p.Get("functionCall.args.command").String() == cmd {
				return p, fmt.Sprintf("contents.%d.parts.%d", i, j)
			}
		}
	}
	return gjson.Result{}, ""
}

// refusedRequests lists the requests the imitation refused.
func refusedRequests(reqs []request) []string {
	var out []string
	for _, r := range reqs {
		if r.Status != http.StatusOK {
			out = append(out, r.URI+": "+r.Answer)
		}
	}
	return out
}

// TestGeminiCLIThoughtSignatures runs Gemini CLI against an imitation of Gemini 3 whose
// turn 2 is one step of two parallel calls: first the destructive command (denied by the
// suite's chain), carrying the step's signature, then a harmless one. Through the proxy
// the first call is removed, its signature moves to the kept call, and the CLI's next
// request — which carries the kept call and its result — is accepted by the imitation's
// signature check with the very signature the imitation issued (not the CLI's
// placeholder), and the run completes. The control straight to the imitation shows the
// unmodified flow satisfies the rule; the negative controls send that accepted request
// with the kept call's signature taken out (refused: the imitation enforces the rule) and
// with the CLI's placeholder (accepted, as by the API: why the CLI would survive a lost
// signature while other Gemini 3 clients do not).
func TestGeminiCLIThoughtSignatures(t *testing.T) {
	bin := agentBin(t, "gemini")
	version := checkVersion(t, bin, geminiPkg)

	setup := func(t *testing.T) (scratch, *imitation, string) {
		s := newScratch(t)
		kept := filepath.Join(s.work, "kept-call-ran")
		sc := s.script(geminiDestroy)
		sc.gemini3, sc.keepCmd = true, "touch "+kept
		return s, newImitation(t, sc), kept
	}
	ran := func(path string) bool { _, err := os.Stat(path); return err == nil }

	t.Run("control", func(t *testing.T) {
		s, im, kept := setup(t)
		trap := newEgressTrap(t)
		res := runGemini(t, bin, im.URL, s, trap)
		saveRecord(t, version, res, im, trap)
		reqs := im.requests()
		logSignatures(t, reqs)
		if res.exitCode != 0 || res.timedOut {
			t.Errorf("control: agent exit code %d (timed out: %v), want 0", res.exitCode, res.timedOut)
		}
		if r := refusedRequests(reqs); len(r) > 0 {
			t.Errorf("control: the imitation refused requests of the unmodified flow: %v", r)
		}
		if s.survived() {
			t.Errorf("control: the destructive first call did not run, so the proxied check proves nothing")
		}
		if !ran(kept) {
			t.Errorf("control: the second call of the step did not run")
		}
		final, ok := requestWith(reqs, answerFinal)
		if !ok {
			t.Fatalf("control: the conversation never reached its final turn (turns: %v)", turns(reqs))
		}
		// The CLI sent the destructive call back first in its step, with the signature it got.
		first, _ := callPart(final, im.script.destroyCmd)
		if got, want := first.Get("thoughtSignature").String(), im.signatureOf(answerDestroy); got != want || want == "" {
			t.Errorf("control: the step's first call came back with signature %q, want the issued %q", got, want)
		}
		checkNoEgress(t, trap)
	})

	t.Run("proxied", func(t *testing.T) {
		s, im, kept := setup(t)
		trap := newEgressTrap(t)
		p := startProxy(t, im.URL, registration(t, s.victim))
		res := runGemini(t, bin, p.url+"/gemini", s, trap)
		saveRecord(t, version, res, im, trap)
		reqs := im.requests()
		logSignatures(t, reqs)
		if res.exitCode != 0 || res.timedOut {
			t.Errorf("agent exit code %d (timed out: %v), want 0: the agent must complete through the proxy", res.exitCode, res.timedOut)
		}
		if r := refusedRequests(reqs); len(r) > 0 {
			t.Errorf("the imitation refused requests the CLI sent through the proxy: %v", r)
		}
		if !s.survived() {
			t.Errorf("%s was deleted: the destructive first call ran through the proxy", s.sentinel)
		}
		if !ran(kept) {
			t.Errorf("the kept second call never ran")
		}
		if !strings.Contains(res.stdout, denyReason) {
			t.Errorf("the agent's output does not say the command was blocked:\n%s", tail(res.stdout, 2<<10))
		}
		for _, key := range []string{promptKeyID, fileKeyID} {
			if where := secretAt(reqs, key); where != "" {
				t.Errorf("the upstream received the secret %s unredacted (%s)", key, where)
			}
		}
		final, ok := requestWith(reqs, answerFinal)
		if !ok {
			t.Fatalf("the conversation never reached its final turn (turns: %v)", turns(reqs))
		}
		if destroy, _ := callPart(final, im.script.destroyCmd); destroy.Exists() {
			t.Errorf("the CLI's history holds the destructive call: it reached the agent")
		}
		call, path := callPart(final, im.script.keepCmd)
		want := im.signatureOf(answerDestroy)
		if got := call.Get("thoughtSignature").String(); got != want || want == "" {
			t.Errorf("the kept call came back with signature %q, want the one issued with its step %q (moved by the proxy); %s "+
				"means the agent got it unsigned and patched it itself", got, want, geminiSkipSignature)
		}

		// Negative controls with the request the imitation just accepted: sent straight to
		// it, and through the proxy (which passes the upstream's refusal on: it neither
		// refuses the unsigned history itself nor hides the error).
		sendTo := func(base, body string) (int, string) {
			t.Helper()
			req, err := http.NewRequest(http.MethodPost, base+final.URI, strings.NewReader(body))
			if err != nil {
				t.Fatal(err)
			}
			req.Header.Set("Content-Type", "application/json")
			req.Header.Set("x-goog-api-key", "AIzaSy-hookproxy-e2e-fake-key")
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			b, _ := io.ReadAll(resp.Body)
			return resp.StatusCode, string(b)
		}
		send := func(body string) (int, string) { t.Helper(); return sendTo(im.URL, body) }
		if path == "" {
			t.Fatalf("the final request holds no kept call: %s", tail(final.raw(), 2<<10))
		}
		unsigned, err := sjson.Delete(final.raw(), path+".thoughtSignature")
		if err != nil {
			t.Fatal(err)
		}
		if code, body := send(unsigned); code != http.StatusBadRequest || !strings.Contains(body, "missing a thought_signature") {
			t.Errorf("negative control: the accepted request without the kept call's signature got %d %s, want 400 "+
				"missing a thought_signature: the imitation does not enforce the rule", code, tail(body, 512))
		}
		if code, body := sendTo(p.url+"/gemini", unsigned); code != http.StatusBadRequest || !strings.Contains(body, "missing a thought_signature") {
			t.Errorf("negative control through the proxy: got %d %s, want the upstream's 400 missing a thought_signature", code, tail(body, 512))
		}
		placeholder, err := sjson.Set(final.raw(), path+".thoughtSignature", geminiSkipSignature)
		if err != nil {
			t.Fatal(err)
		}
		if code, body := send(placeholder); code != http.StatusOK {
			t.Errorf("the request with the documented placeholder signature got %d %s, want 200", code, tail(body, 512))
		}
		checkNoEgress(t, trap)
	})
}
