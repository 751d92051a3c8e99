package capture

import (
	"encoding/json"
	"time"

	"github.com/hookproxy/hookproxy/chain/ahp"
)

// Version is the format version of a capture line.
const Version = 1

// Line is one captured boundary: one JSON line of a capture file.
type Line struct {
	Version  int       `json:"v"`
	Time     time.Time `json:"time"`
	Boundary string    `json:"boundary"` // the event type
	EventID  string    `json:"eventId"`
	Session  string    `json:"session,omitempty"`
	// Subject names the tool call (its tool name) or the request (the model) the
	// boundary governs, for people reading a report.
	Subject string `json:"subject,omitempty"`
	// Redacted says the event was stored after the default secrets redaction.
	Redacted bool `json:"redacted,omitempty"`
	// Event is the canonical event exactly as the chain received it (before accepted
	// modifications), with its ids: a replay re-settles this very event.
	Event json.RawMessage `json:"event"`
	// Capabilities and Extensions are what the host offered at this boundary.
	// (Capabilities is the JSON of an ahp.Capabilities, encoded when the boundary settled.)
	Capabilities json.RawMessage `json:"capabilities"`
	Extensions   []string        `json:"extensions,omitempty"`
	Live         Decision        `json:"live"`
	Shadow       *Decision       `json:"shadow,omitempty"`
}

// SubjectOf names what ev is about: the tool of a tool event, else the model.
func SubjectOf(ev *ahp.Event) string {
	switch {
	case ev == nil:
		return ""
	case ev.Tool != nil && ev.Tool.Name != "":
		return ev.Tool.Name
	case ev.Model != nil && ev.Model.ID != "":
		return ev.Model.ID
	}
	return ""
}

// SessionOf is ev's session id ("" without one).
func SessionOf(ev *ahp.Event) string {
	if ev == nil || ev.Session == nil {
		return ""
	}
	return ev.Session.ID
}
