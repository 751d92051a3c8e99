package anthropic

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"

	"github.com/tidwall/gjson"

	"github.com/hookproxy/hookproxy/mapping"
)

// NewAssembler returns an assembler for Anthropic's Messages event stream.
func (*Messages) NewAssembler() mapping.Assembler {
	a := &assembler{}
	a.SSE.Dispatch = a.dispatch
	// A bare "event: error" is the upstream's error, data or not.
	a.SSE.Dataless = true
	// One event is at most the whole message (a content_block_start repeats no text), so
	// the bound of the chat assembler serves.
	a.SSE.MaxEvent = 16 << 20
	return a
}

// assembler turns the SSE events of a streamed message back into the message object the
// non-streaming API would have returned. Write never fails, so it can sit beside a
// pass-through copy to the client; Body reports what went wrong.
type assembler struct {
	mapping.AssemblerInput // Err: a malformed stream; Upstream: an error event

	started, stopped bool
	msg              string // the message_start skeleton with message_delta applied
	blocks           []*streamBlock

	body []byte
}

// streamBlock is one content block being streamed.
type streamBlock struct {
	raw       string // content_block of content_block_start
	typ       string
	text      strings.Builder
	thinking  strings.Builder
	signature strings.Builder
	partial   strings.Builder // concatenated input_json_delta.partial_json
	citations []string
	// which deltas arrived, so untouched fields keep their original bytes
	sawText, sawThinking, sawSignature, sawInput bool
	stopped                                      bool
	final                                        string
}

func (a *assembler) fail(format string, args ...any) {
	if a.Err == nil {
		a.Err = fmt.Errorf(format, args...)
	}
}

// errStopped stops the SSE reader once the stream has failed or carried the upstream's
// error: nothing after that counts.
var errStopped = errors.New("stopped")

// dispatch handles one complete event.
func (a *assembler) dispatch(event string, data []byte) error {
	a.event(event, data)
	if a.Err != nil || a.Upstream != nil {
		return errStopped
	}
	return nil
}

func (a *assembler) event(event string, data []byte) {
	if len(bytes.TrimSpace(data)) == 0 {
		if event == "error" {
			a.Upstream = upstreamError("api_error", "stream error event without data")
		}
		return
	}
	if checkJSON(mapping.BytesString(data)) != nil { // duplicate keys refused, as in DecodeResponse
		a.fail("event %q: data is not JSON", event)
		return
	}
	v := gjson.ParseBytes(data)
	typ := v.Get("type").String()
	if event == "error" || typ == "error" {
		e := v.Get("error")
		a.Upstream = upstreamError(e.Get("type").String(), e.Get("message").String())
		return
	}
	if typ == "" {
		typ = event
	}
	if typ == "ping" {
		return
	}
	if a.stopped {
		a.fail("%s after message_stop", typ)
		return
	}
	if !a.started && typ != "message_start" {
		a.fail("%s before message_start", typ)
		return
	}
	switch typ {
	case "message_start":
		if a.started {
			a.fail("second message_start")
			return
		}
		m := v.Get("message")
		if !m.IsObject() {
			a.fail("message_start without a message object")
			return
		}
		a.msg, a.started = m.Raw, true
		// Blocks the message already holds are blocks 0..k-1, complete: the SDKs keep them
		// (anthropic-sdk-go's Accumulate and the TypeScript SDK's finalMessage() return
		// them, and run a tool_use among them), and the next content_block_start is k.
		m.Get("content").ForEach(func(_, b gjson.Result) bool {
			if !b.IsObject() {
				a.fail("message_start content block is not an object")
				return false
			}
			a.blocks = append(a.blocks, &streamBlock{raw: b.Raw, typ: b.Get("type").String(), stopped: true, final: b.Raw})
			return true
		})
	case "content_block_start":
		idx := v.Get("index")
		if idx.Type != gjson.Number || idx.Int() != int64(len(a.blocks)) {
			a.fail("content_block_start index %s, expected %d", idx.Raw, len(a.blocks))
			return
		}
		cb := v.Get("content_block")
		if !cb.IsObject() {
			a.fail("content_block_start without a content_block object")
			return
		}
		b := &streamBlock{raw: cb.Raw, typ: cb.Get("type").String()}
		b.text.WriteString(cb.Get("text").String())
		b.thinking.WriteString(cb.Get("thinking").String())
		b.signature.WriteString(cb.Get("signature").String())
		a.blocks = append(a.blocks, b)
	case "content_block_delta":
		b := a.block(v, typ)
		if b == nil {
			return
		}
		d := v.Get("delta")
		switch dt := d.Get("type").String(); dt {
		case "text_delta":
			b.text.WriteString(d.Get("text").String())
			b.sawText = true
		case "input_json_delta":
			b.partial.WriteString(d.Get("partial_json").String())
			b.sawInput = true
		case "thinking_delta":
			b.thinking.WriteString(d.Get("thinking").String())
			b.sawThinking = true
		case "signature_delta":
			b.signature.WriteString(d.Get("signature").String())
			b.sawSignature = true
		case "citations_delta":
			c := d.Get("citation")
			if !c.IsObject() {
				a.fail("citations_delta without a citation object")
				return
			}
			b.citations = append(b.citations, c.Raw)
		default:
			// Unknown deltas carry content we cannot place; dropping them would
			// silently change what the client and the policies see.
			a.fail("unknown delta type %q", dt)
		}
	case "content_block_stop":
		if b := a.block(v, typ); b != nil {
			a.finish(b)
		}
	case "message_delta":
		a.applyDelta(v.Get("delta"), "")
		a.applyDelta(v.Get("usage"), "usage.")
	case "message_stop":
		for _, b := range a.blocks {
			if !b.stopped {
				a.finish(b)
			}
		}
		a.stopped = true
	default:
		// Unknown event types carry no content block; ignore them as the SDKs do.
	}
}

// block returns the open block an event addresses.
func (a *assembler) block(v gjson.Result, typ string) *streamBlock {
	idx := v.Get("index")
	if idx.Type != gjson.Number || idx.Int() < 0 || idx.Int() >= int64(len(a.blocks)) {
		a.fail("%s for unknown content block %s", typ, idx.Raw)
		return nil
	}
	b := a.blocks[idx.Int()]
	if b.stopped {
		a.fail("%s for stopped content block %d", typ, idx.Int())
		return nil
	}
	return b
}

// applyDelta copies the non-null fields of a message_delta object onto the message.
func (a *assembler) applyDelta(d gjson.Result, prefix string) {
	if !d.Exists() || d.Type == gjson.Null {
		return
	}
	if !d.IsObject() {
		a.fail("message_delta %s is not an object", strings.TrimSuffix(prefix, "."))
		return
	}
	d.ForEach(func(k, val gjson.Result) bool {
		if val.Type == gjson.Null {
			return true // null means "no update" in message_delta
		}
		if prefix != "" && !gjson.Get(a.msg, strings.TrimSuffix(prefix, ".")).IsObject() {
			msg, err := mapping.SetRaw(a.msg, strings.TrimSuffix(prefix, "."), "{}")
			if err != nil {
				a.fail("%v", err)
				return false
			}
			a.msg = msg
		}
		msg, err := mapping.SetRaw(a.msg, prefix+mapping.EscapeKey(k.String()), val.Raw)
		if err != nil {
			a.fail("%v", err)
			return false
		}
		a.msg = msg
		return true
	})
}

// finish closes a block: accumulated deltas are written into its start object.
func (a *assembler) finish(b *streamBlock) {
	b.stopped = true
	raw := b.raw
	var err error
	set := func(path, value string) {
		if err == nil {
			raw, err = mapping.SetRaw(raw, path, value)
		}
	}
	if b.sawText {
		set("text", mapping.Quote(b.text.String()))
	}
	if b.sawThinking {
		set("thinking", mapping.Quote(b.thinking.String()))
	}
	if b.sawSignature {
		set("signature", mapping.Quote(b.signature.String()))
	}
	if in := b.partial.String(); in != "" {
		if !gjson.Valid(in) {
			a.fail("content block %q: input_json_delta does not form JSON", b.typ)
			return
		}
		c, cerr := mapping.Compact([]byte(in))
		if cerr != nil {
			a.fail("content block %q: input: %v", b.typ, cerr)
			return
		}
		set("input", c)
	} else if b.sawInput && !gjson.Get(raw, "input").Exists() {
		set("input", "{}") // a call without arguments streams only empty partial_json
	}
	if len(b.citations) > 0 {
		all := []string{}
		gjson.Get(raw, "citations").ForEach(func(_, c gjson.Result) bool {
			all = append(all, c.Raw)
			return true
		})
		set("citations", mapping.JoinArray(append(all, b.citations...)))
	}
	if err != nil {
		a.fail("%v", err)
		return
	}
	b.final = raw
}

// Body returns the assembled message object.
func (a *assembler) Body() ([]byte, error) {
	if a.Upstream != nil {
		return nil, a.Upstream
	}
	if a.Err != nil {
		return nil, fmt.Errorf("anthropic: stream: %w", a.Err)
	}
	if !a.started {
		return nil, errors.New("anthropic: stream: incomplete: no message_start")
	}
	if !a.stopped {
		return nil, errors.New("anthropic: stream: incomplete: no message_stop")
	}
	if a.body == nil {
		raws := make([]string, len(a.blocks))
		for i, b := range a.blocks {
			raws[i] = b.final
		}
		msg, err := mapping.SetRaw(a.msg, "content", mapping.JoinArray(raws))
		if err != nil {
			return nil, err
		}
		a.body = []byte(msg)
	}
	return a.body, nil
}

// WriteStream re-emits a complete message object as Anthropic's event stream:
// message_start (empty content, usage), per block content_block_start, its deltas and
// content_block_stop, then message_delta (stop reason, usage) and message_stop. Each event
// is flushed when w is an http.Flusher.
func (*Messages) WriteStream(w io.Writer, body []byte) error {
	c, err := mapping.Compact(body) // one-line JSON values for data: lines
	if err != nil {
		return fmt.Errorf("anthropic: write stream: %w", mapping.ErrMalformed)
	}
	msg := gjson.Parse(c)
	content := msg.Get("content")
	if !msg.IsObject() || !content.IsArray() {
		return fmt.Errorf("anthropic: write stream: not a message object: %w", mapping.ErrMalformed)
	}
	flusher, _ := w.(http.Flusher)
	emit := func(event, data string) error {
		if _, err := io.WriteString(w, "event: "+event+"\ndata: "+data+"\n\n"); err != nil {
			return err
		}
		if flusher != nil {
			flusher.Flush()
		}
		return nil
	}

	// The skeleton announces no content and no stop yet; fields the body lacks are not
	// invented.
	start, err := mapping.SetRaw(c, "content", "[]")
	if err != nil {
		return err
	}
	var delta []string
	for _, k := range []string{"stop_reason", "stop_sequence"} {
		if v := msg.Get(k); v.Exists() {
			if start, err = mapping.SetRaw(start, k, "null"); err != nil {
				return err
			}
			delta = append(delta, mapping.Quote(k)+":"+v.Raw)
		}
	}
	if err := emit("message_start", `{"type":"message_start","message":`+start+`}`); err != nil {
		return err
	}

	i := 0
	content.ForEach(func(_, b gjson.Result) bool {
		err = writeBlock(emit, i, b)
		i++
		return err == nil
	})
	if err != nil {
		return err
	}

	// message_delta carries the final counts (cumulative, as Anthropic sends them); a body
	// without usage gets none rather than invented zeros.
	md := `{"type":"message_delta","delta":{` + strings.Join(delta, ",") + `}`
	if u := msg.Get("usage"); u.IsObject() {
		var fields []string
		for _, k := range []string{"input_tokens", "cache_creation_input_tokens", "cache_read_input_tokens", "output_tokens", "server_tool_use"} {
			if v := u.Get(k); v.Exists() {
				fields = append(fields, mapping.Quote(k)+":"+v.Raw)
			}
		}
		md += `,"usage":{` + strings.Join(fields, ",") + `}`
	}
	if err := emit("message_delta", md+`}`); err != nil {
		return err
	}
	return emit("message_stop", `{"type":"message_stop"}`)
}

// writeBlock emits one content block as start, deltas and stop, the way Anthropic streams
// it: text and thinking arrive as deltas, tool input as one input_json_delta of the whole
// input, everything else (redacted thinking, server tool results) whole in the start event.
func writeBlock(emit func(event, data string) error, i int, b gjson.Result) error {
	idx := fmt.Sprint(i)
	start := b.Raw
	var deltas []string
	var err error
	set := func(path, value string) {
		if err == nil {
			start, err = mapping.SetRaw(start, path, value)
		}
	}
	switch typ := b.Get("type").String(); {
	case b.Get("input").Exists():
		set("input", "{}")
		deltas = append(deltas, `{"type":"input_json_delta","partial_json":`+mapping.Quote(b.Get("input").Raw)+`}`)
	case typ == blockText:
		set("text", `""`)
		// The body's own string literal, so the text keeps its exact encoding.
		if t := b.Get("text"); t.Type == gjson.String && t.Str != "" {
			deltas = append(deltas, `{"type":"text_delta","text":`+t.Raw+`}`)
		}
	case typ == blockThinking:
		for _, f := range []struct{ field, delta string }{{"thinking", "thinking_delta"}, {"signature", "signature_delta"}} {
			if v := b.Get(f.field); v.Type == gjson.String { // never add a field the block lacks
				set(f.field, `""`)
				if v.String() != "" {
					deltas = append(deltas, `{"type":"`+f.delta+`","`+f.field+`":`+v.Raw+`}`)
				}
			}
		}
	}
	if err != nil {
		return err
	}
	if err := emit("content_block_start", `{"type":"content_block_start","index":`+idx+`,"content_block":`+start+`}`); err != nil {
		return err
	}
	for _, d := range deltas {
		if err := emit("content_block_delta", `{"type":"content_block_delta","index":`+idx+`,"delta":`+d+`}`); err != nil {
			return err
		}
	}
	return emit("content_block_stop", `{"type":"content_block_stop","index":`+idx+`}`)
}
