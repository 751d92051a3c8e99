package chat

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"

	"github.com/tidwall/gjson"
	"github.com/tidwall/sjson"

	"github.com/hookproxy/hookproxy/mapping"
	"github.com/hookproxy/hookproxy/mapping/openai/internal/oaiwire"
)

// Incremental editing of a chat.completion.chunk stream (mapping.StreamEditing).
// Chunks without tool call data are relayed byte for byte as they arrive. The
// delta.tool_calls entries of each call (and a legacy delta.function_call) are taken out
// of their chunks and accumulated per (choice, index); a call is complete when its choice
// opens another index, reports its finish_reason, or the stream reaches [DONE]. Each call
// is then decided and, when kept, emitted as one chunk carrying the whole call with its
// index renumbered among the kept calls of its choice. A choice whose calls were removed
// gets the notes as a content delta ("\n\n" after text, as the held path's renderMessage
// joins them) and finish_reason "stop" when no call is left, just before its finish.
//
// Known difference from the held path, for n > 1 only: notes and the finish reason are
// settled per choice, where the held path gives every note to the first removed call's
// choice.

// NewStreamEditor implements mapping.StreamEditing.
func (c *Chat) NewStreamEditor(out io.Writer, d mapping.StreamDecider) mapping.StreamEditor {
	e := &chatEditor{c: c, out: out, d: d, choices: map[int]*editChoice{}, settle: mapping.CallSettler{D: d}}
	e.Name = "openai chat stream"
	e.SSE.Dispatch = e.event
	return e
}

type chatEditor struct {
	mapping.StreamFeed[editItem]
	c   *Chat
	out io.Writer
	d   mapping.StreamDecider

	head    []byte
	choices map[int]*editChoice
	calls   int // calls seen (StreamCall.Index)
	settle  mapping.CallSettler
}

// editChoice is the editing state of one choice.
type editChoice struct {
	index   int
	open    []*editCall // calls not yet complete
	closed  []int       // tool_calls indices of the calls completed so far
	hadCall bool
	kept    int // calls emitted (the next kept call's index)
	removed int
	notes   []string
	text    bool // non-empty content was relayed (or queued) for this choice
	ended   bool // its finish was written
}

// editCall accumulates one streamed tool call.
type editCall struct {
	choice   *editChoice
	tidx     int
	legacy   bool // delta.function_call
	id, typ  string
	name     strings.Builder
	args     strings.Builder
	custom   strings.Builder
	complete bool
	size     int
}

// editItem is one entry of the queue: raw bytes, a call, or a finish chunk to render.
type editItem struct {
	raw    []byte
	call   *editCall
	finish *finishChunk
}

// finishChunk is a chunk that reports the finish_reason of choices that had tool calls;
// it is rendered when it leaves the queue, when their calls are decided.
type finishChunk struct {
	raw     []byte // the chunk's data (without the tool call data it carried)
	block   []byte // the original event, relayed as it is when nothing changes (nil: re-framed)
	choices []finishAt
}

type finishAt struct {
	pos    int // position in the chunk's choices array
	choice *editChoice
	reason string
	text   bool // the choice had text when the finish came
}

func (e *chatEditor) Close() error {
	if err := e.CloseInput(); err != nil {
		return err
	}
	if e.State() == mapping.Done {
		return nil
	}
	// Some compatible servers end without [DONE]; a stream whose every choice finished is
	// complete. Anything else was cut short: an open call is dropped, never sent undecided.
	if len(e.choices) == 0 || !e.allFinished() {
		return e.Failed(fmt.Errorf("openai chat stream: ended before completion (no finish_reason and no [DONE])"))
	}
	e.Drain()
	if err := e.end(); err != nil {
		return e.Failed(err)
	}
	return nil
}

// end decides every call left at the stream's end and tells the notes of a choice whose
// calls were removed but that never reported a finish.
func (e *chatEditor) end() error {
	e.completeAll()
	if err := e.flush(); err != nil {
		return err
	}
	for i := 0; i < maxStreamChoices; i++ {
		c := e.choices[i]
		if c == nil || c.ended || c.removed == 0 {
			continue
		}
		if err := e.writeNotes(c, c.text); err != nil {
			return err
		}
		if c.kept == 0 {
			if err := e.write(sseData(e.chunk(c.index, "{}", mapping.Quote(e.c.TerminalFinishReason())))); err != nil {
				return err
			}
		}
	}
	return nil
}

// writeNotes sends the notes of a choice's removed calls as content.
func (e *chatEditor) writeNotes(c *editChoice, afterText bool) error {
	if len(c.notes) == 0 {
		return nil
	}
	note := strings.Join(c.notes, "\n")
	if afterText {
		note = "\n\n" + note
	}
	c.notes = nil
	return e.write(sseData(e.chunk(c.index, `{"content":`+mapping.Quote(note)+`}`, "null")))
}

func (e *chatEditor) allFinished() bool {
	for _, it := range e.Queued() {
		if it.call != nil && !it.call.complete {
			return false
		}
	}
	for _, c := range e.choices {
		if len(c.open) > 0 {
			return false
		}
	}
	return true
}

func (e *chatEditor) Fail(errType, code, message string) error {
	return e.Finish(e.out, sseData(oaiwire.ErrorBody(errType, code, message)))
}

// event handles one SSE block.
func (e *chatEditor) event(raw []byte, name string, data []byte, hasData bool) error {
	if e.Ended() {
		return nil
	}
	if !hasData {
		return e.emit(raw) // a comment (keep-alive)
	}
	if string(data) == "[DONE]" {
		e.Drain()
		if err := e.end(); err != nil {
			return err
		}
		return e.Finish(e.out, raw)
	}
	// The event is parsed in place: data is the splitter's buffer, valid during this call,
	// so whatever outlives it is cloned (a copy per text delta would grow with the text).
	root := gjson.Parse(mapping.BytesString(data))
	jerr := oaiwire.CheckClientJSON(data)
	if chunkError(name, data, root, jerr == nil) != nil {
		return e.endWith(raw)
	}
	if jerr != nil || !root.IsObject() {
		return fmt.Errorf("stream event is not a strict JSON object (%v)", jerr)
	}
	if e.head == nil {
		e.head = chunkHead(root)
	}
	choices := root.Get("choices")
	if choices.Exists() && choices.Type != gjson.Null && !choices.IsArray() {
		return fmt.Errorf("stream chunk choices is not an array")
	}
	// What the chunk carries of tool calls, and which finishes concern choices with calls.
	var (
		started  []*editCall
		finishes []finishAt
		strip    []int // positions whose delta carries tool call data
	)
	pos := -1
	var err error
	choices.ForEach(func(_, ch gjson.Result) bool {
		pos++
		if !ch.IsObject() {
			err = fmt.Errorf("stream choice is not an object")
			return false
		}
		idx := int(ch.Get("index").Int())
		if idx < 0 || idx >= maxStreamChoices {
			err = fmt.Errorf("stream choice index %d out of range", idx)
			return false
		}
		c := e.choiceAt(idx)
		d := ch.Get("delta")
		if v := d.Get("content"); v.Type == gjson.String && v.Str != "" {
			c.text = true
		}
		tcs, fc := d.Get("tool_calls"), d.Get("function_call")
		if tcs.IsArray() && len(tcs.Array()) > 0 || fc.IsObject() {
			strip = append(strip, pos)
		}
		var ns []*editCall
		if ns, err = e.toolDeltas(c, tcs, fc); err != nil {
			return false
		}
		started = append(started, ns...)
		if f := ch.Get("finish_reason"); f.Type == gjson.String && f.Str != "" {
			c.closeOpen()
			if c.hadCall {
				finishes = append(finishes, finishAt{pos: pos, choice: c, reason: strings.Clone(f.Str), text: c.text})
			}
		}
		return true
	})
	if err != nil {
		return err
	}
	if len(strip) == 0 && len(finishes) == 0 {
		return e.emit(raw)
	}
	rest := string(data)
	for _, p := range strip {
		for _, k := range []string{"tool_calls", "function_call"} {
			if rest, err = deleteIfPresent(rest, "choices."+strconv.Itoa(p)+".delta."+k); err != nil {
				return err
			}
		}
	}
	if len(started) > 0 && len(finishes) > 0 {
		// The finish goes after the calls this chunk opened: the rest of the chunk first,
		// then the calls, then the finish alone.
		nulled := rest
		for _, f := range finishes {
			if nulled, err = sjson.SetRaw(nulled, "choices."+strconv.Itoa(f.pos)+".finish_reason", "null"); err != nil {
				return err
			}
		}
		if chunkCarries(nulled) {
			e.enqueue(editItem{raw: sseData([]byte(nulled))})
		}
		for _, c := range started {
			e.enqueue(editItem{call: c})
		}
		e.enqueue(editItem{finish: &finishChunk{raw: []byte(e.finishOnly(finishes)), choices: finishes}})
		return e.flush()
	}
	if len(strip) > 0 && chunkCarries(rest) {
		e.enqueue(editItem{raw: sseData([]byte(rest))})
	}
	for _, c := range started {
		e.enqueue(editItem{call: c})
	}
	if len(finishes) > 0 {
		f := &finishChunk{raw: []byte(rest), choices: finishes}
		if len(strip) == 0 {
			f.block = append([]byte(nil), raw...)
		}
		e.enqueue(editItem{finish: f})
	}
	return e.flush()
}

// endWith relays the upstream's error event after what was decided and ends the stream;
// calls still open are dropped, never sent undecided.
func (e *chatEditor) endWith(raw []byte) error {
	if err := e.flush(); err != nil {
		return err
	}
	return e.Finish(e.out, raw)
}

// chunkCarries reports whether a chunk stripped of its tool call data still says
// something: a choice with a non-empty delta or a finish, logprobs, or usage.
func chunkCarries(chunk string) bool {
	root := gjson.Parse(chunk)
	if u := root.Get("usage"); u.IsObject() {
		return true
	}
	carries := false
	root.Get("choices").ForEach(func(_, ch gjson.Result) bool {
		d := ch.Get("delta")
		if d.IsObject() && len(d.Map()) > 0 || ch.Get("finish_reason").Type == gjson.String || ch.Get("logprobs").IsObject() {
			carries = true
		}
		return !carries
	})
	return carries
}

// finishOnly renders a chunk with only the finish of the given choices.
func (e *chatEditor) finishOnly(fs []finishAt) string {
	b := append([]byte(nil), e.head...)
	for i, f := range fs {
		if i > 0 {
			b = append(b, ',')
		}
		b = appendChoiceDelta(b, f.choice.index, "{}", mapping.Quote(f.reason))
	}
	return string(append(b, "]}"...))
}

func appendChoiceDelta(b []byte, index int, delta, finish string) []byte {
	b = append(b, `{"index":`...)
	b = strconv.AppendInt(b, int64(index), 10)
	b = append(b, `,"delta":`...)
	b = append(b, delta...)
	b = append(b, `,"logprobs":null,"finish_reason":`...)
	b = append(b, finish...)
	return append(b, '}')
}

// chunkHead is the identity every chunk of a completion shares, up to the choices (the
// editor's chunks and WriteStream's alike).
func chunkHead(root gjson.Result) []byte {
	b := append([]byte(nil), `{"id":`...)
	b = mapping.AppendQuote(b, root.Get("id").String())
	b = append(b, `,"object":"chat.completion.chunk","created":`...)
	if cr := root.Get("created"); cr.Type == gjson.Number {
		b = append(b, cr.Raw...)
	} else {
		b = append(b, '0')
	}
	b = append(b, `,"model":`...)
	b = mapping.AppendQuote(b, root.Get("model").String())
	for _, f := range []string{"service_tier", "system_fingerprint"} {
		if v := root.Get(f); v.Type == gjson.String {
			b = append(b, ',')
			b = mapping.AppendQuote(b, f)
			b = append(b, ':')
			b = mapping.AppendQuote(b, v.Str)
		}
	}
	return append(b, `,"choices":[`...)
}

func (e *chatEditor) choiceAt(idx int) *editChoice {
	c := e.choices[idx]
	if c == nil {
		c = &editChoice{index: idx}
		e.choices[idx] = c
	}
	return c
}

// toolDeltas merges a choice's tool call data into its calls and returns the calls it
// opened. A new index completes the calls open before it.
func (e *chatEditor) toolDeltas(c *editChoice, tcs, fc gjson.Result) ([]*editCall, error) {
	var started []*editCall
	open := func(tidx int, legacy bool) (*editCall, error) {
		for _, oc := range c.open {
			if oc.tidx == tidx && oc.legacy == legacy {
				return oc, nil
			}
		}
		if !legacy && slices.Contains(c.closed, tidx) {
			// The SDKs would merge this into a call the editor has already judged and
			// sent; what the client has cannot be taken back, so the stream fails.
			return nil, fmt.Errorf("%w: tool call index %d", errCallResumed, tidx)
		}
		if e.calls >= maxStreamToolCalls {
			return nil, fmt.Errorf("stream has more than %d tool calls", maxStreamToolCalls)
		}
		c.closeOpen()
		nc := &editCall{choice: c, tidx: tidx, legacy: legacy}
		c.open = append(c.open[:0], nc)
		c.hadCall = true
		e.calls++
		started = append(started, nc)
		return nc, nil
	}
	var err error
	tcs.ForEach(func(_, tc gjson.Result) bool {
		if !tc.IsObject() {
			err = fmt.Errorf("stream tool call delta is not an object")
			return false
		}
		idx := int(tc.Get("index").Int())
		if idx == -1 {
			idx = 0 // some servers use -1 for a single call
		}
		if idx < 0 || idx >= maxStreamToolCalls {
			err = fmt.Errorf("stream tool call index %d out of range", idx)
			return false
		}
		if toolDeltaEmpty(tc) {
			return true // a fragment of nothing: merged by the SDKs, it changes no call
		}
		var t *editCall
		if t, err = open(idx, false); err != nil {
			return false
		}
		if v := tc.Get("id"); v.Type == gjson.String && v.Str != "" && t.id == "" {
			t.id = strings.Clone(v.Str)
		}
		if v := tc.Get("type"); v.Type == gjson.String && v.Str != "" && t.typ == "" {
			t.typ = strings.Clone(v.Str)
		}
		e.grow(t, &t.name, tc.Get("function.name").String())
		e.grow(t, &t.args, tc.Get("function.arguments").String())
		if cu := tc.Get("custom"); cu.IsObject() {
			e.grow(t, &t.name, cu.Get("name").String())
			e.grow(t, &t.custom, cu.Get("input").String())
		}
		return true
	})
	if err != nil {
		return nil, err
	}
	if fc.IsObject() {
		t, err := open(0, true)
		if err != nil {
			return nil, err
		}
		e.grow(t, &t.name, fc.Get("name").String())
		e.grow(t, &t.args, fc.Get("arguments").String())
	}
	return started, nil
}

// grow appends a fragment of a held call, counted in Held.
func (e *chatEditor) grow(t *editCall, b *strings.Builder, s string) {
	b.WriteString(s)
	t.size += len(s)
	e.Grow(len(s))
}

// completeAll marks every open call complete (the stream's end).
func (e *chatEditor) completeAll() {
	for _, c := range e.choices {
		c.closeOpen()
	}
}

// closeOpen marks the choice's open calls complete: a later delta for one of their
// tool_calls indices is errCallResumed.
func (c *editChoice) closeOpen() {
	for _, oc := range c.open {
		oc.complete = true
		if !oc.legacy {
			c.closed = append(c.closed, oc.tidx)
		}
	}
	c.open = c.open[:0]
}

// errCallResumed is a stream that returns to a tool call after a later one began (or
// after its choice finished). The held path merges such a stream by index; the editor
// has judged and relayed the call by then, so it fails the stream instead.
var errCallResumed = errors.New("openai chat stream: a tool call resumed after it was judged")

// toolDeltaEmpty reports whether a tool_calls delta entry carries nothing to merge.
func toolDeltaEmpty(tc gjson.Result) bool {
	for _, k := range []string{"id", "type", "function.name", "function.arguments", "custom.name", "custom.input"} {
		if v := tc.Get(k); v.Type != gjson.Null && !(v.Type == gjson.String && v.Str == "") {
			return false
		}
	}
	return true
}

// emit relays raw now, or queues it behind an undecided call.
func (e *chatEditor) emit(raw []byte) error {
	if !e.Holding() {
		return e.write(raw)
	}
	e.enqueue(editItem{raw: append([]byte(nil), raw...)})
	return nil
}

func (e *chatEditor) enqueue(it editItem) { e.Push(it, it.size()) }

// size is what the entry holds, but a call's bytes: those are counted as they come (grow).
func (it editItem) size() int {
	if it.finish != nil {
		return len(it.raw) + len(it.finish.raw) + len(it.finish.block)
	}
	return len(it.raw)
}

func (e *chatEditor) write(b []byte) error {
	_, err := e.out.Write(b)
	return err
}

// flush writes the queue up to the first call that is not complete, deciding each
// complete call as it reaches the front (stream order).
func (e *chatEditor) flush() error {
	return e.Release(func(it editItem) (int, bool, error) {
		switch {
		case it.call == nil && it.finish == nil:
			return it.size(), true, e.write(it.raw)
		case it.call == nil:
			return it.size(), true, e.writeFinish(it.finish)
		case !it.call.complete:
			return 0, false, nil
		}
		return it.call.size, true, e.decide(it.call)
	})
}

// entry is the call as the assembled completion's tool_calls entry (or function_call).
func (t *editCall) entry() string {
	b := make([]byte, 0, 64+t.name.Len()+t.args.Len()+t.custom.Len())
	if t.legacy {
		return string(appendFunctionCall(b, t.name.String(), t.args.String()))
	}
	return string(appendToolCall(b, t.id, t.typ, t.name.String(), t.args.String(), t.custom.String()))
}

// read decodes the complete call with the decoder DecodeResponse reads the assembled
// completion's call with. A call without an id is named from the completion's id and its
// entry.
func (e *chatEditor) read(t *editCall) (*nativeCall, error) {
	n := newNatives()
	entry := gjson.Parse(t.entry())
	var err error
	if t.legacy {
		_, _, err = n.decodeLegacyCall(entry, "")
	} else {
		msgID := gjson.GetBytes(e.head, "id").String()
		if msgID == "" {
			msgID = messageID(nil, 0, "response", entry.Raw)
		}
		_, _, err = n.decodeCall(entry, "", "call_"+messageID(nil, 0, msgID, entry.Raw)[1:])
	}
	if err != nil {
		return nil, fmt.Errorf("streamed tool call: %w", err)
	}
	return n.lastCall(), nil
}

// decide settles one complete call and emits it when it is kept.
func (e *chatEditor) decide(t *editCall) error {
	c := t.choice
	nc, err := e.read(t)
	if err != nil {
		return fmt.Errorf("openai chat stream: %w", err)
	}
	j, err := e.settle.Judge(nc.id, nc.name, nc.input, nc.raw, func(call mapping.ToolCall) (string, error) {
		raw, _, err := writeCall(nc, call, "")
		return raw, err
	})
	if err != nil {
		return fmt.Errorf("openai chat stream: %w", err)
	}
	if !j.Kept {
		c.removed++
		if j.Note != "" {
			c.notes = append(c.notes, j.Note)
		}
		return nil
	}
	entry := mapping.CompactJSON(j.Out)
	var delta string
	if t.legacy {
		delta = `{"function_call":` + entry + `}`
	} else {
		// The kept call's index counts only the calls the client receives.
		ent, err := sjson.SetRaw(entry, "index", strconv.Itoa(c.kept))
		if err != nil {
			return err
		}
		delta = `{"tool_calls":[` + ent + `]}`
	}
	c.kept++
	return e.write(sseData(e.chunk(c.index, delta, "null")))
}

func (e *chatEditor) chunk(choice int, delta, finish string) []byte {
	b := append([]byte(nil), e.head...)
	b = appendChoiceDelta(b, choice, delta, finish)
	return append(b, "]}"...)
}

// writeFinish renders a finish chunk now that its choices' calls are decided: unchanged
// when nothing was removed; otherwise the chunk without those finishes, the notes as
// content, and the finish ("stop" when no call of the choice is left).
func (e *chatEditor) writeFinish(f *finishChunk) error {
	var changed []finishAt
	for _, fa := range f.choices {
		fa.choice.ended = true
		if fa.choice.removed > 0 {
			changed = append(changed, fa)
		}
	}
	if len(changed) == 0 {
		if f.block != nil {
			return e.write(f.block)
		}
		return e.write(sseData(f.raw))
	}
	rest := string(f.raw)
	var err error
	for _, fa := range changed {
		if rest, err = sjson.SetRaw(rest, "choices."+strconv.Itoa(fa.pos)+".finish_reason", "null"); err != nil {
			return err
		}
	}
	if chunkCarries(rest) {
		if err := e.write(sseData([]byte(rest))); err != nil {
			return err
		}
	}
	for _, fa := range changed {
		c := fa.choice
		c.ended = true
		if err := e.writeNotes(c, fa.text); err != nil {
			return err
		}
		reason := fa.reason
		if c.kept == 0 {
			reason = e.c.TerminalFinishReason()
		}
		if err := e.write(sseData(e.chunk(c.index, "{}", mapping.Quote(reason)))); err != nil {
			return err
		}
	}
	return nil
}

// sseData frames one data-only event; data spread over several lines upstream is compacted
// onto one.
func sseData(data []byte) []byte {
	if bytes.ContainsAny(data, "\r\n") {
		data = []byte(mapping.CompactJSON(string(data)))
	}
	b := make([]byte, 0, len(data)+8)
	b = append(b, "data: "...)
	b = append(b, data...)
	return append(b, "\n\n"...)
}
