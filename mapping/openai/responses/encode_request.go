package responses

import (
	"fmt"
	"strings"

	"github.com/tidwall/sjson"

	"github.com/hookproxy/hookproxy/chain/ahp"
	"github.com/hookproxy/hookproxy/mapping"
	"github.com/hookproxy/hookproxy/mapping/openai/internal/oaiwire"
)

// EncodeRequest implements mapping.Translator. Unchanged items return the original bytes.
// Otherwise "input" is rebuilt: unchanged items keep their original JSON, edited ones are
// patched, new messages become message items; "instructions" is rewritten only when its
// system message changed (and removed when that message was). Every other member of the
// body stays byte-identical.
//
// While the original messages keep their relative order (every edit the proxy makes, and
// every merge or injection), items are written in their original native order — function
// calls interleaved with their outputs stay interleaved, opaque items stay in place — and
// new messages go before the next original message that follows them. A list that reorders
// original messages is written in canonical order instead, opaque items after the message
// they followed.
func (*Translator) EncodeRequest(req *mapping.Request, items []ahp.Message) ([]byte, error) {
	st, ok := req.Native.(*requestState)
	if !ok {
		return nil, fmt.Errorf("openai responses: request was not decoded by this translator")
	}
	if oaiwire.ItemsEqual(items, st.decoded) {
		return req.Original, nil
	}
	out := req.Original
	var err error

	// instructions
	var instr *ahp.Message
	for i := range items {
		if st.instrID != "" && items[i].ID == st.instrID && items[i].Role == ahp.RoleSystem {
			instr = &items[i]
			break
		}
	}
	if st.instrID != "" {
		origInstr := &st.decoded[st.byID[st.instrID]]
		switch {
		case instr == nil:
			out, err = sjson.DeleteBytes(out, "instructions")
		case !oaiwire.MessagesEqual(instr, origInstr):
			var text string
			if text, err = instructionsText(instr); err == nil {
				out, err = sjson.SetRawBytes(out, "instructions", []byte(mapping.Quote(text)))
			}
		}
		if err != nil {
			return nil, fmt.Errorf("openai responses: instructions: %w", err)
		}
	}

	// input
	rest := make([]ahp.Message, 0, len(items))
	for i := range items {
		if &items[i] != instr {
			rest = append(rest, items[i])
		}
	}
	decodedRest := st.decoded
	if st.instrID != "" {
		decodedRest = st.decoded[1:] // the instructions message is always decoded first
	}
	if oaiwire.ItemsEqual(rest, decodedRest) {
		return out, nil
	}
	input, err := st.renderInput(rest)
	if err != nil {
		return nil, fmt.Errorf("openai responses: %w", err)
	}
	if input == "" {
		return out, nil // no input before, none now
	}
	if out, err = sjson.SetRawBytes(out, "input", []byte(input)); err != nil {
		return nil, fmt.Errorf("openai responses: set input: %w", err)
	}
	return out, nil
}

// instructionsText joins the text parts of the instructions message.
func instructionsText(m *ahp.Message) (string, error) {
	var texts []string
	for i := range m.Parts {
		p := &m.Parts[i]
		if p.Kind != ahp.KindText || p.Category == ahp.CategoryToolCall || p.Text == nil {
			return "", fmt.Errorf("part %s: instructions carry text only", p.ID)
		}
		if *p.Text != "" {
			texts = append(texts, *p.Text)
		}
	}
	return strings.Join(texts, "\n\n"), nil
}

// effective is one effective message being rendered.
type effective struct {
	orig  int // index of the original canonical message, -1 for a new one
	segs  []segment
	segAt map[int]int // native item -> index in segs
	next  int         // segments rendered so far
}

// renderInput renders the effective input messages as the "input" value; "" when there is
// nothing to write (no input before and none now).
func (st *requestState) renderInput(msgs []ahp.Message) (string, error) {
	if len(msgs) == 0 && !st.hasInput {
		return "", nil
	}
	if st.inputString && len(msgs) == 1 && msgs[0].Role == ahp.RoleUser && len(msgs[0].Parts) == 1 {
		// A string input stays a string while it is one user text.
		if p := &msgs[0].Parts[0]; p.Kind == ahp.KindText && p.Category == "" && p.Text != nil {
			return mapping.Quote(*p.Text), nil
		}
	}
	r := &renderer{n: &st.natives}
	effs := make([]effective, len(msgs))
	pos := make(map[int]int, len(msgs)) // original message -> index in effs
	monotonic := true
	last := -1
	calls := mapping.ToolCalls(msgs)
	for k := range msgs {
		m := &msgs[k]
		e := &effs[k]
		e.orig = -1
		if i, ok := st.byID[m.ID]; ok && st.decoded[i].Role == m.Role && m.ID != st.instrID {
			if _, dup := pos[i]; !dup {
				e.orig = i
				pos[i] = k
				monotonic = monotonic && i > last
				last = i
			}
		}
		callID := ""
		if m.Role == ahp.RoleTool {
			callID = st.callFor(m, e.orig, calls)
		}
		segs, err := r.segments(e.orig, m.Role, callID, m.Parts)
		if err != nil {
			return "", fmt.Errorf("message %s: %w", m.ID, err)
		}
		if e.orig >= 0 {
			segs = st.withEmptyItems(st.itemsOf[e.orig], segs)
		}
		e.segs, e.segAt = segs, segmentIndex(segs)
	}

	var out []string
	emit := func(e *effective, upTo int) error {
		for ; e.next < upTo; e.next++ {
			raw, err := r.render(&e.segs[e.next])
			if err != nil {
				return err
			}
			out = append(out, raw)
		}
		return nil
	}
	if monotonic {
		newDone := 0 // new messages before this index are written
		for n := range st.items {
			it := &st.items[n]
			if it.kind == itemOpaque {
				out = append(out, it.raw)
				continue
			}
			k, ok := pos[it.msg]
			if !ok {
				continue // the message was removed
			}
			for ; newDone < k; newDone++ {
				if e := &effs[newDone]; e.orig < 0 {
					if err := emit(e, len(e.segs)); err != nil {
						return "", err
					}
				}
			}
			e := &effs[k]
			upTo := e.next
			if si, ok := e.segAt[n]; ok && si >= e.next {
				upTo = si + 1
			}
			if of := st.itemsOf[it.msg]; of[len(of)-1] == n {
				upTo = len(e.segs) // the message's last native item: what it gained goes here
			}
			if err := emit(e, upTo); err != nil {
				return "", err
			}
		}
		for k := range effs {
			if err := emit(&effs[k], len(effs[k].segs)); err != nil {
				return "", err
			}
		}
	} else {
		// Canonical order. Opaque items follow the message they followed natively.
		anchored := map[int][]string{}
		prev := -1
		for n := range st.items {
			it := &st.items[n]
			if it.kind != itemOpaque {
				prev = it.msg
				continue
			}
			if _, ok := pos[prev]; prev >= 0 && !ok {
				prev = -2 // its message is gone: written at the end
			}
			anchored[prev] = append(anchored[prev], it.raw)
		}
		out = append(out, anchored[-1]...)
		for k := range effs {
			if err := emit(&effs[k], len(effs[k].segs)); err != nil {
				return "", err
			}
			if effs[k].orig >= 0 {
				out = append(out, anchored[effs[k].orig]...)
			}
		}
		out = append(out, anchored[-2]...)
	}
	return "[" + strings.Join(out, ",") + "]", nil
}

// callFor returns the call a tool message answers: the original item's call id, or, for a
// new tool message, its own id when a tool call of that id exists (DecodeRequest's
// convention: a result's message takes the call id).
func (st *requestState) callFor(m *ahp.Message, orig int, calls []mapping.LocatedCall) string {
	if orig >= 0 {
		for _, n := range st.itemsOf[orig] {
			if st.items[n].kind == itemCallOutput {
				return st.items[n].callID
			}
		}
	}
	for _, c := range calls {
		if c.ID == m.ID {
			return c.ID
		}
	}
	if st.callIDs[m.ID] != nil {
		return m.ID
	}
	return ""
}

// withEmptyItems adds the native items of of (one original message's items, in order) that
// decoded to no part — an empty reasoning item, an empty message: they stay while their
// message does, after the segment of the item that preceded them.
func (n *natives) withEmptyItems(of []int, segs []segment) []segment {
	var after map[int][]int // segment index (-1: the start) -> empty items to insert after it
	segAt := segmentIndex(segs)
	last := -1
	for _, ni := range of {
		if si, ok := segAt[ni]; ok {
			last = si
		} else if len(n.items[ni].parts) == 0 {
			if after == nil {
				after = map[int][]int{}
			}
			after[last] = append(after[last], ni)
		}
	}
	if after == nil {
		return segs
	}
	out := make([]segment, 0, len(segs)+len(after))
	for _, ni := range after[-1] {
		out = append(out, segment{item: ni})
	}
	for i := range segs {
		out = append(out, segs[i])
		for _, ni := range after[i] {
			out = append(out, segment{item: ni})
		}
	}
	return out
}

// segmentIndex maps each original native item to the index of its segment.
func segmentIndex(segs []segment) map[int]int {
	m := make(map[int]int, len(segs))
	for i := range segs {
		if segs[i].item >= 0 {
			m[segs[i].item] = i
		}
	}
	return m
}
