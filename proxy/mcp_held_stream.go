package proxy

import (
	"bytes"
	"mime"
	"net/http"
	"strconv"
	"strings"

	"github.com/hookproxy/hookproxy/mapping/mcp"
)

// An MCP tools/call held for approval whose request carries a progressToken, from a
// client that accepts text/event-stream, is answered as an SSE stream from the moment the
// hold starts: notifications/progress go out while the call waits (MCP Streamable HTTP
// lets a server send notifications related to a request before its response), then the
// answer follows on the same stream. Everything that decides what the answer holds
// (tool.after, pinning, redaction, audit) runs exactly as on the JSON path; this file
// only changes how the finished answer is framed.

// approvalProgressMessage is the message of the progress notifications of a held call.
const approvalProgressMessage = "waiting for approval"

// mcpHeldStream is the SSE answer of a POST whose call waits for approval. Only the
// request's goroutine writes to it.
type mcpHeldStream struct {
	w        http.ResponseWriter
	progress int // the last progress value sent: it increases across every held call of the POST
}

// acceptsEventStream reports whether the request's Accept admits text/event-stream (a
// Streamable HTTP client lists it with application/json).
func acceptsEventStream(h http.Header) bool {
	for _, v := range h.Values("Accept") {
		for _, part := range strings.Split(v, ",") {
			mt, params, err := mime.ParseMediaType(strings.TrimSpace(part))
			if err != nil || !strings.EqualFold(mt, "text/event-stream") {
				continue
			}
			if q, err := strconv.ParseFloat(params["q"], 64); err == nil && q == 0 {
				continue // q=0: explicitly not acceptable
			}
			return true
		}
	}
	return false
}

// startHeldStream commits the answer to SSE: status 200 and the SSE headers go out now.
func startHeldStream(w http.ResponseWriter) *mcpHeldStream {
	h := w.Header()
	h.Del("Content-Length")
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-cache")
	w.WriteHeader(http.StatusOK)
	_ = http.NewResponseController(w).Flush()
	return &mcpHeldStream{w: w}
}

// notifyProgress sends the next notifications/progress for token.
func (s *mcpHeldStream) notifyProgress(token []byte) {
	s.progress++
	s.message(mcp.ProgressNotification(token, s.progress, approvalProgressMessage))
}

// message sends one JSON-RPC message (or batch) as an SSE message event.
func (s *mcpHeldStream) message(msg []byte) {
	var b bytes.Buffer
	mcp.WriteMessageEvent(&b, msg)
	_, _ = s.w.Write(b.Bytes())
	_ = http.NewResponseController(s.w).Flush()
}

// relay returns the ResponseWriter the reverse proxy writes the server's (already
// checked) answer to; finish completes the stream once the proxy returns.
func (s *mcpHeldStream) relay(x *mcpExchange) *mcpHeldRelay {
	return &mcpHeldRelay{s: s, x: x, hdr: http.Header{}, limit: x.h.env.Limits.MaxResponseBytes}
}

// mcpHeldRelay takes the reverse proxy's answer after a held call was approved. An SSE
// answer's events pass through as they come (the SSE headers already went out, so the
// server's headers are not sent). Any other answer is collected and becomes one message
// event: a JSON-RPC body as it is, anything else (a non-2xx status without a JSON-RPC
// answer to this request) a JSON-RPC error, since the status can no longer be changed.
type mcpHeldRelay struct {
	s      *mcpHeldStream
	x      *mcpExchange
	hdr    http.Header
	status int
	stream bool
	buf    bytes.Buffer
	limit  int64
	over   bool
}

func (r *mcpHeldRelay) Header() http.Header { return r.hdr }

func (r *mcpHeldRelay) WriteHeader(code int) {
	if r.status != 0 || code < 200 {
		return // a second status, or an informational one: the stream is already 200
	}
	r.status = code
	r.stream = code >= 200 && code <= 299 && isEventStream(r.hdr.Get("Content-Type"))
}

func (r *mcpHeldRelay) Write(p []byte) (int, error) {
	if r.status == 0 {
		r.WriteHeader(http.StatusOK)
	}
	if r.stream {
		return r.s.w.Write(p)
	}
	if int64(r.buf.Len()+len(p)) > r.limit {
		r.over = true
		return len(p), nil
	}
	return r.buf.Write(p)
}

// Flush lets the reverse proxy push each relayed SSE event to the client at once.
func (r *mcpHeldRelay) Flush() {
	if r.stream {
		_ = http.NewResponseController(r.s.w).Flush()
	}
}

// finish writes a collected answer as one message event.
func (r *mcpHeldRelay) finish() {
	if r.stream || r.x.ctx.Err() != nil {
		return
	}
	raw := r.buf.Bytes()
	var reason string
	switch body, err := mcp.ParseBody(raw); {
	case r.over:
		reason = "the MCP server's answer exceeds the proxy limit of " + strconv.FormatInt(r.limit, 10) + " bytes"
	case err == nil && answersRequests(body):
		r.s.message(raw)
		return
	case r.status < 200 || r.status > 299:
		reason = "the MCP server answered HTTP " + strconv.Itoa(r.status)
	default:
		reason = "the MCP server answered the tools/call with no result"
	}
	r.x.failPending(reason) // the calls still awaited are reported as failed
	r.s.message(mcp.ErrorResponse(r.x.body.SingleID(), mcp.CodeInternalError, "hookproxy: "+reason, nil))
}

// answersRequests reports whether a collected body holds at least one response with an
// id: a body of notifications only, or an error with a null id (a server that could not
// read the request), pairs with no request the client waits on.
func answersRequests(b *mcp.Body) bool {
	for i := range b.Messages {
		m := &b.Messages[i]
		if m.Kind == mcp.KindResponse && len(m.ID) > 0 && string(m.ID) != "null" {
			return true
		}
	}
	return false
}
