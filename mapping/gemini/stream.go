package gemini

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"

	"github.com/tidwall/gjson"

	"github.com/hookproxy/hookproxy/mapping"
)

// A Gemini stream is a sequence of whole GenerateContentResponse chunks, each carrying
// the next parts of every candidate: text arrives in pieces, a functionCall always whole.
// The SSE form (alt=sse) sends each chunk as one "data:" event; without alt=sse the body
// is one JSON array of the chunks. Assembling merges the chunks into one response: the
// text of consecutive text parts of the same kind is joined, every other part is kept as
// it came, and for everything else (finishReason, usageMetadata, modelVersion, ...) the
// last value wins.

// merger accumulates stream chunks.
type merger struct {
	chunks int
	top    []member // top-level members except candidates, first-seen order
	candAt int      // position of "candidates" among top (-1: not seen)
	cands  []*mergedCandidate
	sawTop map[string]int
}

type member struct{ key, raw string }

type mergedCandidate struct {
	index    int
	members  []member // except content
	seen     map[string]int
	role     string
	content  []member // content members except parts and role
	parts    []*mergedPart
	hasParts bool // a chunk had content.parts, even an empty one
	// fresh: the last part came from an earlier chunk (text of a new chunk may join it)
	fresh bool
}

// mergedPart is one part of the assembled candidate. A text part that more chunks
// continued is rendered from its first raw with the joined text (and the last signature).
type mergedPart struct {
	raw       string
	text      *strings.Builder // text parts only
	thought   bool
	signature string
	joined    bool
}

// textOnly reports whether a text part has nothing but text, thought and signature, so
// that joining another text to it loses nothing.
func textOnly(p gjson.Result) bool {
	ok := p.Get("text").Type == gjson.String
	p.ForEach(func(k, _ gjson.Result) bool {
		switch k.Str {
		case "text", "thought", "thoughtSignature":
			return true
		}
		ok = false
		return false
	})
	return ok
}

// add merges one chunk. An error chunk is an *UpstreamError.
func (m *merger) add(chunk gjson.Result) error {
	if !chunk.IsObject() {
		return fmt.Errorf("%w: a stream chunk is not a JSON object", mapping.ErrMalformed)
	}
	if ue := errorOf(chunk); ue != nil {
		return ue
	}
	if m.sawTop == nil {
		m.sawTop, m.candAt = map[string]int{}, -1
	}
	m.chunks++
	var err error
	chunk.ForEach(func(k, v gjson.Result) bool {
		if k.Str == "candidates" {
			if m.candAt < 0 {
				m.candAt = len(m.top)
			}
			if !v.IsArray() {
				err = fmt.Errorf("%w: candidates is not an array", mapping.ErrMalformed)
				return false
			}
			v.ForEach(func(_, c gjson.Result) bool {
				err = m.addCandidate(c)
				return err == nil
			})
			return err == nil
		}
		setMember(&m.top, m.sawTop, k.Str, v.Raw)
		return true
	})
	for _, c := range m.cands {
		c.fresh = true
	}
	return err
}

func setMember(list *[]member, seen map[string]int, key, raw string) {
	if i, ok := seen[key]; ok {
		(*list)[i].raw = raw
		return
	}
	seen[key] = len(*list)
	*list = append(*list, member{key, raw})
}

func (m *merger) addCandidate(c gjson.Result) error {
	if !c.IsObject() {
		return fmt.Errorf("%w: a candidate is not a JSON object", mapping.ErrMalformed)
	}
	idx := int(c.Get("index").Int())
	var mc *mergedCandidate
	for _, x := range m.cands {
		if x.index == idx {
			mc = x
		}
	}
	if mc == nil {
		mc = &mergedCandidate{index: idx, seen: map[string]int{}}
		m.cands = append(m.cands, mc)
	}
	var err error
	c.ForEach(func(k, v gjson.Result) bool {
		if k.Str != "content" {
			setMember(&mc.members, mc.seen, k.Str, v.Raw)
			return true
		}
		if _, ok := mc.seen["content"]; !ok {
			setMember(&mc.members, mc.seen, "content", "")
		}
		if !v.IsObject() {
			err = fmt.Errorf("%w: a candidate's content is not an object", mapping.ErrMalformed)
			return false
		}
		v.ForEach(func(ck, cv gjson.Result) bool {
			switch ck.Str {
			case "role":
				if mc.role == "" {
					mc.role = cv.Raw
				}
			case "parts":
				if !cv.IsArray() {
					err = fmt.Errorf("%w: content.parts is not an array", mapping.ErrMalformed)
					return false
				}
				mc.hasParts = true
				first := true
				cv.ForEach(func(_, p gjson.Result) bool {
					mc.addPart(p, first && mc.fresh)
					first = false
					return true
				})
			default:
				found := false
				for i := range mc.content {
					if mc.content[i].key == ck.Str {
						mc.content[i].raw, found = cv.Raw, true
					}
				}
				if !found {
					mc.content = append(mc.content, member{ck.Str, cv.Raw})
				}
			}
			return err == nil
		})
		return err == nil
	})
	mc.fresh = false
	return err
}

// addPart appends a part; the first text part of a chunk continues the previous chunk's
// last text part of the same kind.
func (mc *mergedCandidate) addPart(p gjson.Result, mayJoin bool) {
	if p.IsObject() && textOnly(p) {
		thought := p.Get("thought").Type == gjson.True
		if n := len(mc.parts); mayJoin && n > 0 {
			last := mc.parts[n-1]
			if last.text != nil && last.thought == thought && last.signature == "" {
				last.text.WriteString(p.Get("text").Str)
				if s := p.Get("thoughtSignature"); s.Exists() {
					last.signature = s.Raw
				}
				last.joined = true
				return
			}
		}
		mp := &mergedPart{raw: p.Raw, text: &strings.Builder{}, thought: thought}
		mp.text.WriteString(p.Get("text").Str)
		if s := p.Get("thoughtSignature"); s.Exists() {
			mp.signature = s.Raw
		}
		mc.parts = append(mc.parts, mp)
		return
	}
	mc.parts = append(mc.parts, &mergedPart{raw: p.Raw})
}

func (p *mergedPart) render() string {
	if !p.joined {
		return p.raw
	}
	out, err := mapping.SetRaw(p.raw, "text", mapping.Quote(p.text.String()))
	if err != nil {
		return p.raw
	}
	if p.signature != "" {
		if out2, err := mapping.SetRaw(out, "thoughtSignature", p.signature); err == nil {
			out = out2
		}
	}
	return out
}

// render is the assembled response.
func (m *merger) render() string {
	var b strings.Builder
	b.WriteByte('{')
	n := 0
	write := func(key, raw string) {
		if n > 0 {
			b.WriteByte(',')
		}
		b.WriteString(mapping.Quote(key))
		b.WriteByte(':')
		b.WriteString(raw)
		n++
	}
	for i := 0; i <= len(m.top); i++ {
		if i == m.candAt {
			cands := make([]string, len(m.cands))
			for j, c := range m.cands {
				cands[j] = c.render()
			}
			write("candidates", mapping.JoinArray(cands))
		}
		if i < len(m.top) {
			write(m.top[i].key, m.top[i].raw)
		}
	}
	b.WriteByte('}')
	return b.String()
}

func (mc *mergedCandidate) render() string {
	var b strings.Builder
	b.WriteByte('{')
	for i, mem := range mc.members {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString(mapping.Quote(mem.key))
		b.WriteByte(':')
		if mem.key != "content" {
			b.WriteString(mem.raw)
			continue
		}
		b.WriteByte('{')
		k := 0
		if mc.hasParts {
			parts := make([]string, len(mc.parts))
			for j, p := range mc.parts {
				parts[j] = p.render()
			}
			b.WriteString(`"parts":` + mapping.JoinArray(parts))
			k++
		}
		if mc.role != "" {
			if k > 0 {
				b.WriteByte(',')
			}
			b.WriteString(`"role":` + mc.role)
			k++
		}
		for _, c := range mc.content {
			if k > 0 {
				b.WriteByte(',')
			}
			b.WriteString(mapping.Quote(c.key) + ":" + c.raw)
			k++
		}
		b.WriteByte('}')
	}
	b.WriteByte('}')
	return b.String()
}

// assembler reads a Gemini SSE stream.
type assembler struct {
	// Err: a malformed stream, or the upstream's error chunk (merger.add returns it).
	mapping.AssemblerInput
	m merger
}

// NewAssembler returns an assembler of the SSE stream (alt=sse).
func (t *Translator) NewAssembler() mapping.Assembler {
	a := &assembler{}
	a.SSE.MaxEvent = 16 << 20
	a.SSE.Dispatch = func(_ string, data []byte) error {
		if len(bytes.TrimSpace(data)) == 0 {
			return nil
		}
		if err := strictJSON.Check(data); err != nil {
			return fmt.Errorf("%w: a stream event is not JSON: %v", mapping.ErrMalformed, err)
		}
		return a.m.add(gjson.ParseBytes(data))
	}
	return a
}

func (a *assembler) Body() ([]byte, error) {
	var ue *mapping.UpstreamError
	if errors.As(a.Err, &ue) {
		return nil, ue
	}
	if a.Err == nil {
		a.Err = a.SSE.Close() // a last event without its blank line
	}
	if errors.As(a.Err, &ue) {
		return nil, ue
	}
	if a.Err != nil {
		if errors.Is(a.Err, mapping.ErrMalformed) {
			return nil, a.Err
		}
		return nil, fmt.Errorf("%w: %v", mapping.ErrMalformed, a.Err)
	}
	if a.m.chunks == 0 {
		return nil, fmt.Errorf("%w: the stream carried no response", mapping.ErrMalformed)
	}
	return []byte(a.m.render()), nil
}

// WriteStream re-emits a complete response as Gemini's SSE stream: one event carrying the
// whole response (a stream of one chunk), or one event per element of an array body.
func (t *Translator) WriteStream(w io.Writer, body []byte) error {
	root := gjson.ParseBytes(body)
	var chunks []string
	if root.IsArray() {
		root.ForEach(func(_, c gjson.Result) bool {
			chunks = append(chunks, c.Raw)
			return true
		})
	} else {
		chunks = []string{root.Raw}
	}
	for _, c := range chunks {
		if err := writeEvent(w, []byte(c)); err != nil {
			return err
		}
	}
	return nil
}

// writeEvent writes one chunk as an SSE event, compacted onto one data line.
func writeEvent(w io.Writer, chunk []byte) error {
	ev, err := sseEvent(chunk)
	if err != nil {
		return err
	}
	if _, err := w.Write(ev); err != nil {
		return err
	}
	if f, ok := w.(http.Flusher); ok {
		f.Flush()
	}
	return nil
}

// sseEvent frames one chunk as an SSE event, compacted onto one data line.
func sseEvent(chunk []byte) ([]byte, error) {
	var b bytes.Buffer
	b.Grow(len(chunk) + 10)
	b.WriteString("data: ")
	if err := json.Compact(&b, chunk); err != nil {
		return nil, fmt.Errorf("gemini: stream chunk: %w", err)
	}
	b.WriteString("\r\n\r\n")
	return b.Bytes(), nil
}

// statusOfErrType is the HTTP status of an in-stream error hookproxy writes.
func statusOfErrType(errType string) int {
	switch errType {
	case "policy_denied", "permission_error":
		return http.StatusForbidden
	case "invalid_request_error":
		return http.StatusBadRequest
	}
	if n, err := strconv.Atoi(strings.TrimPrefix(errType, "http_")); err == nil && n >= 400 && n < 600 {
		return n
	}
	return http.StatusInternalServerError
}
