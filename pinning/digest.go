package pinning

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
)

// Tool is one tool definition as an agent is shown it.
type Tool struct {
	Name        string
	Description string
	// Schema is the input schema as sent (JSON; nil or empty when the tool has none).
	Schema json.RawMessage
}

// DigestPrefix starts every digest, naming its algorithm.
const DigestPrefix = "sha256:"

// Digest is the sha256 of the canonical JSON of {"description", "inputSchema"}: object
// keys sorted, no insignificant whitespace, strings re-escaped one way, numbers as written.
// Reordering a schema's keys or re-indenting it is not a change; anything the model would
// read differently is. The name is not part of it, so a rename keeps the digest.
func Digest(t Tool) string {
	var schema any
	if len(bytes.TrimSpace(t.Schema)) > 0 {
		dec := json.NewDecoder(bytes.NewReader(t.Schema))
		dec.UseNumber()
		if err := dec.Decode(&schema); err != nil {
			// Not JSON: the bytes themselves are what was shown.
			schema = string(t.Schema)
		}
	}
	sum := sha256.Sum256(canonical(map[string]any{"description": t.Description, "inputSchema": schema}))
	return DigestPrefix + hex.EncodeToString(sum[:])
}

// canonical encodes v with sorted object keys (encoding/json sorts map keys), compact, and
// without HTML escaping, so the same value always gives the same bytes.
func canonical(v any) []byte {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	_ = enc.Encode(v) // values decoded from JSON always encode
	return bytes.TrimSuffix(buf.Bytes(), []byte("\n"))
}
