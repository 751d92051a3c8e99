package ahp

// Roles of canonical messages (AHP-CONTENT-001). Provider role names are normalized to these.
const (
	RoleSystem    = "system"
	RoleDeveloper = "developer"
	RoleUser      = "user"
	RoleAssistant = "assistant"
	RoleTool      = "tool"
)

// Part kinds and selections (AHP-CONTENT-001).
const (
	KindText       = "text"
	KindAttachment = "attachment"

	SelectionBody     = "body"
	SelectionMetadata = "metadata"
	SelectionOmit     = "omit"

	MediaTypeText = "text/plain"
)

// Part categories used by hookproxy. Reasoning is the protocol's own; tool_call and
// tool_result are hookproxy's conventions for structure serialized into text
// (AHP-CONTENT-001: there is no JSON part).
const (
	CategoryReasoning  = "reasoning"
	CategoryToolCall   = "tool_call"
	CategoryToolResult = "tool_result"
)

// Message is one item of an event's items: a canonical model-visible message (a closed
// object on the wire), or — in the generic slots, the items of tool.before and the other
// events whose items are not model-visible (AHP-CONTENT-001) — a bare content part with
// no role invented, which BarePart then holds. Both forms share one Go type so that the
// member "items" keeps one static JSON encoding: a message list encodes exactly as before,
// with no marshaler and no extra allocation, and a part list round-trips exactly.
// Use PartItem and AsPart rather than BarePart's promoted fields.
type Message struct {
	ID          string `json:"id"`
	Role        string `json:"role,omitempty"`
	Parts       []Part `json:"parts,omitzero"`
	Synthesized bool   `json:"synthesized,omitempty"`
	*BarePart
}

// BarePart is what a bare content part item has beyond a message's id and synthesized:
// the members of Part other than those two. nil for a message.
type BarePart struct {
	Kind      string  `json:"kind"`
	MediaType string  `json:"mediaType"`
	Selection string  `json:"selection"`
	Category  string  `json:"category,omitempty"`
	Text      *string `json:"text,omitempty"`
	Body      *Ref    `json:"body,omitempty"`
	Gap       *Gap    `json:"gap,omitempty"`
	Size      *int64  `json:"size,omitempty"`
	SHA256    string  `json:"sha256,omitempty"`
}

// PartItem returns p as an item of a generic slot (a bare part, not a message).
func PartItem(p Part) Message {
	return Message{ID: p.ID, Synthesized: p.Synthesized, BarePart: &BarePart{Kind: p.Kind, MediaType: p.MediaType,
		Selection: p.Selection, Category: p.Category, Text: p.Text, Body: p.Body, Gap: p.Gap, Size: p.Size, SHA256: p.SHA256}}
}

// AsPart returns the item as a part when it is a bare part (the part shares the item's
// pointers), and false when it is a message.
func (m *Message) AsPart() (Part, bool) {
	b := m.BarePart
	if b == nil {
		return Part{}, false
	}
	return Part{ID: m.ID, Kind: b.Kind, MediaType: b.MediaType, Selection: b.Selection, Category: b.Category,
		Text: b.Text, Body: b.Body, Gap: b.Gap, Size: b.Size, SHA256: b.SHA256, Synthesized: m.Synthesized}, true
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
