package proxy

import (
	"bytes"
	"errors"
	"io"
	"sync"
	"sync/atomic"
)

// Request bodies of the boundary path are read whole (the chain judges them, the codec
// decodes them). A coding agent's request is its whole conversation, hundreds of KiB that
// grow by a little each turn, so a fresh buffer per request is most of what the proxy
// allocates (and zeroes, and later collects). A body the codec says it does not keep
// (mapping.Request.BodyUnkept) goes back to a pool when its request is over and the
// upstream transport has closed every reader of it, and the next body of about its size is
// read into it.
//
// Exactness rests on the release: a buffer returns to the pool only when nothing can read
// it again (the lifecycle ended, every outbound reader closed). A buffer whose release
// never comes (a path that keeps the body, an error before the lifecycle) is simply left
// to the collector.

// Pooled buffers come in classes 64 KiB × 2^(k/2) (64, 96, 128, 192, 256, 384 KiB, ...):
// a buffer is at most half again the body it was made for, and a conversation's bodies
// stay in one class for dozens of turns.
const (
	minPooledBody = 64 << 10
	bodyClasses   = 16 // the largest class is 12 MiB
)

var bodyPools [bodyClasses]sync.Pool

// bodyClassSize is the capacity of class k's buffers.
func bodyClassSize(k int) int {
	if k%2 == 0 {
		return minPooledBody << (k / 2)
	}
	return minPooledBody * 3 << (k / 2) >> 1
}

// bodyClass is the smallest class whose buffers hold n bytes, or -1 when n is outside
// the pooled range.
func bodyClass(n int64) int {
	if n < minPooledBody {
		return -1
	}
	for k := range bodyClasses {
		if int64(bodyClassSize(k)) >= n {
			return k
		}
	}
	return -1
}

// pooledBodyBuffer returns a buffer of length n from the pool, or nil when the pool has
// none (the caller reads as if there were no pool).
func pooledBodyBuffer(n int64) []byte {
	k := bodyClass(n)
	if k < 0 {
		return nil
	}
	if p, _ := bodyPools[k].Get().(*[]byte); p != nil {
		bodyPoolStats.reused.Add(1)
		return (*p)[:n]
	}
	return nil
}

// bodyBuffer allocates a buffer of length n for a body that declared declared bytes. With
// pooled set, the buffer the whole body goes in (n == declared) gets the capacity of its
// class, so that it can be pooled after its request; any other buffer has no spare
// capacity.
func bodyBuffer(n, declared int64, pooled bool) []byte {
	if k := bodyClass(n); pooled && k >= 0 && n == declared {
		return make([]byte, n, bodyClassSize(k))
	}
	return make([]byte, n)
}

// putBodyBuffer returns b to its class's pool; a buffer whose capacity is not a class's
// (one grown while reading) is left to the collector.
func putBodyBuffer(b []byte) {
	k := bodyClass(int64(cap(b)))
	if k < 0 || bodyClassSize(k) != cap(b) {
		return
	}
	b = b[:cap(b)]
	if poisonReleasedBodies {
		for i := range b {
			b[i] = 0xA5
		}
	}
	bodyPoolStats.released.Add(1)
	bodyPools[k].Put(&b)
}

// poisonReleasedBodies overwrites every released buffer (tests): a reader that outlived
// the release reads garbage instead of the right bytes by luck.
var poisonReleasedBodies = false

// bodyPoolStats counts buffers released to the pool and reused from it (tests).
var bodyPoolStats struct{ released, reused atomic.Int64 }

// bodyLease is a pooled request body in use: one reference for the lifecycle, one for
// each outbound reader of it that the upstream transport has not closed. The last one
// returns the buffer.
type bodyLease struct {
	buf  []byte
	refs atomic.Int32
}

func newBodyLease(buf []byte) *bodyLease {
	l := &bodyLease{buf: buf}
	l.refs.Store(1)
	return l
}

func (l *bodyLease) release() {
	if l.refs.Add(-1) == 0 {
		putBodyBuffer(l.buf)
	}
}

// reader returns a reader of body (which may be the leased buffer) that holds a
// reference until it is closed.
func (l *bodyLease) reader(body []byte) io.ReadCloser {
	for {
		n := l.refs.Load()
		if n == 0 {
			// Released already (no caller does this): the buffer may be another
			// request's, so nothing of it is read.
			return &leasedReader{closed: true}
		}
		if l.refs.CompareAndSwap(n, n+1) {
			return &leasedReader{r: bytes.NewReader(body), l: l}
		}
	}
}

// leasedReader serialises Read and Close: net/http may close a request body from another
// goroutine while its writer is still reading it (a cancelled request), and once Close
// has returned the buffer may be another request's.
type leasedReader struct {
	mu     sync.Mutex
	r      *bytes.Reader
	l      *bodyLease
	closed bool
}

func (r *leasedReader) Read(p []byte) (int, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.closed {
		return 0, errLeaseClosed
	}
	return r.r.Read(p)
}

func (r *leasedReader) Close() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if !r.closed {
		r.closed = true
		r.l.release()
	}
	return nil
}

var errLeaseClosed = errors.New("request body read after close")
