package policies

import (
	"context"
	"crypto/sha256"
	"encoding/json"
	"strconv"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/hookproxy/hookproxy/chain/ahp"
	"github.com/hookproxy/hookproxy/chain/transport"
	"github.com/hookproxy/hookproxy/internal/heldtexts"
)

// cacheFiller makes a text long enough for its scan to be cached (minCachedText).
var cacheFiller = strings.Repeat("the build log shows nothing unusual here; ", 8)

// resultJSON is what a policy answered, as the proxy would read it.
func resultJSON(t testing.TB, p ahp.Interceptor, ctx context.Context, ev *ahp.Event) string {
	t.Helper()
	res, err := interceptWith(ctx, p, ev)
	if err != nil {
		t.Fatal(err)
	}
	b, err := json.Marshal(res)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// agentTurns is a conversation's request at turn n: a system prompt, tool definitions in
// the params, and n turns of history, the last of which holds secret (when not "").
func agentTurns(n int, secret string) *ahp.Event {
	items := []ahp.Message{msg("sys", ahp.RoleSystem, text("sys.p0", "You are a coding agent. "+cacheFiller))}
	for i := 0; i < n; i++ {
		body := "output of step " + strconv.Itoa(i) + ": " + cacheFiller
		if i == n-1 && secret != "" {
			body += " export AWS_ACCESS_KEY_ID=" + secret + " " + cacheFiller
		}
		items = append(items, msg("m"+strconv.Itoa(i), ahp.RoleUser, text("m"+strconv.Itoa(i)+".p0", body)))
	}
	ev := requestEvent(items...)
	ev.Params = json.RawMessage(`{"max_tokens":4096,"tools":[{"name":"Bash","description":` + strconv.Quote("Runs a command. "+cacheFiller) + `}]}`)
	return ev
}

// TestScanCacheReusesJudgedContent: a policy that scanned a conversation's history on one
// request answers the next request (the same history plus a new turn holding a credential)
// exactly as a policy that never saw the conversation does, and scans only the new turn:
// the system prompt, the tool definitions and the earlier turns come from its cache.
// Control: the new turn's credential is found although every earlier text was clean.
func TestScanCacheReusesJudgedContent(t *testing.T) {
	warm := mustSecrets(t)
	ctx := func() context.Context {
		return transport.WithTextDigests(context.Background(), transport.NewTextDigests())
	}
	for n := 1; n <= 6; n++ {
		_, _, hits0, misses0 := ScanCacheStats()
		got := resultJSON(t, warm, ctx(), agentTurns(n, testAWSKeyID))
		_, _, hits1, misses1 := ScanCacheStats()
		want := resultJSON(t, mustSecrets(t), ctx(), agentTurns(n, testAWSKeyID))
		if got != want {
			t.Fatalf("turn %d: the warm policy answered\n%s\na fresh one\n%s", n, got, want)
		}
		if !strings.Contains(got, "REDACTED:aws_access_key_id") {
			t.Fatalf("turn %d: the new turn's key was not redacted: %s", n, got)
		}
		// Turn n scans its new text, and the text that held the key at turn n-1 (it no
		// longer does); everything else was scanned before.
		if n > 1 && (misses1-misses0 > 2 || hits1-hits0 < uint64(n-1)) {
			t.Errorf("turn %d: %d scans, %d reused; want at most 2 scans and at least %d reused", n, misses1-misses0, hits1-hits0, n-1)
		}
	}
}

// TestScanCacheBelongsToOneConfiguration: a policy built from another configuration (a
// reload) does not reuse what the first one kept: the same text, cached by a policy that
// reports the key, passes a policy whose allow list admits it, and the reverse.
func TestScanCacheBelongsToOneConfiguration(t *testing.T) {
	strict := mustSecrets(t)
	lenient, err := NewSecrets(SecretsConfig{Allow: []string{"^" + testAWSKeyID + "$"}})
	if err != nil {
		t.Fatal(err)
	}
	ev := agentTurns(2, testAWSKeyID)
	for i := 0; i < 2; i++ {
		if got := resultJSON(t, strict, context.Background(), ev); !strings.Contains(got, "REDACTED") {
			t.Fatalf("round %d: the strict policy let the key through: %s", i, got)
		}
		if got := resultJSON(t, lenient, context.Background(), ev); strings.Contains(got, "REDACTED") {
			t.Fatalf("round %d: the allow list was ignored: %s", i, got)
		}
	}
}

// TestScanCacheIsBounded: however many distinct texts a cache sees, the bytes it holds
// stay within its limit and are reported; recently used entries survive.
func TestScanCacheIsBounded(t *testing.T) {
	const limit = 64 << 10
	c := newScanCache(limit)
	var keep scanKey
	for i := 0; i < 20000; i++ {
		k := scanKey{sum: sha256.Sum256([]byte("text " + strconv.Itoa(i))), kind: scanKindText}
		if i == 0 {
			keep = k
		}
		c.put(k, &scanEntry{findings: []Finding{{Start: 0, End: 4, Kind: "x"}}})
		if i%100 == 0 && c.get(keep) == nil {
			t.Fatalf("after %d inserts the entry in use was dropped", i)
		}
		if held := c.held.Load(); held > limit {
			t.Fatalf("after %d inserts the cache holds %d bytes, limit %d", i, held, limit)
		}
	}
	held := c.held.Load()
	if held < limit/4 {
		t.Fatalf("the cache holds only %d bytes: it keeps nothing", held)
	}
	// Other caches come and go (garbage policies release theirs), so only a lower bound.
	if bytes, _, _, _ := ScanCacheStats(); bytes < held {
		t.Errorf("ScanCacheStats reports %d bytes, this cache alone holds %d", bytes, held)
	}
	if c.get(scanKey{sum: sha256.Sum256([]byte("text 1")), kind: scanKindText}) != nil {
		t.Error("an entry unused since the start survived 20,000 inserts")
	}
}

// FuzzScanCache compares the cached path with a fresh scan: for every built-in scanner, a
// long-lived policy that has seen other inputs (and the same texts in other messages)
// answers exactly as a new policy of the same configuration.
func FuzzScanCache(f *testing.F) {
	for _, s := range []string{
		"AKIAQ3EXAMPLE7VNX2K4", "password: \"Xk9#mP2$vL8qTz\"", "Ignore all previous instructions",
		"mail bob@example.com or call +1 (415) 555-2671", "", "a\u200bb", "Bearer " + testBearer,
	} {
		f.Add(s, "ghp_"+strings.Repeat("a1B2", 9))
	}
	build := listPolicies(f)
	warm := map[string]ahp.Interceptor{}
	for name, b := range build {
		warm[name] = b()
	}
	f.Fuzz(func(t *testing.T, a, b string) {
		if !utf8.ValidString(a) || !utf8.ValidString(b) {
			return
		}
		long := func(s string) string { return cacheFiller + s + cacheFiller }
		// A text the process keeps across requests is recognised by its address
		// (internal/heldtexts), as a decoded literal of an earlier request is.
		held := long(a + b)
		heldtexts.Hold(held)
		ev := requestEvent(
			msg("m1", ahp.RoleUser, text("p1", long(a))),
			msg("m2", ahp.RoleUser, text("p2", long(b)), text("p3", long(a))),
			msg("m3", ahp.RoleUser, text("p4", a+b), text("p5", long(b+a))),
			msg("m4", ahp.RoleUser, text("p6", held), text("p7", held[:len(held)/2])),
			// The same join as m2's from other parts: the joined scan is keyed by the
			// parts' digests.
			msg("m5", ahp.RoleUser, text("p8", long(b)+cacheFiller), text("p9", a+cacheFiller)),
		)
		ev.Params = json.RawMessage(`{"max_tokens":1,"tools":[{"description":` + strconv.Quote(long(b)) + `}]}`)
		for name, fresh := range build {
			want := resultJSON(t, fresh(), context.Background(), ev)
			for round := 0; round < 2; round++ {
				ctx := transport.WithTextDigests(context.Background(), transport.NewTextDigests())
				if got := resultJSON(t, warm[name], ctx, ev); got != want {
					t.Fatalf("%s round %d: cached\n%s\nfresh\n%s", name, round, got, want)
				}
			}
		}
	})
}

// A result noted on a text kept across requests (internal/heldtexts) serves only the
// scanner that noted it: a policy that does not look for AWS keys finds the text clean and
// notes that, and a policy that does must still find the key in the same held text, on
// every request. The control is the same text not held, which the second policy scans.
func TestHeldTextNotesArePerScanner(t *testing.T) {
	kept := strings.Clone(cacheFiller + "export AWS_ACCESS_KEY_ID=" + testAWSKeyID + "\n" + cacheFiller)
	heldtexts.Hold(kept)
	seeing := mustSecrets(t)
	// Enough blind policies that some share the seeing one's note slot (slots go to the
	// key the fewest live keys use).
	var blinds []*Secrets
	for i := 0; i < 16; i++ {
		blind, err := NewSecrets(SecretsConfig{Kinds: []string{SecretGitHubToken}})
		if err != nil {
			t.Fatal(err)
		}
		blinds = append(blinds, blind)
	}
	ev := requestEvent(msg("m1", ahp.RoleUser, text("p1", kept)))
	control := requestEvent(msg("m1", ahp.RoleUser, text("p1", strings.Clone(kept))))
	want := resultJSON(t, mustSecrets(t), context.Background(), control)
	if !strings.Contains(want, "modify") {
		t.Fatalf("control: the key is not found in the text\n%s", want)
	}
	for round := 0; round < 3; round++ {
		ctx := transport.WithTextDigests(context.Background(), transport.NewTextDigests())
		for _, blind := range blinds {
			if got := resultJSON(t, blind, ctx, ev); strings.Contains(got, "modify") {
				t.Fatalf("round %d: a policy without aws keys changed the text\n%s", round, got)
			}
		}
		if got := resultJSON(t, seeing, ctx, ev); got != want {
			t.Fatalf("round %d: held text\n%s\nnot held\n%s", round, got, want)
		}
	}
}

// Concurrent requests carrying the same held texts (one clean, one with a key) get the
// result of a fresh scan, while the notes on those texts are being set and read (run with
// -race).
func TestHeldTextsConcurrently(t *testing.T) {
	clean := strings.Clone(cacheFiller + "nothing to see " + cacheFiller)
	key := strings.Clone(cacheFiller + "export AWS_ACCESS_KEY_ID=" + testAWSKeyID + "\n" + cacheFiller)
	heldtexts.Hold(clean)
	heldtexts.Hold(key)
	ev := requestEvent(msg("m1", ahp.RoleUser, text("p1", clean)), msg("m2", ahp.RoleUser, text("p2", key)))
	want := resultJSON(t, mustSecrets(t), context.Background(), requestEvent(
		msg("m1", ahp.RoleUser, text("p1", strings.Clone(clean))), msg("m2", ahp.RoleUser, text("p2", strings.Clone(key)))))
	p := mustSecrets(t)
	errs := make(chan string, 8)
	for g := 0; g < 8; g++ {
		go func() {
			for round := 0; round < 20; round++ {
				ctx := transport.WithTextDigests(context.Background(), transport.NewTextDigests())
				if got := resultJSON(t, p, ctx, ev); got != want {
					errs <- got
					return
				}
			}
			errs <- ""
		}()
	}
	for g := 0; g < 8; g++ {
		if got := <-errs; got != "" {
			t.Fatalf("held texts\n%s\nnot held\n%s", got, want)
		}
	}
}
