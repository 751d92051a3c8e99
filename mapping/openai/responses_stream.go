package openai

import (
	"encoding/json"
	"fmt"
	"io"
	"sort"
	"strconv"
	"strings"

	"github.com/tidwall/gjson"
	"github.com/tidwall/sjson"

	"github.com/hookproxy/hookproxy/mapping"
)

// maxStreamOutputItems bounds the output items a stream may open.
const maxStreamOutputItems = 4096

// NewAssembler implements mapping.Translator. The terminal event (response.completed,
// response.incomplete) carries the whole response; the assembler returns it, and rebuilds
// the output from output_item and delta events only when that response has none.
func (r *Responses) NewAssembler() mapping.Assembler {
	a := &responsesAssembler{items: map[int64]*streamItem{}}
	a.sse.dispatch = a.event
	return a
}

type responsesAssembler struct {
	sse      sseReader
	err      error
	upstream *mapping.UpstreamError
	final    string // the response object of the terminal event
	snapshot string // the latest response object seen (created / in_progress)
	items    map[int64]*streamItem
}

// streamItem accumulates one output item.
type streamItem struct {
	added, done string // item JSON of output_item.added / output_item.done
	text        map[int64]*strings.Builder
	refusal     map[int64]*strings.Builder
	args        strings.Builder
}

// Write implements mapping.Assembler; like the chat assembler it never fails, and Body
// reports problems.
func (a *responsesAssembler) Write(p []byte) (int, error) {
	if a.err == nil && a.upstream == nil && a.final == "" {
		if err := a.sse.write(p); err != nil && a.err == nil && a.upstream == nil {
			a.err = err
		}
	}
	return len(p), nil
}

func (a *responsesAssembler) event(name string, data []byte) error {
	if a.final != "" {
		return nil
	}
	valid := json.Valid(data)
	var ev gjson.Result
	if valid {
		ev = gjson.Parse(string(data))
	}
	typ := ev.Get("type").String()
	if typ == "" {
		typ = name
	}
	switch {
	case typ == "error" || name == "error":
		msg := ev.Get("message").String()
		if msg == "" {
			msg = ev.Get("error.message").String()
		}
		if msg == "" {
			msg = string(data)
		}
		code := ev.Get("code").String()
		if code == "" {
			code = ev.Get("error.type").String()
		}
		a.upstream = &mapping.UpstreamError{Type: code, Message: msg}
		return nil
	case !valid || !ev.IsObject():
		return fmt.Errorf("stream event is not a JSON object")
	}
	switch typ {
	case "response.created", "response.in_progress", "response.queued":
		if r := ev.Get("response"); r.IsObject() {
			a.snapshot = r.Raw
		}
	case "response.completed", "response.incomplete":
		r := ev.Get("response")
		if !r.IsObject() {
			return fmt.Errorf("%s event without a response object", typ)
		}
		a.final = r.Raw
	case "response.failed":
		e := ev.Get("response.error")
		a.upstream = &mapping.UpstreamError{Type: e.Get("code").String(), Message: e.Get("message").String()}
	case "response.output_item.added", "response.output_item.done":
		it, err := a.item(ev)
		if err != nil {
			return err
		}
		raw := ev.Get("item")
		if !raw.IsObject() {
			return fmt.Errorf("%s event without an item", typ)
		}
		if typ == "response.output_item.added" {
			it.added = raw.Raw
		} else {
			it.done = raw.Raw
		}
	case "response.output_text.delta", "response.refusal.delta":
		it, err := a.item(ev)
		if err != nil {
			return err
		}
		m := &it.text
		if typ == "response.refusal.delta" {
			m = &it.refusal
		}
		if *m == nil {
			*m = map[int64]*strings.Builder{}
		}
		ci := ev.Get("content_index").Int()
		if (*m)[ci] == nil {
			if len(*m) >= maxStreamOutputItems {
				return fmt.Errorf("stream has too many content parts")
			}
			(*m)[ci] = &strings.Builder{}
		}
		(*m)[ci].WriteString(ev.Get("delta").String())
	case "response.function_call_arguments.delta", "response.custom_tool_call_input.delta":
		it, err := a.item(ev)
		if err != nil {
			return err
		}
		it.args.WriteString(ev.Get("delta").String())
	}
	return nil
}

// item returns the accumulator of the event's output_index.
func (a *responsesAssembler) item(ev gjson.Result) (*streamItem, error) {
	k := ev.Get("output_index").Int()
	if k < 0 || k >= maxStreamOutputItems {
		return nil, fmt.Errorf("stream output index %d out of range", k)
	}
	it := a.items[k]
	if it == nil {
		it = &streamItem{}
		a.items[k] = it
	}
	return it, nil
}

// Body implements mapping.Assembler.
func (a *responsesAssembler) Body() ([]byte, error) {
	if a.err == nil && a.upstream == nil && a.final == "" {
		if err := a.sse.close(); err != nil {
			a.err = fmt.Errorf("ended inside an event: %w", err)
		}
	}
	switch {
	case a.upstream != nil:
		return nil, a.upstream
	case a.err != nil:
		return nil, fmt.Errorf("openai responses stream: %w", a.err)
	case a.final == "":
		return nil, fmt.Errorf("openai responses stream: ended before response.completed")
	}
	if out := gjson.Get(a.final, "output"); out.IsArray() && len(out.Array()) > 0 || len(a.items) == 0 {
		return []byte(a.final), nil
	}
	// The terminal response came without its output: rebuild it from the item events.
	keys := make([]int64, 0, len(a.items))
	for k := range a.items {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(i, j int) bool { return keys[i] < keys[j] })
	items := make([]string, 0, len(keys))
	for _, k := range keys {
		raw, err := a.items[k].rebuild()
		if err != nil {
			return nil, fmt.Errorf("openai responses stream: output[%d]: %w", k, err)
		}
		if raw != "" {
			items = append(items, raw)
		}
	}
	out, err := sjson.SetRaw(a.final, "output", "["+strings.Join(items, ",")+"]")
	if err != nil {
		return nil, fmt.Errorf("openai responses stream: %w", err)
	}
	return []byte(out), nil
}

// rebuild returns the item: the done event's, else the added event's completed by deltas.
func (it *streamItem) rebuild() (string, error) {
	if it.done != "" {
		return it.done, nil
	}
	raw := it.added
	if raw == "" {
		return "", nil
	}
	var err error
	switch gjson.Get(raw, "type").String() {
	case kindMessage:
		for _, src := range []struct {
			m    map[int64]*strings.Builder
			typ  string
			name string
		}{{it.text, "output_text", "text"}, {it.refusal, "refusal", "refusal"}} {
			for ci, b := range src.m {
				path := "content." + strconv.FormatInt(ci, 10)
				if !gjson.Get(raw, path).Exists() {
					raw, err = sjson.SetRaw(raw, path, `{"type":`+jsonString(src.typ)+`}`)
					if err != nil {
						return "", err
					}
				}
				if raw, err = sjson.SetRaw(raw, path+"."+src.name, jsonString(b.String())); err != nil {
					return "", err
				}
			}
		}
	case kindFunctionCall:
		raw, err = sjson.SetRaw(raw, "arguments", jsonString(it.args.String()))
	case kindCustomCall:
		raw, err = sjson.SetRaw(raw, "input", jsonString(it.args.String()))
	}
	return raw, err
}

// WriteStream implements mapping.Translator: body (a complete response object) as the
// Responses API's own event stream: response.created and response.in_progress, then per
// output item output_item.added, its content (content_part.added, output_text.delta,
// output_text.done, content_part.done; or function_call_arguments.delta/.done) and
// output_item.done, and finally response.completed (or .incomplete / .failed).
func (r *Responses) WriteStream(w io.Writer, body []byte) error {
	if !json.Valid(body) {
		return fmt.Errorf("openai responses: response is not JSON: %w", mapping.ErrMalformed)
	}
	resp := compactJSON(string(body))
	root := gjson.Parse(resp)
	output := root.Get("output")
	if !root.IsObject() || !output.IsArray() {
		return fmt.Errorf("openai responses: response has no output array: %w", mapping.ErrMalformed)
	}
	ew := &responsesEventWriter{sse: newSSEWriter(w)}
	pending, err := sjson.SetRaw(resp, "output", "[]")
	if err == nil {
		pending, err = sjson.SetRaw(pending, "status", `"in_progress"`)
	}
	if err != nil {
		return fmt.Errorf("openai responses: %w", err)
	}
	if err := ew.emit("response.created", `"response":`+pending); err != nil {
		return err
	}
	if err := ew.emit("response.in_progress", `"response":`+pending); err != nil {
		return err
	}
	k := 0
	output.ForEach(func(_, it gjson.Result) bool {
		err = ew.item(k, it)
		k++
		return err == nil
	})
	if err != nil {
		return err
	}
	final := "response.completed"
	switch root.Get("status").Str {
	case "incomplete":
		final = "response.incomplete"
	case "failed":
		final = "response.failed"
	}
	return ew.emit(final, `"response":`+resp)
}

// responsesEventWriter numbers and writes Responses stream events.
type responsesEventWriter struct {
	sse *sseWriter
	seq int
}

// emit writes one event; fields are the event's members besides type and sequence_number.
func (ew *responsesEventWriter) emit(typ, fields string) error {
	b := make([]byte, 0, len(typ)+len(fields)+48)
	b = append(b, `{"type":`...)
	b = appendJSONString(b, typ)
	b = append(b, `,"sequence_number":`...)
	b = strconv.AppendInt(b, int64(ew.seq), 10)
	if fields != "" {
		b = append(b, ',')
		b = append(b, fields...)
	}
	b = append(b, '}')
	ew.seq++
	return ew.sse.event(typ, b)
}

// item writes the events of one output item.
func (ew *responsesEventWriter) item(k int, it gjson.Result) error {
	idx := `"output_index":` + strconv.Itoa(k)
	itemID := `"item_id":` + jsonString(it.Get("id").String())
	typ := it.Get("type").String()
	added := it.Raw
	var err error
	switch typ {
	case kindMessage:
		added, err = setFields(added, "content", "[]", "status", `"in_progress"`)
	case kindFunctionCall:
		added, err = setFields(added, "arguments", `""`, "status", `"in_progress"`)
	}
	if err != nil {
		return fmt.Errorf("openai responses: %w", err)
	}
	if err := ew.emit("response.output_item.added", idx+`,"item":`+added); err != nil {
		return err
	}
	switch typ {
	case kindMessage:
		ci := 0
		it.Get("content").ForEach(func(_, part gjson.Result) bool {
			err = ew.contentPart(idx, itemID, ci, part)
			ci++
			return err == nil
		})
	case kindFunctionCall:
		args := argumentsString(it.Get("arguments"))
		if err = ew.emit("response.function_call_arguments.delta", itemID+","+idx+`,"delta":`+jsonString(args)); err == nil {
			err = ew.emit("response.function_call_arguments.done", itemID+","+idx+`,"arguments":`+jsonString(args))
		}
	}
	if err != nil {
		return err
	}
	return ew.emit("response.output_item.done", idx+`,"item":`+it.Raw)
}

// contentPart writes the events of one content part of a message item.
func (ew *responsesEventWriter) contentPart(idx, itemID string, ci int, part gjson.Result) error {
	at := itemID + "," + idx + `,"content_index":` + strconv.Itoa(ci)
	typ := part.Get("type").String()
	empty := part.Raw
	var err error
	switch typ {
	case "output_text":
		empty, err = sjson.SetRaw(empty, "text", `""`)
	case "refusal":
		empty, err = sjson.SetRaw(empty, "refusal", `""`)
	}
	if err != nil {
		return fmt.Errorf("openai responses: %w", err)
	}
	if err := ew.emit("response.content_part.added", at+`,"part":`+empty); err != nil {
		return err
	}
	switch typ {
	case "output_text":
		text := part.Get("text").String()
		for _, piece := range splitText(text, streamContentPiece) {
			if err := ew.emit("response.output_text.delta", at+`,"delta":`+jsonString(piece)+`,"logprobs":[]`); err != nil {
				return err
			}
		}
		if err := ew.emit("response.output_text.done", at+`,"text":`+jsonString(text)+`,"logprobs":[]`); err != nil {
			return err
		}
	case "refusal":
		text := part.Get("refusal").String()
		if err := ew.emit("response.refusal.delta", at+`,"delta":`+jsonString(text)); err != nil {
			return err
		}
		if err := ew.emit("response.refusal.done", at+`,"refusal":`+jsonString(text)); err != nil {
			return err
		}
	}
	return ew.emit("response.content_part.done", at+`,"part":`+part.Raw)
}
