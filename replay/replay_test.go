package replay_test

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/hookproxy/hookproxy/app"
	"github.com/hookproxy/hookproxy/capture"
	"github.com/hookproxy/hookproxy/chain"
	"github.com/hookproxy/hookproxy/chain/ahp"
	"github.com/hookproxy/hookproxy/chain/registration"
	"github.com/hookproxy/hookproxy/config"
	"github.com/hookproxy/hookproxy/policies"
	"github.com/hookproxy/hookproxy/proxy"
	"github.com/hookproxy/hookproxy/replay"
	"github.com/hookproxy/hookproxy/shadow"
)

const awsKey = "AKIAQ3EXAMPLE7VNX2K4"

func defaultChain(t *testing.T, tap func(*chain.Tapped)) *chain.Chain {
	t.Helper()
	doc, _, err := registration.Parse(config.DefaultRegistration, app.RegistrationOptions())
	if err != nil {
		t.Fatal(err)
	}
	ch, err := chain.New(doc, chain.Options{Policies: policies.Factories(), ObserveTimeout: time.Second, Tap: tap})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = ch.Close() })
	return ch
}

func toolBefore(id, command string) *ahp.Event {
	in, _ := json.Marshal(map[string]string{"command": command})
	return &ahp.Event{ID: id, Source: "urn:t", Type: ahp.EventToolBefore, Time: "2026-01-01T00:00:00Z", Path: "/w",
		Session: &ahp.Session{ID: "s1"}, Turn: &ahp.Turn{ID: "t1"}, Call: &ahp.Call{ID: "c-" + id},
		Tool: &ahp.Tool{Name: "Bash", Origin: "native", Input: in}}
}

// TestRedactedCaptureReplaysAsRecorded: three tool calls settle on the default chain with
// a capture tapping it (redaction on): a plain one (forwarded), one holding an AWS key
// (rewritten: the secrets policy redacts it) and rm -rf / (refused). The capture holds no
// key, and replaying it through the same chain reproduces every outcome. Control: the same
// capture marked as not redacted (so no stand-in goes back in) differs on exactly the
// event that held the key. --boundary and --since narrow what is replayed.
func TestRedactedCaptureReplaysAsRecorded(t *testing.T) {
	dir := t.TempDir()
	w, err := capture.NewWriter(capture.Options{Dir: dir, Redact: true})
	if err != nil {
		t.Fatal(err)
	}
	tap := shadow.New(shadow.Options{Capture: w})
	live := defaultChain(t, tap.Func())
	caps, _ := proxy.CapabilitiesFor(ahp.EventToolBefore)
	want := map[string]string{}
	for _, ev := range []*ahp.Event{toolBefore("plain", "ls -la"), toolBefore("key", "export AWS_ACCESS_KEY_ID="+awsKey), toolBefore("rm", "rm -rf /")} {
		st := live.Intercept(context.Background(), ev, caps)
		st.Wait()
		want[ev.ID] = string(capture.Summarize(st).Outcome)
	}
	tap.Close()
	if want["plain"] != "forwarded" || want["key"] != "rewritten" || want["rm"] != "refused" {
		t.Fatalf("live outcomes %v", want)
	}
	files, _ := capture.Files(dir)
	raw, _ := os.ReadFile(files[0])
	if strings.Contains(string(raw), awsKey) || !strings.Contains(string(raw), "[CAPTURE-REDACTED-aws_access_key_id]") {
		t.Fatalf("the capture should hold the marker, not the key:\n%s", raw)
	}

	candidate := defaultChain(t, nil)
	rep, err := replay.Run(context.Background(), replay.Options{Capture: dir, Chain: candidate})
	if err != nil {
		t.Fatal(err)
	}
	if rep.Events != 3 || len(rep.Differences) != 0 || rep.Totals.Candidate["rewritten"] != 1 {
		t.Fatalf("replay: %+v", rep)
	}

	// Control: without the stand-ins the key's event settles differently.
	plain := filepath.Join(t.TempDir(), "c.jsonl")
	if err := os.WriteFile(plain, []byte(strings.ReplaceAll(string(raw), `"redacted":true,`, "")), 0o600); err != nil {
		t.Fatal(err)
	}
	rep, err = replay.Run(context.Background(), replay.Options{Capture: plain, Chain: candidate})
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.Differences) != 1 || rep.Differences[0].EventID != "key" || rep.Differences[0].Diff != "would no longer rewrite the tool call" {
		t.Fatalf("control: differences %+v, want only the key's event", rep.Differences)
	}

	rep, _ = replay.Run(context.Background(), replay.Options{Capture: dir, Chain: candidate, Boundary: ahp.EventModelRequestBefore})
	if rep.Events != 0 {
		t.Fatalf("--boundary model.request.before replayed %d tool.before events", rep.Events)
	}
	rep, _ = replay.Run(context.Background(), replay.Options{Capture: dir, Chain: candidate, Since: time.Now().Add(time.Hour)})
	if rep.Events != 0 {
		t.Fatalf("--since the future replayed %d events", rep.Events)
	}
}
