package anthropic

import (
	"hash/maphash"
	"maps"
	"reflect"
	"slices"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"unsafe"

	"github.com/tidwall/gjson"

	"github.com/hookproxy/hookproxy/chain/ahp"
	"github.com/hookproxy/hookproxy/internal/heldtexts"
	"github.com/hookproxy/hookproxy/internal/jsontext"
	"github.com/hookproxy/hookproxy/mapping"
)

// A coding agent re-sends its whole conversation on every request: request N+1 is request
// N's messages array plus the newest turn, and the same system prompt and tools (only the
// cache_control breakpoint moves, from the last message of N to the last of N+1). The
// decode is a function of the body's bytes, sequential over the messages array, so the
// decode of N+1 is the decode of N cut after the last message both share byte for byte,
// then continued over the rest. Decodes are remembered (snapshot) in a bounded memo
// shared by all requests; a request that repeats the start of a remembered messages array
// resumes that decode and decodes only the rest.
//
// The result is exactly a fresh decode's, whatever the input:
//   - a snapshot is used only as far as its messages array equals the new one byte for
//     byte (compared, never trusted to a hash), cut at a message boundary, and only when
//     the system prompt is byte-identical;
//   - every list the decode continues is cut at that boundary with its capacity (an
//     append copies it, never writes where another request reads), the call and gap
//     tables are read as they stood at the cut (refAt, gapBefore) and written to maps of
//     the resumed decode's own;
//   - the strict check of the whole body (checkJSON) is the check of its parts: the
//     shared messages passed it in the earlier body, the rest is checked here — the
//     remaining elements as an array (one level shallower), the body outside the array
//     with the array emptied — unless that outside is byte-identical to the remembered
//     one, which passed it;
//   - anything unexpected (a body the check refuses, a message that fails to decode)
//     falls back to the fresh decode, which gives the error.
//
// Memory: a snapshot holds what its values point into — the first decode's body, then
// for each resumed decode a copy of the elements it decoded (never the new body, which
// would keep every body of a session alive), its arena and lists. That is counted
// (snapshot.cost) and bounded (resumeMemoBytes) in two generations as
// internal/twogen does; a chain of resumed decodes whose leftovers outgrow its array
// decodes afresh once. The decode depends on nothing but the bytes (no configuration),
// so a configuration reload leaves the memo valid.

// resumeMemoBytes bounds what the remembered decodes keep alive.
const (
	resumeMemoBytes = 64 << 20
	// resumePerKey is how many decodes are kept for one start of a messages array (the
	// same first messages, another session or a branch of one).
	resumePerKey = 4
	// minRemembered is how many native messages a request needs to be remembered: a
	// one-message request is the first of a conversation or none.
	minRemembered = 2
)

// snapshot is a finished decode, kept to be resumed. Nothing in it is written after it is
// stored; the lists are cut to their length.
type snapshot struct {
	key uint64
	// pieces, joined, are the messages array decoded, from its '[' to the end of its last
	// element: the pieces of the decodes it resumed (the first decode's body, the copies of
	// the elements each later one decoded), never a later request's body.
	pieces []string
	size   int // their length

	// The requestState lists. items, the list and its parts, is shared with every request
	// that resumed this decode (mapping.Request.Items is read-only).
	items        []ahp.Message
	origins      []itemOrigin
	parts        []origin
	messages     []nativeMessage
	system       int
	systemString bool
	// The decoder's lists and tables.
	marks []mark // before each native message, then after the last
	// residueEntries are the messages' residue entries (appendResidue), listed when a
	// block may have one (the final mark's residue).
	residueEntries []string
	results        []mapping.ToolResult
	gaps           []ahp.Gap
	gapIndex       map[string]int32 // gap reason → index in gaps
	calls          map[string]callRef
	callList       []seenCall // every raw filled

	// The body outside the array (before, after), and what the decode read of it.
	head, tail  string
	hasSystem   bool
	systemRaw   string
	model, hint string
	stream      bool
	// params is Params without the messages residue, handed to every request that resumes
	// this decode with the same outside (the canonical request is read, never written;
	// its length is its capacity, so that an append copies it).
	params []byte

	chunks int64 // bytes of the buffers its values point into (its own and its bases')
	cost   int64 // chunks and its lists: what holding it keeps alive

	// check and checkResults are deep copies of items and results made when the decode
	// was remembered, under go test only: a later use that finds either changed names the
	// rule that was broken.
	check        []ahp.Message
	checkResults []mapping.ToolResult
}

// checkShared is set under go test: remembered decodes keep a copy to check theirs by.
var checkShared = testing.Testing()

// checkUnwritten panics when a remembered decode's messages were written in place since
// it was remembered (by a request that resumed it, which shares their parts).
func (c *snapshot) checkUnwritten() {
	if c.check != nil && (!mapping.MessagesEqual(c.items, c.check) || !reflect.DeepEqual(c.results, c.checkResults)) {
		panic("anthropic: a remembered decode's messages were written in place; the list and parts handed out are shared and must be replaced in a copy, not written (mapping.Request.Items)")
	}
}

// refAt is what was known of call id before native message cut.msgs.
func (s *snapshot) refAt(id string, cut mark) callRef {
	r := s.calls[id]
	for r.call > cut.calls {
		r.call = s.callList[r.call-1].prev
	}
	if r.answer > cut.msgs {
		r.answer = 0
	}
	return r
}

// gapBefore reports whether gap reason was listed before the cut.
func (s *snapshot) gapBefore(reason string, cut mark) bool {
	i, ok := s.gapIndex[reason]
	return ok && i < cut.gaps
}

// resumeDecode decodes body by resuming a remembered decode; nil when none applies (the
// caller decodes it afresh).
func resumeDecode(body []byte) *mapping.Request {
	s := mapping.BytesString(body)
	p, ok := messagesStart(s)
	if !ok {
		return nil
	}
	key, ok := arrayKey(s, p)
	if !ok {
		return nil
	}
	// The candidate sharing the most whole messages with this array.
	var c *snapshot
	j, e := 0, 0
	for _, cand := range resumes.candidates(key) {
		n := commonPrefix(s[p:], cand.pieces)
		k := sort.Search(len(cand.messages), func(i int) bool { return cand.messages[i].end > n })
		if k > j {
			c, j, e = cand, k, cand.messages[k-1].end
		}
	}
	if c == nil {
		resumes.misses.Add(1)
		return nil
	}
	q, ok := arrayEnd(s, p+e)
	// Worth it when most of the array is shared; a chain whose leftovers outgrew its
	// array starts again from a fresh decode.
	if !ok || 2*e < q-p || c.chunks > 4*int64(c.size)+256<<10 {
		resumes.misses.Add(1)
		return nil
	}
	c.checkUnwritten()
	req := resume(body, s, key, c, j, p, e, q)
	if req == nil {
		resumes.misses.Add(1)
		return nil
	}
	resumes.hits.Add(1)
	return req
}

// resume decodes body (s) as the decode c cut before native message j, whose array ends
// at offset e of the array, which spans s[p:q].
func resume(body []byte, s string, key uint64, c *snapshot, j, p, e, q int) *mapping.Request {
	// The rest of the array: nothing, or a comma and at least one element.
	rest := s[p+e : q]
	i := jsontext.SkipSpace(rest, 0)
	newArr := "[]"
	switch {
	case i == len(rest)-1 && rest[i] == ']':
	case rest[i] == ',':
		if k := jsontext.SkipSpace(rest, i+1); k >= len(rest)-1 {
			return nil // a trailing comma: the fresh decode refuses it
		}
		// A copy of the new elements: what this decode makes points into it, not into
		// the body, which a snapshot would otherwise keep alive whole.
		newArr = "[" + rest[i+1:]
		if strictElements.CheckString(newArr) != nil {
			return nil
		}
	default:
		return nil
	}
	shift := e + i // offset in the array of newArr[1], less one

	o := outside{head: s[:p], tail: s[q:]}
	var own int64 = int64(len(newArr))
	if o.head == c.head && o.tail == c.tail {
		o = outside{head: c.head, tail: c.tail, hasSystem: c.hasSystem, systemRaw: c.systemRaw,
			model: c.model, hint: c.hint, stream: c.stream, params: c.params}
	} else {
		// The body with the array emptied: checked and read as the fresh decode would.
		a := s[:p] + "[]" + s[q:]
		if checkJSON(a) != nil {
			return nil
		}
		parsed := gjson.Parse(a)
		if !parsed.IsObject() {
			return nil
		}
		root := mapping.TopMembers(parsed)
		if m := root.Get("messages"); m.Index != p || m.Raw != "[]" {
			return nil
		}
		o = readOutside(root)
		if o.hasSystem != c.hasSystem || o.systemRaw != c.systemRaw {
			return nil
		}
		o.head, o.tail = a[:p], a[p+2:]
		own += int64(len(a))
	}

	cut := c.marks[j]
	d := newRequestDecoder(len(newArr))
	d.base, d.cut = c, cut
	d.st.system, d.st.systemString = c.system, c.systemString
	d.items = cutList(c.items, cut.items)
	d.st.origins = cutList(c.origins, cut.items)
	d.st.parts = cutList(c.parts, cut.parts)
	d.st.messages = cutList(c.messages, int32(j))
	d.results = cutList(c.results, cut.results)
	d.gaps = cutList(c.gaps, cut.gaps)
	d.callList = cutList(c.callList, cut.calls)
	d.marks = cutList(c.marks, int32(j))
	d.residue = cut.residue
	d.st.array = s[p:q]
	if resumeHook != nil {
		resumeHook(j)
	}

	var err error
	var mf messageFields
	d.arena.PickElements(gjson.Result{Type: gjson.JSON, Raw: newArr}, messageFieldNames[:], mf[:], func(m gjson.Result) bool {
		d.done = m.Index + len(m.Raw)
		d.mark()
		err = d.message(len(d.st.messages), m, &mf)
		if err == nil {
			nm := &d.st.messages[len(d.st.messages)-1]
			nm.start, nm.end = m.Index+shift, m.Index+shift+len(m.Raw)
			if m.Index <= 0 || nm.end > len(d.st.array) || d.st.array[nm.start:nm.end] != m.Raw {
				nm.start, nm.end = -1, -1
			}
		}
		return err == nil
	})
	if err != nil {
		return nil // the fresh decode says what is wrong
	}
	d.mark()

	st := d.st
	if len(st.messages) > j {
		own += holdTexts(d.items[cut.items:])
	}
	st.items = d.items // this decode's own list, which the caller and the snapshot share
	st.pointInto(int(cut.parts))
	req := &mapping.Request{
		Items:       d.items[:len(d.items):len(d.items)], // shared with the snapshot (read-only: mapping.Request), see checkShared
		Gaps:        d.gaps,
		ToolResults: d.results[:len(d.results):len(d.results)], // shared with the snapshot, inputs too (read-only)
		PromptStart: promptStart(d.items),
		Original:    body,
		Native:      st, // reads the body (st.array) until the request is over
		BodyUnkept:  true,
		Model:       o.model,
		Stream:      o.stream,
		SessionHint: o.hint,
		Params:      o.params,
	}
	if d.residue {
		// The entries of the messages before the cut are the decode's it resumed (none
		// when no block before the cut may have one), then those of the new elements.
		if cut.residue {
			d.residueEntries = append(d.residueEntries, c.residueEntries[:j]...)
		} else {
			for range j {
				d.residueEntries = append(d.residueEntries, noResidue)
			}
		}
		d.residueEntries = appendResidue(d.residueEntries, newArr)
		req.Params = withResidue(req.Params, d.residueEntries)
	}
	// Lists the decode did not grow are still the snapshot's: the caller gets copies.
	if len(d.gaps) > 0 && len(d.gaps) == int(cut.gaps) {
		req.Gaps = slices.Clone(d.gaps)
	}
	if n := len(st.messages); n > j || o.head != c.head || o.tail != c.tail {
		pieces := cutPieces(c.pieces, e)
		if n > j {
			// The separator before the first new element (a copy: it is in the body), then
			// the copy of the new elements.
			pieces = append(pieces, strings.Clone(rest[:i+1]), newArr[1:st.messages[n-1].end-shift])
		}
		d.remember(key, pieces, o, own)
	}
	return req
}

// cutList is l cut to n elements with no room to append: nil for none, as a fresh decode
// leaves a list it never appended to.
func cutList[T any](l []T, n int32) []T {
	if n == 0 {
		return nil
	}
	return l[:n:n]
}

// outside is the body outside the messages array and what a decode reads of it.
type outside struct {
	head, tail  string
	hasSystem   bool
	systemRaw   string
	model, hint string
	stream      bool
	params      []byte // length and capacity equal
}

// readOutside reads the members of a request other than messages.
func readOutside(root mapping.Members) outside {
	var o outside
	if sys := root.Get("system"); sys.Exists() && sys.Type != gjson.Null {
		o.hasSystem, o.systemRaw = true, sys.Raw
	}
	if v := root.Get("model"); v.Type == gjson.String {
		o.model = v.Str
	}
	o.stream = root.Get("stream").Type == gjson.True
	if v := root.Get("metadata").Get("user_id"); v.Type == gjson.String {
		o.hint = v.Str
	}
	p := []byte(root.Without("messages", "system"))
	o.params = p[:len(p):len(p)]
	return o
}

// strictElements is the strict check of a body (checkJSON) for an array of messages
// checked on its own: one level shallower than in the body.
var strictElements = func() jsontext.CheckOptions {
	o := strictJSON
	o.MaxDepth--
	return o
}()

// remember stores the decode just finished in the memo under key: its messages array is
// pieces joined (up to the end of the last element), the body outside it o. own is the
// bytes of the buffers this decode's values point into besides its arena and lists (the
// body or the copies it made).
func (d *requestDecoder) remember(key uint64, pieces []string, o outside, own int64) {
	st := d.st
	n := len(st.messages)
	if n < minRemembered || !spansKnown(st.messages) {
		return // with spans unknown, a later array cannot be matched against it
	}
	sn := &snapshot{
		key: key, pieces: pieces, size: st.messages[n-1].end,
		items: st.items[:len(st.items):len(st.items)], origins: st.origins[:len(st.origins):len(st.origins)],
		parts: st.parts[:len(st.parts):len(st.parts)], messages: st.messages[:n:n],
		system: st.system, systemString: st.systemString,
		marks: d.marks[:len(d.marks):len(d.marks)], residueEntries: d.residueEntries,
		results: d.results[:len(d.results):len(d.results)], gaps: slices.Clone(d.gaps),
		head: o.head, tail: o.tail, hasSystem: o.hasSystem, systemRaw: o.systemRaw,
		model: o.model, hint: o.hint, stream: o.stream, params: o.params,
	}
	if checkShared {
		sn.check = ahp.CloneMessages(sn.items)
	}
	// The params (an agent's tool definitions above all) are the same bytes on every
	// request that resumes this decode: held, their digest is found by their address
	// (transport.SumBytes) instead of by hashing or comparing them on every request. They
	// are this decode's own bytes, never written (an append copies: no spare capacity).
	if len(o.params) >= minHeldText {
		p := unsafe.String(unsafe.SliceData(o.params), len(o.params))
		if _, ok := heldtexts.Find(p); !ok {
			heldtexts.Hold(p)
		}
	}
	// Every call's input copy made now, so that no resumed decode writes one into the
	// shared list; a fresh decode handed its copies out, so the memo keeps copies of its
	// own (a resumed decode hands out copies, ownInputs).
	for k := int(d.cut.calls); k < len(d.callList); k++ {
		if c := &d.callList[k]; c.raw == nil || d.base == nil {
			c.raw = d.inputBytes(c.input)
		}
	}
	if d.base == nil {
		sn.results = ownInputs(d.results)
	}
	if checkShared {
		sn.checkResults = ownInputs(sn.results)
	}
	sn.callList = d.callList[:len(d.callList):len(d.callList)]
	c := d.base
	switch {
	case c == nil:
		sn.calls = d.calls
	default:
		// The table at the cut, then what this decode noted.
		sn.calls = maps.Clone(c.calls)
		if sn.calls == nil {
			sn.calls = make(map[string]callRef, len(d.calls))
		}
		fix := func(id string) {
			if r := c.refAt(id, d.cut); r == (callRef{}) {
				delete(sn.calls, id)
			} else {
				sn.calls[id] = r
			}
		}
		for k := int(d.cut.calls); k < len(c.callList); k++ {
			fix(c.callList[k].id)
		}
		for k := int(d.cut.results); k < len(c.results); k++ {
			fix(c.results[k].CallID)
		}
		maps.Copy(sn.calls, d.calls)
	}
	switch {
	case len(sn.gaps) == 0:
	case c != nil && len(sn.gaps) == len(c.gaps) && int(d.cut.gaps) == len(c.gaps):
		sn.gapIndex = c.gapIndex
	default:
		sn.gapIndex = make(map[string]int32, len(sn.gaps))
		for k := range sn.gaps {
			sn.gapIndex[sn.gaps[k].Reason] = int32(k)
		}
	}

	// What it keeps alive: the buffers its values point into, then its lists.
	chunks := own + d.arena.Allocated() + int64(d.inputsN) +
		int64(d.partSlab.alloc)*int64(unsafe.Sizeof(ahp.Part{})) + int64(d.strSlab.alloc)*16 +
		int64(d.toolSlab.alloc)*int64(unsafe.Sizeof(toolOrigin{})) + int64(d.subSlab.alloc)*int64(unsafe.Sizeof(toolSub{}))
	if c != nil {
		chunks += c.chunks
	}
	from := int(d.cut.items)
	for i := from; i < len(st.items); i++ {
		for k := range st.items[i].Parts {
			// Texts outside the body or copies counted above (long escaped values from the
			// process-wide memo of decoded literals), and the copy of the parts.
			chunks += int64(unsafe.Sizeof(ahp.Part{})) + 16
			if t := st.items[i].Parts[k].Text; t != nil && len(*t) >= 256 {
				chunks += int64(len(*t))
			}
		}
	}
	for _, e := range d.residueEntries[min(int(d.cut.msgs), len(d.residueEntries)):] {
		chunks += int64(len(e)) // the new messages' residue entries (a list of strings below)
	}
	sn.chunks = chunks
	sn.cost = chunks + int64(cap(st.items))*int64(unsafe.Sizeof(ahp.Message{})) +
		int64(cap(st.origins))*int64(unsafe.Sizeof(itemOrigin{})) + int64(cap(st.parts))*int64(unsafe.Sizeof(origin{})) +
		int64(cap(st.messages))*int64(unsafe.Sizeof(nativeMessage{})) + int64(cap(d.marks))*int64(unsafe.Sizeof(mark{})) +
		int64(cap(d.callList))*int64(unsafe.Sizeof(seenCall{})) + int64(len(sn.results))*int64(unsafe.Sizeof(mapping.ToolResult{})) +
		int64(len(sn.gaps))*int64(unsafe.Sizeof(ahp.Gap{})) + int64(len(sn.calls)+len(sn.gapIndex))*64 +
		int64(cap(sn.residueEntries))*16 + snapshotOverhead
	resumes.add(sn, c)
}

// ownInputs returns a copy of results whose inputs are copies.
func ownInputs(results []mapping.ToolResult) []mapping.ToolResult {
	if results == nil {
		return nil
	}
	out := slices.Clone(results)
	n := 0
	for k := range out {
		n += len(out[k].Input)
	}
	buf := make([]byte, 0, n)
	for k := range out {
		if in := out[k].Input; in != nil {
			start := len(buf)
			buf = append(buf, in...)
			out[k].Input = buf[start:len(buf):len(buf)]
		}
	}
	return out
}

// spansKnown reports whether every native message's span in the array is known.
func spansKnown(msgs []nativeMessage) bool {
	for i := range msgs {
		if msgs[i].start < 0 {
			return false
		}
	}
	return true
}

// snapshotOverhead is a snapshot's own size and its memo entry.
const snapshotOverhead = 512

// resumeHook, set by tests, is told the native message a decode resumes at.
var resumeHook func(at int)

// messagesStart finds the top-level messages array of a body that has not been checked:
// the index of its '['. ok is false when the body does not read as an object with one.
func messagesStart(s string) (int, bool) {
	i := jsontext.SkipSpace(s, 0)
	if i >= len(s) || s[i] != '{' {
		return 0, false
	}
	i = jsontext.SkipSpace(s, i+1)
	for i < len(s) && s[i] == '"' {
		kEnd := jsontext.SkipValue(s, i)
		key := s[i:min(kEnd, len(s))]
		i = jsontext.SkipSpace(s, kEnd)
		if i >= len(s) || s[i] != ':' {
			return 0, false
		}
		v := jsontext.SkipSpace(s, i+1)
		if key == `"messages"` {
			return v, v < len(s) && s[v] == '['
		}
		end := jsontext.SkipValue(s, v)
		if end <= v {
			return 0, false
		}
		i = jsontext.SkipSpace(s, end)
		if i >= len(s) || s[i] != ',' {
			return 0, false
		}
		i = jsontext.SkipSpace(s, i+1)
	}
	return 0, false
}

// arrayKey is the memo key of the array at s[p]: its start up to the end of its second
// element (of its only one).
func arrayKey(s string, p int) (uint64, bool) {
	i := jsontext.SkipSpace(s, p+1)
	if i >= len(s) || s[i] != '{' {
		return 0, false
	}
	end := jsontext.SkipValue(s, i)
	if k := jsontext.SkipSpace(s, end); k < len(s) && s[k] == ',' {
		if k = jsontext.SkipSpace(s, k+1); k < len(s) && s[k] == '{' {
			end = jsontext.SkipValue(s, k)
		}
	}
	if end > len(s) {
		return 0, false
	}
	return resumes.key(s[p:end]), true
}

// arrayEnd returns the index just past the ']' that closes an array open at s[i] (one
// level deep). ok is false when nothing closes it.
func arrayEnd(s string, i int) (int, bool) {
	depth := 1
	for ; i < len(s); i++ {
		switch s[i] {
		case '"':
			i = jsontext.StringEnd(s, i)
		case '{', '[':
			depth++
		case '}', ']':
			if depth--; depth == 0 {
				return i + 1, true
			}
		}
	}
	return 0, false
}

// commonPrefix is the length of the longest common prefix of s and pieces joined.
func commonPrefix(s string, pieces []string) int {
	n := 0
	for _, p := range pieces {
		k := samePrefix(s[n:], p)
		n += k
		if k < len(p) {
			break
		}
	}
	return n
}

// cutPieces returns the pieces that join to the first n bytes of pieces joined.
func cutPieces(pieces []string, n int) []string {
	out := make([]string, 0, len(pieces)+2)
	for _, p := range pieces {
		if n <= 0 {
			break
		}
		p = p[:min(n, len(p))]
		out = append(out, p)
		n -= len(p)
	}
	return out
}

// samePrefix is the length of the longest common prefix of a and b. Mostly the shorter
// is a prefix of the other (a piece of a remembered array within a new one): one
// comparison; otherwise the first difference is found chunk by chunk.
func samePrefix(a, b string) int {
	n := min(len(a), len(b))
	if a[:n] == b[:n] {
		return n
	}
	i := 0
	for chunk := 4096; chunk >= 64; chunk /= 8 {
		for i+chunk <= n && a[i:i+chunk] == b[i:i+chunk] {
			i += chunk
		}
	}
	for a[i] == b[i] {
		i++
	}
	return i
}

// resumes is the process-wide memo of decodes.
var resumes = newResumeMemo(resumeMemoBytes)

// resumeMemo keeps snapshots by the start of their messages array (arrayKey), at most
// limit bytes as snapshot.cost counts them, in two generations: new snapshots go to the
// newer one; when it would hold more than half the limit the older is dropped. A resumed decode's
// snapshot replaces the one it resumed (which it holds, as far as it is still true).
type resumeMemo struct {
	mu                  sync.Mutex
	cur, prev           map[uint64][]*snapshot
	curBytes, prevBytes int64
	limit               int64
	seed                maphash.Seed
	held, entries       atomic.Int64
	hits, misses        atomic.Uint64
}

func newResumeMemo(limit int64) *resumeMemo {
	return &resumeMemo{limit: limit, seed: maphash.MakeSeed(), cur: map[uint64][]*snapshot{}}
}

// key hashes the start of a messages array: it only finds candidates, which are compared
// byte for byte (the seed is the process's own, so a client cannot aim at one bucket).
func (m *resumeMemo) key(start string) uint64 { return maphash.String(m.seed, start) }

// candidates returns the snapshots stored under key, newest first.
func (m *resumeMemo) candidates(key uint64) []*snapshot {
	m.mu.Lock()
	defer m.mu.Unlock()
	a, b := m.cur[key], m.prev[key]
	if len(a)+len(b) == 0 {
		return nil
	}
	out := make([]*snapshot, 0, len(a)+len(b))
	return append(append(out, a...), b...)
}

// add stores s, dropping old (the snapshot s resumed) and the oldest beyond resumePerKey.
func (m *resumeMemo) add(s, old *snapshot) {
	if s.cost > m.limit/8 {
		return
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if old != nil {
		m.drop(m.cur, &m.curBytes, old)
		m.drop(m.prev, &m.prevBytes, old)
	}
	if m.curBytes+s.cost > m.limit/2 {
		// The newer generation is full: it becomes the older, the older is dropped. Each
		// holds at most half the limit.
		m.held.Add(-m.prevBytes)
		for _, l := range m.prev {
			m.entries.Add(-int64(len(l)))
		}
		m.prev, m.prevBytes = m.cur, m.curBytes
		m.cur, m.curBytes = make(map[uint64][]*snapshot, len(m.prev)), 0
	}
	l := append([]*snapshot{s}, m.cur[s.key]...)
	for len(l) > resumePerKey {
		m.drop(m.cur, &m.curBytes, l[len(l)-1])
		l = l[:len(l)-1]
	}
	m.cur[s.key] = l
	m.curBytes += s.cost
	m.held.Add(s.cost)
	m.entries.Add(1)
}

// drop removes s from generation g (holding *bytes) if it is there.
func (m *resumeMemo) drop(g map[uint64][]*snapshot, bytes *int64, s *snapshot) {
	l := g[s.key]
	i := slices.Index(l, s)
	if i < 0 {
		return
	}
	l = slices.Delete(slices.Clone(l), i, i+1) // readers may hold the old list
	if len(l) == 0 {
		delete(g, s.key)
	} else {
		g[s.key] = l
	}
	*bytes -= s.cost
	m.held.Add(-s.cost)
	m.entries.Add(-1)
}

// ResumeStats reports the memory (bytes) and decodes held by the process-wide memo of
// request decodes that later requests of a conversation resume, and how many decodes
// resumed one and how many looked and found none.
func ResumeStats() (bytes, entries int64, hits, misses uint64) {
	return resumes.held.Load(), resumes.entries.Load(), resumes.hits.Load(), resumes.misses.Load()
}

// holdTexts gives the long texts of items, decoded by a decode the memo will keep, memory
// of their own and registers them as held texts (internal/heldtexts): the decodes that
// resume this one hand out the very same strings, which the scanners' results and the
// settlement fingerprints then find by address instead of by their bytes. A copy, not the
// decoded string: that one may point into a body or an arena chunk, which a held text
// would keep alive whole. Texts already held (long escaped literals) are left as they are.
// It returns the bytes copied, which the snapshot keeps alive.
func holdTexts(items []ahp.Message) int64 {
	var n int64
	for i := range items {
		for k := range items[i].Parts {
			t := items[i].Parts[k].Text
			if t == nil || len(*t) < minHeldText {
				continue
			}
			if _, ok := heldtexts.Find(*t); ok {
				continue
			}
			c := strings.Clone(*t)
			heldtexts.Hold(c)
			*t = c // the same text: this decode's own pointer, which nothing else reads yet
			n += int64(len(c))
		}
	}
	return n
}

// minHeldText is the shortest text holdTexts registers: a shorter one costs little to hash.
const minHeldText = 64
