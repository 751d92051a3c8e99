package mapping

import (
	"bytes"
	"errors"
	"testing"
)

// TestStreamFeedStates walks the editor state machine through its transitions: holding
// while something is queued, relaying once the queue is released, draining (which a
// release does not undo), done, and failed, each final.
func TestStreamFeedStates(t *testing.T) {
	var f StreamFeed[string]
	var got []byte
	f.SSE.Dispatch = func(raw []byte, _ string, _ []byte, _ bool) error {
		if string(bytes.TrimSpace(raw)) == "data: bad" {
			return errors.New("bad event")
		}
		got = append(got, raw...)
		return nil
	}
	f.Name = "test stream"
	step := func(s string) (int, bool, error) { return len(s), s != "open", nil }
	if f.State() != Relaying {
		t.Fatalf("a new editor is %v", f.State())
	}
	f.Push("open", 4)
	if f.State() != HoldingCall || f.Held() != 4 {
		t.Fatalf("with a call queued: %v, held %d", f.State(), f.Held())
	}
	if err := f.Release(step); err != nil || f.State() != HoldingCall {
		t.Fatalf("an undecided call stays held: %v %v", f.State(), err)
	}
	f.queue = HoldQueue[string]{}
	f.Push("decided", 7)
	if err := f.Release(step); err != nil || f.State() != Relaying || f.Held() != 0 {
		t.Fatalf("after the queue is released: %v, held %d, %v", f.State(), f.Held(), err)
	}
	f.Drain()
	f.Push("late", 4)
	if err := f.Release(step); err != nil || f.State() != Draining {
		t.Fatalf("draining is left only for done or failed, got %v", f.State())
	}
	var out bytes.Buffer
	if err := f.Finish(&out, []byte("data: end\n\n")); err != nil || f.State() != Done || out.String() != "data: end\n\n" {
		t.Fatalf("finish: %v %q %v", f.State(), out.String(), err)
	}
	if n, err := f.Write([]byte("data: after\n\n")); n != 13 || err != nil || len(got) != 0 {
		t.Fatalf("input after done is read and dropped: %d %v %q", n, err, got)
	}
	if f.Failed(errors.New("late")) == nil || f.State() != Done {
		t.Fatalf("done is final: %v", f.State())
	}

	var g StreamFeed[string]
	g.SSE.Dispatch = f.SSE.Dispatch
	g.Name = "test stream"
	if _, err := g.Write([]byte("data: ok\n\ndata: bad\n\n")); err == nil || g.State() != Failed {
		t.Fatalf("a bad event fails the editing: %v %v", g.State(), err)
	}
	first := g.CloseInput()
	if _, err := g.Write([]byte("data: ok\n\n")); first == nil || err != first {
		t.Fatalf("the first error stays: %v, then %v", first, err)
	}
	if g.Failed(errors.New("other")) != first {
		t.Fatalf("failed is final and keeps its error")
	}
}
