package mapping

// HoldQueue is what a stream editor holds behind its first undecided tool call, in stream
// order: nothing the upstream sent after a call reaches the client before the call is
// settled (AHP-DEC-002), so the events behind it, and later calls, wait here. It counts
// the bytes it holds, which the editor reports in Held (the proxy bounds them). T is the
// editor's entry: an event, a call, or whatever else it renders in order.
type HoldQueue[T any] struct {
	items []T
	held  int
}

// Len is the number of entries waiting.
func (q *HoldQueue[T]) Len() int { return len(q.items) }

// Entries are the entries waiting, front first. The slice is the queue's own.
func (q *HoldQueue[T]) Entries() []T { return q.items }

// Push queues an entry that holds size bytes.
func (q *HoldQueue[T]) Push(it T, size int) {
	q.items = append(q.items, it)
	q.held += size
}

// Grow counts n more bytes held by an entry already queued (a held call's fragment).
func (q *HoldQueue[T]) Grow(n int) { q.held += n }

// Held is the number of bytes the entries hold.
func (q *HoldQueue[T]) Held() int { return q.held }

// Drain hands the entries to step, front first, and drops each one step takes along with
// the bytes it held, until step reports that the front entry must wait (an incomplete
// call: take false), fails, or the queue is empty.
func (q *HoldQueue[T]) Drain(step func(T) (size int, take bool, err error)) error {
	var zero T
	for len(q.items) > 0 {
		size, take, err := step(q.items[0])
		if err != nil || !take {
			return err
		}
		q.held -= size
		q.items[0] = zero // the entry's bytes are not kept alive by the backing array
		q.items = q.items[1:]
	}
	q.items = nil
	return nil
}

// ShiftIndex is where upstream position i stands in the client's stream once the
// positions in removed (ascending or not) are gone: later items close the gap.
func ShiftIndex(removed []int, i int) int {
	n := 0
	for _, r := range removed {
		if r < i {
			n++
		}
	}
	return i - n
}
