package anthropic_test

import (
	"encoding/json"
	"fmt"
	"reflect"
	"strings"
	"testing"

	"github.com/hookproxy/hookproxy/chain/ahp"
	"github.com/hookproxy/hookproxy/mapping"
	"github.com/hookproxy/hookproxy/mapping/anthropic"
)

var tr = anthropic.NewMessages()

// conversation is a compact request with every request-side block kind that matters for
// editing: system blocks with cache_control, thinking with signature, parallel tool calls,
// string and array tool results (one with an image and is_error), unknown fields at every
// level, and a trailing user prompt after the results.
const conversation = `{"model":"claude-sonnet-4-5","max_tokens":1024,"x_vendor":{"a":1},` +
	`"system":[{"type":"text","text":"You are terse.","cache_control":{"type":"ephemeral"}}],` +
	`"metadata":{"user_id":"user-42"},"messages":[` +
	`{"role":"user","content":"list files"},` +
	`{"role":"assistant","content":[{"type":"thinking","thinking":"use ls","signature":"SIG=="},` +
	`{"type":"text","text":"Running."},` +
	`{"type":"tool_use","id":"toolu_1","name":"Bash","input":{"command":"ls"},"x_block":true},` +
	`{"type":"tool_use","id":"toolu_2","name":"Read","input":{"path":"a.png"}}]},` +
	`{"role":"user","content":[` +
	`{"type":"tool_result","tool_use_id":"toolu_1","content":"a.png\nb.txt","x_res":[1]},` +
	`{"type":"tool_result","tool_use_id":"toolu_2","is_error":true,"content":[{"type":"text","text":"binary"},{"type":"image","source":{"type":"base64","media_type":"image/png","data":"aGVsbG8="}}]},` +
	`{"type":"text","text":"now summarize","x_unknown":{"b":2}}]}]}`

func decode(t testing.TB, body string) *mapping.Request {
	t.Helper()
	req, err := tr.DecodeRequest([]byte(body))
	if err != nil {
		t.Fatalf("DecodeRequest: %v", err)
	}
	return req
}

// clone deep-copies canonical items so a test can edit them.
func clone(items []ahp.Message) []ahp.Message {
	b, err := json.Marshal(items)
	if err != nil {
		panic(err)
	}
	var out []ahp.Message
	if err := json.Unmarshal(b, &out); err != nil {
		panic(err)
	}
	return out
}

func ptr[T any](v T) *T { return &v }

// find returns the message with the given role and n-th occurrence.
func find(t testing.TB, items []ahp.Message, role string, n int) int {
	t.Helper()
	for i := range items {
		if items[i].Role == role {
			if n == 0 {
				return i
			}
			n--
		}
	}
	t.Fatalf("no %s message #%d in %s", role, n, summary(items))
	return -1
}

// summary renders items compactly: role{part; part}.
func summary(items []ahp.Message) string {
	var out []string
	for _, m := range items {
		var parts []string
		for _, p := range m.Parts {
			parts = append(parts, partSummary(&p))
		}
		out = append(out, m.Role+"{"+strings.Join(parts, "; ")+"}")
	}
	return strings.Join(out, " ")
}

func partSummary(p *ahp.Part) string {
	s := p.Kind
	if p.Kind == ahp.KindAttachment {
		s += " " + p.MediaType
	}
	if p.Selection != ahp.SelectionBody {
		s += " " + p.Selection
	}
	if p.Category != "" {
		s += " [" + p.Category + "]"
	}
	if p.Text != nil {
		s += fmt.Sprintf(" %q", *p.Text)
	}
	if p.Size != nil {
		s += fmt.Sprintf(" size=%d", *p.Size)
	}
	if p.SHA256 != "" {
		s += " sha=" + p.SHA256[:8]
	}
	if p.Gap != nil {
		s += " gap"
	}
	return s
}

// jsonEqual compares two JSON texts semantically.
func jsonEqual(t testing.TB, got, want []byte) {
	t.Helper()
	var g, w any
	if err := json.Unmarshal(got, &g); err != nil {
		t.Fatalf("got is not JSON: %v\n%s", err, got)
	}
	if err := json.Unmarshal(want, &w); err != nil {
		t.Fatalf("want is not JSON: %v\n%s", err, want)
	}
	if !reflect.DeepEqual(g, w) {
		t.Fatalf("JSON differs\n got: %s\nwant: %s", got, want)
	}
}
