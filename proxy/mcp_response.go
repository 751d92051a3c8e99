package proxy

import (
	"bytes"
	"errors"
	"io"
	"mime"
	"net/http"
	"strconv"
	"strings"

	"go.uber.org/zap"

	"github.com/hookproxy/hookproxy/chain/ahp"
	"github.com/hookproxy/hookproxy/enforcement"
	"github.com/hookproxy/hookproxy/mapping/mcp"
)

// Response side of an MCP POST: the server's results pass tool.after before the caller
// sees them, whether the server answered with JSON or with an SSE stream.

// onResponse is the reverse proxy's ModifyResponse for a POST that held tools/call.
func (x *mcpExchange) onResponse(resp *http.Response) error {
	check := x.subs.after && x.callsPending()
	if !check && len(x.local) == 0 {
		return nil
	}
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		// The server refused the POST (unknown session, bad request, ...): its answer goes
		// to the caller as is, and no result exists to check.
		msg := "the MCP server answered HTTP " + strconv.Itoa(resp.StatusCode)
		for _, c := range x.pendingCalls() {
			x.observeResolved(c, "error", ahp.SkipOther, msg,
				&ahp.ErrorInfo{Message: msg, Class: "mcp_http", Status: jsonStatus(resp.StatusCode)})
		}
		x.settleAll()
		return nil
	}
	ct := resp.Header.Get("Content-Type")
	switch {
	case isEventStream(ct):
		resp.Body = newMCPStream(x, resp.Body, check)
		resp.ContentLength = -1
		resp.Header.Del("Content-Length")
		return nil
	case isJSONMedia(ct):
		return x.rewriteJSON(resp, check)
	}
	// 202 Accepted (the server took only notifications and responses) or an answer that
	// is no JSON-RPC at all: the local answers, and a failure for every call still
	// waiting, are the answer. A result hookproxy cannot read is never passed on.
	if !check && resp.StatusCode != http.StatusAccepted && resp.ContentLength != 0 {
		return nil // nothing to check, and nothing to merge the local answers into
	}
	_ = resp.Body.Close()
	reason := "the MCP server answered the tools/call with no result"
	if ct != "" && resp.StatusCode != http.StatusAccepted {
		reason = "the MCP server answered the tools/call with Content-Type " + strconv.Quote(ct)
	}
	x.replaceWith(resp, append(x.failPending(reason), x.local...))
	return nil
}

// rewriteJSON checks the results in a JSON answer and merges the local answers into it.
func (x *mcpExchange) rewriteJSON(resp *http.Response, check bool) error {
	raw, err := readAllLimited(resp.Body, x.h.env.Limits.MaxResponseBytes, resp.ContentLength)
	_ = resp.Body.Close()
	if err != nil {
		if x.ctx.Err() != nil {
			return errInterrupted
		}
		reason := "the MCP server's answer could not be read"
		if errors.Is(err, errBodyTooLarge) {
			reason = "the MCP server's answer exceeds the proxy limit of " + strconv.FormatInt(x.h.env.Limits.MaxResponseBytes, 10) + " bytes"
		}
		x.replaceWith(resp, append(x.failPending(reason), x.local...))
		return nil
	}
	body, err := mcp.ParseBody(raw)
	if err != nil {
		if !check {
			setMCPBody(resp, raw) // only local answers to merge, into something unreadable: pass it on
			return nil
		}
		x.replaceWith(resp, append(x.failPending("the MCP server's answer is not valid JSON-RPC: "+err.Error()), x.local...))
		return nil
	}
	msgs, changed, err := x.results(body, check)
	if err != nil {
		return err
	}
	if check && x.callsPending() {
		// A JSON answer is the whole answer to the POST: a call it holds no result for
		// (its response refused, or missing) gets an error now rather than never.
		msgs = append(msgs, x.failPending("the MCP server's answer holds no result for this tools/call")...)
		changed = true
	}
	switch {
	case len(x.local) > 0:
		// Local answers exist only for batches (a single request answered here never
		// reaches the server), so the merged answer is a batch.
		setMCPBody(resp, mcp.EncodeBatch(append(msgs, x.local...)))
	case changed:
		setMCPBody(resp, body.Encode(msgs))
	default:
		setMCPBody(resp, raw)
	}
	return nil
}

// mcpAwaited is one request that went to the server: the keys its response is paired by
// (mcp.IDKey, mcp.LooseIDKey), the tools/call it is (nil for any other request) and
// whether its response came.
type mcpAwaited struct {
	exact, loose string
	call         *mcpCallSt
	answered     bool
}

// claim pairs the response m with the request it answers, first by JSON value and then as
// the MCP TypeScript SDK pairs (mapping/mcp ids.go), and marks that request answered. ok
// is false when m answers no request still waiting: it is refused (not relayed), since a
// client pairing ids more loosely than hookproxy could take it for the answer to a call
// whose result was never checked. call is the tools/call m answers, or nil.
func (x *mcpExchange) claim(m *mcp.Message) (call *mcpCallSt, ok bool) {
	exact, loose := mcp.IDKey(m.ID), mcp.LooseIDKey(m.ID)
	var found *mcpAwaited
	for _, a := range x.awaiting {
		if !a.answered && a.exact == exact {
			found = a
			break
		}
	}
	if found == nil && loose != "" {
		for _, a := range x.awaiting {
			if !a.answered && a.loose == loose {
				found = a
				break
			}
		}
	}
	if found == nil {
		return nil, false
	}
	found.answered = true
	return found.call, true
}

// results pairs and checks the messages of one server answer (a JSON body or one SSE
// event): a response to a tools/call passes tool.after, a response that answers no
// waiting request is left out (refused), everything else is kept as it came. It returns
// the messages the caller receives and whether they differ from the server's.
func (x *mcpExchange) results(body *mcp.Body, check bool) ([][]byte, bool, error) {
	msgs := make([][]byte, 0, len(body.Messages)+len(x.local))
	changed := false
	for i := range body.Messages {
		m := &body.Messages[i]
		if !check || m.Kind != mcp.KindResponse {
			msgs = append(msgs, m.Raw)
			continue
		}
		c, ok := x.claim(m)
		switch {
		case !ok:
			x.h.log.Warn("mcp: refused a response from the server whose id answers no request of this POST",
				zap.String("route", x.h.prefix))
			changed = true
			continue
		case c == nil:
			msgs = append(msgs, m.Raw)
			continue
		}
		out, ch, err := x.resolve(c, m)
		if err != nil {
			return nil, false, err
		}
		msgs = append(msgs, out)
		changed = changed || ch
	}
	return msgs, changed, nil
}

// callsPending reports whether a forwarded tools/call still waits for its result.
func (x *mcpExchange) callsPending() bool { return len(x.pendingCalls()) > 0 }

// pendingCalls lists the calls still waiting for a result, in body order.
func (x *mcpExchange) pendingCalls() []*mcpCallSt {
	var out []*mcpCallSt
	for _, a := range x.awaiting {
		if a.call != nil && !a.answered {
			out = append(out, a.call)
		}
	}
	return out
}

// settleAll marks every request answered: nothing more from the server is paired.
func (x *mcpExchange) settleAll() {
	for _, a := range x.awaiting {
		a.answered = true
	}
}

// failPending answers every call still waiting with a JSON-RPC error naming reason, and
// reports each as tool.after with outcome error.
func (x *mcpExchange) failPending(reason string) [][]byte {
	var out [][]byte
	for _, c := range x.pendingCalls() {
		x.observeResolved(c, "error", "", "", &ahp.ErrorInfo{Message: reason, Class: "mcp_protocol"})
		out = append(out, mcp.ErrorResponse(c.call.ID, mcp.CodeInternalError, "hookproxy: "+reason, nil))
	}
	x.settleAll()
	return out
}

// resolve runs tool.after for the server's response m to call c and returns the message
// the caller receives and whether it differs from m.
func (x *mcpExchange) resolve(c *mcpCallSt, m *mcp.Message) ([]byte, bool, error) {
	if m.Err != nil {
		// A protocol-level error (unknown tool, invalid arguments): no result to check.
		msg := x.scrub(m.Err.Message)
		if len(msg) > 512 {
			msg = strings.ToValidUTF8(msg[:512], "")
		}
		x.observeResolved(c, "error", ahp.SkipOther, "the MCP server answered with a JSON-RPC error",
			&ahp.ErrorInfo{Message: msg, Class: "mcp_error", Code: strconv.Itoa(m.Err.Code)})
		return m.Raw, false, nil
	}
	res, err := mcp.ParseResult(m.Result)
	if err != nil {
		// Fail closed: a result no policy could read must not reach the caller.
		x.h.log.Warn("mcp: the server's tools/call result is malformed", zap.String("route", x.h.prefix), zap.Error(err))
		x.observeResolved(c, "error", "", "", &ahp.ErrorInfo{Message: "the MCP server's result is malformed", Class: "mcp_protocol"})
		return mcp.ErrorResponse(c.call.ID, mcp.CodeInternalError,
			"hookproxy could not check the MCP server's tools/call result: "+err.Error(), nil), true, nil
	}
	if res.InputRequired {
		// Not a resolved call: the client answers the server's input requests and calls
		// again, and that call passes tool.before and tool.after like any other.
		return m.Raw, false, nil
	}
	final, err := x.toolAfter(c, res, ahp.Execution{Status: ahp.ExecutionExecuted})
	if err != nil {
		return nil, false, err
	}
	if bytes.Equal(final, res.Raw) {
		return m.Raw, false, nil
	}
	out, err := mcp.ReplaceResult(m.Raw, final)
	if err != nil {
		return mcp.ResultResponse(c.call.ID, mcp.DenialResult("hookproxy could not apply a policy edit to the tool result.")), true, nil
	}
	return out, true, nil
}

// toolAfter settles tool.after for a result (the server's, or a supplied one) and returns
// the CallToolResult the caller receives.
func (x *mcpExchange) toolAfter(c *mcpCallSt, res *mcp.Result, exec ahp.Execution) ([]byte, error) {
	if !x.subs.after {
		return res.Raw, nil
	}
	out := mcp.NewOutput(c.callID+".result", res)
	ev := x.newEvent(ahp.EventToolAfter, c)
	ev.ParentEventID = c.beforeID
	ev.Outcome = "ok"
	if res.IsError {
		// The tool's own error text is content (items), subject to content selection; it is
		// not copied into error.message, which no selection policy covers.
		ev.Outcome = "error"
		ev.Error = &ahp.ErrorInfo{Message: "the MCP tool reported an error (isError)", Class: "tool_error"}
	}
	ev.Execution = &exec
	ev.Items = out.Items
	st := x.settle(ev, capsMCPToolAfter())
	switch {
	case st.Interrupted || x.ctx.Err() != nil:
		x.audit(ev, st, DeliveryIntercept, enforcement.Refused, c)
		return nil, errInterrupted
	case st.Refused():
		// Only a fail-closed failure refuses here (tool.after admits no deny): the result
		// is withheld.
		reason, _ := denialText(st.Denial)
		x.audit(ev, st, DeliveryIntercept, enforcement.Refused, c)
		return mcp.DenialResult(reason), nil
	case st.Modified && st.Event != nil:
		b, err := out.Apply(st.Event.Items)
		if err != nil {
			// The edit cannot be rendered; the unedited result must not go out instead.
			x.h.log.Error("mcp: applying modify(output) failed", zap.String("route", x.h.prefix), zap.Error(err))
			x.audit(ev, st, DeliveryIntercept, enforcement.Refused, c)
			return mcp.DenialResult("hookproxy could not apply a policy edit to the tool result."), nil
		}
		x.audit(ev, st, DeliveryIntercept, enforcement.Rewritten, c)
		return b, nil
	}
	x.audit(ev, st, DeliveryIntercept, enforcement.Forwarded, c)
	return res.Raw, nil
}

// onForwardError reports the calls the server never answered because it could not be
// reached.
func (x *mcpExchange) onForwardError() {
	for _, c := range x.pendingCalls() {
		x.observeResolved(c, "error", ahp.SkipOther, "the MCP server could not be reached",
			&ahp.ErrorInfo{Message: "hookproxy could not reach the MCP server", Class: "mcp_http"})
	}
	x.settleAll()
}

// replaceWith makes msgs the whole answer: HTTP 200, JSON, a batch unless the request was
// a single message and msgs is one message.
func (x *mcpExchange) replaceWith(resp *http.Response, msgs [][]byte) {
	resp.StatusCode, resp.Status = http.StatusOK, "200 OK"
	resp.Header.Set("Content-Type", "application/json")
	resp.Header.Del("Content-Encoding")
	setMCPBody(resp, x.body.Encode(msgs))
}

func setMCPBody(resp *http.Response, b []byte) {
	resp.Body = io.NopCloser(bytes.NewReader(b))
	resp.ContentLength = int64(len(b))
	resp.Header.Set("Content-Length", strconv.Itoa(len(b)))
}

// isJSONMedia reports whether a Content-Type is JSON (application/json or a +json type).
func isJSONMedia(ct string) bool {
	mt, _, err := mime.ParseMediaType(ct)
	if err != nil {
		return false
	}
	return mt == "application/json" || strings.HasSuffix(mt, "+json")
}
