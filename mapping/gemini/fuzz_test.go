package gemini_test

import (
	"bytes"
	"errors"
	"strings"
	"testing"

	"github.com/hookproxy/hookproxy/chain/ahp"
	"github.com/hookproxy/hookproxy/mapping"
	"github.com/hookproxy/hookproxy/mapping/mappingtest"
)

// FuzzDecodeRequest: any body either fails as a *mapping.BadRequest or decodes into a
// request that encodes back to the same bytes unchanged, and to a request that decodes
// again carrying the edit when every text is changed and a message is injected.
func FuzzDecodeRequest(f *testing.F) {
	for _, s := range []string{
		conversation,
		`{"contents":[{"parts":[{"text":"hi"}]}]}`,
		`{"contents":[{"role":"user","parts":[{"inlineData":{"mimeType":"text/plain","data":"aGk="}},{"fileData":{"mimeType":"application/pdf","fileUri":"gs://x"}}]}]}`,
		`{"contents":[{"role":"model","parts":[{"executableCode":{"language":"PYTHON","code":"1"}},{"functionCall":{"name":"f"}},{"functionCall":{"name":"f"}}]}]}`,
		`{"generateContentRequest":{"contents":[{"parts":[{"text":"x"}]}]}}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		orig := append([]byte(nil), body...)
		for _, tr := range []mapping.Translator{tr, countsTr} {
			req, err := tr.DecodeRequest(body)
			if err != nil {
				var bad *mapping.BadRequest
				if !errors.As(err, &bad) {
					t.Fatalf("error is not a *mapping.BadRequest: %v", err)
				}
				continue
			}
			out, err := tr.EncodeRequest(req, req.Items)
			if err != nil || !bytes.Equal(out, orig) {
				t.Fatalf("unchanged encode: %v\n got: %q\nwant: %q", err, out, orig)
			}
			items := clone(req.Items)
			for i := range items {
				for j := range items[i].Parts {
					p := &items[i].Parts[j]
					if p.Text != nil && p.Category != ahp.CategoryToolCall {
						p.Text = ptr(*p.Text + "!")
					}
				}
			}
			items = append(items, ahp.Message{ID: "fuzz-inj", Role: ahp.RoleUser, Parts: []ahp.Part{ahp.TextPart("fuzz-inj.p0", "injected")}})
			out, err = tr.EncodeRequest(req, items)
			if err != nil {
				continue // an edit the native format cannot carry is refused, not mangled
			}
			if !bytes.Equal(req.Original, orig) {
				t.Fatal("EncodeRequest modified the original body")
			}
			again, err := tr.DecodeRequest(out)
			if err != nil {
				t.Fatalf("edited body does not decode: %v\n%s", err, out)
			}
			found := false
			for _, m := range again.Items {
				for _, p := range m.Parts {
					found = found || strings.Contains(p.TextOf(), "injected")
				}
			}
			if !found {
				t.Fatalf("injection lost: %s", out)
			}
		}
	})
}

// FuzzDecodeResponse: any body fails with ErrMalformed or an UpstreamError, or decodes
// into a response that encodes back unchanged, takes a finish reason, and survives
// WriteStream + assembly.
func FuzzDecodeResponse(f *testing.F) {
	for _, s := range []string{answer, "[" + strings.Join(streamChunks, ",") + "]", `{"error":{"code":400,"message":"x","status":"INVALID_ARGUMENT"}}`, `{"candidates":[]}`, `{"promptFeedback":{"blockReason":"SAFETY"}}`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		resp, err := arrayTr.DecodeResponse(body)
		mappingtest.CheckScreen(t, arrayTr, body, resp, err)
		if err != nil {
			var up *mapping.UpstreamError
			if !errors.Is(err, mapping.ErrMalformed) && !errors.As(err, &up) {
				t.Fatalf("unexpected error kind: %v", err)
			}
			return
		}
		out, err := arrayTr.EncodeResponse(resp, resp.Items, "")
		if err != nil || !bytes.Equal(out, body) {
			t.Fatalf("unchanged encode: %v\n%q", err, out)
		}
		out, err = arrayTr.EncodeResponse(resp, resp.Items, "STOP")
		if err != nil {
			t.Fatalf("finish reason change: %v", err)
		}
		if _, err := arrayTr.DecodeResponse(out); err != nil {
			t.Fatalf("re-encoded answer does not decode: %v\n%s", err, out)
		}
		var w bytes.Buffer
		if err := sseTr.WriteStream(&w, body); err != nil {
			t.Fatalf("WriteStream: %v", err)
		}
		if _, err := mappingtest.Assembled(sseTr, w.Bytes()); err != nil {
			t.Fatalf("re-assemble: %v\n%s", err, w.String())
		}
	})
}

// FuzzAssembler: any byte stream in any chunking assembles to the same result as in one
// piece, never panics, and an answer that decodes survives WriteStream + assembly.
func FuzzAssembler(f *testing.F) {
	f.Add(sse(streamChunks...), uint8(1))
	f.Add([]byte(strings.ReplaceAll(string(sse(streamChunks...)), "\r\n", "\n")), uint8(3))
	f.Add(sse(`{"error":{"code":503,"message":"overloaded","status":"UNAVAILABLE"}}`), uint8(2))
	f.Fuzz(func(t *testing.T, stream []byte, chunk uint8) {
		whole, errWhole := assemble(stream, len(stream)+1)
		got, err := assemble(stream, int(chunk%64)+1)
		if (err == nil) != (errWhole == nil) || !bytes.Equal(got, whole) {
			t.Fatalf("chunking changed the result: %v / %v\n%s\n%s", err, errWhole, got, whole)
		}
		if err != nil {
			return
		}
		if _, err := sseTr.DecodeResponse(got); err != nil {
			return
		}
		var w bytes.Buffer
		if err := sseTr.WriteStream(&w, got); err != nil {
			t.Fatalf("WriteStream: %v", err)
		}
		again, err := assemble(w.Bytes(), 7)
		if err != nil {
			t.Fatalf("re-assemble: %v", err)
		}
		jsonEqual(t, again, got)
	})
}

func assemble(stream []byte, chunk int) ([]byte, error) {
	asm := sseTr.NewAssembler()
	for len(stream) > 0 {
		n := min(chunk, len(stream))
		_, _ = asm.Write(stream[:n])
		stream = stream[n:]
	}
	return asm.Body()
}

// FuzzStreamEditGemini: for any stream the held path accepts, the editor relays it without
// error, its output assembles, and the client's view equals the held path's.
func FuzzStreamEditGemini(f *testing.F) {
	f.Add(sse(streamChunks...), uint16(7), uint8(0b0110))
	f.Add(sse(streamChunks...), uint16(0), uint8(0b11))
	f.Add(sse(streamChunks...), uint16(3), uint8(0b0101))
	f.Add(append([]byte("\ufeff"), sse(streamChunks...)...), uint16(5), uint8(0b01)) // a byte-order mark first
	f.Fuzz(func(t *testing.T, stream []byte, chunk uint16, bits uint8) {
		script := mappingtest.ScriptFromBits(bits)
		d := &mappingtest.Decider{Script: script}
		out, err := mappingtest.Edit(sseTr, stream, int(chunk%64), d)
		if u := mappingtest.Undecided(sseTr, out, d); u != "" {
			t.Fatalf("a call reached the client unjudged: %s\n%s", u, out)
		}
		if _, herr := mappingtest.Held(sseTr, stream, script); herr != nil {
			return
		}
		if err != nil {
			t.Fatalf("the held path accepts the stream, the editor fails: %v", err)
		}
		if _, err := mappingtest.Assembled(sseTr, out); err != nil {
			t.Fatalf("edited stream does not assemble: %v\n%s", err, out)
		}
		if why := equivalent(t, stream, int(chunk%64), script); why != "" {
			t.Fatal(why)
		}
	})
}
