package proxy

import (
	"bytes"
	"errors"
	"net/http"
	"strings"

	"go.uber.org/zap"

	"github.com/hookproxy/hookproxy/mapping/mcp"
)

// The GET stream of an MCP session (Streamable HTTP): the server sends requests and
// notifications on it, and, when a client resumes a POST's stream with Last-Event-ID, the
// responses that stream still owed. A response arriving there answers no POST hookproxy is
// holding, so nothing pairs it with a tools/call and no tool.after could check it, while
// a client pairs it by id with whatever it is still waiting for (the TypeScript SDK does).
// While tool.after is subscribed, responses on a GET stream are therefore refused (left
// out of the event), and so is a message event hookproxy cannot read. The results of
// calls a POST stream left unanswered were failed when that stream ended (mcpStream.finish),
// so resuming loses no result a client could still have taken.

// errMCPEncodedStream refuses a GET stream in a content coding, which the filter cannot
// read (hookproxy asked for identity).
var errMCPEncodedStream = errors.New("the MCP server's GET stream is in a content coding hookproxy did not ask for")

// filterGetStream puts the filter in place of an SSE answer to a GET.
func (h *mcpHandler) filterGetStream(resp *http.Response) error {
	if resp.StatusCode < 200 || resp.StatusCode > 299 || !isEventStream(resp.Header.Get("Content-Type")) {
		return nil
	}
	if ce := resp.Header.Get("Content-Encoding"); ce != "" && !strings.EqualFold(ce, "identity") {
		resp.Body.Close()
		return errMCPEncodedStream
	}
	resp.Body = newMCPEventFilter(resp.Body, h.env.Limits.MaxResponseBytes, h.filterGetEvent)
	resp.ContentLength = -1
	resp.Header.Del("Content-Length")
	return nil
}

// filterGetEvent relays one event of a GET stream without its responses.
func (h *mcpHandler) filterGetEvent(ev mcp.Event, out *bytes.Buffer) {
	data, ok := ev.MessageData()
	if !ok {
		out.Write(ev.Raw)
		return
	}
	body, err := mcp.ParseBody(data)
	if err != nil {
		h.log.Warn("mcp: dropped a message event of the GET stream that is not valid JSON-RPC", zap.String("route", h.prefix))
		return
	}
	keep := make([][]byte, 0, len(body.Messages))
	for _, m := range body.Messages {
		if m.Kind == mcp.KindResponse {
			continue
		}
		keep = append(keep, m.Raw)
	}
	switch {
	case len(keep) == len(body.Messages):
		out.Write(ev.Raw)
	case len(keep) > 0:
		ev.WriteWithData(out, body.Encode(keep))
	default:
		h.log.Warn("mcp: refused a response on the GET stream: it answers no request hookproxy is holding", zap.String("route", h.prefix))
	}
}
