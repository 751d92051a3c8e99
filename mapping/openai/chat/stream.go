package chat

import (
	"encoding/json"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"

	"github.com/tidwall/gjson"

	"github.com/hookproxy/hookproxy/mapping"
	"github.com/hookproxy/hookproxy/mapping/openai/internal/oaiwire"
)

// Bounds on what a stream may open; the API allows 128 choices, and a response with more
// tool calls than this is not one an agent can use.
const (
	maxStreamChoices   = 128
	maxStreamToolCalls = 1024
)

// NewAssembler implements mapping.Translator.
func (c *Chat) NewAssembler() mapping.Assembler {
	a := &chatAssembler{}
	a.SSE.Dispatch = a.event
	// Chat chunks are small deltas; a line or event beyond this is a broken upstream.
	a.SSE.MaxEvent = 16 << 20
	return a
}

// chatAssembler accumulates chat.completion.chunk events into a chat.completion.
type chatAssembler struct {
	mapping.AssemblerInput // Upstream: an error event

	done     bool // [DONE] seen
	chunks   int
	finished bool // some choice reported a finish_reason

	id, model, created, fingerprint, serviceTier string
	usage                                        string // raw usage object of the usage chunk
	choices                                      []*choiceAcc
}

// choiceAcc accumulates one choice.
type choiceAcc struct {
	index          int
	role           string
	content        strings.Builder
	hasContent     bool
	refusal        strings.Builder
	hasRefusal     bool
	reasoning      strings.Builder
	reasoningField string
	tools          []*toolAcc
	legacy         *toolAcc
	finish         string
	logprobs       map[string][]string // "content"/"refusal" -> raw token entries
	audio          *audioAcc
}

// toolAcc accumulates one tool call.
type toolAcc struct {
	index       int
	id, typ     string
	name, args  strings.Builder
	customInput strings.Builder
}

// audioAcc accumulates streamed audio output.
type audioAcc struct {
	id, expiresAt    string
	data, transcript strings.Builder
}

// chunkError is the upstream error an event carries, or nil when it is a chunk to read.
// The SDKs disagree on what ends a stream: openai-python raises only on a chunk whose
// "error" member is truthy (in Python's sense) and reads the event name of no chunk;
// openai-node also raises on "error": {} and on "event: error"; openai-go on any "error"
// member. So a chunk with "error": "", "error": {}, "error": null or sent as "event:
// error" is read on by some client, and it and the chunks after it are judged like any
// other. An event ends the stream when every SDK stops at it: a truthy "error", or an
// "event: error" that carries no choices or no JSON object. Nothing after it is relayed.
func chunkError(name string, data []byte, root gjson.Result, valid bool) *mapping.UpstreamError {
	if valid && root.IsObject() {
		if e := root.Get("error"); truthy(e) {
			if ue := upstreamError(root); ue != nil {
				return ue
			}
			return &mapping.UpstreamError{Message: e.Raw}
		}
		if name != "error" || root.Get("choices").Exists() {
			return nil
		}
	}
	if name != "error" {
		return nil // not JSON: the caller reports a malformed stream
	}
	// An error event whose data is not OpenAI's error object: its text is the message.
	msg := root.Get("message").String()
	if msg == "" {
		msg = string(data)
	}
	return &mapping.UpstreamError{Message: msg}
}

// truthy is Python's truth value of a JSON value: false for null, false, 0, "", {} and [].
func truthy(v gjson.Result) bool {
	switch v.Type {
	case gjson.True:
		return true
	case gjson.Number:
		return v.Num != 0
	case gjson.String:
		return v.Str != ""
	case gjson.JSON:
		empty := true
		v.ForEach(func(_, _ gjson.Result) bool {
			empty = false
			return false
		})
		return !empty
	}
	return false
}

// event handles one SSE event.
func (a *chatAssembler) event(name string, data []byte) error {
	if a.done {
		return nil // nothing after [DONE] belongs to the completion
	}
	if string(data) == "[DONE]" {
		a.done = true
		return nil
	}
	valid := oaiwire.CheckClientJSON(data) == nil // duplicate keys refused, as in DecodeResponse
	var root gjson.Result
	if valid {
		root = gjson.Parse(string(data))
	}
	if ue := chunkError(name, data, root, valid); ue != nil {
		a.Upstream = ue
		return nil
	}
	if !valid {
		return fmt.Errorf("stream event is not JSON")
	}
	if !root.IsObject() {
		return fmt.Errorf("stream event is not a JSON object")
	}
	a.chunks++
	setOnce(&a.id, root.Get("id"))
	setOnce(&a.model, root.Get("model"))
	setOnce(&a.fingerprint, root.Get("system_fingerprint"))
	setOnce(&a.serviceTier, root.Get("service_tier"))
	if c := root.Get("created"); a.created == "" && c.Type == gjson.Number {
		a.created = c.Raw
	}
	if u := root.Get("usage"); u.IsObject() {
		a.usage = mapping.CompactJSON(u.Raw)
	}
	choices := root.Get("choices")
	if choices.Exists() && choices.Type != gjson.Null && !choices.IsArray() {
		return fmt.Errorf("stream chunk choices is not an array")
	}
	var err error
	choices.ForEach(func(_, ch gjson.Result) bool {
		err = a.choice(ch)
		return err == nil
	})
	return err
}

// setOnce keeps the first non-empty string value.
func setOnce(dst *string, v gjson.Result) {
	if *dst == "" && v.Type == gjson.String {
		*dst = v.Str
	}
}

func (a *chatAssembler) choice(ch gjson.Result) error {
	if !ch.IsObject() {
		return fmt.Errorf("stream choice is not an object")
	}
	idx := int(ch.Get("index").Int())
	if idx < 0 || idx >= maxStreamChoices {
		return fmt.Errorf("stream choice index %d out of range", idx)
	}
	c := a.choiceAt(idx)
	d := ch.Get("delta")
	if r := d.Get("role"); r.Type == gjson.String && c.role == "" {
		c.role = r.Str
	}
	if v := d.Get("content"); v.Type == gjson.String {
		c.content.WriteString(v.Str)
		c.hasContent = true
	}
	if v := d.Get("refusal"); v.Type == gjson.String {
		c.refusal.WriteString(v.Str)
		c.hasRefusal = true
	}
	for _, f := range []string{"reasoning_content", "reasoning"} {
		if v := d.Get(f); v.Type == gjson.String {
			if c.reasoningField == "" {
				c.reasoningField = f
			}
			if c.reasoningField == f {
				c.reasoning.WriteString(v.Str)
			}
		}
	}
	var err error
	d.Get("tool_calls").ForEach(func(_, tc gjson.Result) bool {
		err = c.toolDelta(tc)
		return err == nil
	})
	if err != nil {
		return err
	}
	if fc := d.Get("function_call"); fc.IsObject() {
		if c.legacy == nil {
			c.legacy = &toolAcc{}
		}
		c.legacy.name.WriteString(fc.Get("name").String())
		c.legacy.args.WriteString(fc.Get("arguments").String())
	}
	if au := d.Get("audio"); au.IsObject() {
		if c.audio == nil {
			c.audio = &audioAcc{}
		}
		if v := au.Get("id"); v.Type == gjson.String && c.audio.id == "" {
			c.audio.id = v.Str
		}
		if v := au.Get("expires_at"); v.Type == gjson.Number {
			c.audio.expiresAt = v.Raw
		}
		c.audio.data.WriteString(au.Get("data").String())
		c.audio.transcript.WriteString(au.Get("transcript").String())
	}
	for _, k := range []string{"content", "refusal"} {
		if lp := ch.Get("logprobs." + k); lp.IsArray() {
			if c.logprobs == nil {
				c.logprobs = map[string][]string{}
			}
			lp.ForEach(func(_, e gjson.Result) bool {
				c.logprobs[k] = append(c.logprobs[k], mapping.CompactJSON(e.Raw))
				return true
			})
		}
	}
	if f := ch.Get("finish_reason"); f.Type == gjson.String && f.Str != "" {
		c.finish = f.Str
		a.finished = true
	}
	return nil
}

func (a *chatAssembler) choiceAt(idx int) *choiceAcc {
	for _, c := range a.choices {
		if c.index == idx {
			return c
		}
	}
	c := &choiceAcc{index: idx}
	a.choices = append(a.choices, c)
	return c
}

// toolDelta merges one tool_calls delta entry, matched by index. Fragments of the name and
// arguments are concatenated (as the official SDK's accumulator does).
func (c *choiceAcc) toolDelta(tc gjson.Result) error {
	if !tc.IsObject() {
		return fmt.Errorf("stream tool call delta is not an object")
	}
	idx := int(tc.Get("index").Int())
	if idx == -1 {
		idx = 0 // some servers use -1 for a single call
	}
	if idx < 0 || idx >= maxStreamToolCalls {
		return fmt.Errorf("stream tool call index %d out of range", idx)
	}
	var t *toolAcc
	for _, x := range c.tools {
		if x.index == idx {
			t = x
		}
	}
	if t == nil {
		if len(c.tools) >= maxStreamToolCalls {
			return fmt.Errorf("stream has more than %d tool calls", maxStreamToolCalls)
		}
		t = &toolAcc{index: idx}
		c.tools = append(c.tools, t)
	}
	if v := tc.Get("id"); v.Type == gjson.String && v.Str != "" && t.id == "" {
		t.id = v.Str
	}
	if v := tc.Get("type"); v.Type == gjson.String && v.Str != "" && t.typ == "" {
		t.typ = v.Str
	}
	t.name.WriteString(tc.Get("function.name").String())
	t.args.WriteString(tc.Get("function.arguments").String())
	if cu := tc.Get("custom"); cu.IsObject() {
		t.name.WriteString(cu.Get("name").String())
		t.customInput.WriteString(cu.Get("input").String())
	}
	return nil
}

// Body implements mapping.Assembler: the equivalent non-streamed chat.completion.
func (a *chatAssembler) Body() ([]byte, error) {
	if a.Err == nil && a.Upstream == nil {
		if err := a.SSE.Close(); err != nil {
			a.Err = fmt.Errorf("ended inside an event: %w", err)
		}
	}
	switch {
	case a.Upstream != nil:
		return nil, a.Upstream
	case a.Err != nil:
		return nil, fmt.Errorf("openai chat stream: %w", a.Err)
	case !a.done && !a.finished:
		return nil, fmt.Errorf("openai chat stream: ended before completion (no finish_reason and no [DONE])")
	case a.chunks == 0:
		return nil, fmt.Errorf("openai chat stream: no chunks")
	}
	slices.SortFunc(a.choices, func(x, y *choiceAcc) int { return x.index - y.index })
	b := make([]byte, 0, 256)
	b = append(b, `{"id":`...)
	b = mapping.AppendQuote(b, a.id)
	b = append(b, `,"object":"chat.completion","created":`...)
	if a.created == "" {
		b = append(b, '0')
	} else {
		b = append(b, a.created...)
	}
	b = append(b, `,"model":`...)
	b = mapping.AppendQuote(b, a.model)
	b = append(b, `,"choices":[`...)
	for i, c := range a.choices {
		if i > 0 {
			b = append(b, ',')
		}
		b = c.appendJSON(b)
	}
	b = append(b, ']')
	if a.usage != "" {
		b = append(b, `,"usage":`...)
		b = append(b, a.usage...)
	}
	if a.serviceTier != "" {
		b = append(b, `,"service_tier":`...)
		b = mapping.AppendQuote(b, a.serviceTier)
	}
	if a.fingerprint != "" {
		b = append(b, `,"system_fingerprint":`...)
		b = mapping.AppendQuote(b, a.fingerprint)
	}
	return append(b, '}'), nil
}

// appendJSON renders the choice the way a non-streamed completion carries it.
func (c *choiceAcc) appendJSON(b []byte) []byte {
	b = append(b, `{"index":`...)
	b = strconv.AppendInt(b, int64(c.index), 10)
	b = append(b, `,"message":{"role":`...)
	role := c.role
	if role == "" {
		role = "assistant"
	}
	b = mapping.AppendQuote(b, role)
	b = append(b, `,"content":`...)
	// An empty content string beside tool calls or a refusal is the stream's opening
	// delta, not content: the non-streamed shape is null.
	if c.content.Len() == 0 && (!c.hasContent || len(c.tools) > 0 || c.legacy != nil || c.hasRefusal) {
		b = append(b, "null"...)
	} else {
		b = mapping.AppendQuote(b, c.content.String())
	}
	b = append(b, `,"refusal":`...)
	if c.hasRefusal {
		b = mapping.AppendQuote(b, c.refusal.String())
	} else {
		b = append(b, "null"...)
	}
	if c.reasoningField != "" {
		b = append(b, ',')
		b = mapping.AppendQuote(b, c.reasoningField)
		b = append(b, ':')
		b = mapping.AppendQuote(b, c.reasoning.String())
	}
	if c.audio != nil {
		b = append(b, `,"audio":{"id":`...)
		b = mapping.AppendQuote(b, c.audio.id)
		b = append(b, `,"data":`...)
		b = mapping.AppendQuote(b, c.audio.data.String())
		b = append(b, `,"expires_at":`...)
		if c.audio.expiresAt == "" {
			b = append(b, '0')
		} else {
			b = append(b, c.audio.expiresAt...)
		}
		b = append(b, `,"transcript":`...)
		b = mapping.AppendQuote(b, c.audio.transcript.String())
		b = append(b, '}')
	}
	if len(c.tools) > 0 {
		slices.SortFunc(c.tools, func(x, y *toolAcc) int { return x.index - y.index })
		b = append(b, `,"tool_calls":[`...)
		for i, t := range c.tools {
			if i > 0 {
				b = append(b, ',')
			}
			b = appendToolCall(b, t.id, t.typ, t.name.String(), t.args.String(), t.customInput.String())
		}
		b = append(b, ']')
	}
	if c.legacy != nil {
		b = append(b, `,"function_call":`...)
		b = appendFunctionCall(b, c.legacy.name.String(), c.legacy.args.String())
	}
	b = append(b, `},"logprobs":`...)
	if c.logprobs == nil {
		b = append(b, "null"...)
	} else {
		b = append(b, '{')
		for i, k := range []string{"content", "refusal"} {
			if i > 0 {
				b = append(b, ',')
			}
			b = mapping.AppendQuote(b, k)
			b = append(b, ':')
			if es, ok := c.logprobs[k]; ok {
				b = append(b, '[')
				b = append(b, strings.Join(es, ",")...)
				b = append(b, ']')
			} else {
				b = append(b, "null"...)
			}
		}
		b = append(b, '}')
	}
	b = append(b, `,"finish_reason":`...)
	if c.finish == "" {
		b = append(b, "null"...)
	} else {
		b = mapping.AppendQuote(b, c.finish)
	}
	return append(b, '}')
}

// streamContentPiece is the size of one content delta WriteStream emits; long content goes
// out in a few deltas rather than one very large event.
const streamContentPiece = 4096

// WriteStream implements mapping.Translator: body (a complete chat.completion) as OpenAI's
// own chat.completion.chunk stream. Per choice: a role chunk, reasoning, content in a few
// deltas, refusal, one chunk per tool call, and a finish chunk; then a usage chunk with no
// choices when the body has usage, and data: [DONE].
func (c *Chat) WriteStream(w io.Writer, body []byte) error {
	if !json.Valid(body) {
		return fmt.Errorf("openai chat: response is not JSON: %w", mapping.ErrMalformed)
	}
	root := gjson.ParseBytes(body)
	choices := root.Get("choices")
	if !root.IsObject() || !choices.IsArray() {
		return fmt.Errorf("openai chat: response has no choices array: %w", mapping.ErrMalformed)
	}
	head := chunkHead(root) // every chunk shares the completion's identity fields

	sw := oaiwire.NewSSEWriter(w)
	chunk := func(choice []byte) error {
		b := make([]byte, 0, len(head)+len(choice)+2)
		b = append(b, head...)
		b = append(b, choice...)
		b = append(b, "]}"...)
		return sw.Event("", b)
	}
	var err error
	k := int64(0)
	choices.ForEach(func(_, ch gjson.Result) bool {
		// The position is the index: a body whose "index" fields disagree with their
		// positions still streams as distinct choices.
		err = writeChoice(k, ch, chunk)
		k++
		return err == nil
	})
	if err != nil {
		return err
	}
	if u := root.Get("usage"); u.IsObject() {
		b := make([]byte, 0, len(head)+len(u.Raw)+16)
		b = append(b, head...)
		b = append(b, `],"usage":`...)
		b = append(b, mapping.CompactJSON(u.Raw)...)
		b = append(b, '}')
		if err := sw.Event("", b); err != nil {
			return err
		}
	}
	return sw.Event("", []byte("[DONE]"))
}

// writeChoice emits the chunks of one choice.
func writeChoice(idx int64, ch gjson.Result, chunk func([]byte) error) error {
	m := ch.Get("message")
	delta := func(d string, extra string) error {
		b := make([]byte, 0, len(d)+len(extra)+48)
		b = append(b, `{"index":`...)
		b = strconv.AppendInt(b, idx, 10)
		b = append(b, `,"delta":`...)
		b = append(b, d...)
		b = append(b, extra...)
		b = append(b, '}')
		return chunk(b)
	}
	content, hasContent := messageText(m.Get("content"))
	opening := `{"role":"assistant","content":null}`
	if hasContent {
		opening = `{"role":"assistant","content":""}`
	}
	if err := delta(opening, `,"logprobs":null,"finish_reason":null`); err != nil {
		return err
	}
	for _, f := range []string{"reasoning_content", "reasoning"} {
		if r := m.Get(f); r.Type == gjson.String {
			if err := delta(`{`+mapping.Quote(f)+`:`+mapping.Quote(r.Str)+`}`, `,"logprobs":null,"finish_reason":null`); err != nil {
				return err
			}
			break
		}
	}
	logprobs := "null"
	if lp := ch.Get("logprobs"); lp.IsObject() {
		logprobs = mapping.CompactJSON(lp.Raw)
	}
	if hasContent {
		for i, piece := range oaiwire.SplitText(content, streamContentPiece) {
			lp := "null"
			if i == 0 {
				lp = logprobs
			}
			if err := delta(`{"content":`+mapping.Quote(piece)+`}`, `,"logprobs":`+lp+`,"finish_reason":null`); err != nil {
				return err
			}
		}
	}
	if r := m.Get("refusal"); r.Type == gjson.String {
		if err := delta(`{"refusal":`+mapping.Quote(r.Str)+`}`, `,"logprobs":null,"finish_reason":null`); err != nil {
			return err
		}
	}
	if au := m.Get("audio"); au.IsObject() {
		if err := delta(`{"audio":`+mapping.CompactJSON(au.Raw)+`}`, `,"logprobs":null,"finish_reason":null`); err != nil {
			return err
		}
	}
	var err error
	k := 0
	m.Get("tool_calls").ForEach(func(_, tc gjson.Result) bool {
		b := make([]byte, 0, len(tc.Raw)+64)
		b = append(b, `{"tool_calls":[{"index":`...)
		b = strconv.AppendInt(b, int64(k), 10)
		b = append(b, `,"id":`...)
		b = mapping.AppendQuote(b, tc.Get("id").String())
		typ := callType(tc)
		b = append(b, `,"type":`...)
		b = mapping.AppendQuote(b, typ)
		if typ == "custom" {
			b = append(b, `,"custom":{"name":`...)
			b = mapping.AppendQuote(b, tc.Get("custom.name").String())
			b = append(b, `,"input":`...)
			b = mapping.AppendQuote(b, tc.Get("custom.input").String())
		} else {
			b = append(b, `,"function":{"name":`...)
			b = mapping.AppendQuote(b, tc.Get("function.name").String())
			b = append(b, `,"arguments":`...)
			b = mapping.AppendQuote(b, argumentsString(tc.Get("function.arguments")))
		}
		b = append(b, "}}]}"...)
		k++
		err = delta(string(b), `,"logprobs":null,"finish_reason":null`)
		return err == nil
	})
	if err != nil {
		return err
	}
	if fc := m.Get("function_call"); fc.IsObject() {
		d := `{"function_call":{"name":` + mapping.Quote(fc.Get("name").String()) +
			`,"arguments":` + mapping.Quote(argumentsString(fc.Get("arguments"))) + `}}`
		if err := delta(d, `,"logprobs":null,"finish_reason":null`); err != nil {
			return err
		}
	}
	finish := "null"
	if f := ch.Get("finish_reason"); f.Type == gjson.String {
		finish = mapping.Quote(f.Str)
	}
	return delta(`{}`, `,"logprobs":null,"finish_reason":`+finish)
}

// messageText returns the text of a message's content: the string, or the text entries of
// an array (some compatible servers answer with content parts) joined.
func messageText(c gjson.Result) (string, bool) {
	if c.Type == gjson.String {
		return c.Str, true
	}
	if !c.IsArray() {
		return "", false
	}
	var b strings.Builder
	c.ForEach(func(_, e gjson.Result) bool {
		b.WriteString(e.Get("text").String())
		return true
	})
	return b.String(), true
}

// argumentsString returns native arguments as the string the stream carries; arguments
// sent as an object by a compatible server are serialized.
func argumentsString(v gjson.Result) string {
	if v.IsObject() {
		return mapping.CompactJSON(v.Raw)
	}
	return v.String()
}

// appendToolCall appends one tool_calls entry of an assembled message: a function call
// (the type when typ is empty, as the SDKs read it) or a custom tool's call.
func appendToolCall(b []byte, id, typ, name, args, customInput string) []byte {
	if typ == "" {
		typ = "function"
	}
	b = append(b, `{"id":`...)
	b = mapping.AppendQuote(b, id)
	b = append(b, `,"type":`...)
	b = mapping.AppendQuote(b, typ)
	if typ == "custom" {
		b = append(b, `,"custom":{"name":`...)
		b = mapping.AppendQuote(b, name)
		b = append(b, `,"input":`...)
		b = mapping.AppendQuote(b, customInput)
	} else {
		b = append(b, `,"function":{"name":`...)
		b = mapping.AppendQuote(b, name)
		b = append(b, `,"arguments":`...)
		b = mapping.AppendQuote(b, args)
	}
	return append(b, "}}"...)
}

// appendFunctionCall appends a legacy function_call object.
func appendFunctionCall(b []byte, name, args string) []byte {
	b = append(b, `{"name":`...)
	b = mapping.AppendQuote(b, name)
	b = append(b, `,"arguments":`...)
	b = mapping.AppendQuote(b, args)
	return append(b, '}')
}
