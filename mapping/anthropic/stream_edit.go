package anthropic

import (
	"bytes"
	"fmt"
	"io"
	"strconv"
	"strings"

	"github.com/tidwall/gjson"

	"github.com/hookproxy/hookproxy/mapping"
)

// Incremental editing of a Messages event stream (mapping.StreamEditing).
// message_start, pings, and every text, thinking and other content block are relayed as
// they arrive. A tool_use block is held from its content_block_start to its
// content_block_stop; then the call is decided and, when kept, emitted as
// content_block_start, one input_json_delta of the whole input and content_block_stop,
// as WriteStream renders a held response. A removed block leaves no gap: later blocks'
// indices are shifted down. The notes of removed calls become a text block after the last
// block, and stop_reason tool_use becomes end_turn when no call is left, in message_delta.
// A tool_use that message_start's message already holds is judged in that event (start).

// NewStreamEditor implements mapping.StreamEditing.
func (m *Messages) NewStreamEditor(out io.Writer, d mapping.StreamDecider) mapping.StreamEditor {
	e := &editor{m: m, out: out, d: d, settle: mapping.CallSettler{D: d}}
	e.Name = "anthropic: stream"
	e.SSE.Dispatch = e.event
	return e
}

type editor struct {
	mapping.StreamFeed[editItem]
	m   *Messages
	out io.Writer
	d   mapping.StreamDecider

	started bool
	msgID   string
	next    int   // the next upstream block index
	removed []int // upstream indices of removed blocks, ascending
	kept    int   // tool calls emitted
	settle  mapping.CallSettler
	notes   []string
	open    map[int]*heldCall // tool_use blocks not stopped yet, by upstream index
	closed  map[int]bool      // blocks stopped (or complete in message_start), by upstream index
	// lastText: the last block the client received is a text block (a note after it
	// starts on a new paragraph, as EncodeResponse renders it).
	lastText bool
	sawDelta bool // message_delta relayed
}

// heldCall is a tool_use block being held.
type heldCall struct {
	blk      streamBlock
	index    int // upstream block index
	complete bool
	size     int
}

// editItem is an event waiting behind an undecided call.
type editItem struct {
	raw   []byte // the event as the upstream sent it
	name  string // its event name
	data  []byte
	index int // its block index, or -1
	call  *heldCall
	delta bool // message_delta: rendered with the settled stop reason
	stop  bool // message_stop
}

func (e *editor) Close() error {
	if err := e.CloseInput(); err != nil {
		return err
	}
	if e.State() != mapping.Done {
		// No message_stop: a held call is dropped, never sent undecided.
		return e.Failed(fmt.Errorf("anthropic: stream: incomplete: no message_stop"))
	}
	return nil
}

func (e *editor) Fail(errType, code, message string) error {
	return e.Finish(e.out, []byte("event: error\ndata: "+string(e.m.ErrorBody(0, errType, code, message))+"\n\n"))
}

func (e *editor) event(raw []byte, name string, data []byte, hasData bool) error {
	if e.Ended() {
		return nil
	}
	if !hasData || len(bytes.TrimSpace(data)) == 0 {
		if name == "error" {
			return e.endWith(raw)
		}
		return e.emit(editItem{raw: raw, index: -1})
	}
	if checkJSON(mapping.BytesString(data)) != nil { // duplicate keys refused, as in DecodeResponse
		return fmt.Errorf("event %q: data is not JSON", name)
	}
	// Parsed in place: data is the splitter's buffer, valid during this call, so whatever
	// outlives it is cloned (a copy per text delta would grow with the text).
	v := gjson.Parse(mapping.BytesString(data))
	typ := v.Get("type").String()
	if name == "error" || typ == "error" {
		return e.endWith(raw)
	}
	if typ == "" {
		typ = name
	}
	it := editItem{raw: raw, name: name, data: data, index: -1}
	if idx := v.Get("index"); idx.Type == gjson.Number {
		it.index = int(idx.Int())
	}
	switch typ {
	case "message_start":
		if e.started {
			return fmt.Errorf("second message_start")
		}
		e.started = true
		e.msgID = strings.Clone(v.Get("message.id").String())
		return e.start(it, v.Get("message.content"))
	case "ping":
		return e.emit(it)
	}
	if !e.started {
		return fmt.Errorf("%s before message_start", typ)
	}
	switch typ {
	case "content_block_start":
		if it.index != e.next {
			return fmt.Errorf("content_block_start index %d, expected %d", it.index, e.next)
		}
		e.next++
		cb := v.Get("content_block")
		if !cb.IsObject() {
			return fmt.Errorf("content_block_start without a content_block object")
		}
		if cb.Get("type").String() == blockToolUse {
			c := &heldCall{index: it.index, blk: streamBlock{raw: strings.Clone(cb.Raw), typ: blockToolUse}}
			c.size = len(cb.Raw)
			if e.open == nil {
				e.open = map[int]*heldCall{}
			}
			e.open[c.index] = c
			e.Push(editItem{call: c, index: -1}, c.size)
			return nil
		}
		return e.emit(it)
	case "content_block_delta", "content_block_stop":
		if c := e.open[it.index]; c != nil {
			return e.callEvent(c, typ, v)
		}
		// As the assembler: an event for a block not open is refused. The SDKs apply a
		// delta to whatever block the client has at that index — a call already judged, one
		// of message_start, or the block that took a removed call's place.
		if it.index < 0 || it.index >= e.next || e.closed[it.index] {
			return fmt.Errorf("%s for a content block that is not open (index %d)", typ, it.index)
		}
		if typ == "content_block_stop" {
			e.close(it.index)
		}
		return e.emit(it)
	case "message_delta":
		it.delta = true
		return e.emit(it)
	case "message_stop":
		e.Drain()
		// Blocks never stopped are finished here, as the assembler finishes them, in
		// stream order (flush decides them as they reach the front of the queue).
		for _, q := range e.Queued() {
			if q.call != nil && !q.call.complete {
				if err := e.finishCall(q.call); err != nil {
					return err
				}
			}
		}
		if err := e.flush(); err != nil {
			return err
		}
		it.stop = true
		if err := e.emit(it); err != nil {
			return err
		}
		return nil
	}
	return e.emit(it) // unknown events carry no tool call: relayed (the SDKs ignore them)
}

// start relays message_start. The blocks its message already holds are complete blocks
// 0..k-1 (the SDKs keep them and run a tool_use among them): each tool_use is judged
// there and then, before anything reaches the client, and the event goes out with the
// kept calls (and the effective input of a modify) only.
func (e *editor) start(it editItem, content gjson.Result) error {
	if !content.IsArray() {
		return e.emit(it)
	}
	var (
		blocks  []string
		changed bool
		err     error
	)
	content.ForEach(func(_, b gjson.Result) bool {
		i := e.next
		e.next++
		e.close(i)
		if !b.IsObject() {
			err = fmt.Errorf("message_start content block is not an object")
			return false
		}
		if b.Get("type").String() != blockToolUse {
			e.lastText = b.Get("type").String() == blockText
			blocks = append(blocks, b.Raw)
			return true
		}
		var kept bool
		var out string
		if kept, out, err = e.settleBlock(b.Raw); err != nil {
			return false
		}
		if !kept {
			e.removed = append(e.removed, i)
			changed = true
			return true
		}
		e.lastText = false
		changed = changed || out != b.Raw
		blocks = append(blocks, out)
		return true
	})
	if err != nil {
		return err
	}
	if !changed {
		return e.emit(it)
	}
	data, err := mapping.SetRaw(string(it.data), "message.content", mapping.JoinArray(blocks))
	if err != nil {
		return err
	}
	c, err := mapping.Compact([]byte(data))
	if err != nil {
		return err
	}
	return e.writeEvent("message_start", c)
}

func (e *editor) close(i int) {
	if e.closed == nil {
		e.closed = map[int]bool{}
	}
	e.closed[i] = true
}

// settleBlock reads a complete tool_use block with the decoder DecodeResponse reads the
// assembled message's blocks with (as strict about its JSON), settles the call, and
// returns the block as the client gets it when it is kept: as it came, or patched with the
// effective input of a modify. A removed call's note is kept for the notes block.
func (e *editor) settleBlock(raw string) (kept bool, out string, err error) {
	if err := checkJSON(raw); err != nil {
		return false, "", fmt.Errorf("anthropic: stream: streamed tool call: %v: %w", err, mapping.ErrMalformed)
	}
	d, err := decodeBlock(gjson.Parse(raw), "")
	if err != nil {
		return false, "", fmt.Errorf("anthropic: stream: streamed tool call: %v: %w", err, mapping.ErrMalformed)
	}
	if d.typ != blockToolUse {
		return false, "", fmt.Errorf("anthropic: stream: %w", mapping.ErrCallUnreadable)
	}
	j, err := e.settle.Judge(d.callID, d.name, d.input, raw, func(call mapping.ToolCall) (string, error) {
		prev, _ := mapping.CanonicalCall(d.callID, d.name, d.input)
		out, _, err := writeToolUse(call, raw, prev, "")
		return out, err
	})
	if err != nil {
		return false, "", err // as the settler gave it
	}
	if !j.Kept {
		if j.Note != "" {
			e.notes = append(e.notes, j.Note)
		}
		return false, "", nil
	}
	e.kept++
	return true, j.Out, nil
}

// callEvent feeds a delta or the stop of the held call.
func (e *editor) callEvent(c *heldCall, typ string, v gjson.Result) error {
	if typ == "content_block_stop" {
		if err := e.finishCall(c); err != nil {
			return err
		}
		return e.flush()
	}
	d := v.Get("delta")
	if dt := d.Get("type").String(); dt != "input_json_delta" {
		return fmt.Errorf("tool_use block: unexpected delta type %q", dt)
	}
	frag := d.Get("partial_json").String()
	c.blk.partial.WriteString(frag)
	c.blk.sawInput = true
	c.size += len(frag)
	e.Grow(len(frag))
	return nil
}

// finishCall ends a held call: its deltas become its block, as assembly does.
func (e *editor) finishCall(c *heldCall) error {
	delete(e.open, c.index)
	e.close(c.index)
	var a assembler
	a.finish(&c.blk)
	if a.Err != nil {
		return fmt.Errorf("anthropic: stream: %w", a.Err)
	}
	c.complete = true
	return nil
}

func (e *editor) endWith(raw []byte) error {
	if err := e.flush(); err != nil {
		return err
	}
	return e.Finish(e.out, raw)
}

// emit writes an event now, or queues it behind an undecided call.
func (e *editor) emit(it editItem) error {
	if !e.Holding() {
		return e.render(it)
	}
	// The splitter reuses its buffers: a queued event keeps its own bytes.
	it.raw, it.data, it.name = bytes.Clone(it.raw), bytes.Clone(it.data), strings.Clone(it.name)
	e.Push(it, len(it.raw)+len(it.data))
	return nil
}

// flush renders the queue up to the first call not yet complete, deciding each complete
// call as it reaches the front (stream order).
func (e *editor) flush() error {
	return e.Release(func(it editItem) (int, bool, error) {
		if it.call == nil {
			return len(it.raw) + len(it.data), true, e.render(it)
		}
		if !it.call.complete {
			return 0, false, nil
		}
		return it.call.size, true, e.decide(it.call)
	})
}

// clientIndex is where upstream block i is in the client's stream.
func (e *editor) clientIndex(i int) int { return mapping.ShiftIndex(e.removed, i) }

func (e *editor) writeEvent(name, data string) error {
	_, err := io.WriteString(e.out, "event: "+name+"\ndata: "+data+"\n\n")
	return err
}

// render writes one event that carries no tool call, with its index shifted past the
// removed blocks and, for message_delta, the settled stop reason after the notes.
func (e *editor) render(it editItem) error {
	switch {
	case it.delta || it.stop && len(e.notes) > 0:
		if err := e.writeNotes(); err != nil {
			return err
		}
	}
	if it.delta {
		e.sawDelta = true
	}
	if it.stop && !e.sawDelta && len(e.removed) > 0 && e.kept == 0 {
		// No message_delta said how the turn ended: as the held path, the turn is finished.
		if err := e.writeEvent("message_delta", `{"type":"message_delta","delta":{"stop_reason":`+mapping.Quote(e.m.TerminalFinishReason())+`,"stop_sequence":null}}`); err != nil {
			return err
		}
	}
	data := mapping.BytesString(it.data) // copied only when changed
	if gjson.Get(data, "type").String() == "content_block_start" {
		e.lastText = gjson.Get(data, "content_block.type").String() == blockText
	}
	changed := false
	if it.index >= 0 {
		if ci := e.clientIndex(it.index); ci != it.index {
			var err error
			if data, err = mapping.SetRaw(data, "index", strconv.Itoa(ci)); err != nil {
				return err
			}
			changed = true
		}
	}
	// As the held path: once no call is left the turn is finished, whatever the upstream said.
	if it.delta && len(e.removed) > 0 && e.kept == 0 && gjson.Get(data, "delta.stop_reason").String() != e.m.TerminalFinishReason() {
		var err error
		if data, err = mapping.SetRaw(data, "delta.stop_reason", mapping.Quote(e.m.TerminalFinishReason())); err != nil {
			return err
		}
		changed = true
	}
	out := it.raw
	if changed {
		c, err := mapping.Compact([]byte(data))
		if err != nil {
			return err
		}
		name := it.name
		if name == "" {
			name = gjson.Get(c, "type").String()
		}
		out = []byte("event: " + name + "\ndata: " + c + "\n\n")
	}
	if it.stop {
		return e.Finish(e.out, out) // message_stop: the stream's last event
	}
	_, err := e.out.Write(out)
	return err
}

// writeNotes tells the agent about removed calls in a text block after the last block.
func (e *editor) writeNotes() error {
	if len(e.notes) == 0 {
		return nil
	}
	note := strings.Join(e.notes, "\n")
	if e.lastText {
		note = "\n\n" + note
	}
	e.notes = nil
	e.lastText = true
	idx := strconv.Itoa(e.clientIndex(e.next))
	e.next++ // the note block takes an upstream index no block has
	if err := e.writeEvent("content_block_start", `{"type":"content_block_start","index":`+idx+`,"content_block":{"type":"text","text":""}}`); err != nil {
		return err
	}
	if err := e.writeEvent("content_block_delta", `{"type":"content_block_delta","index":`+idx+`,"delta":{"type":"text_delta","text":`+mapping.Quote(note)+`}}`); err != nil {
		return err
	}
	return e.writeEvent("content_block_stop", `{"type":"content_block_stop","index":`+idx+`}`)
}

// decide settles a complete tool_use block and emits it when it is kept.
func (e *editor) decide(c *heldCall) error {
	kept, out, err := e.settleBlock(c.blk.final)
	if err != nil {
		return err
	}
	if !kept {
		e.removed = append(e.removed, c.index)
		return nil
	}
	e.lastText = false
	return writeBlock(e.writeEvent, e.clientIndex(c.index), gjson.Parse(out))
}
