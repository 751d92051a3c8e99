// Package codingtest is a test kit for HTTP content codings: the real encoders of every
// coding hookproxy decodes (gzip, x-gzip, deflate in both framings, br, zstd), a handler
// that answers in one of them, and the decoding a fetch-based client (the official Node
// SDKs) does — it decodes what it knows and passes any other coding on as it came.
package codingtest

import (
	"bufio"
	"compress/flate"
	"compress/gzip"
	"compress/zlib"
	"io"
	"net/http"
	"strings"

	"github.com/andybalholm/brotli"
	"github.com/klauspost/compress/zstd"
)

// Encoder is an encoder that can flush what it holds (an SSE event at a time).
type Encoder interface {
	io.WriteCloser
	Flush() error
}

// Coding is a content coding a test server answers in.
type Coding struct {
	Name   string // subtest name
	Header string // Content-Encoding
	Writer func(io.Writer) Encoder
}

// All are the codings a client built on fetch decodes, each with its real encoder.
var All = []Coding{
	{"gzip", "gzip", func(w io.Writer) Encoder { return gzip.NewWriter(w) }},
	{"x-gzip", "x-gzip", func(w io.Writer) Encoder { return gzip.NewWriter(w) }},
	{"deflate", "deflate", func(w io.Writer) Encoder { return zlib.NewWriter(w) }},
	// raw deflate labelled "deflate", as some servers send it; clients accept it
	{"deflate-raw", "deflate", func(w io.Writer) Encoder { fw, _ := flate.NewWriter(w, flate.DefaultCompression); return fw }},
	{"br", "br", func(w io.Writer) Encoder { return brotli.NewWriter(w) }},
	{"zstd", "zstd", func(w io.Writer) Encoder { zw, _ := zstd.NewWriter(w); return zw }},
}

// Unknown labels a plain body with a coding nobody decodes: fetch passes such a body on
// as it came, so the SDK reads it as if it had no coding.
var Unknown = Coding{"unknown", "x-snappy-framed", func(w io.Writer) Encoder { return nopEncoder{w} }}

type nopEncoder struct{ io.Writer }

func (nopEncoder) Close() error { return nil }
func (nopEncoder) Flush() error { return nil }

// Handler makes h answer in coding c whatever the request accepts; with negotiated set,
// only when the request's Accept-Encoding names the coding, as a well-behaved server does.
func Handler(c Coding, negotiated bool, h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if negotiated && !strings.Contains(r.Header.Get("Accept-Encoding"), c.Header) {
			h.ServeHTTP(w, r)
			return
		}
		cw := &codedWriter{ResponseWriter: w, header: c.Header}
		cw.enc = c.Writer(w)
		h.ServeHTTP(cw, r)
		if cw.started {
			_ = cw.enc.Close()
		}
	})
}

type codedWriter struct {
	http.ResponseWriter
	header  string
	enc     Encoder
	started bool
}

func (c *codedWriter) WriteHeader(code int) {
	if !c.started {
		c.started = true
		c.Header().Set("Content-Encoding", c.header)
		c.Header().Del("Content-Length")
	}
	c.ResponseWriter.WriteHeader(code)
}

func (c *codedWriter) Write(p []byte) (int, error) {
	if !c.started {
		c.WriteHeader(http.StatusOK)
	}
	return c.enc.Write(p)
}

func (c *codedWriter) Flush() {
	if c.started {
		_ = c.enc.Flush()
	}
	c.ResponseWriter.(http.Flusher).Flush()
}

// Accept is the Accept-Encoding a fetch-based client sends.
const Accept = "gzip, deflate, br, zstd"

// Decode reads r in the content coding a fetch-based client decodes; known is false for
// identity and for a coding it does not know, and r is then returned as is.
func Decode(coding string, r io.Reader) (_ io.Reader, known bool, err error) {
	switch coding {
	case "gzip", "x-gzip":
		zr, err := gzip.NewReader(r)
		return zr, true, err
	case "deflate":
		br := bufio.NewReader(r)
		if head, _ := br.Peek(2); len(head) == 2 && head[0]&0x0f == 8 && (uint16(head[0])<<8|uint16(head[1]))%31 == 0 {
			zr, err := zlib.NewReader(br)
			return zr, true, err
		}
		return flate.NewReader(br), true, nil
	case "br":
		return brotli.NewReader(r), true, nil
	case "zstd":
		zr, err := zstd.NewReader(r)
		return zr, true, err
	}
	return r, false, nil
}

// DecodeResponse decodes resp's body in place as a fetch-based client does and reports
// the Content-Encoding it came with; a coding it does not know is left as it came.
func DecodeResponse(resp *http.Response) (coding string, err error) {
	coding = resp.Header.Get("Content-Encoding")
	body, known, err := Decode(coding, resp.Body)
	if err != nil || !known {
		return coding, err
	}
	resp.Body = struct {
		io.Reader
		io.Closer
	}{body, resp.Body}
	resp.Header.Del("Content-Encoding")
	resp.Header.Del("Content-Length")
	resp.ContentLength = -1
	return coding, nil
}
