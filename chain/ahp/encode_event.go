package ahp

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"slices"
	"strconv"
	"unsafe"

	"github.com/hookproxy/hookproxy/internal/jsontext"
)

// The request frames of the hooks/intercept and hooks/observe deliveries, written without
// reflection. An event is encoded once per delivery to every HTTP and stdio backend, and
// with encoding/json its reflection walk and string writer were about a quarter of a
// delivery's CPU at 32 KiB.
//
// The output is byte for byte what encoding/json gives for the same value through an
// Encoder with SetEscapeHTML(false), its trailing newline trimmed: the same member order,
// omitempty/omitzero exactly as the struct tags say, nil slices and maps as null where the
// tag has neither, map keys sorted, floats in encoding/json's form, strings escaped alike
// (invalid UTF-8 as \ufffd, U+2028/U+2029 escaped, \b \f \n \r \t short), and every
// json.RawMessage validated and compacted as json.Compact does. Retries resend the same
// bytes (AHP-CORE-004), and a backend may check a signature over them, so the encoding is
// part of the contract: TestEncoderMatchesEncodingJSON, FuzzEncodeEvent and
// TestEncoderKnowsEveryField hold it to encoding/json. A value encoding/json refuses (a NaN
// or infinite float, a RawMessage that is not one JSON value) is refused here too.

// AppendInterceptRequest appends the hooks/intercept JSON-RPC request whose id is the
// string id: {"jsonrpc":"2.0","id":…,"method":"hooks/intercept","params":…}.
func AppendInterceptRequest(dst []byte, id string, params *InterceptParams) ([]byte, error) {
	dst = append(dst, `{"jsonrpc":"2.0","id":`...)
	dst = appendRequestID(dst, id)
	dst = append(dst, `,"method":"`+MethodIntercept+`","params":`...)
	if params == nil {
		return append(dst, "null}"...), nil
	}
	w := eventWriter{b: dst}
	w.interceptParams(params)
	w.b = append(w.b, '}')
	return w.b, w.err
}

// AppendObserveNotification appends the hooks/observe JSON-RPC notification (no id).
func AppendObserveNotification(dst []byte, params *ObserveParams) ([]byte, error) {
	dst = append(dst, `{"jsonrpc":"2.0","method":"`+MethodObserve+`","params":`...)
	if params == nil {
		return append(dst, "null}"...), nil
	}
	w := eventWriter{b: dst}
	w.b = append(w.b, `{"protocolVersion":`...)
	w.str(params.ProtocolVersion)
	w.b = append(w.b, `,"event":`...)
	w.event(params.Event)
	w.b = append(w.b, "}}"...)
	return w.b, w.err
}

// appendRequestID appends the JSON-RPC id. The transport has always produced it with
// json.Marshal, which escapes <, > and & (HTML escaping is on there), unlike the params;
// an id that holds only plain ASCII is the same either way.
func appendRequestID(dst []byte, id string) []byte {
	for i := 0; i < len(id); i++ {
		if c := id[i]; c < 0x20 || c >= 0x80 || c == '"' || c == '\\' || c == '<' || c == '>' || c == '&' {
			raw, _ := json.Marshal(id) // a string always encodes
			return append(dst, raw...)
		}
	}
	dst = append(dst, '"')
	dst = append(dst, id...)
	return append(dst, '"')
}

// eventWriter appends JSON to b; the first value encoding/json would refuse sets err, and
// what follows it is written but discarded by the callers.
type eventWriter struct {
	b   []byte
	err error
}

func (w *eventWriter) fail(member string, err error) {
	if w.err == nil {
		w.err = fmt.Errorf("encoding %s: %w", member, err)
	}
}

func (w *eventWriter) str(s string) { w.b = appendJSONString(w.b, s) }

// key appends ,"name": (or "name": as the first member when comma is false).
func (w *eventWriter) key(comma bool, name string) {
	if comma {
		w.b = append(w.b, ',')
	}
	w.b = append(w.b, '"')
	w.b = append(w.b, name...)
	w.b = append(w.b, '"', ':')
}

func (w *eventWriter) boolean(v bool) { w.b = strconv.AppendBool(w.b, v) }

// raw appends a json.RawMessage as encoding/json does: nil is null; anything else must be
// one JSON value and is compacted (json.Compact). A value that is already compact and
// passes jsontext.Check (which accepts exactly what encoding/json accepts, and further
// refuses duplicate keys and depth beyond the limit) is copied as it is; every other value
// takes json.Compact itself, so the rare case is decided by encoding/json's own code.
func (w *eventWriter) raw(member string, m json.RawMessage) {
	if m == nil {
		w.b = append(w.b, "null"...)
		return
	}
	// IsCompact only reads the text during the call, so it gets m without a copy.
	if jsontext.Check(m, jsontext.MaxNesting) == nil && jsontext.IsCompact(unsafe.String(unsafe.SliceData(m), len(m))) {
		w.b = append(w.b, m...)
		return
	}
	buf := bytes.NewBuffer(w.b)
	if err := json.Compact(buf, m); err != nil {
		w.fail(member, err)
		return
	}
	w.b = buf.Bytes()
}

// float appends f in encoding/json's form: like strconv 'f' with the shortest
// representation, switching to an exponent below 1e-6 and from 1e21, and without the
// exponent's leading zero.
func (w *eventWriter) float(member string, f float64) {
	if math.IsInf(f, 0) || math.IsNaN(f) {
		w.fail(member, fmt.Errorf("unsupported value: %s", strconv.FormatFloat(f, 'g', -1, 64)))
		w.b = append(w.b, "null"...)
		return
	}
	format := byte('f')
	if a := math.Abs(f); a != 0 && (a < 1e-6 || a >= 1e21) {
		format = 'e'
	}
	w.b = strconv.AppendFloat(w.b, f, format, -1, 64)
	if format == 'e' {
		if n := len(w.b); n >= 4 && w.b[n-4] == 'e' && w.b[n-3] == '-' && w.b[n-2] == '0' {
			w.b[n-2] = w.b[n-1]
			w.b = w.b[:n-1]
		}
	}
}

// strings appends a []string; nil is null.
func (w *eventWriter) strings(v []string) {
	if v == nil {
		w.b = append(w.b, "null"...)
		return
	}
	w.b = append(w.b, '[')
	for i, s := range v {
		if i > 0 {
			w.b = append(w.b, ',')
		}
		w.str(s)
	}
	w.b = append(w.b, ']')
}

// rawMap appends a map of raw values with its keys sorted (nil is null).
func (w *eventWriter) rawMap(member string, m map[string]json.RawMessage) {
	if m == nil {
		w.b = append(w.b, "null"...)
		return
	}
	keys := make([]string, 0, 8)
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	w.b = append(w.b, '{')
	for i, k := range keys {
		if i > 0 {
			w.b = append(w.b, ',')
		}
		w.str(k)
		w.b = append(w.b, ':')
		w.raw(member, m[k])
	}
	w.b = append(w.b, '}')
}

func (w *eventWriter) interceptParams(p *InterceptParams) {
	w.b = append(w.b, `{"protocolVersion":`...)
	w.str(p.ProtocolVersion)
	w.b = append(w.b, `,"event":`...)
	w.event(p.Event)
	w.b = append(w.b, `,"capabilities":`...)
	w.capabilities(p.Capabilities)
	if p.State != nil {
		w.b = append(w.b, `,"state":`...)
		w.state(p.State)
	}
	if len(p.Extensions) > 0 {
		w.b = append(w.b, `,"extensions":`...)
		w.rawMap("params.extensions", p.Extensions)
	}
	w.b = append(w.b, '}')
}

func (w *eventWriter) event(ev *Event) {
	if ev == nil {
		w.b = append(w.b, "null"...)
		return
	}
	w.b = append(w.b, `{"id":`...)
	w.str(ev.ID)
	w.b = append(w.b, `,"source":`...)
	w.str(ev.Source)
	w.b = append(w.b, `,"type":`...)
	w.str(ev.Type)
	w.b = append(w.b, `,"time":`...)
	w.str(ev.Time)
	if ev.Session != nil {
		w.b = append(w.b, `,"session":{"id":`...)
		w.str(ev.Session.ID)
		w.synthesized(ev.Session.Synthesized)
		w.b = append(w.b, '}')
	}
	if ev.Turn != nil {
		w.b = append(w.b, `,"turn":{"id":`...)
		w.str(ev.Turn.ID)
		w.synthesized(ev.Turn.Synthesized)
		w.b = append(w.b, '}')
	}
	w.optStr("parentEventId", ev.ParentEventID)
	w.synthesized(ev.Synthesized)
	if m := ev.Model; m != nil {
		w.b = append(w.b, `,"model":{"id":`...)
		w.str(m.ID)
		w.b = append(w.b, `,"provider":`...)
		w.str(m.Provider)
		w.b = append(w.b, '}')
	}
	if a := ev.Attempt; a != nil {
		w.b = append(w.b, `,"attempt":{"id":`...)
		w.str(a.ID)
		w.b = append(w.b, `,"number":`...)
		w.b = strconv.AppendInt(w.b, int64(a.Number), 10)
		w.synthesized(a.Synthesized)
		w.b = append(w.b, '}')
	}
	w.optRaw("params", "event.params", ev.Params)
	if x := ev.Execution; x != nil {
		w.b = append(w.b, `,"execution":{"status":`...)
		w.str(x.Status)
		w.optStr("reason", x.Reason)
		w.optStr("detail", x.Detail)
		w.b = append(w.b, '}')
	}
	w.optStr("finishReason", ev.FinishReason)
	if ev.Usage != nil {
		w.usage(ev.Usage)
	}
	if ev.LatencyMs != nil {
		w.b = append(w.b, `,"latencyMs":`...)
		w.float("event.latencyMs", *ev.LatencyMs)
	}
	if e := ev.Error; e != nil {
		w.b = append(w.b, `,"error":{"message":`...)
		w.str(e.Message)
		w.b = append(w.b, `,"class":`...)
		w.str(e.Class)
		w.optStr("code", e.Code)
		w.optRaw("status", "event.error.status", e.Status)
		w.b = append(w.b, '}')
	}
	w.optStr("recovery", ev.Recovery)
	w.optStr("trigger", ev.Trigger)
	w.optStr("outcome", ev.Outcome)
	w.optInt("continuationCount", ev.ContinuationCount)
	if r := ev.LastAssistantItem; r != nil {
		w.b = append(w.b, `,"lastAssistantItem":{"id":`...)
		w.str(r.ID)
		w.b = append(w.b, '}')
	}
	if c := ev.Call; c != nil {
		w.b = append(w.b, `,"call":{"id":`...)
		w.str(c.ID)
		w.synthesized(c.Synthesized)
		w.b = append(w.b, '}')
	}
	if ev.Tool != nil {
		w.tool(ev.Tool)
	}
	w.optStr("path", ev.Path)
	if bt := ev.Batch; bt != nil {
		w.b = append(w.b, `,"batch":{"id":`...)
		w.str(bt.ID)
		if len(bt.CallIDs) > 0 {
			w.b = append(w.b, `,"callIds":`...)
			w.strings(bt.CallIDs)
		}
		w.synthesized(bt.Synthesized)
		w.b = append(w.b, '}')
	}
	if ev.DurationMs != nil {
		w.b = append(w.b, `,"durationMs":`...)
		w.float("event.durationMs", *ev.DurationMs)
	}
	if f := ev.Failure; f != nil {
		w.b = append(w.b, `,"failure":{"backendId":`...)
		w.str(f.BackendID)
		w.b = append(w.b, `,"reason":`...)
		w.str(f.Reason)
		w.b = append(w.b, `,"policy":`...)
		w.str(f.Policy)
		w.b = append(w.b, '}')
	}
	if ev.Items != nil { // omitzero: an empty list is present as []
		w.b = append(w.b, `,"items":[`...)
		for i := range ev.Items {
			if i > 0 {
				w.b = append(w.b, ',')
			}
			w.message(&ev.Items[i])
		}
		w.b = append(w.b, ']')
	}
	if len(ev.Gaps) > 0 {
		w.b = append(w.b, `,"gaps":`...)
		w.gaps(ev.Gaps)
	}
	w.optRaw("native", "event.native", ev.Native)
	if len(ev.Extensions) > 0 {
		w.b = append(w.b, `,"extensions":`...)
		w.rawMap("event.extensions", ev.Extensions)
	}
	w.b = append(w.b, '}')
}

// optStr appends ,"name":s unless s is empty (omitempty).
func (w *eventWriter) optStr(name, s string) {
	if s != "" {
		w.key(true, name)
		w.str(s)
	}
}

// optRaw appends ,"name":raw unless raw is empty (omitempty on a json.RawMessage).
func (w *eventWriter) optRaw(name, member string, m json.RawMessage) {
	if len(m) > 0 {
		w.key(true, name)
		w.raw(member, m)
	}
}

func (w *eventWriter) optInt(name string, n *int) {
	if n != nil {
		w.key(true, name)
		w.b = strconv.AppendInt(w.b, int64(*n), 10)
	}
}

func (w *eventWriter) optInt64(name string, n *int64) {
	if n != nil {
		w.key(true, name)
		w.b = strconv.AppendInt(w.b, *n, 10)
	}
}

func (w *eventWriter) synthesized(v bool) {
	if v {
		w.b = append(w.b, `,"synthesized":true`...)
	}
}

func (w *eventWriter) usage(u *Usage) {
	w.b = append(w.b, `,"usage":{"kind":`...)
	w.str(u.Kind)
	w.b = append(w.b, `,"scope":`...)
	w.str(u.Scope)
	w.b = append(w.b, `,"completeness":`...)
	w.str(u.Completeness)
	w.b = append(w.b, `,"provenance":`...)
	w.str(u.Provenance)
	w.optInt64("inputTokens", u.InputTokens)
	w.optInt64("outputTokens", u.OutputTokens)
	w.optInt64("cacheReadTokens", u.CacheReadTokens)
	w.optInt64("cacheWriteTokens", u.CacheWriteTokens)
	w.b = append(w.b, '}')
}

func (w *eventWriter) tool(t *Tool) {
	w.b = append(w.b, `,"tool":{"name":`...)
	w.str(t.Name)
	w.b = append(w.b, `,"input":`...)
	w.raw("event.tool.input", t.Input)
	w.b = append(w.b, `,"origin":`...)
	w.str(t.Origin)
	w.optStr("kind", t.Kind)
	if m := t.MCP; m != nil {
		w.b = append(w.b, `,"mcp":{"server":{"id":`...)
		w.str(m.Server.ID)
		w.optStr("name", m.Server.Name)
		w.b = append(w.b, `},"toolName":`...)
		w.str(m.ToolName)
		w.b = append(w.b, `,"provenance":`...)
		w.str(m.Provenance)
		c := &m.Connection
		w.b = append(w.b, `,"connection":{"transport":`...)
		w.str(c.Transport)
		w.optStr("url", c.URL)
		w.optStr("command", c.Command)
		if len(c.Args) > 0 {
			w.b = append(w.b, `,"args":`...)
			w.strings(c.Args)
		}
		if len(c.Gaps) > 0 {
			w.b = append(w.b, `,"gaps":`...)
			w.gaps(c.Gaps)
		}
		w.b = append(w.b, "}}"...)
	}
	w.b = append(w.b, '}')
}

// gaps appends a non-nil list of gaps.
func (w *eventWriter) gaps(gs []Gap) {
	w.b = append(w.b, '[')
	for i := range gs {
		if i > 0 {
			w.b = append(w.b, ',')
		}
		w.gap(&gs[i])
	}
	w.b = append(w.b, ']')
}

func (w *eventWriter) gap(g *Gap) {
	w.b = append(w.b, '{')
	if g.Path != "" {
		w.b = append(w.b, `"path":`...)
		w.str(g.Path)
		w.b = append(w.b, ',')
	}
	w.b = append(w.b, `"reason":`...)
	w.str(g.Reason)
	w.b = append(w.b, '}')
}

// message appends one item: a message, or a bare part (BarePart's members follow the
// message's, as encoding/json promotes an embedded struct's fields in its place).
func (w *eventWriter) message(m *Message) {
	w.b = append(w.b, `{"id":`...)
	w.str(m.ID)
	w.optStr("role", m.Role)
	if m.Parts != nil { // omitzero
		w.b = append(w.b, `,"parts":[`...)
		for i := range m.Parts {
			if i > 0 {
				w.b = append(w.b, ',')
			}
			p := &m.Parts[i]
			w.b = append(w.b, `{"id":`...)
			w.str(p.ID)
			w.partBody(p.Kind, p.MediaType, p.Selection, p.Category, p.Text, p.Body, p.Gap, p.Size, p.SHA256)
			w.synthesized(p.Synthesized)
			w.b = append(w.b, '}')
		}
		w.b = append(w.b, ']')
	}
	w.synthesized(m.Synthesized)
	if b := m.BarePart; b != nil {
		w.partBody(b.Kind, b.MediaType, b.Selection, b.Category, b.Text, b.Body, b.Gap, b.Size, b.SHA256)
	}
	w.b = append(w.b, '}')
}

// partBody appends the members a Part and a BarePart share, in their declared order.
func (w *eventWriter) partBody(kind, mediaType, selection, category string, text *string, body *Ref, gap *Gap, size *int64, sha string) {
	w.b = append(w.b, `,"kind":`...)
	w.str(kind)
	w.b = append(w.b, `,"mediaType":`...)
	w.str(mediaType)
	w.b = append(w.b, `,"selection":`...)
	w.str(selection)
	w.optStr("category", category)
	if text != nil {
		w.b = append(w.b, `,"text":`...)
		w.str(*text)
	}
	if body != nil {
		w.b = append(w.b, `,"body":{"ref":`...)
		w.str(body.Ref)
		w.b = append(w.b, '}')
	}
	if gap != nil {
		w.b = append(w.b, `,"gap":`...)
		w.gap(gap)
	}
	w.optInt64("size", size)
	w.optStr("sha256", sha)
}

func (w *eventWriter) capabilities(c *Capabilities) {
	if c == nil {
		w.b = append(w.b, "null"...)
		return
	}
	w.b = append(w.b, `{"effects":`...)
	w.strings(c.Effects)
	if len(c.Modify) > 0 {
		keys := make([]string, 0, 8)
		for k := range c.Modify {
			keys = append(keys, k)
		}
		slices.Sort(keys)
		w.b = append(w.b, `,"modify":{`...)
		for i, k := range keys {
			if i > 0 {
				w.b = append(w.b, ',')
			}
			w.str(k)
			ops := c.Modify[k]
			w.b = append(w.b, `:{"replace":`...)
			w.boolean(ops.Replace)
			w.b = append(w.b, `,"merge":`...)
			w.boolean(ops.Merge)
			w.b = append(w.b, '}')
		}
		w.b = append(w.b, '}')
	}
	if f := c.Flow; f != nil {
		w.b = append(w.b, `,"flow":{"operations":`...)
		w.strings(f.Operations)
		w.optInt("remainingContinuations", f.RemainingContinuations)
		w.optInt("continuationCount", f.ContinuationCount)
		w.optInt("maxContinuations", f.MaxContinuations)
		w.b = append(w.b, '}')
	}
	if in := c.Inject; in != nil {
		w.b = append(w.b, `,"inject":{"context":{"append":`...)
		w.boolean(in.Context.Append)
		w.b = append(w.b, `,"deliverAt":`...)
		w.strings(in.Context.DeliverAt)
		w.b = append(w.b, "}}"...)
	}
	if e := c.Elicitation; e != nil {
		w.b = append(w.b, `,"elicitation":{`...)
		if e.Form != nil {
			w.b = append(w.b, `"form":{}`...)
		}
		if e.URL != nil {
			w.key(e.Form != nil, "url")
			w.b = append(w.b, "{}"...)
		}
		w.b = append(w.b, '}')
	}
	w.b = append(w.b, '}')
}

func (w *eventWriter) state(s *State) {
	w.b = append(w.b, `{"permission":`...)
	w.str(s.Permission)
	w.b = append(w.b, `,"candidate":`...)
	if s.Candidate == nil {
		w.b = append(w.b, "null"...)
	} else {
		w.b = append(w.b, `{"value":`...)
		w.raw("state.candidate.value", s.Candidate.Value)
		w.b = append(w.b, '}')
	}
	w.optStr("flow", s.Flow)
	if len(s.Instructions) > 0 {
		w.b = append(w.b, `,"instructions":`...)
		w.strings(s.Instructions)
	}
	if len(s.Injections) > 0 {
		w.b = append(w.b, `,"injections":[`...)
		for i := range s.Injections {
			if i > 0 {
				w.b = append(w.b, ',')
			}
			w.effect(&s.Injections[i])
		}
		w.b = append(w.b, ']')
	}
	w.b = append(w.b, '}')
}

func (w *eventWriter) effect(e *Effect) {
	w.b = append(w.b, `{"type":`...)
	w.str(e.Type)
	w.optStr("reason", e.Reason)
	w.optStr("code", e.Code)
	if e.Text != nil {
		w.b = append(w.b, `,"text":`...)
		w.str(*e.Text)
	}
	w.optStr("target", e.Target)
	w.optStr("operation", e.Operation)
	w.optStr("deliverAt", e.DeliverAt)
	if e.Instruction != nil {
		w.b = append(w.b, `,"instruction":`...)
		w.str(*e.Instruction)
	}
	w.optRaw("value", "state.injections.value", e.Value)
	if len(e.Extensions) > 0 {
		w.b = append(w.b, `,"extensions":`...)
		w.rawMap("state.injections.extensions", e.Extensions)
	}
	w.b = append(w.b, '}')
}
