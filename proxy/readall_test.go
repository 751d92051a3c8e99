package proxy

import (
	"errors"
	"io"
	"runtime"
	"strings"
	"testing"
	"testing/iotest"
)

// readAllLimited must return exactly the body whatever its declared length says, and
// refuse a body over the limit, whichever path reads it.
func TestReadAllLimited(t *testing.T) {
	body := strings.Repeat("0123456789", 10) // 100 bytes
	for _, tc := range []struct {
		name        string
		limit, hint int64
		want        string
		err         error
	}{
		{"declared exactly", 1000, 100, body, nil},
		{"no declared length", 1000, -1, body, nil},
		{"declared longer (body cut short)", 1000, 150, body, nil},
		{"declared shorter, within the limit", 1000, 40, body, nil},
		{"declared shorter, over the limit", 60, 40, "", errBodyTooLarge},
		{"over the limit, no declared length", 99, -1, "", errBodyTooLarge},
		{"exactly the limit", 100, 100, body, nil},
		{"declared over the limit", 99, 100, "", errBodyTooLarge},
	} {
		for _, rd := range []struct {
			name string
			r    func() io.Reader
		}{
			{"whole", func() io.Reader { return strings.NewReader(body) }},
			{"byte by byte", func() io.Reader { return iotest.OneByteReader(strings.NewReader(body)) }},
			{"EOF with data", func() io.Reader { return iotest.DataErrReader(strings.NewReader(body)) }},
		} {
			got, err := readAllLimited(rd.r(), tc.limit, tc.hint)
			if !errors.Is(err, tc.err) || string(got) != tc.want {
				t.Errorf("%s / %s: got %q, %v; want %q, %v", tc.name, rd.name, got, err, tc.want, tc.err)
			}
		}
	}
	// A read error is reported, not mistaken for the end of the body.
	boom := errors.New("connection reset")
	r := io.MultiReader(strings.NewReader("partial"), iotest.ErrReader(boom))
	if _, err := readAllLimited(r, 1000, 100); !errors.Is(err, boom) {
		t.Errorf("read error: got %v, want %v", err, boom)
	}
}

// Past maxUpfront the buffer grows with what arrives: a body longer than maxUpfront is read
// whole whatever it declared, one that keeps its declaration ends in a buffer of its exact
// size (no spare capacity held for the exchange), and the limit still holds.
func TestReadAllLimitedPastUpfront(t *testing.T) {
	body := strings.Repeat("abcdefghij", (3*maxUpfront+maxUpfront/3)/10)
	n := int64(len(body))
	for _, tc := range []struct {
		name        string
		limit, hint int64
		want        string
		err         error
	}{
		{"declared exactly", 4 * n, n, body, nil},
		{"declared longer (body cut short)", 4 * n, 2 * n, body, nil},
		{"declared shorter", 4 * n, n / 2, body, nil},
		{"declared shorter, over the limit", n - 1, n / 2, "", errBodyTooLarge},
		{"exactly the limit", n, n, body, nil},
	} {
		for _, rd := range []struct {
			name string
			r    func() io.Reader
		}{
			{"whole", func() io.Reader { return strings.NewReader(body) }},
			{"in odd pieces", func() io.Reader { return iotest.HalfReader(strings.NewReader(body)) }},
			{"EOF with data", func() io.Reader { return iotest.DataErrReader(strings.NewReader(body)) }},
		} {
			got, err := readAllLimited(rd.r(), tc.limit, tc.hint)
			if !errors.Is(err, tc.err) || string(got) != tc.want {
				t.Errorf("%s / %s: got %d bytes, %v; want %d, %v", tc.name, rd.name, len(got), err, len(tc.want), tc.err)
			}
			if tc.hint == n && err == nil && cap(got) != len(got) {
				t.Errorf("%s / %s: a %d-byte buffer for a body that kept its declared length", tc.name, rd.name, cap(got))
			}
		}
	}
}

// A long body that keeps its declared length costs one allocation of its own size: the
// start of it is read into a reused buffer, not into one that is copied out and dropped.
func TestReadAllLimitedAllocatesALongBodyOnce(t *testing.T) {
	body := strings.Repeat("0123456789abcdef", (maxUpfront+maxUpfront/2)/16)
	read := func() {
		got, err := readAllLimited(strings.NewReader(body), 4*int64(len(body)), int64(len(body)))
		if err != nil || string(got) != body || cap(got) != len(got) {
			t.Fatalf("got %d bytes (cap %d), %v", len(got), cap(got), err)
		}
	}
	read() // fills the pool
	const runs = 20
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	for range runs {
		read()
	}
	runtime.ReadMemStats(&after)
	perRead := float64(after.TotalAlloc-before.TotalAlloc) / runs
	if perRead > 1.3*float64(len(body)) {
		t.Errorf("%.0f bytes allocated per read of a %d-byte body", perRead, len(body))
	}
}
