package proxy

import (
	"bytes"
	"context"
	"maps"
	"net/http"
	"strconv"
	"time"

	"github.com/tidwall/gjson"
	"github.com/tidwall/sjson"
	"go.uber.org/zap"

	"github.com/hookproxy/hookproxy/approvals"
	"github.com/hookproxy/hookproxy/chain"
	"github.com/hookproxy/hookproxy/chain/ahp"
	"github.com/hookproxy/hookproxy/config"
	"github.com/hookproxy/hookproxy/enforcement"
	"github.com/hookproxy/hookproxy/mapping/mcp"
	"github.com/hookproxy/hookproxy/pinning"
)

// Pinning on an MCP route: the tools of every tools/list result are compared with the
// route's pins (scope "mcp:" + server id) before the client sees them; a tool that
// pinning strips is taken out of result.tools, and a tools/call of a tool it blocks is
// answered here with a refusal and never forwarded. notifications/tools/list_changed is
// relayed as it comes: the list the client then asks for is the one compared.

const methodToolsList = "tools/list"

// mcpPinList is the pinning state of a POST that holds tools/list requests.
type mcpPinList struct {
	ids     map[string]bool // mcp.IDKey of the tools/list requests
	paged   map[string]bool // those that asked for a later page (params.cursor)
	session *ahp.Session
}

func (h *mcpHandler) pinScope() string { return "mcp:" + h.serverID }

// servePinned looks at a POST before the usual handling. It answers a body holding a
// tools/call that pinning refuses (or, under onChange ask, that a person did not approve),
// and forwards a body holding tools/list requests with the list check in place. Otherwise
// it returns the request to go on with (body put back, the pin scope in its context so a
// tool.before settlement applies the same verdicts) and false.
func (h *mcpHandler) servePinned(w http.ResponseWriter, r *http.Request) (*http.Request, bool) {
	limit := h.env.Limits.MaxRequestBytes
	if r.ContentLength > limit {
		h.writeRPCError(w, http.StatusRequestEntityTooLarge, nil, mcp.CodeInvalidRequest, h.tooLargeMessage())
		return r, true
	}
	raw, err := readAllLimited(r.Body, limit, r.ContentLength)
	if err != nil {
		h.mcpReadError(w, r, err)
		return r, true
	}
	if len(r.Header.Values("Content-Encoding")) > 0 {
		// The names judged are those of the decoded body, which is what goes upstream.
		if raw, err = decodeRequestBody(r.Header, raw, limit); err != nil {
			h.mcpCodingError(w, err)
			return r, true
		}
		r.Header.Del("Content-Encoding")
	}
	setInboundBody(r, raw)
	r = r.WithContext(withPinCheck(r.Context(), &pinCheck{env: h.pins, scope: h.pinScope()}))
	body, err := mcp.ParseBody(raw)
	if err != nil {
		return r, false // the usual handling answers what it cannot read
	}
	pl := &mcpPinList{ids: map[string]bool{}, paged: map[string]bool{}}
	blocked := map[int]string{}
	asked := map[int]string{}
	hasCall := false
	for i := range body.Messages {
		m := &body.Messages[i]
		if m.Kind == mcp.KindRequest && m.Method == methodToolsList {
			k := mcp.IDKey(m.ID)
			pl.ids[k] = true
			if c := gjson.GetBytes(m.Raw, "params.cursor"); c.Exists() && c.Type != gjson.Null {
				pl.paged[k] = true
			}
		}
		call, isCall, cerr := mcp.ToolCallOf(m)
		if !isCall || cerr != nil {
			continue
		}
		hasCall = true
		reason, ask, err := h.pins.pinner.CallVerdict(r.Context(), h.pinScope(), call.Name)
		switch {
		case err != nil:
			h.log.Warn("pinning: the pins could not be read; the call is judged without them", zap.String("route", h.prefix), zap.String("error", safeError(err)))
		case reason != "" && ask:
			asked[i] = reason
		case reason != "":
			blocked[i] = reason
		}
	}
	if len(asked) > 0 && !h.subscriptions().before {
		// No tool.before settlement would hold the call: it is held here.
		if len(body.Messages) != 1 {
			maps.Copy(blocked, asked) // a batch is not held call by call: refused
		} else if reason, ok := asked[0]; ok && !h.holdForApproval(r, body, reason) {
			blocked[0] = "" // answered by holdForApproval
		}
	}
	switch {
	case len(blocked) > 0:
		h.refuseBlocked(w, r, body, blocked)
		return r, true
	case len(pl.ids) == 0 || hasCall:
		// No list, or a (2025-03-26) batch that mixes one with calls: the calls take the
		// usual path and that list goes unchecked (docs/pinning.md).
		return r, false
	}
	pl.session, _ = h.sessionOf(r)
	h.forwardWith(w, r, &mcpState{pinList: pl})
	return r, true
}

// holdForApproval holds the single tools/call of body until a person decides (onChange
// ask) and reports whether it was approved. Without an approval path (no admin listener)
// it is not.
func (h *mcpHandler) holdForApproval(r *http.Request, body *mcp.Body, reason string) bool {
	a := h.env.Approvals
	if a == nil {
		return false
	}
	call, _, _ := mcp.ToolCallOf(&body.Messages[0])
	session, _ := h.sessionOf(r)
	sid := ""
	if session != nil {
		sid = session.ID
	}
	o := a.Service.Hold(r.Context(), approvals.Ask{Route: h.prefix, Session: sid, Tool: call.Name, Input: call.Arguments,
		Generation: a.Generation, AskedBy: []string{pinsBackendID}, Reasons: []string{reason}}, 0, nil)
	h.log.Info("held MCP tool call decided", zap.String("approval", o.Record.ID), zap.String("tool", call.Name),
		zap.String("decision", o.Decision), zap.String("by", o.By), zap.Duration("waited", o.Waited))
	return o.Approved
}

// refuseBlocked answers a POST holding calls of blocked tools, none of it forwarded: each
// blocked call gets a tool result with isError carrying the reason (as a tool.before deny
// is answered), every other request of a batch a JSON-RPC error saying why it was not
// sent.
func (h *mcpHandler) refuseBlocked(w http.ResponseWriter, r *http.Request, body *mcp.Body, blocked map[int]string) {
	var out [][]byte
	session, _ := h.sessionOf(r)
	for i := range body.Messages {
		m := &body.Messages[i]
		if reason, ok := blocked[i]; ok {
			call, _, _ := mcp.ToolCallOf(m)
			if reason == "" {
				reason = "Tool call " + call.Name + " changed since it was pinned and was not approved."
			}
			out = append(out, mcp.ResultResponse(m.ID, mcp.DenialResult(reason)))
			h.auditPinRefusal(r.Context(), session, call, reason)
			continue
		}
		if m.Kind == mcp.KindRequest {
			out = append(out, mcp.ErrorResponse(m.ID, mcp.CodeInvalidRequest,
				"hookproxy: not sent: a tools/call in the same batch was refused", nil))
		}
	}
	hd := w.Header()
	hd.Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusOK)
	_, _ = w.Write(body.Encode(out))
}

// auditPinRefusal records a refused call as the tool.before it stands for.
func (h *mcpHandler) auditPinRefusal(ctx context.Context, session *ahp.Session, call *mcp.ToolCall, reason string) {
	if h.env.Auditor == nil {
		return
	}
	ev := &ahp.Event{ID: ahp.NewEventID(), Source: h.env.Source, Type: ahp.EventToolBefore, Time: eventTime(), Session: session}
	rec := BoundaryRecord{Time: time.Now().UTC(), Route: h.prefix, API: config.APIMCP, EventID: ev.ID,
		EventType: ahp.EventToolBefore, ToolName: call.Name, Delivery: DeliveryIntercept, Enforcement: enforcement.Refused,
		Permission: ahp.PermissionDeny, Flow: ahp.FlowNone, Event: ev,
		Denial: &chain.Denial{Reason: reason, Code: codeToolDefinition, BackendID: pinsBackendID}}
	if session != nil {
		rec.SessionID = session.ID
	}
	h.env.Auditor.OnBoundary(ctx, rec)
}

// pinListResponse puts the list check on the server's answer to a tools/list POST.
func (h *mcpHandler) pinListResponse(resp *http.Response, pl *mcpPinList) error {
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		return nil
	}
	ct := resp.Header.Get("Content-Type")
	if !isEventStream(ct) && !isJSONMedia(ct) {
		return nil
	}
	if err := decodeResponseBody(resp); err != nil {
		resp.Body.Close()
		return err
	}
	ctx := resp.Request.Context()
	if isEventStream(ct) {
		// An SSE answer is relayed event by event, the list results checked (and tools
		// taken out) as they pass.
		resp.Body = newMCPEventFilter(resp.Body, h.env.Limits.MaxResponseBytes, func(ev mcp.Event, out *bytes.Buffer) {
			if data, ok := ev.MessageData(); ok {
				if body, changed := h.pinBody(ctx, pl, data); changed {
					ev.WriteWithData(out, body)
					return
				}
			}
			out.Write(ev.Raw)
		})
		resp.ContentLength = -1
		resp.Header.Del("Content-Length")
		return nil
	}
	raw, err := readAllLimited(resp.Body, h.env.Limits.MaxResponseBytes, resp.ContentLength)
	resp.Body.Close()
	if err != nil {
		return err
	}
	if out, changed := h.pinBody(ctx, pl, raw); changed {
		raw = out
	}
	setMCPBody(resp, raw)
	return nil
}

// pinBody checks the tools/list results of one JSON-RPC body (a JSON answer or one SSE
// event's data) and returns it with stripped tools taken out.
func (h *mcpHandler) pinBody(ctx context.Context, pl *mcpPinList, raw []byte) ([]byte, bool) {
	body, err := mcp.ParseBody(raw)
	if err != nil {
		return raw, false
	}
	msgs := make([][]byte, len(body.Messages))
	changed := false
	for i := range body.Messages {
		m := &body.Messages[i]
		msgs[i] = m.Raw
		if m.Kind != mcp.KindResponse || m.Err != nil || !pl.ids[mcp.IDKey(m.ID)] {
			continue
		}
		if out, ch := h.pinResult(ctx, pl, m); ch {
			msgs[i], changed = out, true
		}
	}
	if !changed {
		return raw, false
	}
	return body.Encode(msgs), true
}

// pinResult checks one ListToolsResult.
func (h *mcpHandler) pinResult(ctx context.Context, pl *mcpPinList, m *mcp.Message) ([]byte, bool) {
	list := gjson.GetBytes(m.Result, "tools")
	if !list.IsArray() {
		return m.Raw, false
	}
	var tools []pinning.Tool
	var index []int // position in result.tools of tools[i]
	for i, t := range list.Array() {
		name := t.Get("name")
		if name.Type != gjson.String {
			continue
		}
		tools = append(tools, pinning.Tool{Name: name.Str, Description: t.Get("description").String(), Schema: rawOf(t.Get("inputSchema"))})
		index = append(index, i)
	}
	next := gjson.GetBytes(m.Result, "nextCursor")
	complete := !pl.paged[mcp.IDKey(m.ID)] && (!next.Exists() || next.Type == gjson.Null || next.Str == "")
	v, err := h.pins.pinner.Check(ctx, h.pinScope(), tools, complete)
	if err != nil {
		h.log.Warn("pinning: the pins could not be read or written; the list passes unchecked", zap.String("route", h.prefix), zap.String("error", safeError(err)))
		return m.Raw, false
	}
	h.pins.report(ctx, h.prefix, config.APIMCP, h.pinScope(), pl.session, v.Changes)
	if !v.Stripping() {
		return m.Raw, false
	}
	out := m.Raw
	for j := len(tools) - 1; j >= 0; j-- {
		if !v.Strip(tools[j].Name) {
			continue
		}
		if out, err = sjson.DeleteBytes(out, "result.tools."+strconv.Itoa(index[j])); err != nil {
			// Never pass on a list with a tool that had to go: the client gets an error.
			return mcp.ErrorResponse(m.ID, mcp.CodeInternalError, "hookproxy could not remove a changed tool from the list", nil), true
		}
	}
	return out, true
}

// rawOf is a gjson value's JSON text, nil when it is absent.
func rawOf(v gjson.Result) []byte {
	if !v.Exists() {
		return nil
	}
	return []byte(v.Raw)
}
