package policies

import (
	"strings"
	"testing"

	"github.com/hookproxy/hookproxy/chain/ahp"
)

func TestPIIRedactsRequest(t *testing.T) {
	p := mustPII(t)
	ev := requestEvent(
		msg("m0", ahp.RoleSystem, text("m0p0", "You are a support agent.")),
		msg("m1", ahp.RoleUser, text("m1p0", "Refund "+testEmail+", card "+testCard+", thanks.")),
	)
	res, _ := run(t, p, ev, proxyCaps(ev.Type))
	e := onlyEffect(t, res, ahp.EffectModify)
	got := decodeMessages(t, e.Value)
	want := "Refund " + wantPlaceholder(PIIEmail, testEmail) + ", card " + wantPlaceholder(PIIPaymentCard, testCard) + ", thanks."
	if *got[1].Parts[0].Text != want {
		t.Fatalf("text = %q\nwant   %q", *got[1].Parts[0].Text, want)
	}
	if *got[0].Parts[0].Text != "You are a support agent." {
		t.Fatal("untouched message changed")
	}
}

func TestPIIDirections(t *testing.T) {
	out := toolAfterEvent("crm_lookup", `{"name":"Jane","email":"`+testEmail+`","phone":"+1 415 555 2671"}`)

	// Default: response side off.
	res, _ := run(t, mustPII(t), out, proxyCaps(out.Type))
	noEffects(t, res)

	// response: deny at tool.after, which has no deny → flow stop.
	p, err := NewPII(PIIConfig{Response: "deny"})
	if err != nil {
		t.Fatal(err)
	}
	res, _ = run(t, p, out, proxyCaps(out.Type))
	e := onlyEffect(t, res, ahp.EffectFlow)
	if e.Operation != ahp.OpStop || !strings.Contains(e.Reason, "email") || strings.Contains(e.Reason, testEmail) {
		t.Fatalf("stop = %+v", e)
	}

	// response: redact.
	p, err = NewPII(PIIConfig{Response: "redact"})
	if err != nil {
		t.Fatal(err)
	}
	res, _ = run(t, p, out, proxyCaps(out.Type))
	got := *decodeMessages(t, onlyEffect(t, res, ahp.EffectModify).Value)[0].Parts[0].Text
	if strings.Contains(got, testEmail) || strings.Contains(got, "555 2671") || !strings.Contains(got, `"name":"Jane"`) {
		t.Fatalf("output = %q", got)
	}

	// request: off.
	p, err = NewPII(PIIConfig{Request: "off"})
	if err != nil {
		t.Fatal(err)
	}
	ev := requestEvent(msg("m1", ahp.RoleUser, text("m1p0", "mail "+testEmail)))
	res, _ = run(t, p, ev, proxyCaps(ev.Type))
	noEffects(t, res)

	// request: deny at tool.before.
	p, err = NewPII(PIIConfig{Request: "deny"})
	if err != nil {
		t.Fatal(err)
	}
	tb := toolBeforeEvent("send_email", `{"to":"`+testEmail+`","body":"hi"}`)
	res, _ = run(t, p, tb, proxyCaps(tb.Type))
	if e := onlyEffect(t, res, ahp.EffectDeny); e.Code != "hookproxy.pii.email" {
		t.Fatalf("code = %q", e.Code)
	}
}

func TestPIIToolInputRedaction(t *testing.T) {
	tb := toolBeforeEvent("write_file", `{"path":"notes.txt","content":"IBAN DE89 3704 0044 0532 0130 00, SSN 512-05-1120"}`)
	res, _ := run(t, mustPII(t), tb, proxyCaps(tb.Type))
	got := decodeObject(t, onlyEffect(t, res, ahp.EffectModify).Value)
	want := "IBAN " + wantPlaceholder(PIIIBAN, "DE89 3704 0044 0532 0130 00") + ", SSN " + wantPlaceholder(PIIUSSSN, "512-05-1120")
	if got["content"] != want || got["path"] != "notes.txt" {
		t.Fatalf("input = %v", got)
	}
}
