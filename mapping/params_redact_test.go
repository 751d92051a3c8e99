package mapping

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/hookproxy/hookproxy/chain/ahp"
)

func TestRedactParams(t *testing.T) {
	const secret = "sk-live-0123456789abcdef"
	body := `{"model":"m","messages":[{"role":"user","content":"` + secret + `"}],` +
		`"tools":[{"type":"function","function":{"name":"f","description":"key ` + secret + ` here"}}],` +
		`"metadata":{"a.b":"` + secret + `","7":"x` + secret + `","n":1},"user":"` + secret + `"}`
	params := `{"model":"m","tools":[{"type":"function","function":{"name":"f","description":"key ` + secret + ` here"}}],` +
		`"metadata":{"a.b":"` + secret + `","7":"x` + secret + `","n":1},"user":"` + secret + `"}`
	reds := []ahp.ParamsRedaction{{Find: secret, Replace: "[REDACTED:api_key:00112233]"}}
	out, changed, err := RedactParams([]byte(body), []byte(params), reds)
	if err != nil || !changed {
		t.Fatalf("changed=%v err=%v", changed, err)
	}
	var got struct {
		Messages []struct{ Content string }
		Tools    []struct{ Function struct{ Description string } }
		Metadata map[string]any
		User     string
	}
	if err := json.Unmarshal(out, &got); err != nil {
		t.Fatalf("output is not JSON: %v\n%s", err, out)
	}
	// Messages are not params: the message codec (and modify(request)) owns them.
	if got.Messages[0].Content != secret {
		t.Errorf("message content changed: %q", got.Messages[0].Content)
	}
	if d := got.Tools[0].Function.Description; d != "key [REDACTED:api_key:00112233] here" {
		t.Errorf("description = %q", d)
	}
	if got.Metadata["a.b"] != "[REDACTED:api_key:00112233]" || got.Metadata["7"] != "x[REDACTED:api_key:00112233]" || got.User != "[REDACTED:api_key:00112233]" {
		t.Errorf("metadata/user not redacted: %s", out)
	}
	if len(got.Metadata) != 3 {
		t.Errorf("metadata gained or lost members: %v", got.Metadata)
	}
	if strings.Count(string(out), secret) != 1 {
		t.Errorf("secret left in params: %s", out)
	}

	// Control: nothing to find, the bytes are the client's.
	same, changed, _ := RedactParams([]byte(body), []byte(params), []ahp.ParamsRedaction{{Find: "absent", Replace: "[REDACTED]"}})
	if changed || string(same) != body {
		t.Errorf("unchanged body rewritten: %s", same)
	}
}

// TestRedactParamsResidue: a residue member (messages) patches the same members of every
// message of the body as it is now, wherever the message moved, and nothing else in it.
func TestRedactParamsResidue(t *testing.T) {
	const secret = "sk-live-0123456789abcdef"
	// The body after an edit put a new message first: the named one is now messages[1].
	body := `{"model":"m","messages":[{"role":"system","content":"new"},{"role":"user","name":"` + secret + `","content":"` + secret + `"},{"role":"user","content":"x"}]}`
	params := `{"model":"m","messages":[{"name":"` + secret + `"},{}]}`
	reds := []ahp.ParamsRedaction{{Find: secret, Replace: "[REDACTED:api_key:00112233]"}}
	out, changed, err := RedactParams([]byte(body), []byte(params), reds)
	if err != nil || !changed {
		t.Fatalf("changed=%v err=%v", changed, err)
	}
	var got struct {
		Messages []map[string]any
	}
	if err := json.Unmarshal(out, &got); err != nil {
		t.Fatalf("output is not JSON: %v\n%s", err, out)
	}
	if len(got.Messages) != 3 || got.Messages[1]["name"] != "[REDACTED:api_key:00112233]" {
		t.Fatalf("name not redacted where the message is now: %s", out)
	}
	if got.Messages[1]["content"] != secret || got.Messages[0]["name"] != nil {
		t.Fatalf("a member outside the residue changed, or one was added: %s", out)
	}
	// Control: as an ordinary params member, the same value would have been written at its
	// decoded index, onto the wrong message.
	ResidueMembers["messages"] = false
	defer func() { ResidueMembers["messages"] = true }()
	wrong, _, _ := RedactParams([]byte(body), []byte(params), reds)
	if !strings.Contains(string(wrong), `"content":"new","name":"[REDACTED:api_key:00112233]"`) || !strings.Contains(string(wrong), `"name":"`+secret) {
		t.Fatalf("control: %s", wrong)
	}
}
