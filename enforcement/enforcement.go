package enforcement

// Unknown is written for a value outside its vocabulary, so that a mistaken assignment
// can never put free text in the audit log or grow a metric's label set.
const Unknown = "unknown"

// Action is how the proxy carried out the settlement toward the client (the audit log's
// "enforcement", the metrics' "outcome" label).
type Action string

const (
	Forwarded Action = "forwarded" // passed on unchanged
	Rewritten Action = "rewritten" // passed on with accepted edits or injections applied
	Refused   Action = "refused"   // deny or fail-closed: a native error answer, or the tool call removed
	Supplied  Action = "supplied"  // return effect: answered from a supplied result without the upstream
	Stopped   Action = "stopped"   // flow stop: pending work removed or answered without the upstream
	// ForwardedUnexamined: input to an endpoint the route does not map, forwarded because
	// the route says unmapped: forward; no boundary ran.
	ForwardedUnexamined Action = "forwarded_unexamined"
)

// Known reports whether a is one of the Action values.
func (a Action) Known() bool {
	switch a {
	case Forwarded, Rewritten, Refused, Supplied, Stopped, ForwardedUnexamined:
		return true
	}
	return false
}

// MarshalText writes a value outside the vocabulary as Unknown.
func (a Action) MarshalText() ([]byte, error) { return closed(string(a), a.Known()), nil }

// Held is how much of a response was held from the client while its chain settled.
type Held string

const (
	HeldWhole     Held = "whole"      // read whole before the client got anything
	HeldToolCalls Held = "tool_calls" // streamed: text flowed, each tool call held until decided
	HeldNone      Held = "none"       // streamed through untouched; observers got a copy
)

// Known reports whether h is one of the Held values.
func (h Held) Known() bool {
	switch h {
	case HeldWhole, HeldToolCalls, HeldNone:
		return true
	}
	return false
}

// MarshalText writes a value outside the vocabulary as Unknown.
func (h Held) MarshalText() ([]byte, error) { return closed(string(h), h.Known()), nil }

// StreamMode is how an SSE response is relayed (the metrics' "mode" label of streams in
// progress).
type StreamMode string

const (
	StreamPassthrough StreamMode = "passthrough" // relayed to the client as it arrives
	StreamHeld        StreamMode = "held"        // held until the response-side chains settle
	StreamToolCalls   StreamMode = "tool_calls"  // text relayed as it arrives, each tool call held until decided
)

// Known reports whether m is one of the StreamMode values.
func (m StreamMode) Known() bool {
	switch m {
	case StreamPassthrough, StreamHeld, StreamToolCalls:
		return true
	}
	return false
}

// MarshalText writes a value outside the vocabulary as Unknown.
func (m StreamMode) MarshalText() ([]byte, error) { return closed(string(m), m.Known()), nil }

func closed(v string, known bool) []byte {
	if known {
		return []byte(v)
	}
	return []byte(Unknown)
}
