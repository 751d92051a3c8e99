package ahp

import (
	"encoding/json"
	"maps"
	"slices"
)

// Clone returns a deep copy of the event: no pointer, slice, map or raw JSON of the copy is
// shared with e, so a receiver (an in-process policy) may change it freely without touching
// the chain's accepted event. Strings are immutable and shared. It costs allocations per
// message and part, not per byte of text, which keeps in-process delivery cheap.
func (e *Event) Clone() *Event {
	if e == nil {
		return nil
	}
	c := *e
	c.Session = clonePtr(e.Session)
	c.Turn = clonePtr(e.Turn)
	c.Model = clonePtr(e.Model)
	c.Attempt = clonePtr(e.Attempt)
	c.Params = cloneRaw(e.Params)
	c.Execution = clonePtr(e.Execution)
	if e.Usage != nil {
		u := *e.Usage
		u.InputTokens = clonePtr(u.InputTokens)
		u.OutputTokens = clonePtr(u.OutputTokens)
		u.CacheReadTokens = clonePtr(u.CacheReadTokens)
		u.CacheWriteTokens = clonePtr(u.CacheWriteTokens)
		c.Usage = &u
	}
	c.LatencyMs = clonePtr(e.LatencyMs)
	if e.Error != nil {
		er := *e.Error
		er.Status = cloneRaw(er.Status)
		c.Error = &er
	}
	c.ContinuationCount = clonePtr(e.ContinuationCount)
	c.LastAssistantItem = clonePtr(e.LastAssistantItem)
	c.Call = clonePtr(e.Call)
	if e.Tool != nil {
		t := *e.Tool
		t.Input = cloneRaw(t.Input)
		if t.MCP != nil {
			m := *t.MCP
			m.Connection.Args = slices.Clone(m.Connection.Args)
			m.Connection.Gaps = slices.Clone(m.Connection.Gaps)
			t.MCP = &m
		}
		c.Tool = &t
	}
	if e.Batch != nil {
		b := *e.Batch
		b.CallIDs = slices.Clone(b.CallIDs)
		c.Batch = &b
	}
	c.DurationMs = clonePtr(e.DurationMs)
	c.Failure = clonePtr(e.Failure)
	c.Items = CloneMessages(e.Items)
	c.Gaps = slices.Clone(e.Gaps)
	c.Native = cloneRaw(e.Native)
	c.Extensions = CloneRawMap(e.Extensions)
	return &c
}

// ShareMessages copies a message list but shares the messages' parts, each part list
// capped so that an append cannot reach past it; never nil (an event's list is present even
// when empty): a list of the caller's own over the same parts. Parts, texts and their other
// values are never written in place by anyone: an edit gives a message a new part list (or
// a part a new text pointer). A request's canonical list itself is read-only as well
// (mapping.Request.Items), so a conversation's history is handed from request to request
// without a copy: a codec's remembered decode, the proxy's working list, its events and the
// scan memos share it. The Anthropic codec and internal/listmemo check this under go test
// (a remembered list written in place panics at its next use).
func ShareMessages(ms []Message) []Message {
	out := make([]Message, len(ms))
	for i, m := range ms {
		if m.Parts != nil {
			m.Parts = m.Parts[:len(m.Parts):len(m.Parts)]
		}
		out[i] = m
	}
	return out
}

// CloneMessages deep-copies a message list (nil stays nil, empty stays empty). The copies
// of all parts share one array, their texts another, and the values of their other pointer
// fields (size, body, gap) a third: a request repeats its whole conversation, hundreds of
// parts, on every call, and the copy costs a few allocations whatever its length. Each
// message's part list is capped at its length, so appending to one never writes into the
// next. The translators keep such a copy of a fresh decode, and in-process interceptors get
// one inside Event.Clone.
func CloneMessages(ms []Message) []Message {
	if ms == nil {
		return nil
	}
	n, texts, stores := 0, 0, 0
	for i := range ms {
		n += len(ms[i].Parts)
		for j := range ms[i].Parts {
			p := &ms[i].Parts[j]
			if p.Text != nil {
				texts++
			}
			if p.Size != nil || p.Body != nil || p.Gap != nil {
				stores++
			}
		}
	}
	out := make([]Message, len(ms))
	parts := make([]Part, n)
	text := make([]string, texts)
	var store []PartValues
	if stores > 0 {
		store = make([]PartValues, stores)
	}
	for i := range ms {
		out[i] = ms[i]
		if b := ms[i].BarePart; b != nil {
			// A bare part item of a generic slot: rare, so one allocation of its own.
			out[i].BarePart = b.clone()
		}
		if ms[i].Parts == nil {
			continue
		}
		k := len(ms[i].Parts)
		ps := parts[:k:k]
		parts = parts[k:]
		for j := range ms[i].Parts {
			p := ms[i].Parts[j]
			if p.Text != nil {
				text[0] = *p.Text
				p.Text = &text[0]
				text = text[1:]
			}
			if p.Size != nil || p.Body != nil || p.Gap != nil {
				store[0].Own(&p)
				store = store[1:]
			}
			ps[j] = p
		}
		out[i].Parts = ps
	}
	return out
}

// clone deep-copies a bare part's members.
func (b *BarePart) clone() *BarePart {
	c := *b
	c.Text = clonePtr(b.Text)
	c.Body = clonePtr(b.Body)
	c.Gap = clonePtr(b.Gap)
	c.Size = clonePtr(b.Size)
	return &c
}

// PartValues holds what a copied part's Size, Body and Gap point to. Kept in one array for
// many parts, or inside a larger record, it lets a deep copy cost no allocation per part.
// Most parts have none of the three, so CloneMessages keeps texts apart.
type PartValues struct {
	size int64
	body Ref
	gap  Gap
}

// Own points p's Size, Body and Gap (those set) at copies held in v.
func (v *PartValues) Own(p *Part) {
	if p.Size != nil {
		v.size = *p.Size
		p.Size = &v.size
	}
	if p.Body != nil {
		v.body = *p.Body
		p.Body = &v.body
	}
	if p.Gap != nil {
		v.gap = *p.Gap
		p.Gap = &v.gap
	}
}

// Clone deep-copies the capabilities.
func (c *Capabilities) Clone() *Capabilities {
	if c == nil {
		return nil
	}
	out := *c
	out.Effects = slices.Clone(c.Effects)
	out.Modify = maps.Clone(c.Modify)
	if c.Flow != nil {
		f := *c.Flow
		f.Operations = slices.Clone(f.Operations)
		f.RemainingContinuations = clonePtr(f.RemainingContinuations)
		f.ContinuationCount = clonePtr(f.ContinuationCount)
		f.MaxContinuations = clonePtr(f.MaxContinuations)
		out.Flow = &f
	}
	if c.Inject != nil {
		in := *c.Inject
		in.Context.DeliverAt = slices.Clone(in.Context.DeliverAt)
		out.Inject = &in
	}
	if c.Elicitation != nil {
		el := *c.Elicitation
		out.Elicitation = &el
	}
	return &out
}

// Clone deep-copies the state.
func (s *State) Clone() *State {
	if s == nil {
		return nil
	}
	out := *s
	if s.Candidate != nil {
		out.Candidate = &Candidate{Value: cloneRaw(s.Candidate.Value)}
	}
	out.Instructions = slices.Clone(s.Instructions)
	if s.Injections != nil {
		out.Injections = make([]Effect, len(s.Injections))
		for i, e := range s.Injections {
			out.Injections[i] = e.clone()
		}
	}
	return &out
}

func (e Effect) clone() Effect {
	e.Text = clonePtr(e.Text)
	e.Instruction = clonePtr(e.Instruction)
	e.Value = cloneRaw(e.Value)
	e.Extensions = CloneRawMap(e.Extensions)
	return e
}

// CloneRawMap deep-copies a map of raw JSON values (extensions).
func CloneRawMap(m map[string]json.RawMessage) map[string]json.RawMessage {
	if m == nil {
		return nil
	}
	out := make(map[string]json.RawMessage, len(m))
	for k, v := range m {
		out[k] = cloneRaw(v)
	}
	return out
}

func cloneRaw(r json.RawMessage) json.RawMessage {
	if r == nil {
		return nil
	}
	return slices.Clone(r)
}

func clonePtr[T any](p *T) *T {
	if p == nil {
		return nil
	}
	v := *p
	return &v
}
