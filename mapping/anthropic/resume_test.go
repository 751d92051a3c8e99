package anthropic_test

import (
	"bytes"
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"reflect"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"unsafe"
	"weak"

	"github.com/hookproxy/hookproxy/chain/ahp"
	"github.com/hookproxy/hookproxy/internal/heldtexts"
	"github.com/hookproxy/hookproxy/mapping"
	"github.com/hookproxy/hookproxy/mapping/anthropic"
)

// agentChat is a conversation as a coding agent sends it, request after request: the
// system prompt and tools unchanged, the whole history again plus the newest turn, the
// cache breakpoint on the last message only. Its messages use every shape the decode
// carries state for across messages: tool_use / tool_result pairs (string and array
// results, an image, is_error), a call id used twice and a result answering it twice,
// Claude Code's role "system" entries, an unknown role, string contents, residue members
// (citations, a document title), thinking, server tool blocks (gaps).
type agentChat struct {
	rng      *rand.Rand
	system   string
	msgs     []string
	calls    []string // ids of tool_use blocks sent so far
	pending  []string // ids not answered yet
	n        int
	sysFirst bool // system and tools before messages, as the SDKs write them
	added    int  // messages the last turn added
}

func newAgentChat(seed uint64) *agentChat {
	c := &agentChat{rng: rand.New(rand.NewPCG(seed, 9)), sysFirst: seed%2 == 0}
	c.system = `[{"type":"text","text":"You are Claude Code."},{"type":"text","text":` +
		strconv.Quote("Be careful.\n"+c.words(40)) + `,"cache_control":{"type":"ephemeral"}}]`
	c.msgs = append(c.msgs, `{"role":"user","content":[{"type":"text","text":`+strconv.Quote("<system-reminder>\n"+c.words(30))+`},{"type":"text","text":"fix the tests"}]}`)
	return c
}

// warmChat forgets every remembered decode, then decodes turns turns of a new chat of
// seed, each checked against a fresh decode, and returns the chat.
func warmChat(t *testing.T, seed uint64, turns int) *agentChat {
	t.Helper()
	anthropic.ForgetDecodes()
	c := newAgentChat(seed)
	for turn := 0; turn < turns; turn++ {
		c.grow(turn)
		sameDecode(t, c.body())
	}
	return c
}

func (c *agentChat) words(n int) string {
	w := strings.Fields(`the a tab	"quoted" back\slash line` + "\nnewline é ünï 日本 " + `func return error nil`)
	var b strings.Builder
	for i := 0; i < n; i++ {
		if i > 0 {
			b.WriteByte(' ')
		}
		b.WriteString(w[c.rng.IntN(len(w))])
	}
	return b.String()
}

// turn appends one turn of kind k (any int).
func (c *agentChat) turn(k int) {
	c.n++
	q := func(s string) string { return strconv.Quote(s) }
	switch k % 9 {
	case 0, 1: // the model calls tools, the results come back (a string and an array)
		a, b := fmt.Sprintf("toolu_%d_a", c.n), fmt.Sprintf("toolu_%d_b", c.n)
		c.msgs = append(c.msgs,
			`{"role":"assistant","content":[{"type":"text","text":`+q(c.words(8))+`},`+
				`{"type":"tool_use","id":"`+a+`","name":"Read","input":{"file_path":`+q("/r/"+c.words(1))+`}},`+
				`{"type":"tool_use","id":"`+b+`","name":"Bash","input":{"command":"ls","n":[1,2]}}]}`,
			`{"role":"user","content":[{"type":"tool_result","tool_use_id":"`+a+`","content":`+q(c.words(60))+`},`+
				`{"type":"tool_result","tool_use_id":"`+b+`","is_error":true,"content":[{"type":"text","text":`+q(c.words(5))+`},`+
				`{"type":"image","source":{"type":"base64","media_type":"image/png","data":"aGVsbG8="}},{"type":"text","text":"second"}]}]}`)
		c.calls = append(c.calls, a, b)
	case 2: // a call whose result comes in a later turn
		a := fmt.Sprintf("toolu_%d_p", c.n)
		c.msgs = append(c.msgs, `{"role":"assistant","content":[{"type":"thinking","thinking":`+q(c.words(4))+`,"signature":"SIG"},`+
			`{"type":"tool_use","id":"`+a+`","name":"Grep","input":{}}]}`)
		c.calls = append(c.calls, a)
		c.pending = append(c.pending, a)
	case 3: // results for pending calls, and one answering an old call again (its id repeats)
		var blocks []string
		for _, id := range c.pending {
			blocks = append(blocks, `{"type":"tool_result","tool_use_id":"`+id+`","content":`+q(c.words(20))+`}`)
		}
		c.pending = nil
		if len(c.calls) > 0 {
			old := c.calls[c.rng.IntN(len(c.calls))]
			blocks = append(blocks, `{"type":"tool_result","tool_use_id":"`+old+`","content":"again"}`)
		}
		blocks = append(blocks, `{"type":"text","text":`+q(c.words(3))+`}`)
		c.msgs = append(c.msgs, `{"role":"user","content":[`+strings.Join(blocks, ",")+`]}`)
	case 4: // Claude Code's environment entry, an unknown role, string contents
		c.msgs = append(c.msgs, `{"role":"system","content":`+q("<env>"+c.words(6))+`}`,
			`{"role":"user","content":`+q(c.words(12))+`}`,
			`{"role":"assistant","content":`+q(c.words(7))+`}`)
		if c.rng.IntN(3) == 0 {
			c.msgs = append(c.msgs, `{"role":"critic","content":[{"type":"text","text":"odd role"}]}`)
		}
	case 5: // residue members: citations, a document title, a search result
		c.msgs = append(c.msgs, `{"role":"user","content":[{"type":"document","title":`+q(c.words(2))+`,`+
			`"source":{"type":"text","media_type":"text/plain","data":`+q(c.words(10))+`}},`+
			`{"type":"search_result","source":"https://x/`+strconv.Itoa(c.n)+`","title":"t","content":[{"type":"text","text":"found"}]}]}`,
			`{"role":"assistant","content":[{"type":"text","text":"cited","citations":[{"type":"char_location","cited_text":"x"}]},`+
				`{"type":"server_tool_use","id":"srv_`+strconv.Itoa(c.n)+`","name":"web_search","input":{"q":"a"}}]}`)
	case 6: // a tool_use reusing an old id, answered right away
		id := fmt.Sprintf("toolu_%d_a", max(1, c.n-c.rng.IntN(3)))
		c.msgs = append(c.msgs, `{"role":"assistant","content":[{"type":"tool_use","id":"`+id+`","name":"Edit","input":{"x":`+q(c.words(2))+`}}]}`,
			`{"role":"user","content":[{"type":"tool_result","tool_use_id":"`+id+`"},{"type":"text","text":"ok"}]}`)
		c.calls = append(c.calls, id)
	case 7: // an empty content and a plain prompt
		c.msgs = append(c.msgs, `{"role":"assistant","content":[]}`, `{"role":"user","content":[{"type":"text","text":`+q(c.words(25))+`}]}`)
	default:
		c.msgs = append(c.msgs, `{"role":"assistant","content":[{"type":"text","text":`+q(c.words(50))+`}]}`,
			`{ "role" : "user" , "content" : [ {"type":"text","text":"spaced"} ] }`)
	}
}

// body is the next request: the cache breakpoint is on the last block of the last message.
func (c *agentChat) body() []byte {
	var b bytes.Buffer
	b.WriteString(`{"model":"claude-sonnet-4-5","max_tokens":32000,"stream":true,"metadata":{"user_id":"user_x_session_1"},`)
	if c.sysFirst {
		b.WriteString(`"system":` + c.system + `,"tools":[{"name":"Read","input_schema":{"type":"object"}}],`)
	}
	b.WriteString(`"messages":[`)
	for i, m := range c.msgs {
		if i > 0 {
			b.WriteByte(',')
		}
		if i == len(c.msgs)-1 {
			m = withBreakpoint(m)
		}
		b.WriteString(m)
	}
	b.WriteString(`]`)
	if !c.sysFirst {
		b.WriteString(`,"system":` + c.system + `,"temperature":1`)
	}
	b.WriteString(`}`)
	return b.Bytes()
}

// withBreakpoint puts cache_control on the last block of message m (an array content).
func withBreakpoint(m string) string {
	if i := strings.LastIndex(m, "}]}"); i > 0 && strings.Contains(m, `"content":[{`) {
		return m[:i] + `,"cache_control":{"type":"ephemeral"}}]}`
	}
	return m
}

// sameDecode decodes body through DecodeRequest (resuming when it can) and from the
// start, and fails unless both give the same request, error, and encodings under edits.
func sameDecode(t *testing.T, body []byte) *mapping.Request { return sameDecodeEdits(t, body, true) }

// sameDecodeEdits is sameDecode, comparing encodings under edits when edits is set.
func sameDecodeEdits(t *testing.T, body []byte, edits bool) *mapping.Request {
	t.Helper()
	got, gerr := tr.DecodeRequest(body)
	want, werr := anthropic.DecodeFresh(body)
	if fmt.Sprint(gerr) != fmt.Sprint(werr) {
		t.Fatalf("error: resumed %v, fresh %v", gerr, werr)
	}
	if werr != nil {
		return nil
	}
	want.BodyUnkept = got.BodyUnkept // a resumed decode keeps nothing of its body (checked below)
	if !reflect.DeepEqual(got, want) {
		diffRequests(t, got, want)
	}
	for e, edit := range requestEdits {
		if !edits {
			break
		}
		gi, wi := edit(ahp.CloneMessages(got.Items)), edit(ahp.CloneMessages(want.Items))
		gout, gerr := tr.EncodeRequest(got, gi)
		wout, werr := tr.EncodeRequest(want, wi)
		if fmt.Sprint(gerr) != fmt.Sprint(werr) || !bytes.Equal(gout, wout) {
			t.Fatalf("edit %d: resumed %v %.300s\nfresh %v %.300s", e, gerr, gout, werr, wout)
		}
	}
	if got.BodyUnkept {
		if before, after := overwriteBody(t, got, body); after != before {
			t.Fatalf("the decode says it keeps nothing of its body, but overwriting the body changed it:\n%.400s\n%.400s", before, after)
		}
	}
	return got
}

// overwriteBody overwrites body, which req was decoded from, as the proxy's pool may hand
// a finished request's buffer to the next request (mapping.Request.BodyUnkept), and
// returns what req reads as (all but Original and Native) before and after. The next
// decode of the conversation, which may resume this one, meets sameDecode's comparison
// with a fresh decode: a remembered decode that pointed into the body would fail it.
func overwriteBody(t *testing.T, req *mapping.Request, body []byte) (before, after string) {
	t.Helper()
	view := func() string {
		r := *req
		r.Original, r.Native = nil, nil
		b, err := json.Marshal(r)
		if err != nil {
			return "unreadable: " + err.Error()
		}
		return string(b)
	}
	before = view()
	for i := range body {
		body[i] = 0xA5
	}
	return before, view()
}

// The check of BodyUnkept can fail: a fresh decode points into its body (it keeps it for
// the requests that resume it), and overwriting that body changes what it reads as.
func TestOverwrittenBodyShowsWhatADecodeKeeps(t *testing.T) {
	c := newAgentChat(5)
	for turn := range 4 {
		c.grow(turn)
	}
	req, err := anthropic.DecodeFresh(c.body())
	if err != nil {
		t.Fatal(err)
	}
	if req.BodyUnkept {
		t.Fatal("a fresh decode says it keeps nothing of its body")
	}
	if before, after := overwriteBody(t, req, req.Original); before == after {
		t.Fatal("control: overwriting a fresh decode's body changed nothing it reads as")
	}
}

// diffRequests reports which field of two requests differs.
func diffRequests(t *testing.T, got, want *mapping.Request) {
	t.Helper()
	gv, wv := reflect.ValueOf(*got), reflect.ValueOf(*want)
	for i := 0; i < gv.NumField(); i++ {
		if !reflect.DeepEqual(gv.Field(i).Interface(), wv.Field(i).Interface()) {
			t.Errorf("Request.%s differs", gv.Type().Field(i).Name)
		}
	}
	for i := range min(len(got.Items), len(want.Items)) {
		if !reflect.DeepEqual(got.Items[i], want.Items[i]) {
			t.Errorf("item %d: resumed %+v\nfresh %+v", i, got.Items[i], want.Items[i])
			break
		}
	}
	t.FailNow()
}

// requestEdits are the edits a chain makes, applied to a copy of the items.
var requestEdits = []func([]ahp.Message) []ahp.Message{
	func(items []ahp.Message) []ahp.Message { return items }, // unchanged
	func(items []ahp.Message) []ahp.Message { // every text changed
		for i := range items {
			for j := range items[i].Parts {
				if p := &items[i].Parts[j]; p.Text != nil && p.Category != ahp.CategoryToolCall && p.Category != ahp.CategoryReasoning {
					p.Text = ptr("[redacted] " + *p.Text)
				}
			}
		}
		return items
	},
	func(items []ahp.Message) []ahp.Message { // the second message removed, one injected
		if len(items) > 2 {
			items = append(items[:1], items[2:]...)
		}
		return append(items, ahp.Message{ID: "inj", Role: ahp.RoleUser, Parts: []ahp.Part{ahp.TextPart("inj.p0", "injected")}})
	},
	func(items []ahp.Message) []ahp.Message { // the last tool result's parts but the text dropped
		for i := len(items) - 1; i >= 0; i-- {
			if items[i].Role == ahp.RoleTool {
				items[i].Parts = items[i].Parts[:1]
				items[i].Parts[0].Text = ptr("short")
				break
			}
		}
		return items
	},
}

func TestResumedDecodeEqualsFresh(t *testing.T) {
	for seed := uint64(1); seed <= 6; seed++ {
		t.Run(strconv.Itoa(int(seed)), func(t *testing.T) {
			anthropic.ForgetDecodes()
			resumedAt := -1
			defer anthropic.OnResume(func(at int) { resumedAt = at })()
			c := newAgentChat(seed)
			resumed := 0
			for turn := 0; turn < 40; turn++ {
				resumedAt = -1
				body := c.body()
				sameDecode(t, body)
				if resumedAt >= 0 {
					resumed++
					// Everything but the last message of the previous request is shared:
					// its cache breakpoint moved.
					if prev := len(c.msgs) - c.lastGrowth(); resumedAt != prev-1 && resumedAt != prev {
						t.Errorf("turn %d resumed at %d of %d messages (last turn added %d)", turn, resumedAt, len(c.msgs), c.lastGrowth())
					}
				}
				c.grow(turn)
			}
			t.Logf("%d resumed", resumed)
			if resumed < 30 {
				t.Errorf("only %d of 40 requests resumed an earlier decode", resumed)
			}
		})
	}
}

// grow adds the turn of the given number, remembering how many messages it added.
func (c *agentChat) grow(turn int) {
	n := len(c.msgs)
	c.turn(turn*7 + int(c.rng.IntN(3)))
	c.added = len(c.msgs) - n
}

func (c *agentChat) lastGrowth() int { return c.added }

// step changes the conversation by op: a turn, a branch (the last messages replaced), an
// early message edited, another system prompt, a compaction (history summarized), or a
// stray byte in the newest message.
func (c *agentChat) step(op byte) []byte {
	switch op % 8 {
	case 4: // a branch: the last messages dropped, another turn in their place
		c.msgs = c.msgs[:max(1, len(c.msgs)-1-int(op>>3)%3)]
		c.pending = nil
		c.grow(int(op >> 4))
	case 5: // an early message edited
		i := int(op>>3) % len(c.msgs)
		c.msgs[i] = strings.Replace(c.msgs[i], `"content":`, `"content_x":1,"content":`, 1)
	case 6: // another system prompt
		c.system = `"` + c.words(3) + `"`
	case 7: // compaction: the first message, a summary, the last two
		if n := len(c.msgs); n > 4 {
			c.msgs = append([]string{c.msgs[0], `{"role":"assistant","content":"summary"}`}, c.msgs[n-2:]...)
			c.pending = nil
		}
	default:
		c.grow(int(op >> 3))
	}
	body := c.body()
	if op&0x80 != 0 && op&0x40 != 0 && len(body) > 10 {
		// A stray byte in the newest content: both decodes refuse it, or read it alike.
		body[len(body)-1-int(op&0x3f)%(len(body)/4)] ^= op & 0x1f
	}
	return body
}

// FuzzResumedDecode: along any sequence of requests (growth, branches, edits of early
// messages and of the system prompt, compactions, corrupted bytes), the decode that
// resumes an earlier one gives what a decode from the start gives.
func FuzzResumedDecode(f *testing.F) {
	f.Add(uint64(1), []byte{0, 1, 2, 3, 4, 8, 9, 10, 11, 12, 13, 14, 15, 16})
	f.Add(uint64(2), []byte{1, 3, 5, 0, 0, 0, 6, 0, 0, 7, 1, 1, 4, 20, 0})
	f.Add(uint64(3), []byte{2, 2, 3, 0x12, 0x1c, 0xc0, 0, 0xd1, 3, 44, 4, 12, 0})
	f.Add(uint64(4), []byte{6, 48, 49, 50, 51, 52, 53, 54, 55, 56, 57, 0, 4, 4, 4, 0})
	f.Fuzz(func(t *testing.T, seed uint64, ops []byte) {
		c := newAgentChat(seed)
		ops = ops[:min(len(ops), 16)]
		for k, op := range ops {
			sameDecodeEdits(t, c.step(op), k == len(ops)-1)
		}
	})
}

// The requests that must not resume past what they share: an early message edited, a
// different system prompt, a compacted history. Each decodes as from the start.
func TestResumeOnlyWhatIsShared(t *testing.T) {
	resumedAt := -1
	defer anthropic.OnResume(func(at int) { resumedAt = at })()
	start := func() *agentChat {
		c := warmChat(t, 11, 12)
		resumedAt = -1
		return c
	}

	c := start()
	c.grow(1)
	sameDecode(t, c.body())
	if resumedAt < len(c.msgs)-4 {
		t.Fatalf("control: a grown request resumed at %d of %d messages", resumedAt, len(c.msgs))
	}

	c = start()
	c.msgs[2] = strings.Replace(c.msgs[2], `"content":`, `"content_x":1,"content":`, 1)
	c.grow(1)
	sameDecode(t, c.body())
	if resumedAt > 2 {
		t.Errorf("an edit of message 2 resumed at message %d", resumedAt)
	}

	c = start()
	c.system = `"another prompt"`
	c.grow(1)
	sameDecode(t, c.body())
	if resumedAt >= 0 {
		t.Errorf("another system prompt resumed at message %d", resumedAt)
	}

	c = start()
	c.msgs = append([]string{c.msgs[0], `{"role":"assistant","content":"summary"}`}, c.msgs[len(c.msgs)-2:]...)
	sameDecode(t, c.body())
	if resumedAt > 1 {
		t.Errorf("a compacted history resumed at message %d", resumedAt)
	}
}

// Requests resuming one decode at once, each changing its copy of what it was given
// (messages, their part lists replaced or appended to, tool results, gaps), change nothing
// another request sees: every later decode is still a fresh decode's. The list, its parts
// and the tool results are shared with the decode they resumed and are never written in
// place (mapping.Request.Items; TestSharedListsWrittenInPlaceAreCaught). Run with -race.
func TestResumedDecodesShareNoList(t *testing.T) {
	c := warmChat(t, 5, 10)
	var resumed atomic.Int32
	defer anthropic.OnResume(func(int) { resumed.Add(1) })()
	var bodies [][]byte
	for k := 0; k < 6; k++ { // six different next turns, all resuming the same decode
		next := *c
		next.msgs = append([]string(nil), c.msgs...)
		next.grow(k)
		bodies = append(bodies, next.body())
	}
	var wg sync.WaitGroup
	for _, body := range bodies {
		wg.Add(1)
		go func() {
			defer wg.Done()
			req, err := tr.DecodeRequest(body)
			if err != nil {
				t.Error(err)
				return
			}
			items := slices.Clone(req.Items)
			for i := range items {
				m := &items[i]
				parts := slices.Clone(m.Parts)
				for j := range parts {
					if parts[j].Text != nil {
						s := "overwritten"
						parts[j].Text, parts[j].ID = &s, "x"
					}
				}
				if i%2 == 0 {
					m.Parts = parts
				}
				m.Parts = append(m.Parts, ahp.TextPart("y", "appended"))
				m.ID, m.Role = "overwritten", "overwritten"
			}
			_ = append(items[:1], ahp.Message{ID: "spliced"})
			req.Items = append(req.Items, ahp.Message{ID: "appended"}) // capped: a copy
			results := slices.Clone(req.ToolResults)
			for i := range results {
				results[i].ToolName = "overwritten"
				if in := slices.Clone(results[i].Input); len(in) > 0 {
					in[0] = ' '
					results[i].Input = in
				}
				results[i].Input = append(req.ToolResults[i].Input, ' ') // capped: a copy
			}
			for i := range req.Gaps { // the caller's own list
				req.Gaps[i].Reason = "overwritten"
			}
		}()
	}
	wg.Wait()
	if resumed.Load() == 0 {
		t.Fatal("control: no decode resumed")
	}
	for _, body := range bodies {
		sameDecode(t, body)
	}
	c.grow(3)
	sameDecode(t, c.body())
}

// A resumed decode's list, parts and tool results are its snapshot's: a message, text or
// tool input written in place through them would reach every later request of the
// conversation. Under go test the snapshot keeps a copy and the next request that resumes
// it panics, naming the rule. Control: the same edits made in copies resume as before.
func TestSharedListsWrittenInPlaceAreCaught(t *testing.T) {
	for _, tc := range []struct {
		name  string
		panic bool
		edit  func(req *mapping.Request, k int)
	}{
		{"a text written in place", true, func(req *mapping.Request, k int) {
			*req.Items[k].Parts[0].Text = "written in place"
		}},
		{"a message of the list replaced in place", true, func(req *mapping.Request, k int) {
			req.Items[k].Role = "written in place"
		}},
		{"a tool input written in place", true, func(req *mapping.Request, _ int) {
			req.ToolResults[0].Input[0] = ' '
		}},
		{"the same edits in copies", false, func(req *mapping.Request, k int) {
			items := slices.Clone(req.Items)
			parts := slices.Clone(items[k].Parts)
			s := "replaced"
			parts[0].Text = &s
			items[k].Parts, items[k].Role = parts, "replaced"
			results := slices.Clone(req.ToolResults)
			results[0].Input = append(slices.Clone(results[0].Input[1:]), ' ')
			req.Items, req.ToolResults = items, results
		}},
	} {
		c := warmChat(t, 6, 8)
		c.grow(8)
		req := decode(t, string(c.body())) // resumes, and is remembered
		var k int
		for k = range req.Items {
			if len(req.Items[k].Parts) > 0 && req.Items[k].Parts[0].Text != nil {
				break
			}
		}
		if len(req.ToolResults) == 0 || len(req.ToolResults[0].Input) == 0 {
			t.Fatal("the conversation has no tool result with an input to edit")
		}
		tc.edit(req, k)
		c.grow(9)
		body := c.body()
		panicked := func() (p any) {
			defer func() { p = recover() }()
			_, _ = tr.DecodeRequest(body)
			return nil
		}()
		anthropic.ForgetDecodes() // the written snapshot must not reach another test
		if tc.panic != (panicked != nil) {
			t.Errorf("%s: the next decode panicked with %v", tc.name, panicked)
		}
		if panicked != nil && !strings.Contains(fmt.Sprint(panicked), "written in place") {
			t.Errorf("%s: the panic does not name the rule: %v", tc.name, panicked)
		}
	}
}

// A resumed decode's texts are the very strings of the decode it resumed (same bytes at
// the same address), so the next stage can recognise a repeated text by its address; and
// the memo does not keep a resumed request's body alive (only copies of its new messages).
func TestResumedTextsAreTheSameStrings(t *testing.T) {
	c := warmChat(t, 8, 6)
	c.grow(6)
	first := decode(t, string(c.body()))
	c.grow(7)
	body := c.body()
	second, err := tr.DecodeRequest(body)
	if err != nil {
		t.Fatal(err)
	}
	same, texts := 0, 0
	for i := range first.Items[:len(first.Items)-3] {
		for j := range first.Items[i].Parts {
			a, b := first.Items[i].Parts[j].Text, second.Items[i].Parts[j].Text
			if a == nil || *a == "" {
				continue
			}
			texts++
			if unsafe.StringData(*a) == unsafe.StringData(*b) && *a == *b {
				same++
			}
		}
	}
	if texts == 0 || same != texts {
		t.Errorf("%d of %d history texts are the same string in the next request", same, texts)
	}
	// And every long one is a held text, found by its address (what the scanners' notes and
	// the settlement fingerprints key on); a short one is not.
	held, long, short := 0, 0, 0
	for i := range second.Items {
		for j := range second.Items[i].Parts {
			p := second.Items[i].Parts[j].Text
			if p == nil || *p == "" {
				continue
			}
			_, ok := heldtexts.Find(*p)
			switch {
			case len(*p) >= 64:
				long++
				if ok {
					held++
				}
			case ok:
				short++
			}
		}
	}
	if long == 0 || held != long || short != 0 {
		t.Errorf("%d of %d long texts are held, and %d short ones", held, long, short)
	}
	// The control: a copy of a held text (same bytes, another address) is not one.
	if p := second.Items[1].Parts[0].Text; len(*p) < 64 {
		t.Fatalf("item 1 is short: %q", *p)
	} else if _, ok := heldtexts.Find(strings.Clone(*p)); ok {
		t.Error("control: a copy of a held text is found as held")
	}
	// The control: a fresh decode's texts point into its own body.
	fresh, _ := anthropic.DecodeFresh(body)
	if p := fresh.Items[1].Parts[0].Text; unsafe.StringData(*p) == unsafe.StringData(*second.Items[1].Parts[0].Text) {
		t.Error("control: a fresh decode shares the resumed decode's strings")
	}

	// The body of a resumed request is not kept by the memo.
	c.grow(8)
	next := c.body()
	w := weak.Make(&next[0])
	resumed := false
	defer anthropic.OnResume(func(int) { resumed = true })()
	if _, err := tr.DecodeRequest(next); err != nil || !resumed {
		t.Fatalf("control: the request did not resume (%v)", err)
	}
	next = nil
	for i := 0; i < 5 && w.Value() != nil; i++ {
		runtime.GC()
	}
	if w.Value() != nil {
		t.Error("the memo keeps a resumed request's body alive")
	}
}

// The memo holds at most its bound as it counts, and reports what it holds.
func TestResumeMemoBoundedAndReported(t *testing.T) {
	anthropic.ForgetDecodes()
	for s := uint64(0); s < 40; s++ {
		c := newAgentChat(100 + s)
		for turn := 0; turn < 8; turn++ {
			c.grow(turn)
			if _, err := tr.DecodeRequest(c.body()); err != nil {
				t.Fatal(err)
			}
		}
	}
	held, entries, hits, _ := anthropic.ResumeStats()
	if held <= 0 || entries <= 0 || hits == 0 {
		t.Fatalf("stats: %d bytes, %d decodes, %d hits", held, entries, hits)
	}
	// A few decodes per conversation: each resumed decode replaced the one it resumed (the
	// first requests, whose breakpoint is on their second message, are keyed apart).
	if entries > 3*40 {
		t.Errorf("%d decodes held for 40 conversations", entries)
	}
	if held > anthropic.ResumeMemoBytes {
		t.Errorf("%d bytes held, bound %d", held, anthropic.ResumeMemoBytes)
	}
}

// Under a small bound the memo drops the older generation and never holds more than the
// bound; decodes stay exact while it evicts.
func TestResumeMemoEvictsWithinItsBound(t *testing.T) {
	const limit = 2 << 20
	defer anthropic.WithResumeMemo(limit)()
	peak := int64(0)
	chats := make([]*agentChat, 12)
	for i := range chats {
		chats[i] = newAgentChat(uint64(200 + i))
	}
	for turn := 0; turn < 15; turn++ {
		for _, c := range chats {
			c.grow(turn)
			sameDecodeEdits(t, c.body(), false)
			held, _, _, _ := anthropic.ResumeStats()
			peak = max(peak, held)
			if held > limit {
				t.Fatalf("held %d bytes, bound %d", held, limit)
			}
		}
	}
	if peak < limit/4 {
		t.Errorf("control: the memo never came near its bound (peak %d)", peak)
	}
}

// TestResumedDecodesShareParamsSafely: a request that resumes the decode of the request
// before it is handed the same params bytes (not a copy per request), with no room to
// append, so that a caller that appends to its request's params (as an edit would) writes
// a copy and the next request of the conversation still decodes to what a fresh decode
// gives.
func TestResumedDecodesShareParamsSafely(t *testing.T) {
	c := warmChat(t, 11, 6)
	resumed := false
	defer anthropic.OnResume(func(int) { resumed = true })()
	var prev *mapping.Request
	shared := 0
	for turn := 6; turn < 30; turn++ {
		c.grow(turn)
		resumed = false
		req := sameDecode(t, c.body())
		// Params with the messages' residue are the request's own (made for it).
		if resumed && prev != nil && !bytes.Contains(req.Params, []byte(`"messages"`)) {
			if &prev.Params[0] != &req.Params[0] {
				t.Errorf("turn %d: the params were copied, not shared with the request it resumed", turn)
			}
			if cap(req.Params) != len(req.Params) {
				t.Fatalf("turn %d: shared params of length %d have capacity %d", turn, len(req.Params), cap(req.Params))
			}
			// Held, so that a digest of them is found by address, and the digest is theirs;
			// a copy of the same bytes is not held (control).
			d, held := heldtexts.Sum(unsafe.String(&req.Params[0], len(req.Params)))
			if !held || d != sha256.Sum256(req.Params) {
				t.Errorf("turn %d: shared params held %v, digest right %v", turn, held, d == sha256.Sum256(req.Params))
			}
			if c := bytes.Clone(req.Params); func() bool { _, ok := heldtexts.Sum(unsafe.String(&c[0], len(c))); return ok }() {
				t.Errorf("turn %d: a copy of the params is held", turn)
			}
			shared++
		}
		prev = &mapping.Request{Params: req.Params}
		req.Params = append(req.Params, `,"x":1`...)
	}
	if shared < 4 {
		t.Errorf("only %d of 24 requests resumed the one before with the same params", shared)
	}
}
