package jsontext

import "testing"

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
