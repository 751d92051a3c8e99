package policies

import (
	"encoding/json"
	"fmt"
	"reflect"
	"strings"
	"testing"

	"github.com/hookproxy/hookproxy/chain/ahp"
	"github.com/hookproxy/hookproxy/mapping"
)

// secretsRequest is a model.request.before event with an AWS key id and a GitHub token in
// one user text part, and other messages and parts that must come back untouched.
func secretsRequest() *ahp.Event {
	return requestEvent(
		msg("m0", ahp.RoleSystem, text("m0p0", "You are a coding agent.")),
		msg("m1", ahp.RoleUser,
			text("m1p0", "Deploy with key "+testAWSKeyID+" and push using "+testGitHubPAT+" please."),
			text("m1p1", "The build log is attached below.")),
		msg("m2", ahp.RoleAssistant, text("m2p0", "Sure, I will deploy now.")),
	)
}

func TestSecretsRedactsRequest(t *testing.T) {
	p := mustSecrets(t)
	ev := secretsRequest()
	res, st := run(t, p, ev, proxyCaps(ev.Type))
	e := onlyEffect(t, res, ahp.EffectModify)
	if e.Target != ahp.TargetRequest || e.Operation != ahp.OpReplace {
		t.Fatalf("effect = %s %s; want modify request replace", e.Target, e.Operation)
	}
	got := decodeMessages(t, e.Value)

	want := secretsRequest().Items
	redacted := "Deploy with key " + wantPlaceholder(SecretAWSAccessKeyID, testAWSKeyID) +
		" and push using " + wantPlaceholder(SecretGitHubToken, testGitHubPAT) + " please."
	want[1].Parts[0].Text = &redacted
	if !reflect.DeepEqual(got, want) {
		gb, _ := json.MarshalIndent(got, "", " ")
		wb, _ := json.MarshalIndent(want, "", " ")
		t.Fatalf("replacement list differs\ngot:  %s\nwant: %s", gb, wb)
	}
	if !st.Changed {
		t.Fatal("chain staged the reply as no change")
	}
	// The original event is not mutated.
	if strings.Contains(*ev.Items[1].Parts[0].Text, "[REDACTED") {
		t.Fatal("policy mutated the event it was given")
	}
}

func TestSecretsCapabilityFallback(t *testing.T) {
	p := mustSecrets(t)
	tests := []struct {
		desc string
		caps *ahp.Capabilities
		ev   func() *ahp.Event
		want string // effect type, "" for none
	}{
		{"modify not advertised: deny", advertise(ahp.EffectDeny).stop().build(), secretsRequest, ahp.EffectDeny},
		{"only merge for request: deny (append cannot redact)", advertise(ahp.EffectDeny).modify(ahp.TargetRequest, false, true).build(), secretsRequest, ahp.EffectDeny},
		{"nothing advertised: no effect", advertise().build(), secretsRequest, ""},
		{"only flow stop: no effect (redact falls back to deny only)", advertise().stop().build(), secretsRequest, ""},
		{"withheld text in the list: deny instead of replace", proxyCaps(ahp.EventModelRequestBefore), func() *ahp.Event {
			ev := secretsRequest()
			ev.Items[2].Parts[0] = ahp.Part{ID: "m2p0", Kind: ahp.KindText, MediaType: ahp.MediaTypeText, Selection: ahp.SelectionMetadata}
			return ev
		}, ahp.EffectDeny},
	}
	for _, tc := range tests {
		t.Run(tc.desc, func(t *testing.T) {
			res, _ := run(t, p, tc.ev(), tc.caps)
			if tc.want == "" {
				noEffects(t, res)
				return
			}
			e := onlyEffect(t, res, tc.want)
			if e.Code != "hookproxy.secrets.aws_access_key_id" {
				t.Errorf("code = %q", e.Code)
			}
			if !strings.Contains(e.Reason, "aws_access_key_id") || !strings.Contains(e.Reason, "github_token") {
				t.Errorf("reason %q does not name the kinds", e.Reason)
			}
			if strings.Contains(e.Reason, testAWSKeyID) || strings.Contains(e.Reason, testGitHubPAT) {
				t.Errorf("reason %q leaks the secret", e.Reason)
			}
		})
	}
}

func TestSecretsDenyAction(t *testing.T) {
	p, err := NewSecrets(SecretsConfig{Action: "deny"})
	if err != nil {
		t.Fatal(err)
	}
	res, _ := run(t, p, secretsRequest(), proxyCaps(ahp.EventModelRequestBefore))
	onlyEffect(t, res, ahp.EffectDeny)

	// tool.after has no deny: flow stop; without stop, redaction.
	ev := toolAfterEvent("Bash", "AWS_ACCESS_KEY_ID="+testAWSKeyID)
	res, _ = run(t, p, ev, proxyCaps(ev.Type))
	e := onlyEffect(t, res, ahp.EffectFlow)
	if e.Operation != ahp.OpStop || e.Reason == "" {
		t.Fatalf("flow effect = %+v", e)
	}
	res, _ = run(t, p, ev, advertise().modify(ahp.TargetOutput, true, false).build())
	onlyEffect(t, res, ahp.EffectModify)
}

func TestSecretsToolInput(t *testing.T) {
	p := mustSecrets(t)
	input := `{"command": "curl -H 'Authorization: Bearer ` + testBearer + `' https://api.example.com",` +
		` "env": {"GITHUB_TOKEN": "` + testGitHubPAT + `", "DEBUG": "1"}, "timeout": 30}`

	t.Run("replace", func(t *testing.T) {
		ev := toolBeforeEvent("Bash", input)
		res, st := run(t, p, ev, proxyCaps(ev.Type))
		e := onlyEffect(t, res, ahp.EffectModify)
		if e.Target != ahp.TargetInput || e.Operation != ahp.OpReplace {
			t.Fatalf("effect = %s %s", e.Target, e.Operation)
		}
		got := decodeObject(t, e.Value)
		want := map[string]any{
			"command": "curl -H 'Authorization: Bearer " + wantPlaceholder(SecretBearerToken, testBearer) + "' https://api.example.com",
			"env":     map[string]any{"GITHUB_TOKEN": wantPlaceholder(SecretGitHubToken, testGitHubPAT), "DEBUG": "1"},
			"timeout": float64(30),
		}
		if !reflect.DeepEqual(got, want) {
			t.Fatalf("input = %v\nwant   %v", got, want)
		}
		if !reflect.DeepEqual(decodeObject(t, st.Values[ahp.TargetInput]), want) {
			t.Fatalf("staged input = %s", st.Values[ahp.TargetInput])
		}
	})
	t.Run("merge only", func(t *testing.T) {
		ev := toolBeforeEvent("Bash", input)
		caps := advertise(ahp.EffectDeny).modify(ahp.TargetInput, false, true).build()
		res, st := run(t, p, ev, caps)
		e := onlyEffect(t, res, ahp.EffectModify)
		if e.Operation != ahp.OpMerge {
			t.Fatalf("operation = %s; want merge", e.Operation)
		}
		got := decodeObject(t, e.Value)
		if _, ok := got["timeout"]; ok || len(got) != 2 {
			t.Fatalf("merge value %v should hold only the changed members command and env", got)
		}
		// Merged onto the original, the result equals the replace result.
		eff := decodeObject(t, st.Values[ahp.TargetInput])
		if eff["timeout"] != float64(30) || !strings.Contains(eff["command"].(string), "[REDACTED:bearer_token:") {
			t.Fatalf("effective input after merge = %v", eff)
		}
	})
	t.Run("no modify: deny", func(t *testing.T) {
		ev := toolBeforeEvent("Bash", input)
		res, _ := run(t, p, ev, advertise(ahp.EffectDeny).build())
		e := onlyEffect(t, res, ahp.EffectDeny)
		if !strings.Contains(e.Reason, "tool call Bash") {
			t.Errorf("reason = %q", e.Reason)
		}
	})
	t.Run("named field", func(t *testing.T) {
		ev := toolBeforeEvent("http_request", `{"url":"https://x.example","password":"hT7#vQ2x!Lp9Zr"}`)
		res, _ := run(t, p, ev, proxyCaps(ahp.EventToolBefore))
		e := onlyEffect(t, res, ahp.EffectModify)
		if got := decodeObject(t, e.Value)["password"]; got != wantPlaceholder(SecretGeneric, "hT7#vQ2x!Lp9Zr") {
			t.Fatalf("password = %v", got)
		}
	})
	t.Run("clean input", func(t *testing.T) {
		ev := toolBeforeEvent("Bash", `{"command":"ls -la"}`)
		res, _ := run(t, p, ev, proxyCaps(ev.Type))
		noEffects(t, res)
	})
}

func TestSecretsToolOutputAndResponse(t *testing.T) {
	p := mustSecrets(t)
	key := "-----BEGIN OPENSSH PRIVATE KEY-----\nb3BlbnNzaC1rZXktdjEAAAAABG5vbmUAAAAEbm9uZQAAAAAAAAABAAAAMwAAAAtzc2gtZW\n-----END OPENSSH PRIVATE KEY-----"
	ev := toolAfterEvent("Read", "contents of id_ed25519:\n"+key+"\n")
	res, _ := run(t, p, ev, proxyCaps(ev.Type))
	e := onlyEffect(t, res, ahp.EffectModify)
	out := decodeMessages(t, e.Value)
	if got, want := *out[0].Parts[0].Text, "contents of id_ed25519:\n"+wantPlaceholder(SecretPrivateKey, key)+"\n"; got != want {
		t.Fatalf("output = %q\nwant %q", got, want)
	}
	if out[0].Parts[0].Category != ahp.CategoryToolResult || out[0].ID != "toolu_01.result" {
		t.Fatalf("message/part identity changed: %+v", out[0])
	}

	// Model output: the text part is redacted, the tool_call part is left to tool.before.
	call := toolCallPart("r1.c0", "toolu_9", "Bash", `{"command":"export GH=`+testGitHubPAT+`"}`)
	rev := responseEvent(msg("r1", ahp.RoleAssistant, text("r1.t", "Your token is "+testGitHubPAT), call))
	res, _ = run(t, p, rev, proxyCaps(rev.Type))
	e = onlyEffect(t, res, ahp.EffectModify)
	got := decodeMessages(t, e.Value)
	if !strings.Contains(*got[0].Parts[0].Text, "[REDACTED:github_token:") {
		t.Fatalf("text part not redacted: %q", *got[0].Parts[0].Text)
	}
	if *got[0].Parts[1].Text != *call.Text {
		t.Fatalf("tool_call part changed at model.response.after: %q", *got[0].Parts[1].Text)
	}
}

// A tool call in the request history keeps valid tool_call JSON after redaction.
func TestSecretsToolCallPartStaysParseable(t *testing.T) {
	p := mustSecrets(t)
	call := toolCallPart("m1.c0", "toolu_7", "Bash", `{"command":"echo \"line\"\nexport GITHUB_TOKEN=`+testGitHubPAT+`"}`)
	ev := requestEvent(
		msg("m0", ahp.RoleUser, text("m0p0", "set up the repo")),
		msg("m1", ahp.RoleAssistant, call),
	)
	res, _ := run(t, p, ev, proxyCaps(ev.Type))
	e := onlyEffect(t, res, ahp.EffectModify)
	got := decodeMessages(t, e.Value)
	tc, ok := mapping.ParseToolCall(&got[1].Parts[0])
	if !ok {
		t.Fatalf("tool_call part no longer parses: %q", *got[1].Parts[0].Text)
	}
	var in map[string]string
	if err := json.Unmarshal(tc.Input, &in); err != nil {
		t.Fatal(err)
	}
	if want := "echo \"line\"\nexport GITHUB_TOKEN=" + wantPlaceholder(SecretGitHubToken, testGitHubPAT); in["command"] != want {
		t.Fatalf("command = %q\nwant      %q", in["command"], want)
	}
	if tc.ID != "toolu_7" || tc.Name != "Bash" || got[1].Parts[0].ID != "m1.c0" {
		t.Fatalf("tool call identity changed: %+v", tc)
	}
}

func TestSecretsConfigKindsAndAllow(t *testing.T) {
	ev := secretsRequest()
	p, err := NewSecrets(SecretsConfig{Kinds: []string{SecretGitHubToken}})
	if err != nil {
		t.Fatal(err)
	}
	res, _ := run(t, p, ev, proxyCaps(ev.Type))
	got := *decodeMessages(t, onlyEffect(t, res, ahp.EffectModify).Value)[1].Parts[0].Text
	if !strings.Contains(got, testAWSKeyID) || strings.Contains(got, testGitHubPAT) {
		t.Fatalf("kinds filter: %q", got)
	}

	p, err = NewSecrets(SecretsConfig{Allow: []string{"^AKIAQ3EXAMPLE", "^ghp_R7tY"}})
	if err != nil {
		t.Fatal(err)
	}
	res, _ = run(t, p, ev, proxyCaps(ev.Type))
	noEffects(t, res)
}

func TestSecretsIgnoresOtherEvents(t *testing.T) {
	p := mustSecrets(t)
	ev := baseEvent("turn.end")
	ev.Items = secretsRequest().Items
	res, err := p.Intercept(t.Context(), &ahp.InterceptRequest{ID: ev.ID, Params: &ahp.InterceptParams{Event: ev, Capabilities: &ahp.Capabilities{Effects: []string{}}}})
	if err != nil {
		t.Fatal(err)
	}
	noEffects(t, res)
}

// TestSecretSplitAcrossTextParts: the model reads a message's text parts as one text, so
// a key cut across parts is refused (no per-part edit can redact it), whichever parts hold
// the halves. The controls show the refusal comes from the join: the same
// key whole in one part is redacted in place, and parts that join to no key pass.
func TestSecretSplitAcrossTextParts(t *testing.T) {
	p := mustSecrets(t)
	caps := proxyCaps(ahp.EventModelRequestBefore)
	half := len(testAWSKeyID) / 2
	split := func(parts ...string) *ahp.Event {
		var ps []ahp.Part
		for i, s := range parts {
			ps = append(ps, text(fmt.Sprintf("m1p%d", i), s))
		}
		return requestEvent(msg("m1", ahp.RoleUser, ps...))
	}
	for _, tt := range []struct {
		desc  string
		parts []string
	}{
		{"first and second of two", []string{"deploy with " + testAWSKeyID[:half], testAWSKeyID[half:] + " now"}},
		{"second and third of three", []string{"deploy with", " the key " + testAWSKeyID[:half], testAWSKeyID[half:] + " now"}},
		{"first and third of three, an empty part between", []string{"key " + testAWSKeyID[:half], "", testAWSKeyID[half:]}},
	} {
		t.Run(tt.desc, func(t *testing.T) {
			res, _ := run(t, p, split(tt.parts...), caps)
			e := onlyEffect(t, res, ahp.EffectDeny)
			if e.Code != "hookproxy.secrets."+SecretAWSAccessKeyID || !strings.Contains(e.Reason, "split across its text parts") {
				t.Fatalf("deny %q %q, want the split refusal", e.Code, e.Reason)
			}
		})
	}

	res, _ := run(t, p, split("deploy with "+testAWSKeyID, " now", " please"), caps)
	if e := onlyEffect(t, res, ahp.EffectModify); strings.Contains(string(e.Value), testAWSKeyID) {
		t.Fatalf("control: a whole key is left in the replacement: %s", e.Value)
	}
	res, _ = run(t, p, split("deploy with "+testAWSKeyID[:half], " the", " rest"), caps)
	noEffects(t, res)
}
