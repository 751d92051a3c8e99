package gemini

// geminiKeepAlive is an empty line. In the SSE form (alt=sse) it ends no event and carries
// no field, so every SSE parser skips it; in the JSON-array form it is whitespace between
// elements. An SSE comment line would be the usual no-op, but the official Go SDK (genai)
// reads every non-empty line that is not "data:" as a JSON chunk and fails on a comment,
// while it skips empty lines.
var geminiKeepAlive = []byte("\n")

// KeepAlive implements mapping.KeepAliver.
func (*Translator) KeepAlive(string) []byte { return geminiKeepAlive }
