package policies

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/hookproxy/hookproxy/chain/ahp"
)

// withheldSecretsRequest is secretsRequest with a withheld part (an encrypted reasoning
// item the policy sees as metadata only): the list cannot be replaced whole.
func withheldSecretsRequest() *ahp.Event {
	ev := secretsRequest()
	ev.Items[2].Parts[0] = ahp.Part{ID: "m2p0", Kind: ahp.KindText, MediaType: ahp.MediaTypeText, Selection: ahp.SelectionMetadata,
		Category: ahp.CategoryReasoning}
	return ev
}

// interceptOffered delivers ev with the host's hookproxy.redact_text offer.
func interceptOffered(t *testing.T, p ahp.Interceptor, ev *ahp.Event) *ahp.InterceptResult {
	t.Helper()
	res, err := p.Intercept(context.Background(), &ahp.InterceptRequest{ID: ev.ID, Params: &ahp.InterceptParams{
		ProtocolVersion: ahp.ProtocolVersion, Event: ev, Capabilities: proxyCaps(ev.Type),
		Extensions: map[string]json.RawMessage{ahp.ExtRedactText: json.RawMessage(`{"target":"request"}`)}}})
	if err != nil {
		t.Fatal(err)
	}
	return res
}

// TestSecretsRedactsInPlaceBesideWithheldText: offered hookproxy.redact_text over a list
// that cannot be replaced whole, the policy answers no effect and one entry per credential
// of the part that holds it; applied, they give exactly the text the whole-list redaction
// gives. Control: without the offer the same event is denied (TestSecretsCapabilityFallback).
func TestSecretsRedactsInPlaceBesideWithheldText(t *testing.T) {
	p := mustSecrets(t)
	ev := withheldSecretsRequest()
	res := interceptOffered(t, p, ev)
	if len(res.Effects) != 0 {
		t.Fatalf("effects %s, want none", describeEffects(res))
	}
	var reds []ahp.TextRedaction
	if err := json.Unmarshal(res.Extensions[ahp.ExtRedactText], &reds); err != nil || len(reds) != 2 {
		t.Fatalf("redact_text = %s (%v), want two entries", res.Extensions[ahp.ExtRedactText], err)
	}
	got := *ev.Items[1].Parts[0].Text
	for _, r := range reds {
		if r.Message != "m1" || r.Part != "m1p0" || !ahp.RedactionPlaceholder.MatchString(r.Replace) {
			t.Errorf("entry %+v", r)
		}
		got = strings.ReplaceAll(got, r.Find, r.Replace)
	}
	want := "Deploy with key " + wantPlaceholder(SecretAWSAccessKeyID, testAWSKeyID) +
		" and push using " + wantPlaceholder(SecretGitHubToken, testGitHubPAT) + " please."
	if got != want {
		t.Errorf("redacted in place: %q\nwant %q", got, want)
	}

	// Offered but not needed: a list that can be replaced whole still gets the replace.
	res = interceptOffered(t, p, secretsRequest())
	if e := onlyEffect(t, res, ahp.EffectModify); e.Operation != ahp.OpReplace || res.Extensions != nil {
		t.Errorf("a whole list: %s with extensions %v", describeEffects(res), res.Extensions)
	}
}

// TestSecretsInPlaceStillDeniesWhatNoPartHolds: a key split across two text parts of one
// message cannot be taken out of either part, offer or not: the request is refused.
func TestSecretsInPlaceStillDeniesWhatNoPartHolds(t *testing.T) {
	p := mustSecrets(t)
	ev := withheldSecretsRequest()
	half := len(testAWSKeyID) / 2
	ev.Items[1].Parts = []ahp.Part{text("m1p0", "Deploy with key "+testAWSKeyID[:half]), text("m1p1", testAWSKeyID[half:]+" now.")}
	res := interceptOffered(t, p, ev)
	if e := onlyEffect(t, res, ahp.EffectDeny); !strings.HasPrefix(e.Code, "hookproxy.secrets.") {
		t.Errorf("deny code %q", e.Code)
	}
}

// TestPIIRedactsInPlaceBesideWithheldText: pii shares the engine: an e-mail address in a
// list that cannot be replaced whole is taken out in place when offered; without the offer
// the request is refused.
func TestPIIRedactsInPlaceBesideWithheldText(t *testing.T) {
	p := mustPII(t)
	ev := withheldSecretsRequest()
	ev.Items[1].Parts = []ahp.Part{text("m1p0", "Mail the report to jane.doe@example.com today.")}
	res := interceptOffered(t, p, ev)
	var reds []ahp.TextRedaction
	if err := json.Unmarshal(res.Extensions[ahp.ExtRedactText], &reds); err != nil || len(reds) != 1 || len(res.Effects) != 0 {
		t.Fatalf("effects %s, redact_text %s", describeEffects(res), res.Extensions[ahp.ExtRedactText])
	}
	if r := reds[0]; r.Part != "m1p0" || r.Find != "jane.doe@example.com" || !ahp.RedactionPlaceholder.MatchString(r.Replace) {
		t.Errorf("entry %+v", r)
	}
	res, _ = run(t, p, ev, proxyCaps(ev.Type))
	onlyEffect(t, res, ahp.EffectDeny)
}
