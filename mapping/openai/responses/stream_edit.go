package responses

import (
	"bytes"
	"fmt"
	"io"
	"strconv"
	"strings"

	"github.com/tidwall/gjson"
	"github.com/tidwall/sjson"

	"github.com/hookproxy/hookproxy/mapping"
	"github.com/hookproxy/hookproxy/mapping/openai/internal/oaiwire"
)

// Incremental editing of a Responses event stream (mapping.StreamEditing).
// Every event of an output item that is not a call (messages, reasoning, hosted tool
// items) and every response-level event is relayed as it arrives. The events of a call
// item the client runs (function_call, custom_tool_call, local_shell_call, shell_call,
// apply_patch_call, computer_call: clientCall, tools.go) are held from output_item.added
// to output_item.done; then the call is decided and, when kept, emitted as WriteStream
// renders an item (added, one arguments or custom tool input delta and its done, done;
// added and done for the types without delta events). A removed item leaves no gap: later
// output_index values are shifted down, and once the stream differs from the upstream's,
// sequence_number is renumbered so that it still counts every event from 0. The notes of
// removed calls become a message item before the terminal event. An item announced as
// something else whose output_item.done carries a call is judged before that event goes
// out (lateCall). The terminal event's response.output, which the SDKs take as the final
// answer, is rebuilt from what was judged: a call the item events did not announce but
// the terminal response holds is decided there, and an item whose terminal form differs
// in kind from the one streamed is replaced by the streamed one — the client never runs a
// call other than the one judged. A removed call that only the terminal response holds,
// with streamed items after it, leaves a placeholder message in its place, so that those
// items stay where their events put them. A call in an output_item.done without output_index
// (Codex runs it) is decided where that event comes (looseCall); the terminal response
// keeps it as judged. When its arguments came before, unannounced and with an
// output_index, it is judged at that index instead, as a late call.

// NewStreamEditor implements mapping.StreamEditing.
func (t *Translator) NewStreamEditor(out io.Writer, d mapping.StreamDecider) mapping.StreamEditor {
	e := &editor{t: t, out: out, d: d, items: map[int]*itemState{}, maxIndex: -1, settle: mapping.CallSettler{D: d}}
	e.Name = "openai responses stream"
	e.SSE.Dispatch = e.event
	e.SSE.MaxEvent = 64 << 20 // the terminal event repeats the whole response
	return e
}

type editor struct {
	mapping.StreamFeed[queued]
	t   *Translator
	out io.Writer
	d   mapping.StreamDecider

	respID     string
	items      map[int]*itemState // by upstream output_index
	maxIndex   int                // highest upstream output_index seen, -1 before any
	removed    []int              // upstream indices of removed items, ascending
	settle     mapping.CallSettler
	kept       int
	dropped    int // calls removed, streamed or terminal-only (removed indexes only the streamed)
	notes      []string
	changed    bool // something differs from the upstream's stream: renumber sequence_number
	nextSeq    int64
	seqStarted bool // nextSeq was taken from the stream's first event
	// loose: the calls of output_item.done events without output_index, judged, by their
	// compact item: the item as emitted, "" when removed.
	loose map[string]string
	// unannounced: the output_index of each item whose call content came before any
	// output_item.added (a stream resumed inside a call), by item id.
	unannounced map[string]int
}

// itemState is what the stream said about one output item.
type itemState struct {
	typ   string
	added string // the item of output_item.added, for an item that is not a call
	done  string // the item of output_item.done (for a kept call: as emitted)
	call  *heldCall
}

// heldCall is a call item being held.
type heldCall struct {
	index     int
	added     string
	args      strings.Builder
	argsFinal *string
	done      string
	complete  bool
	dropped   bool // never finished, and the terminal response holds no item in its place
	size      int
	// announced: the client has the item's output_item.added already — an item announced
	// as something else that finished as a call (lateCall).
	announced bool
	// loose: the output_item.done event, without output_index, that carries the call.
	loose *queued
}

// queued is an event waiting behind an undecided call.
type queued struct {
	raw  []byte
	name string
	data []byte
	call *heldCall
}

// isCallItem reports whether an output item is a tool call the chain judges: exactly the
// items DecodeResponse maps to tool_call parts.
func isCallItem(item gjson.Result) bool { return clientCall(item) }

func (e *editor) Close() error {
	if err := e.CloseInput(); err != nil {
		return err
	}
	if e.State() != mapping.Done {
		return e.Failed(fmt.Errorf("openai responses stream: ended before completion (no response.completed)"))
	}
	return nil
}

func (e *editor) Fail(errType, code, message string) error {
	if code == "" {
		code = errType
	}
	return e.Finish(e.out, []byte("event: error\ndata: "+`{"type":"error","code":`+mapping.Quote(code)+`,"message":`+mapping.Quote(message)+
		`,"param":null,"sequence_number":`+strconv.FormatInt(e.nextSeq, 10)+"}\n\n"))
}

func (e *editor) event(raw []byte, name string, data []byte, hasData bool) error {
	if e.Ended() {
		return nil
	}
	if !hasData {
		return e.emit(queued{raw: raw})
	}
	if oaiwire.CheckClientJSON(data) != nil { // duplicate keys refused, as in DecodeResponse
		if name == "error" {
			return e.endWith(raw)
		}
		return fmt.Errorf("stream event is not JSON")
	}
	// Parsed in place: data is the splitter's buffer, valid during this call, so whatever
	// outlives it is cloned (a copy per text delta would grow with the text).
	root := gjson.Parse(mapping.BytesString(data))
	if !root.IsObject() {
		return fmt.Errorf("stream event is not a JSON object")
	}
	typ := root.Get("type").String()
	if typ == "" {
		typ = name
	}
	if !e.seqStarted {
		// A resumed stream (starting_after) does not count from 0: what the editor writes
		// itself continues the upstream's numbering from its first event.
		e.seqStarted = true
		if sn := root.Get("sequence_number"); sn.Type == gjson.Number {
			e.nextSeq = sn.Int()
		}
	}
	if typ == "error" || !strings.HasPrefix(typ, "response.") && root.Get("error").Exists() {
		return e.endWith(raw)
	}
	q := queued{raw: raw, name: name, data: data}
	switch typ {
	case "response.created", "response.in_progress", "response.queued":
		if id := root.Get("response.id").String(); id != "" && e.respID == "" {
			e.respID = strings.Clone(id)
		}
		return e.emit(q)
	case "response.completed", "response.incomplete", "response.failed", "response.cancelled":
		// Calls never finished by output_item.done are complete now. As the held path reads
		// the stream, the terminal response is their final form: the item it holds at
		// that index, or, when it holds none, no call at all (the client never saw one).
		// Without a terminal output, what came is all there is.
		out := root.Get("response.output")
		for _, it := range e.items {
			if c := it.call; c != nil && !c.complete {
				c.complete = true
				if out.IsArray() {
					if ti := out.Get(strconv.Itoa(c.index)); ti.Exists() {
						c.done = strings.Clone(ti.Raw)
					} else {
						c.dropped = true
					}
				}
			}
		}
		if err := e.emit(q); err != nil {
			return err
		}
		return e.flush()
	}
	oi := root.Get("output_index")
	if typ == "response.output_item.done" && !oi.Exists() {
		if item := root.Get("item"); isCallItem(item) {
			if idx, ok := e.unannounced[item.Get("id").String()]; ok && e.items[idx] == nil {
				// Its arguments named its place: judged there, so that removing it moves
				// the later items as the terminal response will.
				return e.lateCall(e.newItem(idx, item.Get("type").String()), idx, item.Raw, false)
			}
			return e.looseCall(q, item.Raw)
		}
	}
	if !strings.HasPrefix(typ, "response.") || !oi.Exists() {
		return e.emit(q)
	}
	i64, err := index(oi, maxStreamItems, "output_index")
	if err != nil {
		return err
	}
	idx := int(i64)
	it := e.items[idx]
	if typ == "response.output_item.added" && it == nil {
		it = e.newItem(idx, root.Get("item.type").String())
		if !isCallItem(root.Get("item")) {
			it.added = strings.Clone(root.Get("item").Raw)
		} else {
			c := &heldCall{index: idx, added: strings.Clone(root.Get("item").Raw)}
			c.size = len(c.added)
			it.call = c
			e.Push(queued{call: c}, c.size)
			return nil
		}
	}
	if it != nil && it.call != nil {
		return e.callEvent(it.call, typ, root)
	}
	if it == nil && isCallContentEvent(typ) {
		// The arguments of an item this stream never announced: a stream resumed inside a
		// call (GET /v1/responses/{id}?stream=true&starting_after=N). They are not relayed
		// unjudged; the call is judged, and rendered whole, at its output_item.done
		// (lateCall) or from the terminal response.
		if id := root.Get("item_id").String(); id != "" {
			if e.unannounced == nil {
				e.unannounced = map[string]int{}
			}
			if _, seen := e.unannounced[id]; !seen && len(e.unannounced) < maxStreamItems {
				e.unannounced[strings.Clone(id)] = idx
			}
		}
		return nil
	}
	if typ == "response.output_item.done" {
		announced := it != nil
		if it == nil {
			it = e.newItem(idx, root.Get("item.type").String())
		}
		if item := root.Get("item"); isCallItem(item) {
			return e.lateCall(it, idx, item.Raw, announced)
		}
		it.done = strings.Clone(root.Get("item").Raw)
	}
	return e.emit(q)
}

// newItem records an item of type typ at upstream index idx.
func (e *editor) newItem(idx int, typ string) *itemState {
	it := &itemState{typ: strings.Clone(typ)}
	e.items[idx] = it
	e.maxIndex = max(e.maxIndex, idx)
	return it
}

// isCallContentEvent reports whether an event of type typ carries a call's arguments (or
// custom tool input).
func isCallContentEvent(typ string) bool {
	switch typ {
	case "response.function_call_arguments.delta", "response.function_call_arguments.done",
		"response.custom_tool_call_input.delta", "response.custom_tool_call_input.done":
		return true
	}
	return false
}

// lateCall takes a call that the stream did not announce as one — its output_item.added
// named another type (a shell call said to run in a provider container, say), or there was
// none — and judges it like a held call, in its place among the calls: the done event
// that carries it never reaches the client unjudged (AHP-DEC-002). The held path judges
// the same call, from the terminal response.
func (e *editor) lateCall(it *itemState, idx int, item string, announced bool) error {
	c := &heldCall{index: idx, done: strings.Clone(item), complete: true, announced: announced}
	c.size = len(c.done)
	it.call = c
	e.Push(queued{call: c}, c.size)
	return e.flush()
}

// looseCall takes the call of an output_item.done without output_index. Codex runs the
// item of such an event all the same, so it is judged in its place among the calls; kept,
// it goes out as it came (re-rendered with the effective arguments of a modify), removed,
// it leaves no event. It has no index to keep, so no other item moves.
func (e *editor) looseCall(q queued, item string) error {
	q.raw, q.data, q.name = bytes.Clone(q.raw), bytes.Clone(q.data), strings.Clone(q.name) // the splitter reuses its buffers
	c := &heldCall{index: -1, done: strings.Clone(item), complete: true, loose: &q}
	c.size = len(c.done) + len(q.raw) + len(q.data)
	e.Push(queued{call: c}, c.size)
	return e.flush()
}

// decideLoose settles a call of looseCall, decoded where the held path puts it when the
// terminal response does not hold it: after the streamed items.
func (e *editor) decideLoose(c *heldCall) error {
	kept, out, err := e.decide(c.done, e.maxIndex+1)
	if err != nil {
		return err
	}
	if e.loose == nil {
		e.loose = map[string]string{}
	}
	key := mapping.CompactJSON(c.done)
	if !kept {
		e.changed = true
		e.dropped++
		e.loose[key] = ""
		return nil
	}
	e.loose[key] = out
	if out == c.done {
		return e.render(*c.loose)
	}
	e.changed = true
	return e.emitter()("response.output_item.done", "item", out)
}

// callEvent feeds one event of a held call. Its events other than the arguments (or custom
// tool input) and the done item — shell_call_command events, say — are dropped with it: the
// kept call is re-rendered from its done item.
func (e *editor) callEvent(c *heldCall, typ string, root gjson.Result) error {
	if c.complete {
		return nil // after its done: nothing more belongs to the call
	}
	switch typ {
	case "response.function_call_arguments.delta", "response.custom_tool_call_input.delta":
		d := root.Get("delta").String()
		c.args.WriteString(d)
		c.size += len(d)
		e.Grow(len(d))
	case "response.function_call_arguments.done":
		s := strings.Clone(root.Get("arguments").String())
		c.argsFinal = &s
	case "response.custom_tool_call_input.done":
		s := strings.Clone(root.Get("input").String())
		c.argsFinal = &s
	case "response.output_item.done":
		item := root.Get("item")
		if !item.IsObject() {
			// A done without its item finishes nothing the client could run: the call stays
			// unfinished, and the terminal response decides it, as on the held path.
			return nil
		}
		c.done = strings.Clone(item.Raw)
		c.complete = true
		return e.flush()
	}
	return nil
}

func (e *editor) endWith(raw []byte) error {
	if err := e.flush(); err != nil {
		return err
	}
	return e.Finish(e.out, raw)
}

// emit relays an event now, or queues it behind an undecided call.
func (e *editor) emit(q queued) error {
	if !e.Holding() {
		return e.render(q)
	}
	q.raw, q.data, q.name = bytes.Clone(q.raw), bytes.Clone(q.data), strings.Clone(q.name) // the splitter reuses its buffers
	e.Push(q, len(q.raw)+len(q.data))
	return nil
}

// flush relays the queue up to the first call not yet complete, deciding each complete
// call as it reaches the front (stream order).
func (e *editor) flush() error {
	return e.Release(func(q queued) (int, bool, error) {
		switch {
		case q.call == nil:
			return len(q.raw) + len(q.data), true, e.render(q)
		case !q.call.complete:
			return 0, false, nil
		}
		return q.call.size, true, e.decideHeld(q.call)
	})
}

// clientIndex is where upstream output item i is in the client's output.
func (e *editor) clientIndex(i int) int { return mapping.ShiftIndex(e.removed, i) }

// write sends one event the editor renders, numbered in sequence.
func (e *editor) write(typ string, data string) error {
	_, err := io.WriteString(e.out, "event: "+typ+"\ndata: "+data+"\n\n")
	return err
}

// render relays an event that carries no call: as it came while the stream is the
// upstream's, else with its output_index shifted and its sequence_number renumbered. The
// terminal event's response is rebuilt from what was judged.
func (e *editor) render(q queued) error {
	if q.data == nil {
		_, err := e.out.Write(q.raw) // a comment
		return err
	}
	root := gjson.Parse(mapping.BytesString(q.data))
	typ := root.Get("type").String()
	if typ == "" {
		typ = q.name
	}
	terminal := false
	switch typ {
	case "response.completed", "response.incomplete", "response.failed", "response.cancelled":
		terminal = true
	}
	data := mapping.BytesString(q.data) // copied only when rewritten
	rewrite := false
	var err error
	if terminal {
		e.Drain() // the calls only the terminal response holds are settled here
		if data, rewrite, err = e.terminal(data, root); err != nil {
			return err
		}
	}
	if oi := root.Get("output_index"); oi.Type == gjson.Number {
		if ci := e.clientIndex(int(oi.Int())); ci != int(oi.Int()) {
			if data, err = sjson.SetRaw(data, "output_index", strconv.Itoa(ci)); err != nil {
				return err
			}
			rewrite = true
		}
	}
	if sn := root.Get("sequence_number"); sn.Type == gjson.Number {
		if e.changed && sn.Int() != e.nextSeq {
			if data, err = sjson.SetRaw(data, "sequence_number", strconv.FormatInt(e.nextSeq, 10)); err != nil {
				return err
			}
			rewrite = true
		} else {
			e.nextSeq = sn.Int()
		}
		e.nextSeq++
	}
	out := q.raw
	if rewrite {
		name := q.name
		if name == "" {
			name = typ
		}
		out = []byte("event: " + name + "\ndata: " + mapping.CompactJSON(data) + "\n\n")
	}
	if terminal {
		return e.Finish(e.out, out)
	}
	_, err = e.out.Write(out)
	return err
}

// emitter returns WriteStream's event function, numbering from nextSeq.
func (e *editor) emitter() func(string, ...string) error {
	var buf []byte
	return func(typ string, kv ...string) error {
		buf = appendEvent(buf[:0], typ, e.nextSeq, kv...)
		e.nextSeq++
		return e.write(typ, string(buf))
	}
}

// decideHeld settles a held call item and emits it when it is kept.
func (e *editor) decideHeld(c *heldCall) error {
	if c.loose != nil {
		return e.decideLoose(c)
	}
	if c.dropped {
		e.changed = true
		e.removed = append(e.removed, c.index)
		return nil
	}
	item := c.done
	if item == "" {
		// No output_item.done: the item as announced, with the arguments (or custom tool
		// input) that came; the other call types are as announced.
		item = c.added
		if typ := gjson.Get(c.added, "type").String(); typ == "function_call" || typ == "custom_tool_call" {
			args := c.args.String()
			if c.argsFinal != nil {
				args = *c.argsFinal
			}
			var err error
			if item, err = patch(c.added, callTextField(typ), mapping.Quote(args)); err != nil {
				return err
			}
		}
	}
	e.changed = true // the call's events are re-rendered (or gone)
	it := e.items[c.index]
	pos := strconv.Itoa(e.clientIndex(c.index))
	if !isCallItem(gjson.Parse(item)) {
		// Announced as a call, finished as something else: nothing to judge.
		it.done = item
		return writeItem(e.emitter(), pos, gjson.Parse(item))
	}
	kept, out, err := e.decide(item, c.index)
	if err != nil {
		return err
	}
	switch {
	case !kept && c.announced:
		// The client has the item's added event: it is closed as it was announced, which
		// is not a call.
		it.done = it.added
		if it.done == "" {
			it.done = `{"type":` + mapping.Quote(it.typ) + `}`
		}
		return e.emitter()("response.output_item.done", "output_index", pos, "item", it.done)
	case !kept:
		e.removed = append(e.removed, c.index)
		it.done = ""
		return nil
	case c.announced:
		it.done = out
		return e.emitter()("response.output_item.done", "output_index", pos, "item", out)
	}
	it.done = out
	return writeItem(e.emitter(), pos, gjson.Parse(out))
}

// decide settles one call item: whether it is kept, and the item as the client gets it.
// The item is read with the decoder DecodeResponse reads the assembled response's call
// items with, at its upstream output index idx, so that a call without a call_id gets
// the id the held path derives from its position.
func (e *editor) decide(item string, idx int) (bool, string, error) {
	it := gjson.Parse(item)
	if !it.IsObject() || !clientCall(it) {
		return false, "", fmt.Errorf("openai responses stream: streamed tool call could not be read")
	}
	typ := it.Get("type").String()
	callID := itemCallID(it, hashID("call_", strconv.Itoa(idx), it.Raw))
	if callID == "" {
		return false, "", fmt.Errorf("openai responses stream: streamed tool call: %s without call_id: %w", typ, mapping.ErrMalformed)
	}
	name, input, _, err := callInput(it, typ, callID)
	if err != nil {
		return false, "", fmt.Errorf("openai responses stream: streamed tool call: %v: %w", err, mapping.ErrMalformed)
	}
	j, err := e.settle.Judge(callID, name, input, item, func(c mapping.ToolCall) (string, error) {
		args, err := callArguments(c, "")
		if err != nil {
			return "", err
		}
		return patchCallItem(item, typ, &callOrigin{id: callID, name: name, typ: typ, input: input}, c, args, "")
	})
	if err != nil || !j.Kept {
		if j.Note != "" {
			e.notes = append(e.notes, j.Note)
		}
		return false, "", err // as the settler gave it
	}
	e.kept++
	return true, j.Out, nil
}

// terminal rebuilds the terminal event's response from what was judged, and writes the
// notes' message item before it. It reports whether the event must be rewritten.
func (e *editor) terminal(data string, root gjson.Result) (string, bool, error) {
	resp := root.Get("response")
	out := resp.Get("output")
	if !resp.IsObject() || !out.IsArray() {
		// No output to rebuild (the SDKs then keep the items streamed); notes still go out,
		// and a turn left without calls is finished, as below.
		if err := e.writeNotes(e.maxIndex + 1); err != nil {
			return "", false, err
		}
		if !resp.IsObject() || !e.noCallLeft(resp) {
			return data, false, nil
		}
		data, err := e.finishTurn(data)
		return data, err == nil, err
	}
	term := out.Array()
	n := max(e.maxIndex+1, len(term))
	final := make([]string, 0, n+1)
	rebuilt := false
	for i := 0; i < n; i++ {
		st := e.items[i]
		var ti gjson.Result
		if i < len(term) {
			ti = term[i]
		}
		switch {
		case st != nil && st.call != nil:
			if st.done == "" {
				continue // removed
			}
			final = append(final, st.done)
			rebuilt = rebuilt || ti.Raw != st.done
		case st != nil && ti.Exists() && ti.Get("type").String() == st.typ && !isCallItem(ti):
			final = append(final, ti.Raw)
		case st != nil && st.done != "":
			// The terminal item is not the one streamed (or is missing): the client keeps
			// what it was shown.
			final = append(final, st.done)
			rebuilt = true
		case st != nil && !ti.Exists():
			rebuilt = true // announced, never completed, not in the terminal response
		case st != nil && !isCallItem(ti):
			// Announced but never completed, and the terminal holds something else that is
			// not a call: it takes the item's place, so later items keep the positions
			// their events gave them.
			final = append(final, ti.Raw)
			rebuilt = true
		case ti.Exists() && isCallItem(ti) && e.isLoose(ti.Raw):
			// A call judged from its output_item.done without output_index: as judged.
			out := e.loose[mapping.CompactJSON(ti.Raw)]
			switch {
			case out != "":
				final = append(final, out)
			case e.streamedAfter(i):
				final = append(final, e.placeholder(ti.Raw))
			}
			rebuilt = rebuilt || out != ti.Raw
		case ti.Exists() && isCallItem(ti):
			// A call only the terminal response holds: judged here.
			e.changed, rebuilt = true, true
			kept, item, err := e.decide(ti.Raw, i)
			if err != nil {
				return "", false, err
			}
			if kept {
				final = append(final, item)
			} else {
				e.dropped++
				if e.streamedAfter(i) {
					final = append(final, e.placeholder(ti.Raw))
				}
			}
		case ti.Exists():
			final = append(final, ti.Raw)
		}
	}
	if len(e.notes) > 0 {
		note := e.noteItem()
		if err := e.writeNotesItem(len(final), note); err != nil {
			return "", false, err
		}
		final = append(final, note)
		rebuilt = true
	}
	if !rebuilt {
		return data, false, nil
	}
	var err error
	if data, err = sjson.SetRaw(data, "response.output", "["+strings.Join(final, ",")+"]"); err != nil {
		return "", false, err
	}
	if e.noCallLeft(resp) {
		if data, err = e.finishTurn(data); err != nil {
			return "", false, err
		}
	}
	return data, true, nil
}

// noCallLeft reports whether every call was removed and the terminal response resp does
// not say the turn is finished: as on the held path, it must.
func (e *editor) noCallLeft(resp gjson.Result) bool {
	return e.kept == 0 && len(e.removed)+e.dropped > 0 && resp.Get("status").String() != e.t.TerminalFinishReason()
}

// finishTurn sets the terminal event's response to a finished turn.
func (e *editor) finishTurn(data string) (string, error) {
	r, err := setFinish(gjson.Get(data, "response").Raw, e.t.TerminalFinishReason())
	if err != nil {
		return "", err
	}
	return sjson.SetRaw(data, "response", r)
}

// streamedAfter reports whether the stream gave an item after upstream index i: the
// client has its events at a position that a removed call before it must not move.
func (e *editor) streamedAfter(i int) bool {
	for j := i + 1; j <= e.maxIndex; j++ {
		if e.items[j] != nil {
			return true
		}
	}
	return false
}

// placeholder is what takes the terminal response's place of a removed call that the
// stream never carried, when items the stream did carry come after it: a message saying
// so (the notes' message, at the end, says why), so that those items keep the positions
// their events gave them.
func (e *editor) placeholder(call string) string {
	return messageItem(hashID("msg_", e.respID, call), "[a tool call was removed here by policy]")
}

// isLoose reports whether item was judged by looseCall.
func (e *editor) isLoose(item string) bool {
	_, ok := e.loose[mapping.CompactJSON(item)]
	return ok
}

// writeNotes writes the notes' message item at client position of upstream index i.
func (e *editor) writeNotes(i int) error {
	if len(e.notes) == 0 {
		return nil
	}
	return e.writeNotesItem(e.clientIndex(i), e.noteItem())
}

func (e *editor) writeNotesItem(pos int, item string) error {
	e.notes = nil
	e.changed = true
	return writeItem(e.emitter(), strconv.Itoa(pos), gjson.Parse(item))
}

// noteItem is the assistant message that tells the agent about removed calls.
func (e *editor) noteItem() string {
	note := strings.Join(e.notes, "\n")
	return messageItem(hashID("msg_", e.respID, note), note)
}

// messageItem is a completed assistant message item holding text.
func messageItem(id, text string) string {
	return `{"id":` + mapping.Quote(id) + `,"type":"message","status":"completed","role":"assistant","content":[{"type":"output_text","text":` +
		mapping.Quote(text) + `,"annotations":[]}]}`
}
