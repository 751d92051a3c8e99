package transport

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"unicode/utf8"

	"github.com/hookproxy/hookproxy/chain/ahp"
)

// fail builds an operational failure. The text is always a short local description:
// callers never format backend-supplied bytes or credentials into it.
func fail(kind Kind, format string, args ...any) *Error {
	return &Error{Kind: kind, Err: fmt.Errorf(format, args...)}
}

// ctxFailure classifies the end of ctx: the subscription deadline (KindTimeout) or an
// interruption of the enclosing operation (KindCancelled). AHP-FAIL-002.
func ctxFailure(ctx context.Context, during string) *Error {
	err := ctx.Err()
	if err == nil {
		// Callers only ask once ctx is done; treat anything else as a cancellation.
		err = context.Canceled
	}
	if errors.Is(err, context.DeadlineExceeded) {
		return &Error{Kind: KindTimeout, Err: fmt.Errorf("deadline exceeded %s: %w", during, err)}
	}
	return &Error{Kind: KindCancelled, Err: fmt.Errorf("cancelled %s: %w", during, err)}
}

// interceptFrame encodes the hooks/intercept request once. The same bytes are used for
// every retry, so a retry is byte-equivalent to the first attempt (AHP-CORE-004), and the
// JSON-RPC id is the event id (AHP spec, execution-payloads.md). The encoder writes
// exactly what encoding/json would, without its reflection (ahp.AppendInterceptRequest).
func interceptFrame(id string, params *ahp.InterceptParams) ([]byte, error) {
	sb := frameScratch.Get().(*[]byte)
	b, err := ahp.AppendInterceptRequest((*sb)[:0], id, params)
	frame := ownFrame(sb, b, err)
	if err != nil {
		return nil, fail(KindMalformed, "encoding hooks/intercept request: %v", err)
	}
	return frame, nil
}

// observeFrame encodes the hooks/observe notification (a JSON-RPC notification: no id, no reply).
func observeFrame(params *ahp.ObserveParams) ([]byte, error) {
	sb := frameScratch.Get().(*[]byte)
	b, err := ahp.AppendObserveNotification((*sb)[:0], params)
	frame := ownFrame(sb, b, err)
	if err != nil {
		return nil, fail(KindMalformed, "encoding hooks/observe notification: %v", err)
	}
	return frame, nil
}

// frameScratch holds the buffers frames are encoded into. A frame is then copied out once
// at its exact size: the HTTP client may still be reading a request body after the
// response has arrived, and a retry resends it, so the frame itself is never recycled.
// Encoding into a warm buffer spares the growth copies of a 32 KiB event.
var frameScratch = sync.Pool{New: func() any { b := make([]byte, 0, 16<<10); return &b }}

// maxScratch bounds the buffer kept for reuse, so one huge event does not stay pinned.
const maxScratch = 1 << 20

// ownFrame copies the encoded b out of the scratch buffer (nothing when encoding failed)
// and returns the buffer to the pool.
func ownFrame(sb *[]byte, b []byte, err error) []byte {
	var frame []byte
	if err == nil {
		frame = append([]byte(nil), b...) // not zeroed first, unlike make
	}
	if cap(b) <= maxScratch {
		*sb = b[:0]
		frameScratch.Put(sb)
	}
	return frame
}

// checkReplyFrame checks the framing of a reply: valid UTF-8 and exactly one JSON object
// (a batch, a scalar or trailing data is a framing error; AHP spec, base/failure.md
// "Failure classes"). The JSON-RPC and AHP content of the object is validated by the chain.
func checkReplyFrame(frame []byte) error {
	if !utf8.Valid(frame) {
		return fail(KindMalformed, "reply is not valid UTF-8")
	}
	trimmed := bytes.TrimLeft(frame, " \t\r\n")
	if len(trimmed) == 0 {
		return fail(KindMalformed, "reply is empty")
	}
	if trimmed[0] != '{' {
		return fail(KindMalformed, "reply is not a single JSON object")
	}
	if !json.Valid(trimmed) {
		return fail(KindMalformed, "reply is not valid JSON")
	}
	return nil
}

// replyIDMatches reports whether the reply object's JSON-RPC id is the string id. Callers
// have already checked the frame with checkReplyFrame.
func replyIDMatches(frame []byte, id string) bool {
	var head struct {
		ID json.RawMessage `json:"id"`
	}
	if json.Unmarshal(frame, &head) != nil || len(head.ID) == 0 || head.ID[0] != '"' {
		return false
	}
	var got string
	if json.Unmarshal(head.ID, &got) != nil {
		return false
	}
	return got == id
}

// responseFrame encodes an in-process result as the JSON-RPC response a remote backend
// would have sent, so that the chain validates every interceptor's answer the same way.
func responseFrame(id string, result *ahp.InterceptResult) ([]byte, error) {
	if f, ok := emptyResultFrame(id, result); ok {
		return f, nil
	}
	rawID, err := json.Marshal(id)
	if err != nil {
		return nil, err
	}
	rawResult, err := json.Marshal(result)
	if err != nil {
		return nil, err
	}
	// What json.Marshal(ahp.Response{...}) writes, without compacting the result a second
	// time: both parts are encoding/json's own output, compact and HTML-escaped.
	frame := make([]byte, 0, len(rawID)+len(rawResult)+32)
	frame = append(frame, `{"jsonrpc":"2.0","id":`...)
	frame = append(frame, rawID...)
	frame = append(frame, `,"result":`...)
	frame = append(frame, rawResult...)
	return append(frame, '}'), nil
}

// emptyResultFrame is responseFrame of a result without effects or extensions (what a
// policy answers when it has no opinion, most of the time), written without reflection;
// the bytes are encoding/json's. ok is false for any other result, or when a string needs
// escaping.
func emptyResultFrame(id string, result *ahp.InterceptResult) ([]byte, bool) {
	if len(result.Effects) != 0 || result.Extensions != nil || !plainString(id) || !plainString(result.ProtocolVersion) {
		return nil, false
	}
	effects := `[]`
	if result.Effects == nil {
		effects = `null`
	}
	frame := make([]byte, 0, len(id)+len(result.ProtocolVersion)+80)
	frame = append(frame, `{"jsonrpc":"2.0","id":"`...)
	frame = append(frame, id...)
	frame = append(frame, `","result":{"protocolVersion":"`...)
	frame = append(frame, result.ProtocolVersion...)
	frame = append(frame, `","effects":`...)
	frame = append(frame, effects...)
	return append(frame, "}}"...), true
}

// plainString reports whether encoding/json writes s as it is between quotes: printable
// ASCII without the characters it escapes (quote, backslash, and <, >, & as HTML-safe).
func plainString(s string) bool {
	for i := 0; i < len(s); i++ {
		switch c := s[i]; {
		case c < 0x20 || c > 0x7e, c == '"', c == '\\', c == '<', c == '>', c == '&':
			return false
		}
	}
	return true
}
