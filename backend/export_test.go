package backend

import "context"

// What the package's external tests reach beyond the exported API: the binding-independent
// core and a small frame limit. Only tests use them, so they are compiled only with them.

// WithMaxFrameBytes sets the size limit of one incoming message (default
// DefaultMaxFrameBytes). Values below 1 keep the default.
func WithMaxFrameBytes(n int64) Option {
	return func(s *Server) {
		if n > 0 {
			s.maxFrame = n
		}
	}
}

// Respond handles one JSON-RPC message and returns the response frame to send, or nil when
// the message is a notification (which JSON-RPC never answers). It is the
// binding-independent core of Handler and ServeStdio.
func (s *Server) Respond(ctx context.Context, frame []byte) []byte {
	return s.respond(ctx, frame).reply
}
