package gemini

import (
	"bytes"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"

	"github.com/tidwall/gjson"

	"github.com/hookproxy/hookproxy/mapping"
)

// Incremental editing of a Gemini SSE stream (mapping.StreamEditing). Gemini
// sends each functionCall whole inside one chunk, so no call spans events: a chunk
// without a functionCall is relayed byte for byte as it arrives; a chunk with calls is
// held only while its calls are decided (in stream order), then re-emitted without the
// removed calls and with rewritten arguments. The notes of removed calls become a text
// part at the end of the candidate's chunk that carries its finishReason (or, when no
// chunk does, an event of their own at the stream's end), and a finish reason keeps
// STOP, which Gemini reports for calls and answers alike.

// NewStreamEditor implements mapping.StreamEditing.
func (t *Translator) NewStreamEditor(out io.Writer, d mapping.StreamDecider) mapping.StreamEditor {
	e := &editor{t: t, out: out, settle: mapping.CallSettler{D: d}, seen: map[int]callIDs{}, notes: map[int][]string{},
		keptIn: map[int]int{}, sigs: map[int]signature{}, openHosted: -1}
	e.Name = "gemini stream"
	e.SSE.Dispatch = e.event
	return e
}

type editor struct {
	// Calls are held only inside their own chunk: nothing queues.
	mapping.StreamFeed[struct{}]
	t      *Translator
	out    io.Writer
	settle mapping.CallSettler
	seen   map[int]callIDs  // per candidate index: derived call ids so far
	notes  map[int][]string // per candidate index: notes not yet emitted
	// kept and removed count the calls so far: when every call was removed, the finish
	// reason is STOP, as the held path makes it
	kept, removed int
	// keptIn counts the calls kept per candidate; sigs holds, per candidate, the
	// thoughtSignature of a removed first call until a kept call or the note of the
	// removal can carry it (signature.go).
	keptIn     map[int]int
	sigs       map[int]signature
	hosted     []mapping.HostedCall // code Gemini ran, as relayed
	openHosted int                  // index in hosted of the code awaiting its result, -1 none
}

var _ mapping.HostedCallReporter = (*editor)(nil)

// HostedCalls are the code executions the stream carried (executableCode parts, each with
// the codeExecutionResult that followed it), for observation after the stream.
func (e *editor) HostedCalls() []mapping.HostedCall { return e.hosted }

// noteHosted records the code executions of a chunk. Only a chunk that names one is read.
func (e *editor) noteHosted(data []byte, cands gjson.Result) {
	if !bytes.Contains(data, []byte("xecutableCode")) && !bytes.Contains(data, []byte("odeExecutionResult")) &&
		!bytes.Contains(data, []byte("xecutable_code")) && !bytes.Contains(data, []byte("ode_execution_result")) {
		return
	}
	cands.ForEach(func(_, c gjson.Result) bool {
		c.Get("content.parts").ForEach(func(_, p gjson.Result) bool {
			if ec, _, _ := field(p, "executableCode"); ec.IsObject() {
				e.hosted = append(e.hosted, mapping.HostedCall{Name: "code_execution", Input: []byte(compactJSON(ec.Raw))})
				e.openHosted = len(e.hosted) - 1
				return true
			}
			if r, _, _ := field(p, "codeExecutionResult"); r.IsObject() && e.openHosted >= 0 {
				h := &e.hosted[e.openHosted]
				h.Result = compactJSON(r.Raw)
				out := r.Get("outcome").String()
				h.IsError = out != "" && out != "OUTCOME_OK"
				e.openHosted = -1
			}
			return true
		})
		return true
	})
}

// Close ends the stream: a partial event is an error (never sent undecided); notes not yet
// emitted go out in an event of their own.
func (e *editor) Close() error {
	switch e.State() {
	case mapping.Failed:
		return e.CloseInput() // the error that ended the editing
	case mapping.Done:
		return nil
	}
	if e.SSE.Buffered() > 0 {
		// A last event without its blank line: complete it, as a client would read it.
		if err := e.SSE.Write([]byte("\n\n")); err != nil {
			return e.Failed(err)
		}
	}
	e.Drain()
	for idx, notes := range e.notes {
		if len(notes) == 0 {
			continue
		}
		finish := ""
		if e.kept == 0 {
			finish = `,"finishReason":"STOP"`
		}
		note := `{"text":` + mapping.Quote(strings.Join(notes, "\n")) + `}`
		if sig, ok := e.sigs[idx]; ok {
			var err error
			if note, err = mapping.SetRaw(note, sig.key, sig.value); err != nil {
				return e.Failed(err)
			}
			delete(e.sigs, idx)
		}
		chunk := `{"candidates":[{"content":{"role":"model","parts":[` + note + `]}` + finish + `,"index":` + fmt.Sprint(idx) + `}]}`
		delete(e.notes, idx)
		if err := writeEvent(e.out, []byte(chunk)); err != nil {
			return e.Failed(err)
		}
	}
	return nil
}

// Fail writes an in-stream Gemini error event.
func (e *editor) Fail(errType, code, message string) error {
	ev, err := sseEvent(e.t.ErrorBody(statusOfErrType(errType), errType, code, message))
	if err != nil {
		return err
	}
	if err := e.Finish(e.out, ev); err != nil {
		return err
	}
	if f, ok := e.out.(http.Flusher); ok {
		f.Flush() // as writeEvent does
	}
	return nil
}

func (e *editor) event(raw []byte, _ string, data []byte, hasData bool) error {
	if e.Ended() {
		return nil
	}
	if !hasData || len(bytes.TrimSpace(data)) == 0 {
		_, err := e.out.Write(raw)
		return err
	}
	if err := strictJSON.Check(data); err != nil {
		return fmt.Errorf("%w: a stream event is not JSON: %v", mapping.ErrMalformed, err)
	}
	chunk := gjson.ParseBytes(data)
	if !chunk.IsObject() {
		return fmt.Errorf("%w: a stream chunk is not a JSON object", mapping.ErrMalformed)
	}
	if chunk.Get("error").IsObject() {
		return e.Finish(e.out, raw)
	}
	cands := chunk.Get("candidates")
	e.noteHosted(data, cands)
	if !cands.IsArray() || !e.touches(cands) {
		_, err := e.out.Write(raw)
		return err
	}
	var out []string
	changed := false
	var err error
	cands.ForEach(func(_, c gjson.Result) bool {
		var r string
		var ch bool
		r, ch, err = e.candidate(c)
		out = append(out, r)
		changed = changed || ch
		return err == nil
	})
	if err != nil {
		return err
	}
	if !changed {
		_, err := e.out.Write(raw)
		return err
	}
	obj, err := mapping.SetRaw(chunk.Raw, "candidates", mapping.JoinArray(out))
	if err != nil {
		return err
	}
	return writeEvent(e.out, []byte(obj))
}

// touches reports whether a chunk has a call to decide or a finish that notes wait for.
func (e *editor) touches(cands gjson.Result) bool {
	found := false
	cands.ForEach(func(_, c gjson.Result) bool {
		if len(e.notes[int(c.Get("index").Int())]) > 0 && c.Get("finishReason").Exists() {
			found = true
			return false
		}
		c.Get("content.parts").ForEach(func(_, p gjson.Result) bool {
			found = isCall(p)
			return !found
		})
		return !found
	})
	return found
}

// candidate decides the calls of one candidate of a chunk and renders what is kept.
func (e *editor) candidate(c gjson.Result) (string, bool, error) {
	idx := int(c.Get("index").Int())
	seen := e.seen[idx]
	if seen == nil {
		seen = callIDs{}
		e.seen[idx] = seen
	}
	var parts []string
	changed := false
	var err error
	c.Get("content.parts").ForEach(func(_, p gjson.Result) bool {
		if !isCall(p) {
			parts = append(parts, p.Raw)
			return true
		}
		pm := readPart(p) // isCall: one spelling only
		fc, key := pm.vals[dCall], pm.keys[dCall]
		var kept bool
		var r string
		kept, r, err = e.call(p, fc, key, seen, idx)
		if err != nil {
			return false
		}
		if kept {
			parts = append(parts, r)
			e.keptIn[idx]++
		} else if _, pending := e.sigs[idx]; !pending && e.keptIn[idx] == 0 {
			// The step's first call carries its signature; a call kept before this one
			// would have been that first call.
			if v, k := partSignature(p.Raw); v != "" {
				e.sigs[idx] = signature{value: v, key: k}
			}
		}
		changed = changed || !kept || r != p.Raw
		return true
	})
	if err != nil {
		return "", false, err
	}
	finishing := c.Get("finishReason").Exists()
	noted := false
	if notes := e.notes[idx]; len(notes) > 0 && finishing {
		parts = append(parts, `{"text":`+mapping.Quote(strings.Join(notes, "\n"))+`}`)
		delete(e.notes, idx)
		changed, noted = true, true
	}
	if carried, err := e.carrySignature(idx, parts, noted); err != nil {
		return "", false, err
	} else if carried {
		changed = true
	}
	if !changed {
		return c.Raw, false, nil
	}
	r, err := mapping.SetRaw(c.Raw, "content.parts", mapping.JoinArray(parts))
	if err == nil && finishing && e.kept == 0 && e.removed > 0 {
		r, err = mapping.SetRaw(r, "finishReason", `"STOP"`)
	}
	return r, true, err
}

// call settles one functionCall part before anything after it is written: a denied call
// never reaches the client (AHP-DEC-002, AHP-TB-001). The call is read as the decoder of
// the assembled response reads it (readCall; seen numbers the derived ids of the
// candidate), and a kept call goes out as it came, with the effective arguments of a
// modify patched in.
func (e *editor) call(p, fc gjson.Result, key string, seen callIDs, idx int) (kept bool, rendered string, err error) {
	if !fc.IsObject() {
		return false, "", fmt.Errorf("%w: streamed tool call: functionCall is not an object", mapping.ErrMalformed)
	}
	c := readCall(fc, seen)
	j, err := e.settle.Judge(c.ID, c.Name, string(c.Input), p.Raw, func(call mapping.ToolCall) (string, error) {
		return mapping.SetRaw(p.Raw, key+".args", compactJSON(string(call.Input)))
	})
	if err != nil {
		return false, "", err // as the settler gave it
	}
	if !j.Kept {
		e.removed++
		if j.Note != "" {
			e.notes[idx] = append(e.notes[idx], j.Note)
		}
		return false, "", nil
	}
	e.kept++
	return true, j.Out, nil
}

// signature is a removed call's thoughtSignature: its raw JSON value and member name.
type signature struct{ value, key string }

// carrySignature puts the pending signature of candidate idx on the first call of parts
// (this chunk's parts as they go to the client) or, when the chunk has none and noted is
// set, on the note of the removal that ends parts.
func (e *editor) carrySignature(idx int, parts []string, noted bool) (bool, error) {
	sig, ok := e.sigs[idx]
	if !ok {
		return false, nil
	}
	hasCall := false
	for _, r := range parts {
		if isCall(gjson.Parse(r)) {
			hasCall = true
			break
		}
	}
	if !hasCall && !noted {
		return false, nil // wait for a later chunk's call or note
	}
	before := slices.Clone(parts)
	if _, err := carrySignature(parts, sig.value, sig.key); err != nil {
		return false, err
	}
	delete(e.sigs, idx)
	return !slices.Equal(before, parts), nil
}
