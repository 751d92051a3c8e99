package policies

// The shared content engine of the redacting policies (secrets, pii, injection): scan the
// text an event carries, and turn findings into a whole-target modify value that keeps
// every message and part id and changes only the detected substrings.

import (
	"encoding/json"
	"github.com/hookproxy/hookproxy/internal/jsontext"
	"slices"
	"strings"
	"unicode/utf8"

	"github.com/hookproxy/hookproxy/chain/ahp"
)

// detector finds sensitive spans. Both methods return findings sorted by position,
// without overlaps, with disabled kinds and allow-listed values already removed.
type detector interface {
	// scanText examines free text.
	scanText(dst []Finding, text string) []Finding
	// scanField examines one JSON string value stored under key ("" in arrays), so that a
	// name such as "password" can qualify its value.
	scanField(dst []Finding, key, value string) []Finding
}

// replFunc returns the replacement text of one finding.
type replFunc func(f Finding, value string) string

// partHit is the findings of one text part of a message list.
type partHit struct {
	msg, part int
	findings  []Finding
}

// listScan is the outcome of scanning a message list.
type listScan struct {
	hits []partHit
	// withheld is true when some text part of the list is not visible to this policy
	// (metadata or omit selection, or a gap). A whole-list replace would then have to
	// carry text the policy never saw, so it is not used.
	withheld bool
	// split lists the kinds of findings that only the joined text of adjacent parts of
	// one message shows (a key cut in two parts): no per-part edit can redact them.
	split []string
}

// partFilter selects the parts a policy scans. A value, not a function: the list memo
// (scan_lists.go) files a list's result under the filter it was scanned with.
type partFilter uint8

const (
	allParts              partFilter = iota // every visible text part
	skipResponseToolCalls                   // not the tool_call parts (of model output)
	skipOperatorMessages                    // not system and developer messages
)

func (f partFilter) includes(m *ahp.Message, p *ahp.Part) bool {
	switch f {
	case skipResponseToolCalls:
		return p.Category != ahp.CategoryToolCall
	case skipOperatorMessages:
		return m.Role != ahp.RoleSystem && m.Role != ahp.RoleDeveloper
	}
	return true
}

// scanItems scans the text parts of items that include selects. A metered scanner with a
// result cache reuses what it found in the leading messages of the list it scanned on an
// earlier request of the conversation (scan_lists.go) and scans only the rest.
func scanItems(items []ahp.Message, d detector, include partFilter) listScan {
	if m, ok := d.(*metered); ok && m.cache != nil {
		return m.scanList(items, include)
	}
	return scanMessages(items, 0, listScan{}, d, include, nil)
}

// scanMessages scans items[from:] into ls, which holds the scan of items[:from]. With at
// non-nil, it appends the scan's state after each message (listMark).
func scanMessages(items []ahp.Message, from int, ls listScan, d detector, include partFilter, at *listMarks) listScan {
	var scratch []Finding
	var texts []string // the scanned text parts of one message
	for i := from; i < len(items); i++ {
		m := &items[i]
		texts = texts[:0]
		found := 0
		for j := range m.Parts {
			p := &m.Parts[j]
			if p.Kind != ahp.KindText {
				continue
			}
			if p.Text == nil || p.Selection != ahp.SelectionBody || p.Gap != nil {
				ls.withheld = true
				continue
			}
			if !include.includes(m, p) {
				continue
			}
			texts = append(texts, *p.Text)
			scratch = d.scanText(scratch[:0], *p.Text)
			found += len(scratch)
			if len(scratch) > 0 {
				ls.hits = append(ls.hits, partHit{msg: i, part: j, findings: slices.Clone(scratch)})
			}
		}
		// The model reads a message's text parts as one text.
		if len(texts) > 1 {
			if all := scanJoined(d, scratch[:0], texts); len(all) > found {
				for _, f := range all {
					if !slices.Contains(ls.split, f.Kind) {
						ls.split = append(ls.split, f.Kind)
					}
				}
			}
		}
		if at != nil {
			at.add(&ls)
		}
	}
	return ls
}

// scanJoined is d.scanText of the texts joined. A metered scanner with a result cache
// looks the join up by its parts' digests and joins them only to scan (scan_cache.go):
// most messages with several text parts (a system prompt in blocks, a prompt with
// reminders) are re-sent unchanged on every request.
func scanJoined(d detector, dst []Finding, texts []string) []Finding {
	if m, ok := d.(*metered); ok {
		return m.scanJoined(dst, texts)
	}
	return d.scanText(dst, strings.Join(texts, ""))
}

// kinds lists the distinct kinds found, in order of first appearance. The list goes to a
// policy's decision through a func value, so it lives on the heap: one allocation sized for
// the usual handful of kinds rather than one per append.
func (ls *listScan) kinds() []string {
	out := make([]string, 0, 4)
	for _, h := range ls.hits {
		for _, f := range h.findings {
			if !slices.Contains(out, f.Kind) {
				out = append(out, f.Kind)
			}
		}
	}
	return out
}

// redactedListJSON is the value of a whole-list modify: items encoded with every hit
// replaced, every message and part id, order and other member kept. It writes the bytes
// that encoding a copy of items with the redacted texts would, without making that copy:
// unchanged parts are encoded from items, edited texts straight from their pieces (see
// appendRedactedText).
//
// Profiling the found-something path on a 32 KiB request showed its extra time going to
// the encoding (see appendJSONString) and to allocation and garbage collection, not to the
// detectors (the scan costs what it costs on clean text, and nothing is scanned twice).
// The result itself, one buffer as large as the list, has to be allocated; the copy (the
// list, the edited parts, each edited text rebuilt, then read again by the encoder) added a
// quarter to that, and garbage collection work grows with every byte allocated.
func redactedListJSON(items []ahp.Message, hits []partHit, d detector, repl replFunc) []byte {
	edit := func(dst []byte, p *ahp.Part, k int) []byte {
		return appendRedactedText(dst, p, hits[k].findings, d, repl)
	}
	return appendEditedMessages(make([]byte, 0, messagesJSONCap(items)), items, hits, edit)
}

// appendRedactedText writes redactPartText(p, fs, d, repl) as a JSON string literal. For
// plain text it escapes the kept pieces of the text and the replacements one after the
// other instead of joining them first. The escaping is decided byte by byte, except that a
// multi-byte UTF-8 sequence is decoded as a whole, so the result is the same unless a
// valid sequence would span the join of two pieces: a piece ending in a non-ASCII byte
// followed by one starting with a continuation byte (as when removing a zero-width
// character joins the halves of a broken character). Placeholders are ASCII, so that does
// not happen for them; when it could, the part is written from the joined text.
func appendRedactedText(dst []byte, p *ahp.Part, fs []Finding, d detector, repl replFunc) []byte {
	if p.Category == ahp.CategoryToolCall {
		return appendJSONString(dst, redactPartText(p, fs, d, repl))
	}
	text := *p.Text
	mark := len(dst)
	dst = append(dst, '"')
	var prev byte // last byte of the redacted text written so far
	last := 0
	for i := 0; i <= len(fs); i++ {
		var pieces [2]string
		if i < len(fs) {
			f := fs[i]
			pieces = [2]string{text[last:f.Start], repl(f, text[f.Start:f.End])}
			last = f.End
		} else {
			pieces[0] = text[last:]
		}
		for _, s := range pieces {
			if s == "" {
				continue
			}
			if prev >= utf8.RuneSelf && s[0]&0xC0 == 0x80 {
				return appendJSONString(dst[:mark], redactPartText(p, fs, d, repl))
			}
			dst = jsontext.AppendStringJSBody(dst, s)
			prev = s[len(s)-1]
		}
	}
	return append(dst, '"')
}

// redactPartText rewrites one part. A tool_call part holds serialized JSON that the
// mapping layer parses back into native tool arguments, so its string values are
// rewritten through the JSON reader (escapes decoded, result re-encoded) to keep it valid;
// every other part is plain text.
func redactPartText(p *ahp.Part, fs []Finding, d detector, repl replFunc) string {
	text := *p.Text
	if p.Category == ahp.CategoryToolCall {
		if v, err := parseJSON([]byte(text)); err == nil {
			var scratch []Finding
			changed := v.rewriteStrings("", func(key, s string) (string, bool) {
				scratch = d.scanField(scratch[:0], key, s)
				if len(scratch) == 0 {
					return s, false
				}
				return applyFindings(s, scratch, repl), true
			})
			if changed {
				return string(v.appendJSON(nil))
			}
		}
	}
	return applyFindings(text, fs, repl)
}

// inputScan is the outcome of scanning a tool.input object.
type inputScan struct {
	kinds []string
	// parsed input with findings applied (only when rewrite was requested)
	value   jsonValue
	changed []bool // per top-level member
	// raw is true when the input could not be parsed as a JSON object and was scanned as
	// text; such an input cannot be edited.
	raw bool
}

// scanInput scans every string value of a tool.input object; when repl is not nil the
// findings are also applied to the parsed value.
func scanInput(input json.RawMessage, d detector, repl replFunc) inputScan {
	var is inputScan
	v, err := parseJSON(input)
	if err != nil || v.kind != jsonObject {
		is.raw = true
		for _, f := range d.scanText(nil, string(input)) {
			if !slices.Contains(is.kinds, f.Kind) {
				is.kinds = append(is.kinds, f.Kind)
			}
		}
		return is
	}
	var scratch []Finding
	note := func(fs []Finding) {
		for _, f := range fs {
			if !slices.Contains(is.kinds, f.Kind) {
				is.kinds = append(is.kinds, f.Kind)
			}
		}
	}
	if repl == nil {
		v.eachString("", func(key, s string) {
			scratch = d.scanField(scratch[:0], key, s)
			note(scratch)
		})
		return is
	}
	is.changed = make([]bool, len(v.elems))
	for i := range v.elems {
		is.changed[i] = v.elems[i].rewriteStrings(v.keys[i], func(key, s string) (string, bool) {
			scratch = d.scanField(scratch[:0], key, s)
			if len(scratch) == 0 {
				return s, false
			}
			note(scratch)
			return applyFindings(s, scratch, repl), true
		})
	}
	is.value = v
	return is
}

// replaceValue is the whole rewritten input.
func (is *inputScan) replaceValue() json.RawMessage {
	return is.value.appendJSON(nil)
}

// mergeValue is an object holding only the top-level members that changed: a shallow
// merge of it onto the original input gives the same result as replaceValue.
func (is *inputScan) mergeValue() json.RawMessage {
	m := jsonValue{kind: jsonObject}
	for i, ch := range is.changed {
		if ch {
			m.keys = append(m.keys, is.value.keys[i])
			m.elems = append(m.elems, is.value.elems[i])
		}
	}
	return m.appendJSON(nil)
}

// contentDecision is how a redacting policy resolves findings at one boundary.
type contentDecision struct {
	action string // actionRedact or actionDeny
	reason string // deny / stop reason (names kinds, never values)
	code   string // deny code
}

const (
	actionRedact = "redact"
	actionDeny   = "deny"
	actionOff    = "off"
	actionWarn   = "warn"
)

// decideContent turns findings at a boundary into effects, honouring the advertisement:
//
//   - redact: modify(replace) of the whole target (for tool.input, merge of the changed
//     top-level members when only merge is advertised); for a message list that cannot be
//     replaced whole (withheld text, or no replace advertised), the findings taken out in
//     place through hookproxy.redact_text when the host offers it (textOffer); when none
//     of that is possible, deny if advertised; otherwise no effect.
//   - deny: deny if advertised, else flow stop if advertised (boundaries without deny);
//     otherwise redact as above when possible; otherwise no effect.
func decideContent(ev *ahp.Event, caps *ahp.Capabilities, b boundary, d detector, dec contentDecision, ls *listScan, is *inputScan, textOffer bool) *ahp.InterceptResult {
	// inPlace is the hookproxy.redact_text list taking the findings out where a whole-list
	// replace is not possible (withheld text, or replace not advertised).
	var inPlace json.RawMessage
	redact := func() (ahp.Effect, bool) {
		ops := modifyOps(caps, b.target)
		if b.list {
			if !ops.Replace || ls.withheld {
				if textOffer {
					inPlace = textRedactions(ev.Items, ls.hits)
				}
				return ahp.Effect{}, false
			}
			return modifyEffect(b.target, ahp.OpReplace, redactedListJSON(ev.Items, ls.hits, d, redactPlaceholder)), true
		}
		if is.raw || (!ops.Replace && !ops.Merge) {
			return ahp.Effect{}, false
		}
		if ops.Replace {
			return modifyEffect(b.target, ahp.OpReplace, is.replaceValue()), true
		}
		return modifyEffect(b.target, ahp.OpMerge, is.mergeValue()), true
	}
	if dec.action == actionDeny {
		if e, ok := block(caps, dec.reason, dec.code); ok {
			return results(e)
		}
	}
	if e, ok := redact(); ok {
		return results(e)
	}
	if inPlace != nil {
		return withExtensions(results(), map[string]json.RawMessage{ahp.ExtRedactText: inPlace})
	}
	if dec.action == actionRedact {
		if e, ok := denyOnly(caps, dec.reason, dec.code); ok {
			return results(e)
		}
	}
	return results()
}

// textRedactions is the hookproxy.redact_text list (ahp.ExtRedactText) that takes every hit
// out of the part that holds it, in place: each distinct found value once per part, with
// the placeholder the whole-list redaction would write, so the visible text ends the same
// while every other part and every withheld item of the list stays as it is. nil when a
// hit cannot be taken out this way: a tool_call part (serialized JSON) whose text would no
// longer parse once its findings are replaced.
func textRedactions(items []ahp.Message, hits []partHit) json.RawMessage {
	var reds []ahp.TextRedaction
	for _, h := range hits {
		m, p := &items[h.msg], &items[h.msg].Parts[h.part]
		text := *p.Text
		edited := text
		first := len(reds)
		for _, f := range h.findings {
			value := text[f.Start:f.End]
			r := ahp.TextRedaction{Message: m.ID, Part: p.ID, Find: value, Replace: redactPlaceholder(f, value)}
			if value == "" || slices.Contains(reds[first:], r) {
				continue
			}
			reds = append(reds, r)
			edited = strings.ReplaceAll(edited, r.Find, r.Replace)
		}
		if p.Category == ahp.CategoryToolCall && !json.Valid([]byte(edited)) {
			return nil
		}
	}
	if len(reds) == 0 {
		return nil
	}
	raw, err := json.Marshal(reds)
	if err != nil {
		return nil
	}
	return raw
}
