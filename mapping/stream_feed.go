package mapping

import (
	"fmt"
	"io"
	"strconv"
)

// EditState is where a stream editor stands. It is the editor's one end state: the
// transitions are made in StreamFeed alone (to), and the editors ask it rather than keep
// flags of their own.
//
//	Relaying ──Push──▶ HoldingCall ──Drain empties the queue──▶ Relaying
//	Relaying, HoldingCall ──the upstream's terminal event or end──▶ Draining
//	Relaying, HoldingCall, Draining ──Finish──▶ Done
//	any but Done ──an error──▶ Failed
//
// Done and Failed are final. A flow stop is not a stream state: the stream goes on and
// the settler removes every later call (CallSettler).
type EditState uint8

const (
	// Relaying: nothing is held; each complete event goes to the client as it arrives.
	Relaying EditState = iota
	// HoldingCall: a tool call is open or undecided; it and everything after it wait in
	// the hold queue until it is settled (AHP-DEC-002).
	HoldingCall
	// Draining: the upstream's stream ended (its terminal event, or its end); what is
	// held is settled and written, and the editor writes the stream's end.
	Draining
	// Done: the last event (terminal, an upstream error event, or Fail's) was written;
	// further input is read and dropped, as a client drops it.
	Done
	// Failed: an error ended the editing; Write and Close return it and nothing more of
	// the upstream's is written.
	Failed
)

var editStateNames = [...]string{"relaying", "holdingCall", "draining", "done", "failed"}

func (s EditState) String() string {
	if int(s) < len(editStateNames) {
		return editStateNames[s]
	}
	return "EditState(" + strconv.Itoa(int(s)) + ")"
}

// StreamFeed is what every stream editor shares: the SSE splitter the upstream's bytes go
// into, the hold queue of entries T behind the first undecided call, and the editor's
// state. Name prefixes its errors ("openai chat stream").
type StreamFeed[T any] struct {
	SSE   SSESplitter
	Name  string
	queue HoldQueue[T]
	state EditState
	err   error
}

// to is the one place the state changes. Done and Failed are final; once Draining, the
// editor only settles what is left and ends; and an editor that holds something is
// HoldingCall, not Relaying.
func (f *StreamFeed[T]) to(s EditState) {
	switch f.state {
	case Done, Failed:
		return
	case Draining:
		if s == Relaying || s == HoldingCall {
			return
		}
	}
	if s == Relaying && f.queue.Len() > 0 {
		s = HoldingCall
	}
	f.state = s
}

// State is where the editor stands.
func (f *StreamFeed[T]) State() EditState { return f.state }

// Ended reports that the editor writes nothing more of the upstream's (Done or Failed).
func (f *StreamFeed[T]) Ended() bool { return f.state == Done || f.state == Failed }

// Failed ends the editing with err (state Failed) and returns it; once Failed, the first
// error stays and is returned. An editor already Done stays Done (err is returned only).
func (f *StreamFeed[T]) Failed(err error) error {
	switch f.state {
	case Failed:
		return f.err
	case Done:
		return err
	}
	f.err = err
	f.to(Failed)
	return err
}

// Write feeds upstream bytes to the splitter, which dispatches each complete event.
func (f *StreamFeed[T]) Write(p []byte) (int, error) {
	switch f.state {
	case Failed:
		return 0, f.err
	case Done:
		return len(p), nil
	}
	if err := f.SSE.Write(p); err != nil {
		return 0, f.Failed(fmt.Errorf("%s: %w", f.Name, err))
	}
	return len(p), nil
}

// Drain marks the upstream's stream ended: what is held is settled next (Draining).
func (f *StreamFeed[T]) Drain() { f.to(Draining) }

// Finish writes last, the last bytes the client reads (the terminal event, an upstream
// error event, or the error event of the editor's Fail), and the editor is Done.
func (f *StreamFeed[T]) Finish(out io.Writer, last []byte) error {
	f.to(Done)
	_, err := out.Write(last)
	return err
}

// CloseInput ends the input: an event cut off before its blank line is still dispatched,
// as the assemblers (and the SDKs) read it. It returns the editor's error, if any.
func (f *StreamFeed[T]) CloseInput() error {
	if f.state == Failed {
		return f.err
	}
	if f.state != Done {
		if _, err := f.SSE.Close(); err != nil && f.state != Failed {
			return f.Failed(fmt.Errorf("%s: %w", f.Name, err))
		}
	}
	if f.state == Failed {
		return f.err
	}
	return nil
}

// Held is the number of upstream bytes the editor holds: its queue and a partial event.
func (f *StreamFeed[T]) Held() int { return f.queue.Held() + f.SSE.Buffered() }

// Holding reports whether anything waits behind an undecided call (an event that comes
// now must queue behind it).
func (f *StreamFeed[T]) Holding() bool { return f.queue.Len() > 0 }

// Push queues an entry that holds size bytes behind the first undecided call.
func (f *StreamFeed[T]) Push(it T, size int) {
	f.queue.Push(it, size)
	f.to(HoldingCall)
}

// Grow counts n more bytes held by an entry already queued (a held call's fragment).
func (f *StreamFeed[T]) Grow(n int) { f.queue.Grow(n) }

// Queued are the entries waiting, front first. The slice is the queue's own.
func (f *StreamFeed[T]) Queued() []T { return f.queue.Entries() }

// Release hands the queue to step, front first (HoldQueue.Drain); the editor relays
// again once nothing is held.
func (f *StreamFeed[T]) Release(step func(T) (size int, take bool, err error)) error {
	err := f.queue.Drain(step)
	if f.queue.Len() == 0 {
		f.to(Relaying)
	}
	return err
}
