package responses

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"slices"
	"strconv"
	"strings"

	"github.com/tidwall/gjson"
	"github.com/tidwall/sjson"

	"github.com/hookproxy/hookproxy/mapping"
	"github.com/hookproxy/hookproxy/mapping/openai/internal/oaiwire"
)

// Bounds on what a stream may open. A response with more output items or content parts than
// this is not one an agent can use; the bounds keep a broken upstream from growing memory.
const (
	maxStreamItems = 4096
	maxStreamParts = 1024
)

// NewAssembler implements mapping.Assembler.
func (*Translator) NewAssembler() mapping.Assembler {
	a := &assembler{}
	a.SSE.Dispatch = a.event
	// A terminal event repeats the whole response, so the bound is larger than Chat's.
	a.SSE.MaxEvent = 64 << 20
	return a
}

// assembler accumulates a Responses event stream into the final response object. The
// terminal event (response.completed / .incomplete) carries the whole response, which is
// authoritative; the output items and deltas are kept only to rebuild "output" when a
// server sends a terminal response without it.
type assembler struct {
	mapping.AssemblerInput // Upstream: an error event, or response.failed

	snapshot string // the response of response.created / .in_progress
	final    string // the response of the terminal event
	terminal string // the terminal event's type
	items    map[int64]*itemAcc
	// loose: the call items of output_item.done events without output_index. Codex runs
	// such an item all the same; one the output does not hold is added after it.
	loose []string
}

// itemAcc accumulates one output item.
type itemAcc struct {
	added, done string // the item as announced and as finished
	args        strings.Builder
	argsFinal   *string
	parts       map[int64]*partAcc // message content, or reasoning content
	summary     map[int64]*partAcc // reasoning summary
}

// partAcc accumulates one content or summary part.
type partAcc struct {
	added, done string
	text        strings.Builder
	final       *string
}

// event handles one SSE event.
func (a *assembler) event(name string, data []byte) error {
	if a.terminal != "" || string(data) == "[DONE]" {
		return nil // nothing after the terminal event belongs to the response
	}
	if oaiwire.CheckClientJSON(data) != nil { // duplicate keys refused, as in DecodeResponse
		if name == "error" {
			a.Upstream = &mapping.UpstreamError{Type: "error", Message: string(data)}
			return nil
		}
		return fmt.Errorf("stream event is not JSON")
	}
	root := gjson.ParseBytes(data)
	if !root.IsObject() {
		return fmt.Errorf("stream event is not a JSON object")
	}
	typ := root.Get("type").String()
	if typ == "" {
		typ = name
	}
	if typ == "error" || !strings.HasPrefix(typ, "response.") && root.Get("error").Exists() {
		a.Upstream = streamError(root)
		return nil
	}
	switch typ {
	case "response.created", "response.in_progress", "response.queued":
		if r := root.Get("response"); r.IsObject() {
			a.snapshot = r.Raw
		}
		return nil
	case "response.completed", "response.incomplete", "response.failed", "response.cancelled":
		a.terminal = typ
		if r := root.Get("response"); r.IsObject() {
			a.final = r.Raw
		}
		if typ == "response.failed" {
			ue := upstreamError(gjson.Parse(a.final))
			if ue == nil {
				ue = &mapping.UpstreamError{Type: "response.failed", Message: "the response failed"}
			}
			a.Upstream = ue
		}
		return nil
	}
	if !strings.HasPrefix(typ, "response.") {
		return nil
	}
	idx := root.Get("output_index")
	if typ == "response.output_item.done" && !idx.Exists() {
		if item := root.Get("item"); isCallItem(item) {
			if len(a.loose) >= maxStreamItems {
				return fmt.Errorf("stream has more than %d output items", maxStreamItems)
			}
			a.loose = append(a.loose, item.Raw)
		}
		return nil
	}
	if !idx.Exists() {
		return nil // an event about something other than an output item
	}
	it, err := a.item(idx)
	if err != nil {
		return err
	}
	switch typ {
	case "response.output_item.added":
		it.added = root.Get("item").Raw
	case "response.output_item.done":
		it.done = root.Get("item").Raw
	case "response.function_call_arguments.delta", "response.custom_tool_call_input.delta":
		it.args.WriteString(root.Get("delta").String())
	case "response.function_call_arguments.done":
		s := root.Get("arguments").String()
		it.argsFinal = &s
	case "response.custom_tool_call_input.done":
		s := root.Get("input").String()
		it.argsFinal = &s
	case "response.content_part.added", "response.content_part.done",
		"response.output_text.delta", "response.output_text.done",
		"response.refusal.delta", "response.refusal.done",
		"response.reasoning_text.delta", "response.reasoning_text.done":
		p, err := part(&it.parts, root.Get("content_index"))
		if err != nil {
			return err
		}
		p.apply(typ, root, "refusal")
	case "response.reasoning_summary_part.added", "response.reasoning_summary_part.done",
		"response.reasoning_summary_text.delta", "response.reasoning_summary_text.done":
		p, err := part(&it.summary, root.Get("summary_index"))
		if err != nil {
			return err
		}
		p.apply(typ, root, "")
	}
	return nil
}

// streamError reads an error event: {"type":"error","code","message"}, the same with the
// details nested under "error", or a bare {"error":{...}}.
func streamError(root gjson.Result) *mapping.UpstreamError {
	src := root
	if e := root.Get("error"); e.IsObject() {
		src = e
	} else if e.Type == gjson.String {
		return &mapping.UpstreamError{Type: "error", Message: e.Str}
	}
	typ := src.Get("type").String()
	if typ == "" || typ == "error" {
		typ = src.Get("code").String()
	}
	if typ == "" {
		typ = "error"
	}
	return &mapping.UpstreamError{Type: typ, Message: src.Get("message").String()}
}

// item returns the accumulator of an output index.
func (a *assembler) item(idx gjson.Result) (*itemAcc, error) {
	i, err := index(idx, maxStreamItems, "output_index")
	if err != nil {
		return nil, err
	}
	if a.items == nil {
		a.items = map[int64]*itemAcc{}
	}
	it := a.items[i]
	if it == nil {
		it = &itemAcc{}
		a.items[i] = it
	}
	return it, nil
}

// part returns the accumulator of a content or summary index.
func part(m *map[int64]*partAcc, idx gjson.Result) (*partAcc, error) {
	i, err := index(idx, maxStreamParts, "content or summary index")
	if err != nil {
		return nil, err
	}
	if *m == nil {
		*m = map[int64]*partAcc{}
	}
	p := (*m)[i]
	if p == nil {
		p = &partAcc{}
		(*m)[i] = p
	}
	return p, nil
}

// index validates a stream index.
func index(v gjson.Result, limit int64, what string) (int64, error) {
	if v.Type != gjson.Number {
		return 0, fmt.Errorf("stream event without a numeric %s", what)
	}
	i := v.Int()
	if float64(i) != v.Num || i < 0 || i >= limit {
		return 0, fmt.Errorf("stream %s %s out of range", what, v.Raw)
	}
	return i, nil
}

// apply merges one content or summary event into the part. refusalField names the field
// of the .done event that carries the final text for refusals.
func (p *partAcc) apply(typ string, root gjson.Result, refusalField string) {
	switch {
	case strings.HasSuffix(typ, "part.added"):
		p.added = root.Get("part").Raw
	case strings.HasSuffix(typ, "part.done"):
		p.done = root.Get("part").Raw
	case strings.HasSuffix(typ, ".delta"):
		p.text.WriteString(root.Get("delta").String())
	case typ == "response.refusal.done" && refusalField != "":
		s := root.Get(refusalField).String()
		p.final = &s
	default: // a text .done event
		s := root.Get("text").String()
		p.final = &s
	}
}

// Body implements mapping.Assembler: the final response object.
func (a *assembler) Body() ([]byte, error) {
	if a.Err == nil && a.Upstream == nil {
		if err := a.SSE.Close(); err != nil {
			a.Err = err
		}
	}
	switch {
	case a.Upstream != nil:
		return nil, a.Upstream
	case a.Err != nil:
		return nil, fmt.Errorf("openai responses stream: %w", a.Err)
	case a.terminal == "":
		return nil, fmt.Errorf("openai responses stream: ended before completion (no response.completed)")
	}
	body := a.final
	if body == "" {
		// A terminal event without its response: the snapshot, finished.
		body = a.snapshot
		if body == "" {
			body = `{"object":"response"}`
		}
		status := strings.TrimPrefix(a.terminal, "response.")
		var err error
		if body, err = sjson.SetRaw(body, "status", mapping.Quote(status)); err != nil {
			return nil, fmt.Errorf("openai responses stream: %w", err)
		}
	}
	if out := gjson.Get(body, "output"); out.IsArray() {
		// The terminal response is what the SDKs keep, but agents act on the items as
		// their output_item.done events arrive: a stream whose events and summary
		// disagree would let a client run a call other than the one judged.
		terminal := out.Array()
		for k, it := range a.items {
			if it.done == "" {
				continue
			}
			if k >= int64(len(terminal)) || mapping.CompactJSON(terminal[k].Raw) != mapping.CompactJSON(it.done) {
				return nil, fmt.Errorf("openai responses stream: output item %d of the terminal response differs from its output_item.done event", k)
			}
		}
		return a.withLoose(body, terminal)
	}
	keys := slices.Sorted(maps.Keys(a.items))
	var b strings.Builder
	b.WriteByte('[')
	for i, k := range keys {
		if i > 0 {
			b.WriteByte(',')
		}
		raw, err := a.items[k].build()
		if err != nil {
			return nil, fmt.Errorf("openai responses stream: output item %d: %w", k, err)
		}
		b.WriteString(raw)
	}
	b.WriteByte(']')
	out, err := sjson.SetRaw(body, "output", b.String())
	if err != nil {
		return nil, fmt.Errorf("openai responses stream: %w", err)
	}
	return a.withLoose(out, gjson.Get(out, "output").Array())
}

// withLoose adds to the response's output the loose calls it does not hold already.
func (a *assembler) withLoose(body string, output []gjson.Result) ([]byte, error) {
	have := map[string]bool{}
	for _, it := range output {
		have[mapping.CompactJSON(it.Raw)] = true
	}
	var err error
	for _, item := range a.loose {
		if k := mapping.CompactJSON(item); !have[k] {
			have[k] = true
			if body, err = sjson.SetRaw(body, "output.-1", item); err != nil {
				return nil, fmt.Errorf("openai responses stream: %w", err)
			}
		}
	}
	return []byte(body), nil
}

// build renders an item from what the stream said about it: its done form when there is one,
// otherwise its announced form completed with the accumulated deltas.
func (it *itemAcc) build() (string, error) {
	if it.done != "" {
		return it.done, nil
	}
	raw := it.added
	if !gjson.Valid(raw) || !gjson.Parse(raw).IsObject() {
		return "", fmt.Errorf("neither announced nor finished")
	}
	var err error
	set := func(path, value string) {
		if err == nil {
			raw, err = sjson.SetRaw(raw, path, value)
		}
	}
	switch gjson.Get(raw, "type").String() {
	case "message":
		set("content", buildParts(it.parts, `{"type":"output_text","text":"","annotations":[]}`))
	case "function_call", "custom_tool_call":
		args := it.args.String()
		if it.argsFinal != nil {
			args = *it.argsFinal
		}
		set(callTextField(gjson.Get(raw, "type").String()), mapping.Quote(args))
	case "reasoning":
		set("summary", buildParts(it.summary, `{"type":"summary_text","text":""}`))
		if len(it.parts) > 0 {
			set("content", buildParts(it.parts, `{"type":"reasoning_text","text":""}`))
		}
	}
	if gjson.Get(raw, "status").Exists() {
		set("status", `"completed"`)
	}
	return raw, err
}

// buildParts renders accumulated parts as an array, in index order.
func buildParts(m map[int64]*partAcc, skeleton string) string {
	keys := slices.Sorted(maps.Keys(m))
	var b strings.Builder
	b.WriteByte('[')
	for i, k := range keys {
		if i > 0 {
			b.WriteByte(',')
		}
		p := m[k]
		if p.done != "" {
			b.WriteString(p.done)
			continue
		}
		raw := p.added
		if !gjson.Valid(raw) || !gjson.Parse(raw).IsObject() {
			raw = skeleton
		}
		text := p.text.String()
		if p.final != nil {
			text = *p.final
		}
		field := "text"
		if gjson.Get(raw, "type").String() == "refusal" {
			field = "refusal"
		}
		if out, err := sjson.SetRaw(raw, field, mapping.Quote(text)); err == nil {
			raw = out
		}
		b.WriteString(raw)
	}
	b.WriteByte(']')
	return b.String()
}

// streamPiece is the size of one delta WriteStream emits: long text goes out in a few
// deltas rather than one very large event.
const streamPiece = 4096

// appendEvent appends one stream event's JSON: its type, the members kv (name, raw JSON
// value, ...) in order, and its sequence_number.
func appendEvent(buf []byte, typ string, seq int64, kv ...string) []byte {
	buf = append(buf, `{"type":`...)
	buf = mapping.AppendQuote(buf, typ)
	for i := 0; i+1 < len(kv); i += 2 {
		buf = append(buf, ',', '"')
		buf = append(buf, kv[i]...)
		buf = append(buf, '"', ':')
		buf = append(buf, kv[i+1]...)
	}
	buf = append(buf, `,"sequence_number":`...)
	buf = strconv.AppendInt(buf, seq, 10)
	return append(buf, '}')
}

// WriteStream implements mapping.Translator: a complete response object as the Responses
// event stream — response.created and .in_progress (the response without output), per
// output item: output_item.added, its content parts, text, refusal, summary, argument and
// custom tool input deltas and their .done events, output_item.done; then the terminal event
// (response.completed, .incomplete or .failed) carrying the whole response. Every event is
// "event: <type>" plus one data line that ends in its sequence_number.
func (*Translator) WriteStream(w io.Writer, body []byte) error {
	var cb bytes.Buffer
	if err := json.Compact(&cb, body); err != nil {
		return fmt.Errorf("openai responses: response is not JSON: %w", mapping.ErrMalformed)
	}
	s := cb.String()
	root := gjson.Parse(s)
	output := root.Get("output")
	if !root.IsObject() || output.Exists() && output.Type != gjson.Null && !output.IsArray() {
		return fmt.Errorf("openai responses: response has no output array: %w", mapping.ErrMalformed)
	}
	sw := oaiwire.NewSSEWriter(w)
	seq := 0
	var buf []byte
	ev := func(typ string, kv ...string) error {
		buf = appendEvent(buf[:0], typ, int64(seq), kv...)
		seq++
		return sw.NamedEvent(typ, buf)
	}

	snapshot, err := patch(s, "status", `"in_progress"`, "output", "[]")
	for _, f := range [...]string{"usage", "completed_at", "incomplete_details", "error"} {
		if err == nil && gjson.Get(snapshot, f).Exists() {
			snapshot, err = sjson.SetRaw(snapshot, f, "null")
		}
	}
	if err != nil {
		return fmt.Errorf("openai responses: %w", err)
	}
	if err := ev("response.created", "response", snapshot); err != nil {
		return err
	}
	if err := ev("response.in_progress", "response", snapshot); err != nil {
		return err
	}
	for i, item := range output.Array() { // Array is empty for a missing or null output
		if err := writeItem(ev, strconv.Itoa(i), item); err != nil {
			return err
		}
	}
	terminal := "response.completed"
	switch root.Get("status").String() {
	case "incomplete":
		terminal = "response.incomplete"
	case "failed":
		terminal = "response.failed"
	}
	return ev(terminal, "response", s)
}

// callTextField is the member of a streamed call item that its text deltas build:
// arguments of a function_call, input of a custom_tool_call.
func callTextField(typ string) string {
	if typ == "custom_tool_call" {
		return "input"
	}
	return "arguments"
}

// writeItem emits the events of one output item. Items without delta events of their own
// (local_shell_call, apply_patch_call, computer_call, hosted tool calls, ...) are
// output_item.added with the whole item, then output_item.done.
func writeItem(ev func(string, ...string) error, idx string, item gjson.Result) error {
	typ := item.Get("type").String()
	added := item.Raw
	var err error
	switch typ {
	case "message":
		added, err = patch(added, "status", `"in_progress"`, "content", "[]")
	case "function_call":
		added, err = patch(added, "status", `"in_progress"`, "arguments", `""`)
	case "custom_tool_call":
		// As the API streams one: the input comes in custom_tool_call_input events.
		added, err = patch(added, "input", `""`)
		if err == nil && item.Get("status").Exists() {
			added, err = sjson.SetRaw(added, "status", `"in_progress"`)
		}
	case "reasoning":
		added, err = patch(added, "summary", "[]")
		if err == nil && item.Get("content").IsArray() {
			added, err = sjson.SetRaw(added, "content", "[]")
		}
	}
	if err != nil {
		return fmt.Errorf("openai responses: output item %s: %w", idx, err)
	}
	if err := ev("response.output_item.added", "output_index", idx, "item", added); err != nil {
		return err
	}
	head := []string{"item_id", mapping.Quote(item.Get("id").String()), "output_index", idx}
	with := func(kv ...string) []string { return append(append([]string(nil), head...), kv...) }
	switch typ {
	case "message":
		for j, p := range arrayOf(item.Get("content")) {
			if err := writeContentPart(ev, with, strconv.Itoa(j), p); err != nil {
				return err
			}
		}
	case "function_call", "custom_tool_call":
		field := callTextField(typ)
		prefix := "response.function_call_arguments"
		if typ == "custom_tool_call" {
			prefix = "response.custom_tool_call_input"
		}
		text := mapping.Quote(item.Get(field).String())
		if err := ev(prefix+".delta", with("delta", text)...); err != nil {
			return err
		}
		if err := ev(prefix+".done", with(field, text)...); err != nil {
			return err
		}
	case "reasoning":
		for k, p := range arrayOf(item.Get("summary")) {
			ki := strconv.Itoa(k)
			text := p.Get("text").String()
			if err := ev("response.reasoning_summary_part.added", with("summary_index", ki, "part", `{"type":"summary_text","text":""}`)...); err != nil {
				return err
			}
			if err := writeDeltas(ev, "response.reasoning_summary_text", with("summary_index", ki), "text", text); err != nil {
				return err
			}
			if err := ev("response.reasoning_summary_part.done", with("summary_index", ki, "part", p.Raw)...); err != nil {
				return err
			}
		}
		for k, p := range arrayOf(item.Get("content")) {
			if err := writeDeltas(ev, "response.reasoning_text", with("content_index", strconv.Itoa(k)), "text", p.Get("text").String()); err != nil {
				return err
			}
		}
	}
	return ev("response.output_item.done", "output_index", idx, "item", item.Raw)
}

// writeDeltas emits <prefix>.delta events carrying text in pieces, then <prefix>.done with
// the whole text under doneField.
func writeDeltas(ev func(string, ...string) error, prefix string, head []string, doneField, text string, extra ...string) error {
	for _, piece := range oaiwire.SplitText(text, streamPiece) {
		kv := append(append(append([]string(nil), head...), "delta", mapping.Quote(piece)), extra...)
		if err := ev(prefix+".delta", kv...); err != nil {
			return err
		}
	}
	return ev(prefix+".done", append(append([]string(nil), head...), doneField, mapping.Quote(text))...)
}

// arrayOf returns the elements of v when it is an array, else none.
func arrayOf(v gjson.Result) []gjson.Result {
	if !v.IsArray() {
		return nil
	}
	return v.Array()
}

// writeContentPart emits the events of one content part of a message item.
func writeContentPart(ev func(string, ...string) error, with func(...string) []string, j string, p gjson.Result) error {
	typ := p.Get("type").String()
	added := p.Raw
	var err error
	switch typ {
	case "output_text":
		added, err = patch(added, "text", `""`)
		for _, f := range [...]string{"annotations", "logprobs"} {
			if err == nil && gjson.Get(added, f).Exists() {
				added, err = sjson.SetRaw(added, f, "[]")
			}
		}
	case "refusal":
		added, err = patch(added, "refusal", `""`)
	}
	if err != nil {
		return fmt.Errorf("openai responses: content part %s: %w", j, err)
	}
	if err := ev("response.content_part.added", with("content_index", j, "part", added)...); err != nil {
		return err
	}
	switch typ {
	case "output_text":
		text := p.Get("text").String()
		for _, piece := range oaiwire.SplitText(text, streamPiece) {
			if err := ev("response.output_text.delta", with("content_index", j, "delta", mapping.Quote(piece), "logprobs", "[]")...); err != nil {
				return err
			}
		}
		logprobs := "[]"
		if lp := p.Get("logprobs"); lp.IsArray() {
			logprobs = lp.Raw
		}
		if err := ev("response.output_text.done", with("content_index", j, "text", mapping.Quote(text), "logprobs", logprobs)...); err != nil {
			return err
		}
	case "refusal":
		if err := writeDeltas(ev, "response.refusal", with("content_index", j), "refusal", p.Get("refusal").String()); err != nil {
			return err
		}
	}
	return ev("response.content_part.done", with("content_index", j, "part", p.Raw)...)
}

// patch sets raw JSON values at paths (path, value, path, value, ...).
func patch(raw string, kv ...string) (string, error) {
	var err error
	for i := 0; i+1 < len(kv) && err == nil; i += 2 {
		raw, err = sjson.SetRaw(raw, kv[i], kv[i+1])
	}
	return raw, err
}
