package anthropic

import (
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"reflect"
	"strings"
	"testing"
)

// Lists taken from a slab are independent: filling one, or appending to it, never changes
// another, across array boundaries and whatever the size hint says.
func TestSlabListsAreIndependent(t *testing.T) {
	for _, ahead := range []func() int{nil, func() int { return 0 }, func() int { return 3 }, func() int { return 100 }} {
		s := slab[int]{ahead: ahead}
		var lists [][]int
		for i := 0; i < 200; i++ {
			n := i % 7
			l := s.take(n)
			if len(l) != n || cap(l) != n {
				t.Fatalf("take(%d): len %d cap %d", n, len(l), cap(l))
			}
			for j := range l {
				if l[j] != 0 {
					t.Fatalf("take(%d) handed out a used element", n)
				}
				l[j] = i
			}
			lists = append(lists, l)
			if i%3 == 0 && i > 0 {
				prev := &lists[i-1]
				*prev = append(*prev, -1) // must reallocate, not write into list i
			}
		}
		for i, l := range lists {
			for j, v := range l {
				if v != i && !(v == -1 && j == len(l)-1) {
					t.Fatalf("list %d changed: %v", i, l)
				}
			}
		}
		if s.keep(nil) != nil || s.keep([]int{}) != nil {
			t.Fatal("keep of an empty list is not nil")
		}
		src := []int{1, 2, 3}
		c := s.keep(src)
		src[0] = 9
		if !reflect.DeepEqual(c, []int{1, 2, 3}) || cap(c) != 3 {
			t.Fatalf("keep: %v cap %d", c, cap(c))
		}
	}
}

func TestGrow(t *testing.T) {
	l := []int{1, 2}
	for _, want := range []int{0, 2, 3, 50} {
		g := grow(l, want)
		if !reflect.DeepEqual(g, l) || cap(g) < max(want, len(l)+1) {
			t.Fatalf("grow(%v, %d) = %v cap %d", l, want, g, cap(g))
		}
		g[0] = 7
		if l[0] != 1 {
			t.Fatal("grow shares the array")
		}
	}
}

// The id hash frames and hashes exactly the bytes it is given, whether a string fits in its
// buffer or passes through in pieces: ids must not depend on how the hash is fed.
func TestIDHashIsFramedSHA256(t *testing.T) {
	h := newIDHash()
	for _, n := range []int{0, 1, 100, 511, 512, 513, 1000, 1025, 5000} {
		for _, lead := range []int{0, 1, 300, 511} {
			h.reset()
			ref := sha256.New()
			var frame []byte
			h.int(-3)
			frame = binary.AppendVarint(frame, -3)
			lead := strings.Repeat("l", lead)
			s := strings.Repeat("0123456789abcdef", n/16+1)[:n]
			for _, str := range []string{lead, s, "tail"} {
				h.str(str)
				frame = append(binary.AppendUvarint(frame, uint64(len(str))), str...)
			}
			ref.Write(frame)
			if got, want := h.sum(), hex.EncodeToString(ref.Sum(nil)[:8]); got != want {
				t.Fatalf("len %d after %d: %s, want %s", n, len(lead), got, want)
			}
		}
	}
}
