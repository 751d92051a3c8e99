package anthropic

// anthropicPing is the Messages stream's own keep-alive event, which the official SDKs
// accept and skip.
var anthropicPing = []byte("event: ping\ndata: {\"type\": \"ping\"}\n\n")

// KeepAlive implements mapping.KeepAliver: a ping event.
func (*Messages) KeepAlive(string) []byte { return anthropicPing }
