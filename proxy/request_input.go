package proxy

// Request input the chain must not miss outside a mapped endpoint's POST: a body on a
// method that takes none, and a JSON body an unmapped endpoint receives under a media
// type other than JSON (or with none). An upstream reads input from any method and, often,
// JSON whatever the Content-Type says; hookproxy cannot examine what it does not read, so
// it reads the body as the upstream may, or refuses it.

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"mime"
	"net/http"
	"strings"

	"github.com/hookproxy/hookproxy/mapping"
)

// hasBody reports whether r carries a body. A body of unknown length (chunked) is probed
// for one byte: when there is none, r goes on with no body; when there is one, the body is
// left unusable, which is fine: such a request is refused.
func hasBody(r *http.Request) bool {
	switch {
	case r.Body == nil || r.Body == http.NoBody || r.ContentLength == 0:
		return false
	case r.ContentLength > 0:
		return true
	}
	var one [1]byte
	if n, _ := io.ReadFull(r.Body, one[:]); n > 0 {
		return true
	}
	r.Body, r.ContentLength = http.NoBody, 0
	return false
}

// bodyRefused answers a request that carries a body on a method that takes none: 400 in
// the route's format. Forwarded, the body would reach the upstream unexamined.
func (rt *route) bodyRefused(method string) *httpError {
	return &httpError{status: http.StatusBadRequest, body: rt.errorBody(http.StatusBadRequest,
		mapping.InvalidRequestType(rt.provider()), "",
		"hookproxy refuses a "+method+" request with a body: the body would reach the upstream unexamined; send input with POST")}
}

// sniffsJSON reports whether a body of this Content-Type must be sniffed for JSON before
// it is forwarded unexamined: everything but JSON (examined as such) and multipart forms
// (file uploads, never JSON as a whole).
func sniffsJSON(h http.Header) bool {
	mt, _, err := mime.ParseMediaType(h.Get("Content-Type"))
	if err != nil {
		return true // no Content-Type, or one nobody can parse: the upstream may still read JSON
	}
	return !strings.HasPrefix(mt, "multipart/")
}

// sniffJSON reads the start of r's body to learn whether it is a JSON object or array,
// and puts the bytes it read back so that the body is forwarded whole either way. A body
// that opens like JSON is read whole (within limit) and checked; any other body is put
// back unread past its first non-space byte, so an upload is still streamed. A body with
// a Content-Encoding is read whole and decoded, and goes on decoded.
func sniffJSON(r *http.Request, limit int64) (bool, error) {
	if len(r.Header.Values("Content-Encoding")) > 0 {
		raw, err := readAllLimited(r.Body, limit, r.ContentLength)
		if err != nil {
			return false, err
		}
		body, err := decodeRequestBody(r.Header, raw, limit)
		if err != nil {
			return false, err
		}
		r.Header.Del("Content-Encoding")
		setInboundBody(r, body)
		return opensJSON(body) && json.Valid(body), nil
	}
	br := bufio.NewReader(r.Body)
	var head []byte
	for {
		b, err := br.ReadByte()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return false, err
		}
		head = append(head, b)
		if int64(len(head)) > limit {
			return false, errBodyTooLarge
		}
		if !isJSONSpace(b) {
			break
		}
	}
	if !opensJSON(head) {
		r.Body = struct {
			io.Reader
			io.Closer
		}{io.MultiReader(bytes.NewReader(head), br), r.Body}
		return false, nil
	}
	body, err := readAllGrowing(br, head, limit)
	if err != nil {
		return false, err
	}
	setInboundBody(r, body)
	return json.Valid(body), nil
}

// opensJSON reports whether b's first non-space byte opens a JSON object or array.
func opensJSON(b []byte) bool {
	t := bytes.TrimLeft(b, " \t\r\n")
	return len(t) > 0 && (t[0] == '{' || t[0] == '[')
}

func isJSONSpace(b byte) bool { return b == ' ' || b == '\t' || b == '\r' || b == '\n' }

// setInboundBody makes b the request's body, of known length.
func setInboundBody(r *http.Request, b []byte) {
	r.Body = io.NopCloser(bytes.NewReader(b))
	r.ContentLength = int64(len(b))
	r.Header.Del("Transfer-Encoding")
	r.TransferEncoding = nil
}

// inputReadError turns a failure to read or decode a body hookproxy sniffs into the
// answer for it.
func (rt *route) inputReadError(r *http.Request, err error) error {
	switch {
	case errors.Is(err, errBodyTooSlow):
		return rt.bodyTooSlow()
	case r.Context().Err() != nil:
		return errInterrupted
	case errors.Is(err, errBodyTooLarge):
		return rt.tooLarge(rt.s.limits.MaxRequestBytes)
	}
	var ce *codingError
	var de *decodeError
	if errors.As(err, &ce) || errors.As(err, &de) {
		return rt.requestCodingError(err)
	}
	return rt.badRequest("the request body could not be read", err)
}
