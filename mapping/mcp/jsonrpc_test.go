package mcp

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"
)

func TestMCPParseBody(t *testing.T) {
	tests := []struct {
		desc  string
		body  string
		batch bool
		kinds []Kind
		code  int // expected error code; 0 = valid
	}{
		{desc: "request", body: `{"jsonrpc":"2.0","id":1,"method":"tools/list"}`, kinds: []Kind{KindRequest}},
		{desc: "string id", body: `{"jsonrpc":"2.0","id":"a","method":"ping","params":{}}`, kinds: []Kind{KindRequest}},
		{desc: "notification", body: `{"jsonrpc":"2.0","method":"notifications/initialized"}`, kinds: []Kind{KindNotification}},
		{desc: "response to a server request", body: `{"jsonrpc":"2.0","id":7,"result":{}}`, kinds: []Kind{KindResponse}},
		{desc: "error response", body: `{"jsonrpc":"2.0","id":7,"error":{"code":-1,"message":"no"}}`, kinds: []Kind{KindResponse}},
		{desc: "batch", body: `[{"jsonrpc":"2.0","id":1,"method":"a"},{"jsonrpc":"2.0","method":"b"}]`, batch: true,
			kinds: []Kind{KindRequest, KindNotification}},
		{desc: "not JSON", body: `{"jsonrpc":`, code: CodeParseError},
		{desc: "trailing garbage", body: `{"jsonrpc":"2.0","method":"a"} x`, code: CodeParseError},
		{desc: "empty body", body: ``, code: CodeParseError},
		{desc: "empty batch", body: `[]`, code: CodeInvalidRequest},
		{desc: "scalar", body: `42`, code: CodeInvalidRequest},
		{desc: "batch of scalars", body: `[1]`, code: CodeInvalidRequest},
		{desc: "no jsonrpc", body: `{"id":1,"method":"a"}`, code: CodeInvalidRequest},
		{desc: "wrong jsonrpc", body: `{"jsonrpc":"1.0","id":1,"method":"a"}`, code: CodeInvalidRequest},
		{desc: "null id", body: `{"jsonrpc":"2.0","id":null,"method":"a"}`, code: CodeInvalidRequest},
		{desc: "object id", body: `{"jsonrpc":"2.0","id":{},"method":"a"}`, code: CodeInvalidRequest},
		{desc: "empty method", body: `{"jsonrpc":"2.0","id":1,"method":""}`, code: CodeInvalidRequest},
		{desc: "scalar params", body: `{"jsonrpc":"2.0","id":1,"method":"a","params":3}`, code: CodeInvalidRequest},
		{desc: "neither method nor id", body: `{"jsonrpc":"2.0"}`, code: CodeInvalidRequest},
		{desc: "result and error", body: `{"jsonrpc":"2.0","id":1,"result":{},"error":{"code":1,"message":"x"}}`, code: CodeInvalidRequest},
		{desc: "request with result", body: `{"jsonrpc":"2.0","id":1,"method":"a","result":{}}`, code: CodeInvalidRequest},
		{desc: "malformed error", body: `{"jsonrpc":"2.0","id":1,"error":{"code":"x"}}`, code: CodeInvalidRequest},
		{desc: "duplicate key", body: `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"a","name":"b"}}`, code: CodeInvalidRequest},
		{desc: "duplicate key written with an escape", body: `{"jsonrpc":"2.0","id":1,"method":"a","params":{"x":1,"\u0078":2}}`, code: CodeInvalidRequest},
		{desc: "duplicate envelope key", body: `{"jsonrpc":"2.0","id":1,"method":"a","method":"b"}`, code: CodeInvalidRequest},
		{desc: "case variant of a member", body: `{"jsonrpc":"2.0","id":1,"method":"a","Params":{}}`, code: CodeInvalidRequest},
		{desc: "same key in sibling objects is fine", body: `{"jsonrpc":"2.0","id":1,"method":"a","params":{"a":{"k":1},"b":{"k":2}}}`, kinds: []Kind{KindRequest}},
		{desc: "tools/call notification", body: `{"jsonrpc":"2.0","method":"tools/call","params":{"name":"x"}}`, code: CodeInvalidRequest},
		{desc: "deep nesting", body: `{"jsonrpc":"2.0","id":1,"method":"a","params":{"x":` + strings.Repeat("[", 600) + strings.Repeat("]", 600) + `}}`, code: CodeInvalidRequest},
	}
	for _, tc := range tests {
		t.Run(tc.desc, func(t *testing.T) {
			b, err := ParseBody([]byte(tc.body))
			if tc.code != 0 {
				var je *Error
				if !errors.As(err, &je) || je.Code != tc.code {
					t.Fatalf("err = %v, want code %d", err, tc.code)
				}
				return
			}
			if err != nil {
				t.Fatalf("ParseBody: %v", err)
			}
			if b.Batch != tc.batch || len(b.Messages) != len(tc.kinds) {
				t.Fatalf("batch=%v messages=%d, want %v %d", b.Batch, len(b.Messages), tc.batch, len(tc.kinds))
			}
			for i, k := range tc.kinds {
				if b.Messages[i].Kind != k {
					t.Errorf("message %d kind = %v, want %v", i, b.Messages[i].Kind, k)
				}
			}
		})
	}
}

func TestMCPParseBodyKeepsRawMessages(t *testing.T) {
	body := `[ {"jsonrpc":"2.0", "id":1, "method":"a", "x":{"y": [1, 2]}} , {"jsonrpc":"2.0","id":"s","result":{"k":1}} ]`
	b, err := ParseBody([]byte(body))
	if err != nil {
		t.Fatal(err)
	}
	if got := string(b.Messages[0].Raw); got != `{"jsonrpc":"2.0", "id":1, "method":"a", "x":{"y": [1, 2]}}` {
		t.Errorf("raw = %s", got)
	}
	if got := string(b.Messages[1].Result); got != `{"k":1}` {
		t.Errorf("result = %s", got)
	}
	if got := string(b.Encode([][]byte{b.Messages[1].Raw})); got != `[{"jsonrpc":"2.0","id":"s","result":{"k":1}}]` {
		t.Errorf("encode = %s", got)
	}
}

func TestMCPIDKey(t *testing.T) {
	same := [][2]string{
		{`1`, `1.0`}, {`1`, `1e0`}, {`1`, `10e-1`}, {`1`, `0.1E+1`}, {`0`, `-0`}, {`0`, `0.000e5`},
		{`1000`, `1e3`}, {`"a"`, `"\u0061"`}, {`-25`, `-2.5e1`},
	}
	for _, p := range same {
		if IDKey(json.RawMessage(p[0])) != IDKey(json.RawMessage(p[1])) {
			t.Errorf("IDKey(%s) != IDKey(%s): the same JSON value must be the same id", p[0], p[1])
		}
	}
	differ := [][2]string{
		{`1`, `"1"`}, {`1`, `"01"`}, {`1`, `2`}, {`1`, `-1`}, {`1`, `1.5`}, {`"a"`, `"A"`},
		{`9007199254740993`, `9007199254740992`}, // distinct values, one double
		{`1e999999999999999999999`, `1e999999999999999999998`},
	}
	for _, p := range differ {
		if IDKey(json.RawMessage(p[0])) == IDKey(json.RawMessage(p[1])) {
			t.Errorf("IDKey(%s) == IDKey(%s): different JSON values must be different ids", p[0], p[1])
		}
	}
}

// TestMCPLooseIDKey checks the pairing of the MCP TypeScript SDK: Number(id) as JavaScript
// computes it (the expectations are what node prints for Number(x)).
func TestMCPLooseIDKey(t *testing.T) {
	one := LooseIDKey(json.RawMessage(`1`))
	for _, id := range []string{`1`, `1.0`, `1e0`, `"1"`, `"01"`, `" 1 "`, `"\t1\n"`, `"0x1"`, `"0X01"`, `"0b1"`, `"0o1"`,
		`"+1"`, `"1."`, `"1e0"`, `"\u00a01\u2028"`, `"\ufeff1"`, `"10e-1"`} {
		if got := LooseIDKey(json.RawMessage(id)); got != one {
			t.Errorf("LooseIDKey(%s) = %q, want %q (Number() is 1)", id, got, one)
		}
	}
	zero := LooseIDKey(json.RawMessage(`0`))
	for _, id := range []string{`""`, `"  "`, `-0`, `"-0"`, `"0"`, `".0"`} {
		if got := LooseIDKey(json.RawMessage(id)); got != zero {
			t.Errorf("LooseIDKey(%s) = %q, want %q (Number() is 0)", id, got, zero)
		}
	}
	for _, id := range []string{`"abc"`, `"1x"`, `"0x"`, `"-0x1"`, `"1_0"`, `"inf"`, `"NaN"`, `"."`, `"1e"`, `"++1"`, `"0x1p0"`, `"0b2"`, `true`, `null`} {
		if got := LooseIDKey(json.RawMessage(id)); got != "" {
			t.Errorf("LooseIDKey(%s) = %q, want \"\" (Number() is NaN)", id, got)
		}
	}
	if LooseIDKey(json.RawMessage(`"Infinity"`)) != LooseIDKey(json.RawMessage(`1e400`)) {
		t.Error(`Number("Infinity") and JSON.parse("1e400") are both Infinity`)
	}
	if LooseIDKey(json.RawMessage(`9007199254740993`)) != LooseIDKey(json.RawMessage(`9007199254740992`)) {
		t.Error("two integers that round to one double are one id to the TypeScript SDK")
	}
}

func TestMCPErrorResponse(t *testing.T) {
	got := string(ErrorResponse(nil, CodeParseError, `bad <"body">`, nil))
	want := `{"jsonrpc":"2.0","id":null,"error":{"code":-32700,"message":"bad <\"body\">"}}`
	if got != want {
		t.Errorf("got  %s\nwant %s", got, want)
	}
	got = string(DenialError(json.RawMessage(`"x"`), "No deletes.", "com.example.no_delete"))
	want = `{"jsonrpc":"2.0","id":"x","error":{"code":-32091,"message":"No deletes.","data":{"code":"com.example.no_delete"}}}`
	if got != want {
		t.Errorf("got  %s\nwant %s", got, want)
	}
	if got := string(ResultResponse(json.RawMessage(`3`), []byte(`{"content":[]}`))); got != `{"jsonrpc":"2.0","id":3,"result":{"content":[]}}` {
		t.Errorf("result response = %s", got)
	}
}

func TestMCPToolCallOf(t *testing.T) {
	tests := []struct {
		desc     string
		msg      string
		isCall   bool
		args     string
		meta     string
		wantCode int
	}{
		{desc: "other method", msg: `{"jsonrpc":"2.0","id":1,"method":"tools/list"}`},
		{desc: "arguments", msg: `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"read_file","arguments":{"path":"/a"},"_meta":{"progressToken":5}}}`,
			isCall: true, args: `{"path":"/a"}`, meta: `{"progressToken":5}`},
		{desc: "no arguments", msg: `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"now"}}`, isCall: true, args: `{}`},
		{desc: "null arguments", msg: `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"now","arguments":null}}`, isCall: true, args: `{}`},
		{desc: "array arguments", msg: `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"x","arguments":[1]}}`, isCall: true, wantCode: CodeInvalidParams},
		{desc: "no name", msg: `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"arguments":{}}}`, isCall: true, wantCode: CodeInvalidParams},
		{desc: "no params", msg: `{"jsonrpc":"2.0","id":1,"method":"tools/call"}`, isCall: true, wantCode: CodeInvalidParams},
		{desc: "case variant of arguments", msg: `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"x","Arguments":{"a":1}}}`, isCall: true, wantCode: CodeInvalidParams},
	}
	for _, tc := range tests {
		t.Run(tc.desc, func(t *testing.T) {
			b, err := ParseBody([]byte(tc.msg))
			if err != nil {
				t.Fatal(err)
			}
			call, ok, err := ToolCallOf(&b.Messages[0])
			if ok != tc.isCall {
				t.Fatalf("ok = %v, want %v", ok, tc.isCall)
			}
			if tc.wantCode != 0 {
				var je *Error
				if !errors.As(err, &je) || je.Code != tc.wantCode {
					t.Fatalf("err = %v, want code %d", err, tc.wantCode)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if !ok {
				return
			}
			if string(call.Arguments) != tc.args || string(call.Meta) != tc.meta || string(call.ID) != "1" {
				t.Errorf("call = %+v", call)
			}
		})
	}
}

func TestMCPWithArgumentsKeepsTheRest(t *testing.T) {
	msg := `{"jsonrpc":"2.0", "id":9, "method":"tools/call", "params":{"name":"rm", "arguments":{"path":"/etc"}, "_meta":{"k":"v"}}, "x-extra": true}`
	got, err := WithArguments([]byte(msg), json.RawMessage(`{"path":"/tmp/x"}`))
	if err != nil {
		t.Fatal(err)
	}
	want := `{"jsonrpc":"2.0", "id":9, "method":"tools/call", "params":{"name":"rm", "arguments":{"path":"/tmp/x"}, "_meta":{"k":"v"}}, "x-extra": true}`
	if string(got) != want {
		t.Errorf("got  %s\nwant %s", got, want)
	}
	// Absent arguments are added.
	got, err = WithArguments([]byte(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"now"}}`), json.RawMessage(`{"tz":"UTC"}`))
	if err != nil || !strings.Contains(string(got), `"arguments":{"tz":"UTC"}`) {
		t.Errorf("got %s, %v", got, err)
	}
	if _, err := WithArguments([]byte(msg), json.RawMessage(`[1]`)); err == nil {
		t.Error("an array is not an arguments object")
	}
}

// FuzzParseBody checks that no body makes the parsers panic.
func FuzzMCPParseBody(f *testing.F) {
	for _, s := range []string{
		`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"a","arguments":{}}}`,
		`[{"jsonrpc":"2.0","id":1,"result":{"content":[{"type":"text","text":"x"}]}}]`,
		`{"jsonrpc":"2.0","id":1,"error":{"code":1,"message":"m"}}`,
		`[[[[`, `{"a":1,"a":2}`, `"\u0000"`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		b, err := ParseBody(body)
		if err != nil {
			return
		}
		for i := range b.Messages {
			_, _, _ = ToolCallOf(&b.Messages[i])
			if b.Messages[i].Result != nil {
				if r, err := ParseResult(b.Messages[i].Result); err == nil && !r.InputRequired {
					_, _ = NewOutput("m", r).Apply(nil)
				}
			}
		}
	})
}
