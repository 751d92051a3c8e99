package ahp

// AppendEvent appends ev as the frames encode it, which must be what encoding/json writes
// ("null" for nil): the tests compare the event alone as well as the frames.
func AppendEvent(dst []byte, ev *Event) ([]byte, error) {
	w := eventWriter{b: dst}
	w.event(ev)
	return w.b, w.err
}
