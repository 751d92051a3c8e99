package chain

// Per-subscription projection of an event through its content selection
// (AHP-CONTENT-002). The projection is a delivery view only: validation, staging and
// composition always run against the full effective event.

import (
	"crypto/sha256"
	"encoding/hex"
	"strings"
	"unsafe"

	"github.com/hookproxy/hookproxy/chain/ahp"
)

// selection is a subscription's content policy, resolved once at New.
type selection struct {
	def           string
	cats          map[string]string
	allBody       bool // every category selects body: parts never change
	includeNative bool
}

func newSelection(content map[string]string, includeNative bool) selection {
	s := selection{def: content["default"], cats: make(map[string]string, len(content)), includeNative: includeNative}
	if s.def == "" {
		// Registration requires "default"; should it ever be missing, withhold rather
		// than disclose.
		s.def = ahp.SelectionMetadata
	}
	s.allBody = s.def == ahp.SelectionBody
	for k, v := range content {
		if k == "default" {
			continue
		}
		s.cats[k] = v
		if v != ahp.SelectionBody {
			s.allBody = false
		}
	}
	return s
}

// categoryOf classifies a part: its explicit category wins, otherwise its media type —
// never the role of the enclosing message.
func categoryOf(p *ahp.Part) string {
	if p.Category != "" {
		return p.Category
	}
	mt := strings.ToLower(p.MediaType)
	switch {
	case mt == ahp.MediaTypeText || strings.HasPrefix(mt, "text/plain;"):
		return "text"
	case strings.HasPrefix(mt, "image/"):
		return "images"
	case strings.HasPrefix(mt, "audio/"):
		return "audio"
	case strings.HasPrefix(mt, "video/"):
		return "video"
	}
	return "files"
}

// of returns the selection the policy asks for p (unlisted categories use default).
func (s *selection) of(p *ahp.Part) string {
	if s.allBody {
		return ahp.SelectionBody
	}
	if v, ok := s.cats[categoryOf(p)]; ok {
		return v
	}
	return s.def
}

// rank orders selections from most to least disclosed.
func rank(sel string) int {
	switch sel {
	case ahp.SelectionBody:
		return 0
	case ahp.SelectionMetadata:
		return 1
	}
	return 2
}

// withheld says what a projected view hides from its subscriber.
type withheld struct {
	text        bool // a metadata/omit text part, a text gap, or an event-level gap in items
	attachments bool // a metadata/omit attachment or an attachment gap
}

func (w *withheld) note(p *ahp.Part) {
	hidden := p.Selection != ahp.SelectionBody || p.Gap != nil
	if !hidden {
		return
	}
	if p.Kind == ahp.KindText {
		w.text = true
	} else {
		w.attachments = true
	}
}

// project returns the subscriber's view of ev and what that view withholds. When the view
// equals ev (the usual case) ev itself is returned: no copy is made. A changed view shares
// every unchanged message and part with ev; ev is never mutated.
func project(ev *ahp.Event, sel *selection) (*ahp.Event, withheld) {
	var w withheld
	for i := range ev.Gaps {
		if strings.HasPrefix(ev.Gaps[i].Path, "items") {
			w.text = true
		}
	}
	stripNative := len(ev.Native) > 0 && !sel.includeNative
	var items []ahp.Message // allocated on first change
	for mi := range ev.Items {
		m := &ev.Items[mi]
		if m.BarePart != nil {
			bp, _ := m.AsPart()
			// A bare part of a generic slot (tool.before's items, ...): the same selection
			// as a message part (AHP-CONTENT-002: selection applies to every copy), except
			// that an omitted one is left out of the list entirely (omission may also be
			// expressed by leaving the part out), as the protocol's observation-chain
			// vectors expect; a message keeps an omit variant so that its part positions
			// stay.
			want := sel.of(&bp)
			if rank(want) <= rank(bp.Selection) {
				w.note(&bp)
				if items != nil {
					items = append(items, *m)
				}
				continue
			}
			if items == nil {
				items = make([]ahp.Message, mi, len(ev.Items))
				copy(items, ev.Items[:mi])
			}
			q := withhold(&bp, want)
			w.note(&q)
			if want == ahp.SelectionOmit {
				continue
			}
			items = append(items, ahp.PartItem(q))
			continue
		}
		var parts []ahp.Part
		for pi := range m.Parts {
			p := &m.Parts[pi]
			want := sel.of(p)
			if rank(want) <= rank(p.Selection) {
				w.note(p)
				continue
			}
			if parts == nil {
				parts = make([]ahp.Part, len(m.Parts))
				copy(parts, m.Parts)
			}
			parts[pi] = withhold(p, want)
			w.note(&parts[pi])
		}
		if parts != nil && items == nil {
			items = make([]ahp.Message, mi, len(ev.Items))
			copy(items, ev.Items[:mi])
		}
		if items != nil {
			items = append(items, *m)
			if parts != nil {
				items[len(items)-1].Parts = parts
			}
		}
	}
	if items == nil && !stripNative {
		return ev, w
	}
	v := *ev
	if items != nil {
		v.Items = items
	}
	if stripNative {
		// includeNative defaults to false: native may duplicate content the selection
		// withholds (AHP-CONTENT-002, no duplicate-content bypass).
		v.Native = nil
	}
	return &v, w
}

// withhold turns p into its metadata or omit variant. Metadata views describe the
// withheld text by size and sha256; they never carry text, body or gap.
func withhold(p *ahp.Part, sel string) ahp.Part {
	q := ahp.Part{ID: p.ID, Kind: p.Kind, MediaType: p.MediaType, Selection: sel, Category: p.Category, Synthesized: p.Synthesized}
	if sel != ahp.SelectionMetadata {
		return q
	}
	switch {
	case p.Kind == ahp.KindText && p.Text != nil:
		n := int64(len(*p.Text))
		// Hashed in place: a metadata view of a long history would otherwise copy every
		// text it describes.
		sum := sha256.Sum256(unsafe.Slice(unsafe.StringData(*p.Text), len(*p.Text)))
		q.Size = &n
		q.SHA256 = hex.EncodeToString(sum[:])
	default:
		// Attachment bytes (and a text gap) are not held here: keep what is known.
		q.Size = p.Size
		q.SHA256 = p.SHA256
	}
	return q
}
