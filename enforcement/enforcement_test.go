package enforcement

import (
	"encoding"
	"testing"
)

// TestClosedEncoding: every declared value encodes as itself; anything else — free text a
// mistaken assignment could carry into an audit line or a metric label — as "unknown".
func TestClosedEncoding(t *testing.T) {
	for _, tc := range []struct {
		desc  string
		v     encoding.TextMarshaler
		known bool
		want  string
	}{
		{desc: "action", v: Refused, known: Refused.Known(), want: "refused"},
		{desc: "unexamined forward", v: ForwardedUnexamined, known: ForwardedUnexamined.Known(), want: "forwarded_unexamined"},
		{desc: "free text as action", v: Action("Bearer sk-secret"), known: Action("Bearer sk-secret").Known(), want: Unknown},
		{desc: "held", v: HeldToolCalls, known: HeldToolCalls.Known(), want: "tool_calls"},
		{desc: "free text as held", v: Held("all of it"), known: Held("all of it").Known(), want: Unknown},
		{desc: "stream mode", v: StreamPassthrough, known: StreamPassthrough.Known(), want: "passthrough"},
		{desc: "a held value is not a stream mode", v: StreamMode(HeldWhole), known: StreamMode(HeldWhole).Known(), want: Unknown},
	} {
		got, err := tc.v.MarshalText()
		if err != nil || string(got) != tc.want {
			t.Errorf("%s: MarshalText = %q, %v; want %q", tc.desc, got, err, tc.want)
		}
		if tc.known != (tc.want != Unknown) {
			t.Errorf("%s: Known = %v", tc.desc, tc.known)
		}
	}
}
