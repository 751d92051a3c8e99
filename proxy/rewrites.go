package proxy

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"iter"
	"sync"
	"unsafe"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"

	"github.com/hookproxy/hookproxy/chain/ahp"
	"github.com/hookproxy/hookproxy/chain/transport"
	"github.com/hookproxy/hookproxy/internal/heldtexts"
	"github.com/hookproxy/hookproxy/internal/listmemo"
	"github.com/hookproxy/hookproxy/mapping"
	"github.com/hookproxy/hookproxy/state"
)

// Settlement memory. A modify(output) accepted at tool.after, or a modify(prompt) accepted
// at turn.start, changes what the model sees in one request only: the agent keeps the
// original content in its own history and re-sends it with every later request of the
// conversation. So every tool result and prompt the proxy settles is recorded (canonical
// id + fingerprint → unchanged, or the rewrite), and every later request of the session
// gets the recorded rewrites re-applied before any boundary is built.
//
// Fail-safe by construction: a tool result or prompt anywhere in a request's
// history that the store does not know, because another replica without a shared store
// settled it, the process restarted, the session was evicted or expired, or the store is
// down, is treated as new: its tool.after (or turn.start) runs again and the settlement is
// recorded. Forgetting costs a repeated hook call, never a decided-on result reaching the
// model as it was. tool.after and turn.start are therefore delivered at least once; a
// repeated tool.after carries the same event id (toolEventID), so a backend can tell.

// rewriteState is one request's view of the settlement memory.
type rewriteState struct {
	applied int // recorded rewrites re-applied to this request's list
	// index maps an index of req.Items to the index in the effective list of the first
	// message standing for it (len(req.Items)+1 entries); nil while both lists line up.
	index   []int
	known   []bool         // req.Items index → covered by a record of this conversation
	pending []state.Record // settled at this request; recorded once enforced
	// partial limits the records to messages before req.Items index newFrom (a partial
	// list's new content is not recorded).
	partial bool
	newFrom int
	// resettling is set while an earlier, unknown tool result or prompt is settled.
	resettling bool
}

// at maps an index of req.Items to the effective list.
func (rs *rewriteState) at(i int) int {
	if rs.index == nil || i < 0 || i >= len(rs.index) {
		return i
	}
	return rs.index[i]
}

// isKnown reports whether the message at req.Items index i was settled at an earlier
// request (a record matched it): its boundary is not emitted again.
func (rs *rewriteState) isKnown(i int) bool {
	return rs.known != nil && i >= 0 && i < len(rs.known) && rs.known[i]
}

// knownRun reports whether every message of req.Items[start:end] is known.
func (rs *rewriteState) knownRun(start, end int) bool {
	if start >= end {
		return false
	}
	for i := start; i < end; i++ {
		if !rs.isKnown(i) {
			return false
		}
	}
	return true
}

// applyRecords re-applies the conversation's recorded rewrites to the effective list,
// before any boundary is built, so that the upstream and every policy see the settled
// content again, and marks every message a record covers as known. Only runs whose ids
// and fingerprints both match count.
func (x *lifecycle) applyRecords(recs []state.Record) {
	if len(recs) == 0 {
		return
	}
	m := matchRecords(fpMemo, transport.TextDigestsFrom(x.ctx), x.req.Items, recs)
	if m.matched == 0 {
		return
	}
	x.rw.known = m.known
	if m.applied == 0 {
		return // only unchanged records: the lists still line up
	}
	x.items, x.changed = m.items, true
	x.rw.index, x.rw.applied = m.index, m.applied
	x.s.logAt(x.ctx, zapcore.DebugLevel, "re-applied recorded rewrites", zap.Int("rewrites", m.applied))
}

// recordMatch is what a conversation's records make of a request's list: the effective
// list and the index map (nil when no rewrite applies: the lists line up), the known
// messages (rewriteState; nil when no record matched), the rewrites applied and the
// records matched.
type recordMatch struct {
	items            []ahp.Message
	index            []int
	known            []bool
	applied, matched int
}

// matchRecords matches recs against orig (a request's req.Items), taking from memo (nil:
// none) the fingerprints of units the conversation's previous request had already
// computed, and leaving there the ones it used for the next request.
func matchRecords(memo *listmemo.Memo[[]fpUnit], td *transport.TextDigests, orig []ahp.Message, recs []state.Record) recordMatch {
	at := recordsAt(orig, recs)
	// The list of this conversation's previous request (or another list with the same
	// start) and how many leading messages it shares with this one, equal field by field.
	var (
		key    uint64
		prev   *listmemo.Entry[[]fpUnit]
		shared int
		had    []fpUnit // prev's sums, by start; consumed as the walk passes them
		sums   []fpUnit // the sums this request used, by start, kept for the next
	)
	if memo != nil {
		key, prev, shared = memo.Find(0, orig)
		if prev != nil {
			had = prev.Value
		}
	}
	// The effective list and its index map are made at the first rewrite: until then
	// (and, with only unchanged records, for good) they are orig and the identity.
	var items []ahp.Message
	var index []int
	var known []bool
	applied, matched, computed := 0, 0, 0
	if memo != nil {
		sums = make([]fpUnit, 0, min(len(recs), len(orig)))
	}
	for i := 0; i < len(orig); {
		// Ids are cheap to compare; only a candidate is fingerprinted.
		if rec := at[i]; rec != nil && rec.Count > 0 && rec.Count <= len(orig)-i &&
			len(rec.Fingerprint) == 2*sha256.Size {
			u := fpUnit{start: int32(i), count: int32(rec.Count)}
			for len(had) > 0 && had[0].start < u.start {
				had = had[1:]
			}
			var ok bool
			if i+rec.Count <= shared && len(had) > 0 && had[0].start == u.start && had[0].count == u.count {
				// The fingerprint is a pure function of the unit's messages (every member
				// of every message and part; a text by its SHA-256), and these messages
				// are equal, field by field, to the ones it was computed from: it is what
				// fingerprintSum would give.
				u.fp = had[0].fp
				ok = u.fp == rec.Fingerprint
			} else {
				sum := fingerprintSum(td, orig[i:i+rec.Count])
				computed++
				if fingerprintHook != nil {
					fingerprintHook(i, rec.Count)
				}
				ok = sumIs(sum, rec.Fingerprint)
				switch {
				case memo == nil:
				case ok:
					// The record's own string (a store's record strings are their own: the
					// memory store's the ones recorded, Redis's each decoded on its own): on
					// the next request the memory store hands out the same one, which
					// compares without reading it.
					u.fp = rec.Fingerprint
				default:
					u.fp = hex.EncodeToString(sum[:])
				}
			}
			sums = append(sums, u)
			if ok {
				matched++
				if known == nil {
					known = make([]bool, len(orig))
				}
				if !rec.Unchanged && items == nil {
					items = make([]ahp.Message, i, len(orig)+len(rec.Items))
					copy(items, orig[:i])
					index = make([]int, len(orig)+1)
					for k := range i {
						index[k] = k
					}
				}
				for k := i; k < i+rec.Count; k++ {
					known[k] = true
					switch {
					case items == nil:
					case rec.Unchanged:
						index[k] = len(items)
						items = append(items, orig[k])
					default:
						index[k] = len(items) // every original stands at the replacement's start
					}
				}
				if !rec.Unchanged {
					items = append(items, cloneMessages(rec.Items)...)
					applied++
				}
				i += rec.Count
				continue
			}
		}
		if items != nil {
			index[i] = len(items)
			items = append(items, orig[i])
		}
		i++
	}
	if items != nil {
		index[len(orig)] = len(items)
	}
	// Keeping a list costs about what fingerprinting a few units does (the memo compares
	// it with the list it replaces and copies what is new); while the remembered list
	// still holds all but a few of this one's sums, it stays.
	if memo != nil && computed > 0 && (prev == nil || computed >= fpKeepAfter) {
		// The memo keeps orig itself: a request's list is read-only (mapping.Request.Items).
		memo.Keep(key, orig, shared, sums, int64(cap(sums))*int64(unsafe.Sizeof(fpUnit{}))+int64(len(sums))*2*sha256.Size, prev)
	}
	return recordMatch{items: items, index: index, known: known, applied: applied, matched: matched}
}

// recordsAt is the record of each message of orig (nil where none), from recs, the records
// a store loaded for orig's ids: in their order, one for each message whose id has one
// (state.Store.Load), so that a walk along both pairs them without a map of the records.
// Records that do not pair so (a store that broke that order) are paired by id.
func recordsAt(orig []ahp.Message, recs []state.Record) []*state.Record {
	at := make([]*state.Record, len(orig))
	r := 0
	for i := range orig {
		if r < len(recs) && recs[r].ID == orig[i].ID {
			at[i] = &recs[r]
			r++
		}
	}
	if r == len(recs) {
		return at
	}
	byID := make(map[string]*state.Record, len(recs))
	for i := range recs {
		byID[recs[i].ID] = &recs[i]
	}
	for i := range orig {
		at[i] = byID[orig[i].ID]
	}
	return at
}

// fpUnit is the fingerprint (hex, as records hold it) of the settlement unit of count
// messages at start of a remembered list.
type fpUnit struct {
	start, count int32
	fp           string
}

// fpMemo remembers, for a conversation's latest list, the fingerprints applyRecords
// computed over it: an agent re-sends its whole history with every request, and every
// unit of it but the newest was fingerprinted at the previous request. It is one for the
// process: a fingerprint depends on nothing but the messages (no configuration, server
// or tenant), so one memo serves every server and survives a reload, as the codecs'
// decode memo does, and a conversation's lists are found however its requests are
// routed. A list counts its texts whole (internal/listmemo), although they are mostly the
// decode's, kept by the decode memo anyway.
var fpMemo = listmemo.New[[]fpUnit](fpMemoBytes)

// fpMemoBytes bounds what fpMemo holds: at ~400 KB a list, forty to eighty conversations
// of 160 turns at once (two generations); past that the ones least recently seen are
// fingerprinted afresh.
const fpMemoBytes = 32 << 20

// fpKeepAfter is how many units a request fingerprints afresh before its list replaces
// the remembered one.
const fpKeepAfter = 8

// fingerprintHook, set by tests, is told every unit matchRecords fingerprints (rather
// than takes from the memo).
var fingerprintHook func(start, count int)

// splice replaces the effective messages standing for req.Items[start:start+count] by
// repl, keeping the index map of later messages right.
func (x *lifecycle) splice(start, count int, repl []ahp.Message) {
	n := len(x.req.Items)
	if count <= 0 || start < 0 || start+count > n {
		return
	}
	if x.rw.index == nil {
		x.rw.index = make([]int, n+1)
		for i := range x.rw.index {
			x.rw.index[i] = i
		}
	}
	es, ee := x.rw.index[start], x.rw.index[start+count]
	items := make([]ahp.Message, 0, len(x.items)-(ee-es)+len(repl))
	items = append(append(append(items, x.items[:es]...), repl...), x.items[ee:]...)
	delta := len(repl) - (ee - es)
	for k := start; k < start+count; k++ {
		x.rw.index[k] = es
	}
	for k := start + count; k <= n; k++ {
		x.rw.index[k] += delta
	}
	x.items, x.changed = items, true
}

// noteSettled records that the count messages of req.Items from start on were settled at
// event: replaced by effective, or (effective nil) seen by the model as they were. It is
// recorded only once the request is enforced.
func (x *lifecycle) noteSettled(start, count int, effective []ahp.Message, event string) {
	if count <= 0 || start < 0 || start+count > len(x.req.Items) ||
		(x.rw.partial && start >= x.rw.newFrom) {
		return
	}
	orig := x.req.Items[start : start+count]
	td := transport.TextDigestsFrom(x.ctx)
	fp := fingerprint(td, orig)
	if fp == "" {
		return // not recordable: settled again next time
	}
	rec := state.Record{ID: orig[0].ID, Count: count, Fingerprint: fp, Event: event}
	if effective == nil || fingerprint(td, effective) == fp {
		rec.Unchanged = true
	} else {
		rec.Items = cloneMessages(effective)
	}
	x.rw.pending = append(x.rw.pending, rec)
}

// commitRecords records this request's settlements unless the request was refused or
// abandoned: then the model saw nothing, and the content is settled again on the next
// attempt. A flow stop or a supplied result does count: the agent gets an answer and moves
// on, and the content becomes history. A failed write costs a repeated hook call next
// time, never a leak; under fail-closed it refuses the request all the same, since the
// store is then not what the operator relies on.
func (x *lifecycle) commitRecords(kind outcomeKind) *httpError {
	if len(x.rw.pending) == 0 || kind == outcomeRefused || kind == outcomeInterrupted {
		return nil
	}
	// Recorded even if the client left: the upstream may already have the request.
	err := x.s.state.Record(context.WithoutCancel(x.ctx), x.scope(), x.rw.pending)
	switch {
	case err == nil:
		x.s.storeOK(x.ctx)
	case errors.Is(err, state.ErrTooLarge):
		x.s.logAt(x.ctx, zapcore.WarnLevel, "a settled rewrite is too large for the state store; it will be settled again")
	default:
		x.s.storeFailed(x.ctx, storeOpRecord, err)
		if x.s.failClosed() {
			return x.rt.storeUnavailable()
		}
	}
	return nil
}

// settlementUnit is one piece of a request's history that is settled once: a tool result
// (its tool.after) or a run of user messages, a prompt (its turn.start), as
// req.Items[start:end].
type settlementUnit struct {
	start, end int
	result     *mapping.ToolResult // nil for a prompt
}

// settlementUnits yields the request's tool results and prompts in history order. ps is
// the trailing prompt's start (-1 without one); earlier prompts are the runs of user
// messages before it. The units are walked, not listed: most of a long history is known
// and skipped, and a list of them was one more allocation the size of the history.
func settlementUnits(req *mapping.Request, ps int) iter.Seq[settlementUnit] {
	return func(yield func(settlementUnit) bool) {
		n := len(req.Items)
		results := resultsAt(req.ToolResults, n)
		promptEnd := n
		if ps >= 0 && ps < n {
			promptEnd = ps
		}
		for i := 0; i < promptEnd; {
			if tr := results[i]; tr != nil {
				if !yield(settlementUnit{start: i, end: i + 1, result: tr}) {
					return
				}
				i++
				continue
			}
			if req.Items[i].Role != ahp.RoleUser {
				i++
				continue
			}
			j := i
			for j < promptEnd && req.Items[j].Role == ahp.RoleUser && results[j] == nil {
				j++
			}
			if !yield(settlementUnit{start: i, end: j}) {
				return
			}
			i = j
		}
		if ps >= 0 && ps < n {
			yield(settlementUnit{start: ps, end: n})
		}
	}
}

// resultsAt is the tool result of each of n items (nil where none; the last of results
// naming an item where several do): an index by position, where a map cost a hash and an
// allocation per tool result of the history on every request.
func resultsAt(results []mapping.ToolResult, n int) []*mapping.ToolResult {
	at := make([]*mapping.ToolResult, n)
	for i := range results {
		if k := results[i].ItemIndex; k >= 0 && k < n {
			at[k] = &results[i]
		}
	}
	return at
}

// fingerprint is the sha256 (hex) of an injective framing of msgs' canonical content (every
// member of every message and part, with presence marked), in which each text stands as its
// own SHA-256 from the request's digest memo (transport.TextDigests): a text is hashed once
// per request, and the in-process scanners' result cache reuses the same digest. No JSON is
// encoded: two lists have the same fingerprint exactly when their canonical JSON is the same,
// short of a SHA-256 collision. Records written under an earlier framing never match (their
// content is settled again once).
func fingerprint(td *transport.TextDigests, msgs []ahp.Message) string {
	if len(msgs) == 0 {
		return ""
	}
	sum := fingerprintSum(td, msgs)
	return hex.EncodeToString(sum[:])
}

// sumIs reports whether fp is the fingerprint (hex) of sum.
func sumIs(sum [sha256.Size]byte, fp string) bool {
	var h [2 * sha256.Size]byte
	hex.Encode(h[:], sum[:])
	return string(h[:]) == fp
}

// fingerprintSum is the SHA-256 behind fingerprint. A unit re-sent unchanged (a tool
// result of the history) frames to the same bytes on every request; where it holds a text
// the process keeps across requests (internal/heldtexts), the frame and its sum are a note
// on that text, and an equal frame takes the noted sum instead of hashing again. The frame
// is compared whole, so the sum is the frame's whatever else changed.
func fingerprintSum(td *transport.TextDigests, msgs []ahp.Message) [sha256.Size]byte {
	f := fpFrames.Get().(*fpFrame)
	f.b = f.b[:0]
	f.td = td
	f.anchor, f.anchored = heldtexts.Text{}, false
	f.b = append(f.b, "hookproxy-records-v2"...)
	for i := range msgs {
		m := &msgs[i]
		f.str(m.ID)
		f.str(m.Role)
		f.flag(m.Synthesized)
		f.flag(m.Parts != nil)
		f.int(int64(len(m.Parts)))
		for j := range m.Parts {
			p := &m.Parts[j]
			f.str(p.ID)
			f.flag(p.Synthesized)
			f.part(p.Kind, p.MediaType, p.Selection, p.Category, p.Text, p.Body, p.Gap, p.Size, p.SHA256)
		}
		f.flag(m.BarePart != nil)
		if bp := m.BarePart; bp != nil {
			f.part(bp.Kind, bp.MediaType, bp.Selection, bp.Category, bp.Text, bp.Body, bp.Gap, bp.Size, bp.SHA256)
		}
	}
	var sum [sha256.Size]byte
	noted := false
	if f.anchored {
		if n, _ := f.anchor.Note(fpNotes).(*fpNote); n != nil && string(n.frame) == string(f.b) {
			sum, noted = n.sum, true
		}
	}
	if !noted {
		sum = sha256.Sum256(f.b)
		if f.anchored && len(f.b) <= maxNotedFrame {
			f.anchor.SetNote(fpNotes, &fpNote{frame: bytes.Clone(f.b), sum: sum})
		}
	}
	f.td, f.anchor, f.anchored = nil, heldtexts.Text{}, false
	if cap(f.b) <= 64<<10 {
		fpFrames.Put(f)
	}
	return sum
}

// fpNotes names the fingerprints' notes on held texts: a frame and its SHA-256, for units
// of history re-sent unchanged. maxNotedFrame keeps a note small (the memo counts ~250
// bytes for it): a tool result's frame is ~150 bytes besides its ids.
var fpNotes = heldtexts.NewNoteKey()

const maxNotedFrame = 256

type fpNote struct {
	frame []byte // never written once noted
	sum   [sha256.Size]byte
}

// fpFrame is the scratch of one fingerprint: the framing, hashed at once.
type fpFrame struct {
	b  []byte
	td *transport.TextDigests
	// anchor is the first held text of the unit, where its frame is noted.
	anchor   heldtexts.Text
	anchored bool
}

var fpFrames = sync.Pool{New: func() any { return &fpFrame{b: make([]byte, 0, 4<<10)} }}

func (f *fpFrame) str(s string) {
	f.b = binary.AppendUvarint(f.b, uint64(len(s)))
	f.b = append(f.b, s...)
}

func (f *fpFrame) flag(v bool) {
	if v {
		f.b = append(f.b, 1)
	} else {
		f.b = append(f.b, 0)
	}
}

func (f *fpFrame) int(i int64) { f.b = binary.AppendVarint(f.b, i) }

func (f *fpFrame) part(kind, mediaType, selection, category string, text *string, body *ahp.Ref, gap *ahp.Gap, size *int64, sum string) {
	f.str(kind)
	f.str(mediaType)
	f.str(selection)
	f.str(category)
	f.flag(text != nil)
	if text != nil {
		var d [sha256.Size]byte
		if h, ok := heldtexts.Find(*text); ok {
			d = h.Sum()
			if !f.anchored {
				f.anchor, f.anchored = h, true
			}
		} else {
			d = f.td.SumUnheld(*text)
		}
		f.b = append(f.b, d[:]...)
	}
	f.flag(body != nil)
	if body != nil {
		f.str(body.Ref)
	}
	f.flag(gap != nil)
	if gap != nil {
		f.str(gap.Path)
		f.str(gap.Reason)
	}
	f.flag(size != nil)
	if size != nil {
		f.int(*size)
	}
	f.str(sum)
}
