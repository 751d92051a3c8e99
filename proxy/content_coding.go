package proxy

// Content codings (RFC 9110 §8.4) of the bodies hookproxy reads. What a policy judges must
// be what the other side decodes: an answer in a coding hookproxy relayed as opaque bytes
// would reach a client that decodes it (fetch decodes br, zstd and deflate) with its tool
// calls unsettled and its tool results unredacted. So wherever hookproxy reads a body it
// first undoes every coding the body declares — gzip (and its alias x-gzip), deflate, br,
// zstd — and passes the decoded content on with no Content-Encoding: identity is acceptable
// to every client (RFC 9110 §12.5.3). A body in a coding hookproxy cannot decode is never
// relayed: the answer is a 502 (response) or 415 (request) in the route's format.
//
// Upstream requests whose answer is read carry no client Accept-Encoding (setOutboundBody),
// so the transport asks for gzip only and undoes it itself; decoding here covers an
// upstream, or a cache in front of it, that compresses anyway.

import (
	"bufio"
	"bytes"
	"compress/flate"
	"compress/gzip"
	"compress/zlib"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"

	"github.com/andybalholm/brotli"
	"github.com/klauspost/compress/zstd"

	"github.com/hookproxy/hookproxy/mapping"
)

// maxCodings bounds how many codings one body may stack: a real server applies one; each
// further layer only multiplies the work a hostile peer can ask for.
const maxCodings = 2

// zstdMaxWindow is the largest zstd window accepted: RFC 9659 §3 limits the window of the
// "zstd" content coding to 8 MiB, so a decoder never has to hold more per stream.
const zstdMaxWindow = 8 << 20

// codingError reports a Content-Encoding hookproxy cannot undo.
type codingError struct{ coding string }

func (e *codingError) Error() string {
	return fmt.Sprintf("content coding %q is not one hookproxy can decode", e.coding)
}

// decodableCodings names what hookproxy decodes, for the messages that refuse the rest.
const decodableCodings = "gzip, x-gzip, deflate, br and zstd"

// codingRefusal is the message of an answer or request refused for its coding.
func codingRefusal(who string, err error) string {
	var ce *codingError
	if errors.As(err, &ce) {
		return fmt.Sprintf("%s in content coding %q, which hookproxy cannot decode (it decodes %s); what hookproxy cannot examine is not relayed", who, ce.coding, decodableCodings)
	}
	return who + " in a content coding hookproxy could not decode: " + err.Error()
}

// contentCodings returns the codings a header names, in the order they were applied,
// lower-cased, without "identity". An unknown coding, or more than maxCodings, is a
// *codingError.
func contentCodings(h http.Header) ([]string, error) {
	var out []string
	for _, v := range h.Values("Content-Encoding") {
		for _, c := range strings.Split(v, ",") {
			c = strings.ToLower(strings.TrimSpace(c))
			switch c {
			case "", "identity":
				continue
			case "gzip", "x-gzip", "deflate", "br", "zstd":
			default:
				return nil, &codingError{coding: c}
			}
			out = append(out, c)
		}
	}
	if len(out) > maxCodings {
		return nil, &codingError{coding: strings.Join(out, ", ")}
	}
	return out, nil
}

// decodeResponseBody replaces a coded response body by its decoded content and drops the
// headers that described the coded bytes. The decoders start on the first read, so a
// stream's headers are not held back waiting for its first coded bytes.
func decodeResponseBody(resp *http.Response) error {
	codings, err := contentCodings(resp.Header)
	if err != nil {
		return err
	}
	if len(codings) == 0 || resp.Body == nil || resp.Body == http.NoBody || resp.ContentLength == 0 {
		resp.Header.Del("Content-Encoding") // no coding to undo, or no content to undo it on
		return nil
	}
	resp.Body = &decodingBody{src: resp.Body, codings: codings}
	resp.Header.Del("Content-Encoding")
	resp.Header.Del("Content-Length")
	resp.ContentLength = -1
	resp.Uncompressed = true
	return nil
}

// decodeRequestBody undoes the codings a request declares for a body read whole, keeping
// the decoded content within limit (errBodyTooLarge past it).
func decodeRequestBody(h http.Header, body []byte, limit int64) ([]byte, error) {
	codings, err := contentCodings(h)
	if err != nil || len(codings) == 0 {
		return body, err
	}
	d := &decodingBody{src: io.NopCloser(bytes.NewReader(body)), codings: codings}
	defer d.Close()
	return readAllGrowing(d, nil, limit)
}

// decodingBody reads src with codings undone, the last applied first.
type decodingBody struct {
	src     io.ReadCloser
	codings []string
	r       io.Reader
	closers []func()
	err     error
}

func (d *decodingBody) Read(p []byte) (int, error) {
	if d.r == nil && d.err == nil {
		d.r, d.err = d.open()
	}
	if d.err != nil {
		return 0, d.err
	}
	n, err := d.r.Read(p)
	if err != nil && !errors.Is(err, io.EOF) {
		err = &decodeError{coding: strings.Join(d.codings, ", "), err: err}
	}
	return n, err
}

// decodeError is content that does not decode as the coding it declares.
type decodeError struct {
	coding string
	err    error
}

func (e *decodeError) Error() string {
	return "decoding the " + e.coding + " content: " + e.err.Error()
}
func (e *decodeError) Unwrap() error { return e.err }

func (d *decodingBody) open() (io.Reader, error) {
	src := bufio.NewReader(d.src)
	if _, err := src.Peek(1); errors.Is(err, io.EOF) {
		// No bytes at all: an empty body, whatever coding it is labelled with, as clients
		// read it.
		return bytes.NewReader(nil), nil
	}
	var r io.Reader = src
	for i := len(d.codings) - 1; i >= 0; i-- {
		next, err := d.decoder(d.codings[i], r)
		if err != nil {
			return nil, &decodeError{coding: d.codings[i], err: err}
		}
		r = next
	}
	return r, nil
}

func (d *decodingBody) decoder(coding string, r io.Reader) (io.Reader, error) {
	switch coding {
	case "gzip", "x-gzip":
		return gzip.NewReader(r)
	case "deflate":
		// RFC 9110 §8.4.1.2: "deflate" is the zlib format; some servers send the raw
		// deflate stream instead, and clients accept both, so both are read.
		br := bufio.NewReader(r)
		if head, err := br.Peek(2); err == nil && isZlibHeader(head) {
			return zlib.NewReader(br)
		}
		fr := flate.NewReader(br)
		d.closers = append(d.closers, func() { _ = fr.Close() })
		return fr, nil
	case "br":
		return brotli.NewReader(r), nil
	case "zstd":
		zr, err := zstd.NewReader(r, zstd.WithDecoderConcurrency(1), zstd.WithDecoderLowmem(true),
			zstd.WithDecoderMaxWindow(zstdMaxWindow))
		if err != nil {
			return nil, err
		}
		d.closers = append(d.closers, zr.Close)
		return zr, nil
	}
	return nil, &codingError{coding: coding}
}

// isZlibHeader reports whether two bytes open a zlib stream (RFC 1950 §2.2): method 8
// (deflate), a window of at most 32 KiB, and a header checksum divisible by 31.
func isZlibHeader(b []byte) bool {
	return b[0]&0x0f == 8 && b[0]>>4 <= 7 && (uint16(b[0])<<8|uint16(b[1]))%31 == 0
}

func (d *decodingBody) Close() error {
	for _, c := range d.closers {
		c()
	}
	d.closers = nil
	return d.src.Close()
}

// requestCodingError turns a failure to decode a request body into the answer for it:
// 413 past the limit, 415 for a coding hookproxy cannot decode, 400 for a body that does
// not decode.
func (rt *route) requestCodingError(err error) *httpError {
	var ce *codingError
	switch {
	case errors.Is(err, errBodyTooLarge):
		return rt.tooLarge(rt.s.limits.MaxRequestBytes)
	case errors.As(err, &ce):
		return &httpError{status: http.StatusUnsupportedMediaType, cause: err, body: rt.errorBody(http.StatusUnsupportedMediaType,
			mapping.InvalidRequestType(rt.provider()), "", codingRefusal("the request body is", err))}
	}
	return rt.badRequest("the request body does not decode from its Content-Encoding", err)
}
