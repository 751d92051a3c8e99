package anthropic_test

import (
	"bytes"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"testing"

	"github.com/hookproxy/hookproxy/chain/ahp"
	"github.com/hookproxy/hookproxy/mapping"
	"github.com/hookproxy/hookproxy/mapping/anthropic"
	"github.com/hookproxy/hookproxy/mapping/mappingtest"
)

// FuzzDecodeRequest: any body either fails as a *mapping.BadRequest or decodes into a
// request that encodes back to the same bytes unchanged, and to a valid request carrying
// the edit when every text is changed and a message is injected.
func FuzzDecodeRequest(f *testing.F) {
	for _, s := range []string{
		conversation,
		`{"messages":[{"role":"user","content":"hi"}]}`,
		`{"system":"s","messages":[{"role":"user","content":[{"type":"tool_result","tool_use_id":"t","content":[{"type":"text","text":"a"},{"type":"image","source":{"type":"base64","media_type":"image/png","data":"aGVsbG8="}}]}]}]}`,
		`{"messages":[{"role":"assistant","content":[{"type":"redacted_thinking","data":"x"},{"type":"server_tool_use","id":"s","name":"web_search","input":{}}]}]}`,
		`{"messages":[],"messages":[]}`,
		`{"messages":[{"role":"user","content":[{"type":"document","source":{"type":"base64","media_type":"text/plain","data":"aGVsbG8="}},{"type":"document","source":{"type":"content","content":[{"type":"text","text":"a"}]}},{"type":"search_result","source":"s","title":"t","content":[{"type":"text","text":"b"},{"type":"text","text":"c"}]},{"type":"tool_result","tool_use_id":"t","content":[{"type":"search_result","source":"s","title":"t","content":[{"type":"text","text":"d"}]}]}]}]}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, input []byte) {
		// The decoder keeps what a remembered decode points into — a fresh decode's body —
		// for later requests to resume (resume.go), and a caller never writes a body it
		// decoded (the proxy reads each request into a buffer of its own). The fuzzing
		// engine reuses its input buffer for the next input, so the decode gets a copy.
		body := append([]byte(nil), input...)
		orig := append([]byte(nil), body...)
		req, err := tr.DecodeRequest(body)
		// The decode may have resumed one of an earlier input (resume.go): it is the
		// decode from the start, whatever the input.
		want, werr := anthropic.DecodeFresh(body)
		if req != nil && want != nil {
			want.BodyUnkept = req.BodyUnkept // a resumed decode keeps nothing of its body; a fresh one keeps it
		}
		if fmt.Sprint(err) != fmt.Sprint(werr) || !reflect.DeepEqual(req, want) {
			t.Fatalf("resumed and fresh decodes differ: %v / %v", err, werr)
		}
		if err != nil {
			var bad *mapping.BadRequest
			if !errors.As(err, &bad) {
				t.Fatalf("error is not a *mapping.BadRequest: %v", err)
			}
			return
		}
		out, err := tr.EncodeRequest(req, req.Items)
		if err != nil || !bytes.Equal(out, orig) {
			t.Fatalf("unchanged encode: %v\n got: %q\nwant: %q", err, out, orig)
		}

		items := clone(req.Items)
		for i := range items {
			for j := range items[i].Parts {
				p := &items[i].Parts[j]
				if p.Text != nil && p.Category != ahp.CategoryToolCall && p.Category != ahp.CategoryReasoning {
					p.Text = ptr(*p.Text + "!")
				}
			}
		}
		items = append(items, ahp.Message{ID: "fuzz-inj", Role: ahp.RoleUser, Parts: []ahp.Part{ahp.TextPart("fuzz-inj.p0", "injected")}})
		out, err = tr.EncodeRequest(req, items)
		if err != nil {
			return // an edit the native format cannot carry is refused, not mangled
		}
		if !bytes.Equal(req.Original, orig) {
			t.Fatal("EncodeRequest modified the original body")
		}
		again, err := tr.DecodeRequest(out)
		if err != nil {
			t.Fatalf("edited body does not decode: %v\n%s", err, out)
		}
		if !strings.Contains(texts(again.Items), "injected") {
			t.Fatalf("injection lost: %s", out)
		}
	})
}

// FuzzDecodeResponse: any body fails with ErrMalformed or an UpstreamError, or decodes
// into a response that encodes back unchanged and survives WriteStream + assembly.
func FuzzDecodeResponse(f *testing.F) {
	for _, s := range []string{message, sseMessage, `{"type":"error","error":{"type":"api_error","message":"x"}}`, `{"content":[]}`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		resp, err := tr.DecodeResponse(body)
		mappingtest.CheckScreen(t, tr, body, resp, err)
		if err != nil {
			var up *mapping.UpstreamError
			if !errors.Is(err, mapping.ErrMalformed) && !errors.As(err, &up) {
				t.Fatalf("unexpected error kind: %v", err)
			}
			return
		}
		out, err := tr.EncodeResponse(resp, resp.Items, "")
		if err != nil || !bytes.Equal(out, body) {
			t.Fatalf("unchanged encode: %v\n%q", err, out)
		}
		if _, err := tr.EncodeResponse(resp, resp.Items, "end_turn"); err != nil {
			t.Fatalf("stop reason change: %v", err)
		}
		var w bytes.Buffer
		if err := tr.WriteStream(&w, body); err != nil {
			t.Fatalf("WriteStream: %v", err)
		}
		got, err := assemble(t, w.String(), 5)
		if err != nil {
			t.Fatalf("re-assemble: %v\n%s", err, w.String())
		}
		jsonEqual(t, got, body)
	})
}

// FuzzAssembler: any byte stream in any chunking assembles to the same result as in one
// piece, never panics, and a message that decodes survives WriteStream + assembly.
func FuzzAssembler(f *testing.F) {
	f.Add([]byte(sseStream), uint8(1))
	f.Add([]byte(strings.ReplaceAll(sseStream, "\n", "\r\n")), uint8(3))
	f.Add([]byte("event: error\ndata: {\"type\":\"error\",\"error\":{\"type\":\"overloaded_error\",\"message\":\"Overloaded\"}}\n\n"), uint8(2))
	f.Fuzz(func(t *testing.T, stream []byte, chunk uint8) {
		whole, errWhole := assemble(t, string(stream), len(stream)+1)
		got, err := assemble(t, string(stream), int(chunk%64)+1)
		if (err == nil) != (errWhole == nil) || !bytes.Equal(got, whole) {
			t.Fatalf("chunking changed the result: %v / %v\n%s\n%s", err, errWhole, got, whole)
		}
		if err != nil {
			return
		}
		if _, err := tr.DecodeResponse(got); err != nil {
			return
		}
		var w bytes.Buffer
		if err := tr.WriteStream(&w, got); err != nil {
			t.Fatalf("WriteStream: %v", err)
		}
		again, err := assemble(t, w.String(), 7)
		if err != nil {
			t.Fatalf("re-assemble: %v", err)
		}
		jsonEqual(t, again, got)
	})
}
