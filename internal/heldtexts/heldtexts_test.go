package heldtexts

import (
	"crypto/sha256"
	"runtime"
	"strconv"
	"strings"
	"testing"
)

// A held text is recognised by its address and length, and no other string gets its
// digest: not a prefix or suffix of it (same address or same end, other length), not a
// text that later occupies the memory the held text had. The control builds a memo that
// does not hold its texts: there the memory of a dropped text is reused for another text
// of the same length, which then gets the dropped text's digest — so it is the entry
// keeping the string alive that makes a hit exact.
func TestHitIsExact(t *testing.T) {
	const size = 4000
	text := func(round, i int) string {
		return strings.Repeat(strconv.Itoa(round*1000+i)+" ", size)[:size]
	}
	run := func(keep bool) (reused, wrong int) {
		m := newMemo(64<<20, keep)
		for round := 0; round < 50 && (keep || wrong == 0); round++ {
			var keys []key
			for i := 0; i < 32; i++ {
				s := text(round, i)
				m.hold(s)
				if d, ok := m.sum(s); !ok {
					t.Fatalf("keep=%v: a held text was not recognised", keep)
				} else if d != sha256.Sum256([]byte(s)) {
					wrong++ // its address was another text's, whose entry stayed
				}
				if d, ok := m.sum(s[:size-1]); ok && d != sha256.Sum256([]byte(s[:size-1])) {
					t.Errorf("keep=%v: a prefix of a held text got another digest", keep)
				}
				if d, ok := m.sum(s[1:]); ok && d != sha256.Sum256([]byte(s[1:])) {
					t.Errorf("keep=%v: a suffix of a held text got another digest", keep)
				}
				keys = append(keys, keyOf(s))
			}
			// Every reference but the memo's is gone; new texts of the same length may
			// now be placed where the old ones were.
			runtime.GC()
			runtime.GC()
			for i := 0; i < 64; i++ {
				s := text(round+100, i)
				for _, k := range keys {
					if k == keyOf(s) {
						reused++
					}
				}
				if d, ok := m.sum(s); ok && d != sha256.Sum256([]byte(s)) {
					wrong++
				}
			}
		}
		return reused, wrong
	}
	if reused, wrong := run(true); reused != 0 || wrong != 0 {
		t.Errorf("held texts: %d new texts took a held text's memory, %d got a wrong digest", reused, wrong)
	}
	reused, wrong := run(false)
	t.Logf("control: %d texts made after a collection took the memory of one just dropped; %d texts in all got a wrong digest", reused, wrong)
	if wrong == 0 {
		t.Errorf("control (texts not held): %d new texts reused a dropped text's memory, none got its digest; the test shows nothing", reused)
	}
}

// Texts never held, and the empty string, are not recognised.
func TestOnlyHeldTexts(t *testing.T) {
	m := newMemo(1<<20, true)
	s := strings.Repeat("x", 300)
	if _, ok := m.sum(s); ok {
		t.Error("a text never held was recognised")
	}
	m.hold("")
	if _, ok := m.sum(""); ok {
		t.Error("the empty string was recognised")
	}
	m.hold(s)
	if _, ok := m.sum(strings.Clone(s)); ok {
		t.Error("an equal text at another address was recognised (the memo is by address)")
	}
}

// However many texts are held, the memo holds at most its limit and reports what it
// holds; a text in use survives.
func TestBoundedAndReported(t *testing.T) {
	m := newMemo(1<<20, true)
	keep := strings.Repeat("k", 500)
	m.hold(keep)
	for i := 0; i < 20000; i++ {
		m.hold(strings.Repeat("t", 300) + strconv.Itoa(i))
		if i%100 == 0 {
			if _, ok := m.sum(keep); !ok {
				t.Fatalf("after %d texts the one in use was dropped", i)
			}
		}
	}
	var bytes, entries int64
	for _, sh := range m.shards {
		b, n := sh.Stats()
		bytes, entries = bytes+b, entries+n
	}
	if bytes > 1<<20 || bytes < 1<<18 || entries == 0 || entries > bytes/300 {
		t.Errorf("holds %d bytes in %d entries, limit %d", bytes, entries, 1<<20)
	}
}

// Concurrent first requests for a held text's digest all get it right (run with -race).
func TestConcurrentFirstSum(t *testing.T) {
	m := newMemo(1<<20, true)
	s := strings.Repeat("concurrent ", 100)
	m.hold(s)
	want := sha256.Sum256([]byte(s))
	done := make(chan [sha256.Size]byte)
	for i := 0; i < 8; i++ {
		go func() { d, _ := m.sum(s); done <- d }()
	}
	for i := 0; i < 8; i++ {
		if d := <-done; d != want {
			t.Fatalf("digest %x, want %x", d, want)
		}
	}
}

// A note serves only the key that set it: not a key given its slot later, after the
// first was released. Live keys get slots of their own while there are slots.
func TestNotesByKey(t *testing.T) {
	s := strings.Repeat("noted ", 100)
	Hold(s)
	h, ok := Find(s)
	if !ok || h.Sum() != sha256.Sum256([]byte(s)) {
		t.Fatal("a held text was not found with its digest")
	}
	var keys []NoteKey
	slots := map[uint8]bool{}
	for i := 0; i < noteSlots; i++ {
		k := NewNoteKey()
		keys = append(keys, k)
		slots[k.slot] = true
		h.SetNote(k, i)
	}
	defer func() {
		for _, k := range keys[1:] {
			k.Release()
		}
	}()
	if len(slots) != noteSlots {
		t.Errorf("%d live keys share %d slots", noteSlots, len(slots))
	}
	for i, k := range keys {
		if v := h.Note(k); v != i {
			t.Errorf("key %d reads %v", i, v)
		}
	}
	keys[0].Release()
	next := NewNoteKey()
	defer next.Release()
	if next.slot != keys[0].slot {
		t.Errorf("a released slot was not given to the next key")
	}
	if v := h.Note(next); v != nil {
		t.Errorf("a new key read its slot's previous note: %v", v)
	}
	if _, ok := Find(strings.Clone(s)); ok {
		t.Error("an equal text at another address was found")
	}
}
