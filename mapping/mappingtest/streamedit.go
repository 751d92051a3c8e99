package mappingtest

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/hookproxy/hookproxy/chain/ahp"
	"github.com/hookproxy/hookproxy/mapping"
)

// Script is the verdict for each call, by StreamCall.Index; a call not listed is allowed.
type Script map[int]mapping.CallVerdict

// ScriptFromBits is the verdicts a fuzzer's byte picks for calls 0..3, two bits each:
// 0 allow, 1 remove (with a note), 2 rewrite the input, 3 flow stop.
func ScriptFromBits(bits uint8) Script {
	s := Script{}
	for i := 0; i < 4; i++ {
		switch (bits >> (2 * i)) & 3 {
		case 1:
			s[i] = mapping.CallVerdict{Remove: true, Note: "removed " + string(rune('a'+i))}
		case 2:
			s[i] = mapping.CallVerdict{Input: json.RawMessage(`{"rewritten":true}`)}
		case 3:
			s[i] = mapping.CallVerdict{Remove: true, Stop: true, Note: "stop"}
		}
	}
	return s
}

// Decider is a StreamDecider that answers from a Script and records what it was asked.
type Decider struct {
	Script  Script
	Decided []mapping.StreamCall
	Skips   []mapping.StreamCall
	// OnDecide, when set, runs before each verdict (a test checks what the client has
	// received at that moment).
	OnDecide func(mapping.StreamCall)
	// Err, when set, is returned for the call with index ErrAt.
	Err   error
	ErrAt int
}

func (d *Decider) Decide(c mapping.StreamCall) (mapping.CallVerdict, error) {
	d.Decided = append(d.Decided, c)
	if d.OnDecide != nil {
		d.OnDecide(c)
	}
	if d.Err != nil && c.Index == d.ErrAt {
		return mapping.CallVerdict{}, d.Err
	}
	return d.Script[c.Index], nil
}

func (d *Decider) Skipped(c mapping.StreamCall) { d.Skips = append(d.Skips, c) }

// Edit runs stream through the translator's editor, written in pieces of chunk bytes
// (the whole stream at once when chunk <= 0), and returns what the client receives.
func Edit(se mapping.StreamEditing, stream []byte, chunk int, d mapping.StreamDecider) ([]byte, error) {
	var out bytes.Buffer
	ed := se.NewStreamEditor(&out, d)
	if chunk <= 0 {
		chunk = len(stream) + 1
	}
	for len(stream) > 0 {
		n := min(chunk, len(stream))
		if _, err := ed.Write(stream[:n]); err != nil {
			return out.Bytes(), err
		}
		stream = stream[n:]
	}
	err := ed.Close() // before out is read: Close may write the stream's end
	return out.Bytes(), err
}

// Held is the held path for the same verdicts: the stream assembled and decoded, each
// call judged in order (flow stop removes it and every later one), the removed calls
// taken out with their notes, the finish reason made terminal when no call is left, and
// the result encoded. It returns the client's body (a non-streamed response).
func Held(tr mapping.Translator, stream []byte, script Script) ([]byte, error) {
	asm := tr.NewAssembler()
	_, _ = asm.Write(stream)
	body, err := asm.Body()
	if err != nil {
		return nil, err
	}
	resp, err := tr.DecodeResponse(body)
	if err != nil {
		return nil, err
	}
	items := ahp.CloneMessages(resp.Items)
	calls := mapping.ToolCalls(items)
	removed := map[int]bool{}
	var notes []string
	for i, c := range calls {
		v := script[i]
		if v.Stop {
			for j := i; j < len(calls); j++ {
				removed[j] = true
			}
			notes = append(notes, v.Note)
			break
		}
		if v.Remove {
			removed[i] = true
			notes = append(notes, v.Note)
		} else if v.Input != nil {
			p := items[c.Item].Parts[c.Part]
			items[c.Item].Parts[c.Part] = mapping.ToolCallPart(p.ID, mapping.ToolCall{ID: c.ID, Name: c.Name, Input: v.Input})
		}
	}
	finish := ""
	if len(removed) > 0 {
		var kept []string
		for _, n := range notes {
			if n != "" {
				kept = append(kept, n)
			}
		}
		items = mapping.RemoveCalls(items, calls, removed, strings.Join(kept, "\n"), resp.ID+".hookproxy")
		if len(mapping.ToolCalls(items)) == 0 {
			finish = tr.TerminalFinishReason()
		}
	}
	return tr.EncodeResponse(resp, items, finish)
}

// View is what an agent acts on in a response body: per message its role and parts
// (text by category, tool calls by id, name and input), and the finish reason.
func View(tr mapping.Translator, body []byte) (string, error) {
	resp, err := tr.DecodeResponse(body)
	if err != nil {
		return "", err
	}
	var b strings.Builder
	fmt.Fprintf(&b, "finish=%s\n", resp.FinishReason)
	for _, m := range resp.Items {
		fmt.Fprintf(&b, "%s:\n", m.Role)
		for i := range m.Parts {
			p := &m.Parts[i]
			if c, ok := mapping.ParseToolCall(p); ok {
				in, _ := json.Marshal(c.Input)
				fmt.Fprintf(&b, "  call %s %s %s\n", c.ID, c.Name, in)
				continue
			}
			fmt.Fprintf(&b, "  %s/%s %q\n", p.Kind, p.Category, p.TextOf())
		}
	}
	return b.String(), nil
}

// Assembled is the body a client assembles from a stream.
func Assembled(tr mapping.Translator, stream []byte) ([]byte, error) {
	asm := tr.NewAssembler()
	_, _ = asm.Write(stream)
	return asm.Body()
}

// Equivalent compares what the client assembles from the edited stream with the held
// path's body for the same verdicts; it returns "" when they agree, else a description.
func Equivalent(tr mapping.Translator, stream []byte, chunk int, script Script) (string, error) {
	held, err := Held(tr, stream, script)
	if err != nil {
		return "", fmt.Errorf("held path: %w", err)
	}
	se, ok := tr.(mapping.StreamEditing)
	if !ok {
		return "", fmt.Errorf("%T does not edit streams", tr)
	}
	edited, err := Edit(se, stream, chunk, &Decider{Script: script})
	if err != nil {
		return "", fmt.Errorf("edit: %w", err)
	}
	body, err := Assembled(tr, edited)
	if err != nil {
		return "", fmt.Errorf("the edited stream does not assemble: %w\n%s", err, edited)
	}
	want, err := View(tr, held)
	if err != nil {
		return "", err
	}
	got, err := View(tr, body)
	if err != nil {
		return "", err
	}
	if got != want {
		return fmt.Sprintf("edited stream:\n%s\nheld path:\n%s\nstream sent:\n%s", got, want, edited), nil
	}
	return "", nil
}

// Undecided reports a tool call the client assembles from the edited stream out beyond
// those Decide let through (d's verdicts, counted by tool name), or "" when there is none:
// no call reaches the client unjudged. A stream that does not assemble gives the client
// no call.
func Undecided(tr mapping.Translator, out []byte, d *Decider) string {
	body, err := Assembled(tr, out)
	if err != nil {
		return ""
	}
	resp, err := tr.DecodeResponse(body)
	if err != nil {
		return ""
	}
	kept := map[string]int{}
	for _, c := range d.Decided {
		if v := d.Script[c.Index]; !v.Remove && !v.Stop {
			kept[c.Name]++
		}
	}
	for _, c := range mapping.ToolCalls(resp.Items) {
		if kept[c.Name] == 0 {
			return fmt.Sprintf("%s %s", c.Name, c.Input)
		}
		kept[c.Name]--
	}
	return ""
}

// BenchEdit measures one streamed response through the translator's editor, written
// whole, with the verdicts of script (a benchmark of the streamed-call path).
func BenchEdit(b *testing.B, se mapping.StreamEditing, stream []byte, script Script) {
	b.ReportAllocs()
	b.SetBytes(int64(len(stream)))
	var out bytes.Buffer
	for b.Loop() {
		out.Reset()
		ed := se.NewStreamEditor(&out, &Decider{Script: script})
		if _, err := ed.Write(stream); err != nil {
			b.Fatal(err)
		}
		if err := ed.Close(); err != nil {
			b.Fatal(err)
		}
	}
}

// ModifyFirst is a Script that rewrites the input of a response's first tool call.
var ModifyFirst = Script{0: {Input: json.RawMessage(`{"command":"ls -la","rewritten":true}`)}}

// CallDecodes is the number of decodes of a tool call (mapping.CallDecodeHook: a codec's
// call decoder reading native arguments, or ParseToolCall reading a tool_call part back)
// while f runs. Tests that use it must not run in parallel with others of their package.
func CallDecodes(f func()) int {
	n := 0
	mapping.CallDecodeHook = func() { n++ }
	defer func() { mapping.CallDecodeHook = nil }()
	f()
	return n
}

// DecodedOnce checks that the editor decodes each streamed tool call of stream at most
// once on its way from events to settlement and back to events, for verdicts that keep,
// rewrite and remove calls. Its control is the route the editors took before: a call
// decoded with the whole DecodeResponse of a document holding it and read back from its
// tool_call part (then re-encoded for a modify), which the held path still takes; the same
// count over it exceeds one decode per call.
func DecodedOnce(t testing.TB, tr mapping.Translator, stream []byte) {
	t.Helper()
	script := Script{0: ModifyFirst[0], 1: {Remove: true, Note: "removed"}}
	d := &Decider{Script: script}
	var err error
	edit := CallDecodes(func() { _, err = Edit(tr.(mapping.StreamEditing), stream, 7, d) })
	if err != nil {
		t.Fatalf("edit: %v", err)
	}
	calls := len(d.Decided) + len(d.Skips)
	if calls < 2 {
		t.Fatalf("the stream has %d tool calls; the check needs a kept and a removed one", calls)
	}
	if edit > calls {
		t.Errorf("the editor decoded %d times for %d streamed calls: more than once per call", edit, calls)
	}
	held := CallDecodes(func() { _, err = Held(tr, stream, script) })
	if err != nil {
		t.Fatalf("held path: %v", err)
	}
	t.Logf("%d streamed calls: %d decodes edited, %d on the decode-and-re-encode route", calls, edit, held)
	if held <= calls {
		t.Errorf("control: the decode-and-re-encode route decoded %d times for %d calls; the count cannot tell the routes apart", held, calls)
	}
}
