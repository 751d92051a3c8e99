package ahp

// Roles of canonical messages (SPEC-DIGEST §4.1). Provider role names are normalized to these.
const (
	RoleSystem    = "system"
	RoleDeveloper = "developer"
	RoleUser      = "user"
	RoleAssistant = "assistant"
	RoleTool      = "tool"
)

// Part kinds and selections (SPEC-DIGEST §4.2).
const (
	KindText       = "text"
	KindAttachment = "attachment"

	SelectionBody     = "body"
	SelectionMetadata = "metadata"
	SelectionOmit     = "omit"

	MediaTypeText = "text/plain"
)

// Part categories used by hookproxy. Reasoning is the protocol's own; tool_call and
// tool_result are the conventions of SPEC-DIGEST §4.4 and §15.4 for structure serialized
// into text.
const (
	CategoryReasoning  = "reasoning"
	CategoryToolCall   = "tool_call"
	CategoryToolResult = "tool_result"
)

// Message is one canonical model-visible item. It is a closed object on the wire.
type Message struct {
	ID          string `json:"id"`
	Role        string `json:"role"`
	Parts       []Part `json:"parts"`
	Synthesized bool   `json:"synthesized,omitempty"`
}

// Part is one of the eight closed part variants (kind × selection, with or without gap).
// Text is a pointer so that an empty text body ("") stays distinguishable from no text.
type Part struct {
	ID          string  `json:"id"`
	Kind        string  `json:"kind"`
	MediaType   string  `json:"mediaType"`
	Selection   string  `json:"selection"`
	Category    string  `json:"category,omitempty"`
	Text        *string `json:"text,omitempty"`
	Body        *Ref    `json:"body,omitempty"`
	Gap         *Gap    `json:"gap,omitempty"`
	Size        *int64  `json:"size,omitempty"`
	SHA256      string  `json:"sha256,omitempty"`
	Synthesized bool    `json:"synthesized,omitempty"`
}

// Ref is an uploaded attachment reference (receiver-allocated, opaque).
type Ref struct {
	Ref string `json:"ref"`
}

// Gap says why requested content could not be supplied. Used both inside a part and in
// the event-level gaps list (where Path is required).
type Gap struct {
	Path   string `json:"path,omitempty"`
	Reason string `json:"reason"`
}

// TextPart returns a body-selected text part.
func TextPart(id, text string) Part {
	return Part{ID: id, Kind: KindText, MediaType: MediaTypeText, Selection: SelectionBody, Text: &text}
}

// TextOf returns the part's inline text, or "" when it carries none.
func (p *Part) TextOf() string {
	if p.Text == nil {
		return ""
	}
	return *p.Text
}
