package jsonpath

import (
	"encoding/json"
	"slices"
	"testing"
)

func TestMemberIndex(t *testing.T) {
	tests := []struct {
		desc string
		got  string
		want string
	}{
		{desc: "member of the document", got: Member("$", "hooks"), want: "hooks"},
		{desc: "member of an empty path", got: Member("", "hooks"), want: "hooks"},
		{desc: "nested path", got: Member(Index(Member(Index("hooks", 1), "subscriptions"), 0), "content"), want: "hooks[1].subscriptions[0].content"},
		{desc: "key that is not an identifier", got: Member("$", "weird key"), want: `$["weird key"]`},
		{desc: "quoted key inside a path", got: Member("params.event.extensions", "x-y"), want: `params.event.extensions["x-y"]`},
		{desc: "dollar and underscore are identifier characters", got: Member("a", "$_x1"), want: "a.$_x1"},
		{desc: "index of the document", got: Index("$", 2), want: "$[2]"},
	}
	for _, tc := range tests {
		t.Run(tc.desc, func(t *testing.T) {
			if tc.got != tc.want {
				t.Fatalf("got %s, want %s", tc.got, tc.want)
			}
		})
	}
}

func TestTypeName(t *testing.T) {
	tests := []struct {
		x    any
		want string
	}{
		{nil, "null"}, {true, "a boolean"}, {json.Number("1"), "a number"}, {"s", "a string"},
		{[]any{}, "an array"}, {map[string]any{}, "an object"},
	}
	for _, tc := range tests {
		if got := TypeName(tc.x); got != tc.want {
			t.Errorf("TypeName(%#v) = %q, want %q", tc.x, got, tc.want)
		}
	}
}

func TestInteger(t *testing.T) {
	tests := []struct {
		n          string
		isInt      bool
		fitsInt64  bool
		wantString string
	}{
		{n: "0", isInt: true, fitsInt64: true, wantString: "0"},
		{n: "-0", isInt: true, fitsInt64: true, wantString: "0"},
		{n: "1.0", isInt: true, fitsInt64: true, wantString: "1"},
		{n: "1e3", isInt: true, fitsInt64: true, wantString: "1000"},
		{n: "-42", isInt: true, fitsInt64: true, wantString: "-42"},
		{n: "1.5", isInt: false},
		{n: "1.00000000000000001", isInt: false},
		{n: "9223372036854775807", isInt: true, fitsInt64: true, wantString: "9223372036854775807"},
		{n: "9223372036854775808", isInt: true, fitsInt64: false, wantString: "9223372036854775808"},
		{n: "1e30", isInt: true, fitsInt64: false, wantString: "1000000000000000000000000000000"},
	}
	for _, tc := range tests {
		t.Run(tc.n, func(t *testing.T) {
			i, ok := Integer(json.Number(tc.n))
			if ok != tc.isInt {
				t.Fatalf("Integer ok = %v, want %v", ok, tc.isInt)
			}
			if ok && i.String() != tc.wantString {
				t.Fatalf("Integer = %s, want %s", i, tc.wantString)
			}
			n, fits := Int64(json.Number(tc.n))
			if fits != tc.fitsInt64 {
				t.Fatalf("Int64 ok = %v, want %v", fits, tc.fitsInt64)
			}
			if fits && i.Int64() != n {
				t.Fatalf("Int64 = %d, want %s", n, i)
			}
		})
	}
}

func TestDuplicates(t *testing.T) {
	tests := []struct {
		desc string
		doc  string
		want []string
	}{
		{desc: "none", doc: `{"a":1,"b":{"a":2},"c":[{"a":3},{"a":4}]}`},
		{desc: "top level", doc: `{"a":1,"a":2}`, want: []string{"a"}},
		{desc: "nested, in document order", doc: `{"hooks":[{"id":"x"},{"id":"y","id":"z"}],"k y":{"b":1,"b":2}}`,
			want: []string{"hooks[1].id", `$["k y"].b`}},
		{desc: "inside a duplicated value", doc: `{"a":{"b":1},"a":{"b":1,"b":2}}`, want: []string{"a", "a.b"}},
		{desc: "same name in sibling objects is no duplicate", doc: `[{"a":1},{"a":1}]`},
	}
	for _, tc := range tests {
		t.Run(tc.desc, func(t *testing.T) {
			if got := Duplicates([]byte(tc.doc)); !slices.Equal(got, tc.want) {
				t.Fatalf("Duplicates = %q, want %q", got, tc.want)
			}
		})
	}
}
