package mapping

// KeepAliver is implemented by translators whose streamed responses can carry a no-op
// between events: what the proxy writes while a tool call of the stream waits for a
// person's decision, so that neither the client nor an intermediary closes a quiet
// connection. The bytes are a complete no-op in the provider's own stream form, written
// only between complete events.
type KeepAliver interface {
	// KeepAlive returns the no-op for a stream of this Content-Type.
	KeepAlive(contentType string) []byte
}

// SSEComment is a server-sent events comment line: every SSE parser skips it (HTML
// "Server-sent events", the line starting with a colon).
var SSEComment = []byte(": keep-alive\n\n")
