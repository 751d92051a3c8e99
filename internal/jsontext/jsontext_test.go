package jsontext

import (
	"strconv"
	"testing"
)

func TestKeySet(t *testing.T) {
	for _, n := range []int{1, 16, 17, 40} {
		var ks KeySet
		for i := range n {
			if !ks.Add("k" + strconv.Itoa(i)) {
				t.Fatalf("n=%d: key %d reported as duplicate", n, i)
			}
		}
		for i := range n {
			if ks.Add("k" + strconv.Itoa(i)) {
				t.Fatalf("n=%d: duplicate key %d not detected", n, i)
			}
		}
		if !ks.Add("new") {
			t.Fatalf("n=%d: fresh key reported as duplicate", n)
		}
	}
}

func TestStringEnd(t *testing.T) {
	for _, tc := range []struct {
		in   string
		i    int
		want int
	}{
		{`"abc"`, 0, 4},
		{`x:"a\"b",`, 2, 7},
		{`"a\\"`, 0, 4},
		{`""`, 0, 1},
		{`"open`, 0, 4},
	} {
		if got := StringEnd([]byte(tc.in), tc.i); got != tc.want {
			t.Errorf("StringEnd(%q, %d) = %d, want %d", tc.in, tc.i, got, tc.want)
		}
	}
}

func TestUnquoteKey(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{`"input"`, "input"},
		{`"inp\u0075t"`, "input"},
		{`"a\"b"`, `a"b`},
		{`""`, ""},
		{`"bad\x"`, `"bad\x"`},
	} {
		if got := UnquoteKey([]byte(tc.in)); got != tc.want {
			t.Errorf("UnquoteKey(%s) = %q, want %q", tc.in, got, tc.want)
		}
	}
}

func TestAppendString(t *testing.T) {
	for _, tc := range []struct{ in, plain, js string }{
		{"plain", `"plain"`, `"plain"`},
		{"<a&b>", `"<a&b>"`, `"<a&b>"`},
		{"q\"b\\", `"q\"b\\"`, `"q\"b\\"`},
		{"\n\r\t\b\f\x00\x1f", `"\n\r\t\u0008\u000c\u0000\u001f"`, `"\n\r\t\u0008\u000c\u0000\u001f"`},
		{"é→\u2028x\u2029", "\"é→\u2028x\u2029\"", `"é→\u2028x\u2029"`},
		{"a\xffb\xe2\x80", `"a\ufffdb\ufffd\ufffd"`, `"a\ufffdb\ufffd\ufffd"`},
		{"bad\xff\u2028", "\"bad\\ufffd\u2028\"", `"bad\ufffd\u2028"`},
	} {
		if got := string(AppendString(nil, tc.in)); got != tc.plain {
			t.Errorf("AppendString(%q) = %s, want %s", tc.in, got, tc.plain)
		}
		if got := string(AppendStringJS([]byte("x"), tc.in)); got != "x"+tc.js {
			t.Errorf("AppendStringJS(%q) = %s, want x%s", tc.in, got, tc.js)
		}
	}
}
