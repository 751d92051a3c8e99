package twogen

import (
	"strconv"
	"strings"
	"testing"
	"unsafe"
)

func cost(k string, _ int) int64 { return int64(len(k)) + 16 }

// However many keys pass, the map holds at most its limit, reports what it holds, and what
// is in use survives the generations.
func TestBoundedAndAccounted(t *testing.T) {
	m := New(64<<10, cost, strings.Clone)
	keep := strings.Repeat("k", 100)
	m.Add(keep, -1)
	for i := 0; i < 20000; i++ {
		m.Add(strings.Repeat("t", 80)+strconv.Itoa(i), i)
		if i%50 == 0 {
			if v, ok := m.Get(keep); !ok || v != -1 {
				t.Fatalf("after %d keys the one in use was dropped", i)
			}
		}
		if h, _ := m.Stats(); h > m.Limit() {
			t.Fatalf("after %d keys the map holds %d bytes, limit %d", i, h, m.Limit())
		}
	}
	var sum int64
	for k, v := range m.cur {
		sum += cost(k, v)
	}
	for k, v := range m.prev {
		sum += cost(k, v)
	}
	if h, n := m.Stats(); h != sum || n != int64(len(m.cur)+len(m.prev)) || h < m.Limit()/4 {
		t.Errorf("reported %d bytes / %d entries, holds %d / %d", h, n, sum, len(m.cur)+len(m.prev))
	}
	if _, ok := m.Get(strings.Repeat("t", 80) + "1"); ok {
		t.Error("a key unused since the start survived 20,000 others")
	}
}

// The first value stored wins, and keys are the map's own copies.
func TestAddKeepsFirstAndOwnsKeys(t *testing.T) {
	m := New(1<<20, cost, strings.Clone)
	b := []byte("some request bytes")
	k := unsafe.String(unsafe.SliceData(b), len(b))
	if got := m.Add(k, 1); got != 1 {
		t.Fatalf("Add = %d", got)
	}
	if got := m.Add("some request bytes", 2); got != 1 {
		t.Fatalf("a second Add replaced the value: %d", got)
	}
	for i := range b {
		b[i] = 'x'
	}
	if v, ok := m.Get("some request bytes"); !ok || v != 1 {
		t.Fatalf("the key changed with the caller's bytes: %d %v", v, ok)
	}
}
