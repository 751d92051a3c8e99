package proxy

import (
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/hookproxy/hookproxy/mapping"
)

// Request bodies that trickle in: a client sending one byte every few
// seconds would otherwise hold a connection, and its goroutine, for as long as it likes.
// The body must arrive within limits.requestBodyGrace plus one second per
// limits.minRequestBodyRate bytes received so far; the connection's read deadline is
// moved forward as bytes arrive, and a body that falls behind ends with 408.

var errBodyTooSlow = errors.New("request body arrived too slowly")

type bodyGuardKey struct{}

// guardBody wraps r's body in the rate guard. release clears the read deadline once the
// handler is done, so that it does not outlive the request on a kept-alive connection.
func (s *Server) guardBody(w http.ResponseWriter, r *http.Request) (*http.Request, func()) {
	if r.Body == nil || r.Body == http.NoBody {
		return r, func() {}
	}
	g := &rateBody{rc: r.Body, ctl: http.NewResponseController(w), start: time.Now(),
		grace: s.limits.RequestBodyGrace, rate: s.limits.MinRequestBodyRate}
	if g.arm() != nil {
		return r, func() {} // a writer without deadlines (an in-process test recorder)
	}
	r = r.WithContext(context.WithValue(r.Context(), bodyGuardKey{}, g))
	r.Body = g
	return r, func() {
		// A body cut off keeps its deadline: net/http would otherwise read the rest of
		// it, at the client's pace, before the 408 leaves.
		if !g.timedOut.Load() {
			_ = g.ctl.SetReadDeadline(time.Time{})
		}
	}
}

// tooSlow reports whether the request's body was cut off by the rate guard.
func tooSlow(ctx context.Context) bool {
	g, _ := ctx.Value(bodyGuardKey{}).(*rateBody)
	return g != nil && g.timedOut.Load()
}

type rateBody struct {
	rc       io.ReadCloser
	ctl      *http.ResponseController
	start    time.Time
	grace    time.Duration
	rate     int64
	n        atomic.Int64
	timedOut atomic.Bool
	// interrupted: the deadline was brought forward to end a read in flight (relayBody),
	// so a timeout is not the body falling behind.
	interrupted atomic.Bool
}

// interrupt brings the deadline of a read in flight forward to at most within from now.
func (b *rateBody) interrupt(within time.Duration) {
	b.interrupted.Store(true)
	if d := time.Now().Add(within); d.Before(b.deadline()) {
		_ = b.ctl.SetReadDeadline(d)
	}
}

// resume gives the connection back the deadline the body's rate allows, once the
// interrupted read has returned.
func (b *rateBody) resume() {
	if !b.timedOut.Load() {
		_ = b.arm()
	}
	b.interrupted.Store(false)
}

func (b *rateBody) deadline() time.Time {
	return b.start.Add(b.grace + time.Duration(b.n.Load()*int64(time.Second)/b.rate))
}

func (b *rateBody) arm() error { return b.ctl.SetReadDeadline(b.deadline()) }

func (b *rateBody) Read(p []byte) (int, error) {
	n, err := b.rc.Read(p)
	b.n.Add(int64(n))
	var ne net.Error
	switch {
	case err == io.EOF:
		_ = b.ctl.SetReadDeadline(time.Time{}) // the body is in: the handler may take its time
	case err == nil:
		_ = b.arm()
	case errors.As(err, &ne) && ne.Timeout():
		if b.interrupted.Load() {
			return n, errRelayClosed
		}
		b.timedOut.Store(true)
		err = errBodyTooSlow
	}
	return n, err
}

func (b *rateBody) Close() error { return b.rc.Close() }

// admit counts a request in; false when limits.maxConcurrentRequests are in progress.
func (s *Server) admit() bool {
	if s.active.Add(1) > s.limits.MaxConcurrentRequests {
		s.active.Add(-1)
		return false
	}
	return true
}

// hold reserves n bytes of the limits.maxHeldBytes budget; false when it is spent.
func (s *Server) hold(n int64) bool {
	if s.held.Add(n) > s.limits.MaxHeldBytes {
		s.held.Add(-n)
		return false
	}
	return true
}

func (s *Server) release(n int64) { s.held.Add(-n) }

// overloaded is the 503 of a request over a server-wide limit, in the provider's format.
func (rt *route) overloaded(what string) *httpError {
	return &httpError{status: http.StatusServiceUnavailable, body: rt.errorBody(http.StatusServiceUnavailable,
		mapping.UpstreamFailureType(rt.provider()), "hookproxy.overloaded", "hookproxy is at its limit of "+what+"; retry later")}
}

// bodyTooSlow is the 408 a trickling client gets, in the provider's format.
func (rt *route) bodyTooSlow() *httpError {
	return &httpError{status: http.StatusRequestTimeout, cause: errBodyTooSlow, body: rt.errorBody(http.StatusRequestTimeout,
		mapping.InvalidRequestType(rt.provider()), "", "the request body arrived too slowly (minimum "+
			strconv.FormatInt(rt.s.limits.MinRequestBodyRate, 10)+" bytes/s after "+rt.s.limits.RequestBodyGrace.String()+")")}
}
