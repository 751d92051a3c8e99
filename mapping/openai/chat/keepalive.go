package chat

import "github.com/hookproxy/hookproxy/mapping"

// KeepAlive implements mapping.KeepAliver: an SSE comment line, which openai-go and the
// other OpenAI clients skip.
func (*Chat) KeepAlive(string) []byte { return mapping.SSEComment }
