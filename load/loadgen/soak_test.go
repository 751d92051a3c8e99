package main

import (
	"io"
	"slices"
	"testing"
)

// TestSoakGrowth: a heap that grows across several collections is reported, the same heap
// flat is not, and a window with a single collection is not judged either way (its heap
// goal says when that collection ran). Goroutines and open files are judged regardless.
func TestSoakGrowth(t *testing.T) {
	series := func(n int, f func(i int) soakSample) []soakSample {
		var s []soakSample
		for i := range n {
			s = append(s, f(i))
		}
		return s
	}
	const mib = 1 << 20
	tests := []struct {
		desc    string
		samples []soakSample
		want    []string
	}{
		{"flat", series(16, func(i int) soakSample { return soakSample{300, 180, 40 * mib, float64(i)} }), nil},
		{"heap grows over many collections", series(16, func(i int) soakSample {
			return soakSample{300, 180, float64(40+5*i) * mib, float64(i)}
		}), []string{"heap_goal"}},
		{"one collection: heap not judged", series(16, func(i int) soakSample {
			c, h := 3.0, 60.0
			if i >= 8 {
				c, h = 4, 90
			}
			return soakSample{300, 180, h * mib, c}
		}), nil},
		{"goroutines and files grow, one collection", series(16, func(i int) soakSample {
			return soakSample{float64(300 + 20*i), float64(180 + 20*i), 40 * mib, 3}
		}), []string{"goroutines", "open_fds"}},
	}
	for _, tt := range tests {
		t.Run(tt.desc, func(t *testing.T) {
			got, err := soakGrowth(tt.samples, 0.25, io.Discard)
			if err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(got, tt.want) {
				t.Fatalf("grew %q, want %q", got, tt.want)
			}
		})
	}
	if _, err := soakGrowth(make([]soakSample, 2), 0.25, io.Discard); err == nil {
		t.Fatal("two samples were judged")
	}
}
