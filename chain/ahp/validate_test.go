package ahp_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
	"testing"

	"github.com/hookproxy/hookproxy/chain/ahp"
)

// Builders for table cases: a valid tool.before intercept request that cases edit.
const (
	toolBeforeEvent = `{"id":"e1","source":"urn:hookproxy:test","type":"tool.before","time":"2026-09-15T12:00:00Z",` +
		`"call":{"id":"c1"},"tool":{"name":"Bash","input":{"command":"ls"},"origin":"native"},"path":"hookproxy.openai.chat"}`
	denyCaps = `{"effects":["deny"]}`
)

func intercept(event, caps string) string {
	return `{"jsonrpc":"2.0","id":"e1","method":"hooks/intercept","params":{"protocolVersion":"draft","event":` + event + `,"capabilities":` + caps + `}}`
}

func observe(event string) string {
	return `{"jsonrpc":"2.0","method":"hooks/observe","params":{"protocolVersion":"draft","event":` + event + `}}`
}

// ev builds an event of type typ with the common envelope plus members.
func ev(typ, members string) string {
	s := `{"id":"e1","source":"urn:hookproxy:test","type":"` + typ + `","time":"2026-09-15T12:00:00Z"`
	if members != "" {
		s += "," + members
	}
	return s + "}"
}

const (
	tool            = `"call":{"id":"c1"},"tool":{"name":"Bash","input":{},"origin":"native"},"path":"p"`
	textMsg         = `{"id":"m1","role":"user","parts":[{"id":"p1","kind":"text","mediaType":"text/plain","selection":"body","text":"hi"}]}`
	minimalManifest = `{"events":[],"gaps":[],"transports":[],"authentication":[],"toolPaths":[],"contentCategories":[],"limits":{},"managedPolicy":{"scopes":[],"disableable":true},"correlationIdentityFields":[]}`
	modelMA         = `"model":{"id":"gpt","provider":"openai"},"attempt":{"id":"a1","number":1}`
)

func TestValidateMessageTable(t *testing.T) {
	tests := []struct {
		desc string
		msg  string
		// path is the expected path of the first violation; "" means valid.
		path string
		msg2 string // substring of the first violation message
	}{
		{desc: "intercept valid", msg: intercept(toolBeforeEvent, denyCaps)},
		{desc: "not JSON", msg: `{"jsonrpc":`, path: "$", msg2: "not JSON"},
		{desc: "two values", msg: `{} {}`, path: "$", msg2: "more than one"},
		{desc: "batch", msg: `[` + intercept(toolBeforeEvent, denyCaps) + `]`, path: "$", msg2: "batches"},
		{desc: "duplicate member", msg: `{"jsonrpc":"2.0","jsonrpc":"2.0","method":"hooks/observe","params":{}}`, path: "$", msg2: "jsonrpc is written more than once"},
		{desc: "duplicate member spelt with an escape", msg: `{"jsonrpc":"2.0","json\u0072pc":"2.0","method":"hooks/observe","params":{}}`, path: "$", msg2: "jsonrpc is written more than once"},
		{desc: "nested duplicate member", msg: `{"jsonrpc":"2.0","method":"hooks/observe","params":{"event":{"a":1,"a":2}}}`, path: "$", msg2: "params.event.a is written more than once"},
		{desc: "bad UTF-8", msg: "{\"jsonrpc\":\"2.0\xff\"}", path: "$", msg2: "UTF-8"},
		{desc: "jsonrpc 1.0", msg: strings.Replace(intercept(toolBeforeEvent, denyCaps), `"2.0"`, `"1.0"`, 1), path: "jsonrpc"},
		{desc: "unknown method", msg: `{"jsonrpc":"2.0","id":1,"method":"hooks/decide","params":{}}`, path: "method", msg2: "unknown AHP method"},
		{desc: "params missing", msg: `{"jsonrpc":"2.0","id":1,"method":"hooks/capabilities"}`, path: "$", msg2: `"params" is required`},
		{desc: "params array", msg: `{"jsonrpc":"2.0","id":1,"method":"hooks/capabilities","params":[]}`, path: "params"},
		{desc: "request with result", msg: `{"jsonrpc":"2.0","id":"d","method":"hooks/capabilities","params":{"protocolVersion":"draft"},"result":{}}`, path: "result"},
		{desc: "capabilities request", msg: `{"jsonrpc":"2.0","id":7,"method":"hooks/capabilities","params":{"protocolVersion":"draft"}}`},
		{desc: "capabilities request extra param", msg: `{"jsonrpc":"2.0","id":7,"method":"hooks/capabilities","params":{"protocolVersion":"draft","session":{}}}`, path: "params.session"},
		{desc: "capabilities notification", msg: `{"jsonrpc":"2.0","method":"hooks/capabilities","params":{"protocolVersion":"draft"}}`, path: "$"},
		{desc: "capabilities wrong version", msg: `{"jsonrpc":"2.0","id":7,"method":"hooks/capabilities","params":{"protocolVersion":"0.1"}}`, path: "params.protocolVersion", msg2: "unsupported protocol version"},
		{desc: "request id null", msg: `{"jsonrpc":"2.0","id":null,"method":"hooks/capabilities","params":{"protocolVersion":"draft"}}`, path: "id"},
		{desc: "request id float", msg: `{"jsonrpc":"2.0","id":1.5,"method":"hooks/capabilities","params":{"protocolVersion":"draft"}}`, path: "id"},
		{desc: "intercept without id", msg: strings.Replace(intercept(toolBeforeEvent, denyCaps), `"id":"e1","method"`, `"method"`, 1), path: "$", msg2: "request"},
		{desc: "intercept integer id", msg: strings.Replace(intercept(toolBeforeEvent, denyCaps), `"id":"e1","method"`, `"id":1,"method"`, 1), path: "id", msg2: "must equal params.event.id"},
		{desc: "intercept version", msg: strings.Replace(intercept(toolBeforeEvent, denyCaps), `"protocolVersion":"draft"`, `"protocolVersion":"2026-01-01"`, 1), path: "params.protocolVersion"},
		{desc: "intercept caps missing", msg: `{"jsonrpc":"2.0","id":"e1","method":"hooks/intercept","params":{"protocolVersion":"draft","event":` + toolBeforeEvent + `}}`, path: "params", msg2: `"capabilities" is required`},
		{desc: "intercept observe-only event", msg: intercept(strings.Replace(ev("turn.end", `"turn":{"id":"t"},"outcome":"completed","continuationCount":0,"items":[]`), `"id":"e1"`, `"id":"e1"`, 1), `{"effects":[]}`), path: "params.event.type", msg2: "observe-only"},
		{desc: "intercept extensions", msg: strings.Replace(intercept(toolBeforeEvent, denyCaps), `"capabilities"`, `"extensions":{"com.example.x":1},"capabilities"`, 1)},
		{desc: "intercept bad extension key", msg: strings.Replace(intercept(toolBeforeEvent, denyCaps), `"capabilities"`, `"extensions":{"x":1},"capabilities"`, 1), path: "params.extensions.x"},
		{desc: "state valid", msg: strings.Replace(intercept(toolBeforeEvent, denyCaps), `"capabilities"`, `"state":{"permission":"allow","candidate":{"value":3},"flow":"none","instructions":["a"],"injections":[]},"capabilities"`, 1)},
		{desc: "state candidate required", msg: strings.Replace(intercept(toolBeforeEvent, denyCaps), `"capabilities"`, `"state":{"permission":"none"},"capabilities"`, 1), path: "params.state", msg2: `"candidate" is required`},
		{desc: "state permission", msg: strings.Replace(intercept(toolBeforeEvent, denyCaps), `"capabilities"`, `"state":{"permission":"maybe","candidate":null},"capabilities"`, 1), path: "params.state.permission"},
		{desc: "state empty instruction", msg: strings.Replace(intercept(toolBeforeEvent, denyCaps), `"capabilities"`, `"state":{"permission":"none","candidate":null,"instructions":[""]},"capabilities"`, 1), path: "params.state.instructions[0]"},
		{desc: "caps modify without effect", msg: intercept(toolBeforeEvent, `{"effects":["deny"],"modify":{"input":{"replace":true,"merge":false}}}`), path: "params.capabilities.modify"},
		{desc: "caps modify effect without block", msg: intercept(toolBeforeEvent, `{"effects":["modify"]}`), path: "params.capabilities", msg2: `"modify" is required`},
		{desc: "caps modify all false", msg: intercept(toolBeforeEvent, `{"effects":["modify"],"modify":{"input":{"replace":false,"merge":false}}}`), path: "params.capabilities.modify.input"},
		{desc: "caps modify empty", msg: intercept(toolBeforeEvent, `{"effects":["modify"],"modify":{}}`), path: "params.capabilities.modify"},
		{desc: "caps flow continue needs allowance", msg: intercept(ev("tool.after", tool+`,"outcome":"ok","execution":{"status":"executed"},"items":[]`), `{"effects":["flow"],"flow":{"operations":["continue"]}}`), path: "params.capabilities.flow", msg2: `"remainingContinuations" is required`},
		{desc: "caps flow continue at tool.after", msg: intercept(ev("tool.after", tool+`,"outcome":"ok","execution":{"status":"executed"},"items":[]`), `{"effects":["flow"],"flow":{"operations":["stop","continue"],"remainingContinuations":1,"continuationCount":0}}`)},
		{desc: "caps inject", msg: intercept(toolBeforeEvent, `{"effects":["inject"],"inject":{"context":{"append":true,"deliverAt":["now","next_turn"]}}}`)},
		{desc: "caps inject append false", msg: intercept(toolBeforeEvent, `{"effects":["inject"],"inject":{"context":{"append":false,"deliverAt":["now"]}}}`), path: "params.capabilities.inject.context.append"},
		{desc: "caps inject empty deliverAt", msg: intercept(toolBeforeEvent, `{"effects":["inject"],"inject":{"context":{"append":true,"deliverAt":[]}}}`), path: "params.capabilities.inject.context.deliverAt"},
		{desc: "caps duplicate effect", msg: intercept(toolBeforeEvent, `{"effects":["deny","deny"]}`), path: "params.capabilities.effects[1]"},
		{desc: "caps extension effect out of bound", msg: intercept(toolBeforeEvent, `{"effects":["com.example.quarantine"]}`), path: "params.capabilities.effects[0]", msg2: "cannot be advertised"},
		{desc: "caps unknown member ignored", msg: intercept(toolBeforeEvent, `{"effects":["deny"],"futureThing":{}}`)},
		{desc: "observe valid", msg: observe(toolBeforeEvent)},
		{desc: "observe extra params", msg: strings.Replace(observe(toolBeforeEvent), `"protocolVersion":"draft"`, `"protocolVersion":"draft","subscriptionId":"s1"`, 1), path: "params.subscriptionId"},
		{desc: "observe event missing", msg: `{"jsonrpc":"2.0","method":"hooks/observe","params":{"protocolVersion":"draft"}}`, path: "params"},
		{desc: "unknown envelope member ignored", msg: observe(ev("tool.before", tool+`,"futureMember":{"x":1}`))},
		{desc: "time with offset", msg: observe(strings.Replace(toolBeforeEvent, "2026-09-15T12:00:00Z", "2026-09-15T14:00:00.123+02:00", 1))},
		{desc: "time lowercase t z", msg: observe(strings.Replace(toolBeforeEvent, "2026-09-15T12:00:00Z", "2026-09-15t12:00:00z", 1))},
		{desc: "time leap second", msg: observe(strings.Replace(toolBeforeEvent, "2026-09-15T12:00:00Z", "2016-12-31T23:59:60Z", 1))},
		{desc: "time bad leap second", msg: observe(strings.Replace(toolBeforeEvent, "2026-09-15T12:00:00Z", "2016-12-31T12:59:60Z", 1)), path: "params.event.time"},
		{desc: "time feb 30", msg: observe(strings.Replace(toolBeforeEvent, "2026-09-15T12:00:00Z", "2026-02-30T12:00:00Z", 1)), path: "params.event.time"},
		{desc: "time no offset", msg: observe(strings.Replace(toolBeforeEvent, "2026-09-15T12:00:00Z", "2026-09-15T12:00:00", 1)), path: "params.event.time"},
		{desc: "source relative", msg: observe(strings.Replace(toolBeforeEvent, "urn:hookproxy:test", "/runtime/42", 1)), path: "params.event.source"},
		{desc: "source bad percent", msg: observe(strings.Replace(toolBeforeEvent, "urn:hookproxy:test", "urn:x:%zz", 1)), path: "params.event.source"},
		{desc: "session open", msg: observe(ev("tool.before", tool+`,"session":{"id":"s","cwd":"/r","agent":{"id":"a","x":1},"future":true}`))},
		{desc: "session id empty", msg: observe(ev("tool.before", tool+`,"session":{"id":""}`)), path: "params.event.session.id"},
		{desc: "tool.before open turn", msg: observe(ev("tool.before", tool+`,"turn":{"id":"t","x":1}`))},
		{desc: "turn.start closed turn", msg: observe(ev("turn.start", `"turn":{"id":"t","x":1},"trigger":"user","items":[]`)), path: "params.event.turn.x"},
		{desc: "gaps entry", msg: observe(ev("tool.before", tool+`,"gaps":[{"path":"tool.kind","reason":"unknown"}]`))},
		{desc: "gaps entry reason missing", msg: observe(ev("tool.before", tool+`,"gaps":[{"path":"tool.kind"}]`)), path: "params.event.gaps[0]"},
		{desc: "tool input string", msg: observe(ev("tool.before", `"call":{"id":"c"},"tool":{"name":"Bash","input":"{}","origin":"native"},"path":"p"`)), path: "params.event.tool.input", msg2: "JSON object"},
		{desc: "tool native with mcp", msg: observe(ev("tool.before", `"call":{"id":"c"},"tool":{"name":"Bash","input":{},"origin":"native","mcp":{}},"path":"p"`)), path: "params.event.tool.mcp"},
		{desc: "tool mcp without mcp", msg: observe(ev("tool.before", `"call":{"id":"c"},"tool":{"name":"Bash","input":{},"origin":"mcp"},"path":"p"`)), path: "params.event.tool"},
		{desc: "mcp sse url", msg: observe(ev("tool.before", `"call":{"id":"c"},"tool":{"name":"t","input":{},"origin":"mcp","mcp":{"server":{"id":"s"},"toolName":"t","provenance":"runtime","connection":{"transport":"sse","url":"https://m.example/sse"}}},"path":"p"`))},
		{desc: "mcp url not http", msg: observe(ev("tool.before", `"call":{"id":"c"},"tool":{"name":"t","input":{},"origin":"mcp","mcp":{"server":{"id":"s"},"toolName":"t","provenance":"runtime","connection":{"transport":"http","url":"ftp://m.example/"}}},"path":"p"`)), path: "params.event.tool.mcp.connection.url"},
		{desc: "mcp headers refused", msg: observe(ev("tool.before", `"call":{"id":"c"},"tool":{"name":"t","input":{},"origin":"mcp","mcp":{"server":{"id":"s"},"toolName":"t","provenance":"runtime","connection":{"transport":"http","url":"https://m.example/","headers":{"Authorization":"x"}}}},"path":"p"`)), path: "params.event.tool.mcp.connection.headers"},
		{desc: "mcp unknown transport", msg: observe(ev("tool.before", `"call":{"id":"c"},"tool":{"name":"t","input":{},"origin":"mcp","mcp":{"server":{"id":"s"},"toolName":"t","provenance":"runtime","connection":{"transport":"ws"}}},"path":"p"`)), path: "params.event.tool.mcp.connection.transport"},
		{desc: "batch callIds empty", msg: observe(ev("tool.before", tool+`,"batch":{"id":"b","callIds":[]}`)), path: "params.event.batch.callIds"},
		{desc: "batch callIds duplicate", msg: observe(ev("tool.before", tool+`,"batch":{"id":"b","callIds":["a","a"]}`)), path: "params.event.batch.callIds[1]"},
		{desc: "tool.before forbids outcome", msg: observe(ev("tool.before", tool+`,"outcome":"ok"`)), path: "params.event.outcome"},
		{desc: "tool.after denied executed", msg: observe(ev("tool.after", tool+`,"outcome":"denied","execution":{"status":"executed"},"items":[]`)), path: "params.event.execution", msg2: "policy"},
		{desc: "tool.after skipped with duration", msg: observe(ev("tool.after", tool+`,"outcome":"denied","execution":{"status":"skipped","reason":"policy"},"items":[],"durationMs":3`)), path: "params.event.durationMs"},
		{desc: "tool.after error requires error", msg: observe(ev("tool.after", tool+`,"outcome":"error","execution":{"status":"executed"},"items":[]`)), path: "params.event", msg2: `"error" is required`},
		{desc: "tool.after items are messages", msg: observe(ev("tool.after", tool+`,"outcome":"ok","execution":{"status":"executed"},"items":[{"id":"p","kind":"text","mediaType":"text/plain","selection":"body","text":"x"}]`)), path: "params.event.items[0]"},
		{desc: "tool.after fileChanges", msg: observe(ev("tool.after", tool+`,"outcome":"ok","execution":{"status":"executed"},"items":[],"fileChanges":[{"path":"a","change":"moved","previousPath":"b"}]`))},
		{desc: "fileChange moved needs previousPath", msg: observe(ev("tool.after", tool+`,"outcome":"ok","execution":{"status":"executed"},"items":[],"fileChanges":[{"path":"a","change":"moved"}]`)), path: "params.event.fileChanges[0]"},
		{desc: "fileChange created with before", msg: observe(ev("tool.after", tool+`,"outcome":"ok","execution":{"status":"executed"},"items":[],"fileChanges":[{"path":"a","change":"created","before":{"id":"p","kind":"text","mediaType":"text/plain","selection":"omit"}}]`)), path: "params.event.fileChanges[0].before"},
		{desc: "execution supplied detail", msg: observe(ev("tool.after", tool+`,"outcome":"ok","execution":{"status":"skipped","reason":"supplied_result","detail":"x"},"items":[]`)), path: "params.event.execution.detail"},
		{desc: "model.request.before", msg: observe(ev("model.request.before", modelMA+`,"params":{},"items":[`+textMsg+`]`))},
		{desc: "model.request.before forbids usage", msg: observe(ev("model.request.before", modelMA+`,"params":{},"items":[],"usage":{}`)), path: "params.event.usage"},
		{desc: "model.request.before params string", msg: observe(ev("model.request.before", modelMA+`,"params":"{}","items":[]`)), path: "params.event.params"},
		{desc: "attempt number zero", msg: observe(ev("model.request.before", `"model":{"id":"gpt","provider":"openai"},"attempt":{"id":"a1","number":0},"params":{},"items":[]`)), path: "params.event.attempt.number"},
		{desc: "attempt number 2.0", msg: observe(ev("model.request.before", `"model":{"id":"gpt","provider":"openai"},"attempt":{"id":"a1","number":2.0},"params":{},"items":[]`))},
		{desc: "model.response.after supplied with usage", msg: observe(ev("model.response.after", modelMA+`,"execution":{"status":"skipped","reason":"supplied_result"},"items":[],"finishReason":"stop","usage":{"kind":"amount","scope":"attempt","completeness":"complete","provenance":"provider"}`)), path: "params.event.usage"},
		{desc: "model.response.after skipped policy", msg: observe(ev("model.response.after", modelMA+`,"execution":{"status":"skipped","reason":"policy"},"items":[],"finishReason":"stop"`)), path: "params.event.execution.reason"},
		{desc: "model.response.after usage turn kind", msg: observe(ev("model.response.after", modelMA+`,"execution":{"status":"executed"},"items":[],"finishReason":"stop","usage":{"kind":"total","scope":"attempt","completeness":"complete","provenance":"provider"}`)), path: "params.event.usage.kind"},
		{desc: "usage cost", msg: observe(ev("model.response.after", modelMA+`,"execution":{"status":"executed"},"items":[],"finishReason":"stop","latencyMs":12.5,"usage":{"kind":"amount","scope":"attempt","completeness":"partial","provenance":"estimate","inputTokens":10,"cost":{"amount":0.01,"currency":"USD","basis":"estimated"}}`))},
		{desc: "usage cost currency", msg: observe(ev("model.response.after", modelMA+`,"execution":{"status":"executed"},"items":[],"finishReason":"stop","usage":{"kind":"amount","scope":"attempt","completeness":"partial","provenance":"estimate","cost":{"amount":1,"currency":"usd","basis":"billed"}}`)), path: "params.event.usage.cost.currency"},
		{desc: "model.error skipped", msg: observe(ev("model.error", modelMA+`,"execution":{"status":"skipped","reason":"other"},"error":{"message":"m","class":"c"}`)), path: "params.event.execution.status"},
		{desc: "model.error status integer", msg: observe(ev("model.error", modelMA+`,"execution":{"status":"executed"},"error":{"message":"m","class":"c","status":429}`))},
		{desc: "model.error status float", msg: observe(ev("model.error", modelMA+`,"execution":{"status":"executed"},"error":{"message":"m","class":"c","status":4.5}`)), path: "params.event.error.status"},
		{desc: "turn.end completed with error", msg: observe(ev("turn.end", `"turn":{"id":"t"},"outcome":"completed","continuationCount":0,"items":[],"error":{"message":"m","class":"c"}`)), path: "params.event.error"},
		{desc: "session.start bad manifest", msg: observe(ev("session.start", `"session":{"id":"s"},"trigger":"startup","harness":{"name":"h","version":"1"},"permissionMode":"default","manifest":{},"items":[]`)), path: "params.event.manifest", msg2: `"events" is required`},
		{desc: "session.start clear needs resumedFrom", msg: observe(ev("session.start", `"session":{"id":"s"},"trigger":"clear","harness":{"name":"h","version":"1"},"permissionMode":"default","manifest":`+minimalManifest+`,"items":[]`)), path: "params.event", msg2: "resumedFrom"},
		{desc: "session.start resume", msg: observe(ev("session.start", `"session":{"id":"s"},"trigger":"resume","harness":{"name":"h","version":"1"},"permissionMode":"default","manifest":`+minimalManifest+`,"items":[`+textMsg+`]`))},
		{desc: "session.start forbids outcome", msg: observe(ev("session.start", `"session":{"id":"s"},"trigger":"startup","harness":{"name":"h","version":"1"},"permissionMode":"default","manifest":`+minimalManifest+`,"items":[],"outcome":"x"`)), path: "params.event.outcome"},
		{desc: "hook.failure needs parent", msg: observe(ev("hook.failure", `"failure":{"backendId":"com.x","reason":"timeout","policy":"fail-open"}`)), path: "params.event", msg2: `"parentEventId" is required`},
		{desc: "hook.failure", msg: observe(ev("hook.failure", `"parentEventId":"e0","failure":{"backendId":"com.x","reason":"timeout","policy":"fail-closed"}`))},
		{desc: "part sha256 uppercase", msg: observe(ev("tool.before", tool+`,"items":[{"id":"p","kind":"attachment","mediaType":"image/png","selection":"metadata","sha256":"`+strings.Repeat("A", 64)+`"}]`)), path: "params.event.items[0].sha256"},
		{desc: "part size negative", msg: observe(ev("tool.before", tool+`,"items":[{"id":"p","kind":"attachment","mediaType":"image/png","selection":"omit","size":-1}]`)), path: "params.event.items[0].size"},
		{desc: "attachment text/csv", msg: observe(ev("tool.before", tool+`,"items":[{"id":"p","kind":"attachment","mediaType":"TEXT/csv","selection":"omit"}]`)), path: "params.event.items[0].mediaType"},
		{desc: "attachment json charset", msg: observe(ev("tool.before", tool+`,"items":[{"id":"p","kind":"attachment","mediaType":"application/json; charset=utf-8","selection":"omit"}]`)), path: "params.event.items[0].mediaType"},
		{desc: "attachment jsonl is fine", msg: observe(ev("tool.before", tool+`,"items":[{"id":"p","kind":"attachment","mediaType":"application/jsonl","selection":"omit"}]`))},
		{desc: "attachment gap with size", msg: observe(ev("tool.before", tool+`,"items":[{"id":"p","kind":"attachment","mediaType":"image/png","selection":"body","gap":{"reason":"too big"},"size":9}]`))},
		{desc: "attachment gap with body", msg: observe(ev("tool.before", tool+`,"items":[{"id":"p","kind":"attachment","mediaType":"image/png","selection":"body","gap":{"reason":"r"},"body":{"ref":"x"}}]`)), path: "params.event.items[0].body"},
		{desc: "gap extra member", msg: observe(ev("tool.before", tool+`,"items":[{"id":"p","kind":"text","mediaType":"text/plain","selection":"body","gap":{"reason":"r","why":1}}]`)), path: "params.event.items[0].gap.why"},
		{desc: "body text part with size", msg: observe(ev("tool.before", tool+`,"items":[{"id":"p","kind":"text","mediaType":"text/plain","selection":"body","text":"x","size":1}]`)), path: "params.event.items[0].size"},
		{desc: "empty text is content", msg: observe(ev("tool.before", tool+`,"items":[{"id":"p","kind":"text","mediaType":"text/plain","selection":"body","text":""}]`))},
		{desc: "message kind member", msg: observe(ev("turn.start", `"turn":{"id":"t"},"trigger":"user","items":[{"id":"m","role":"user","parts":[],"kind":"message"}]`)), path: "params.event.items[0].kind"},
		{desc: "attention textparts", msg: observe(ev("user.attention", `"attention":{"kind":"k","message":[{"id":"a","kind":"attachment","mediaType":"image/png","selection":"omit"}],"title":[]}`)), path: "params.event.attention.message[0].kind"},
		{desc: "workspace change empty", msg: observe(ev("workspace.change.before", `"workspace":{"kind":"cwd","change":{}}`)), path: "params.event.workspace.change"},
		{desc: "response result", msg: `{"jsonrpc":"2.0","id":"e1","result":{"protocolVersion":"draft","effects":[]}}`},
		{desc: "response result null id", msg: `{"jsonrpc":"2.0","id":null,"error":{"code":-32700,"message":"Parse error"}}`},
		{desc: "response id missing", msg: `{"jsonrpc":"2.0","result":{"protocolVersion":"draft","effects":[]}}`, path: "$"},
		{desc: "response neither", msg: `{"jsonrpc":"2.0","id":"e1"}`, path: "$"},
		{desc: "response version", msg: `{"jsonrpc":"2.0","id":"e1","result":{"protocolVersion":"1900-01-01","effects":[]}}`, path: "result.protocolVersion"},
		{desc: "response no version", msg: `{"jsonrpc":"2.0","id":"e1","result":{"effects":[]}}`, path: "result"},
		{desc: "response effects and manifest", msg: `{"jsonrpc":"2.0","id":"e1","result":{"protocolVersion":"draft","effects":[],"manifest":{}}}`, path: "result"},
		{desc: "response effects not array", msg: `{"jsonrpc":"2.0","id":"e1","result":{"protocolVersion":"draft","effects":{}}}`, path: "result.effects"},
		{desc: "error code string", msg: `{"jsonrpc":"2.0","id":"e1","error":{"code":"-32001","message":"x"}}`, path: "error.code"},
		{desc: "error code float", msg: `{"jsonrpc":"2.0","id":"e1","error":{"code":-32001.5,"message":"x"}}`, path: "error.code"},
		{desc: "error message missing", msg: `{"jsonrpc":"2.0","id":"e1","error":{"code":-32001}}`, path: "error"},
		{desc: "error with data", msg: `{"jsonrpc":"2.0","id":"e1","error":{"code":-32001,"message":"x","data":{"supported":["draft"]}}}`},
	}
	for _, tc := range tests {
		t.Run(tc.desc, func(t *testing.T) {
			err := ahp.ValidateMessage([]byte(tc.msg))
			if tc.path == "" {
				if err != nil {
					t.Fatalf("want valid, got %v", err)
				}
				return
			}
			var verr *ahp.ValidationError
			if !errors.As(err, &verr) {
				t.Fatalf("want *ValidationError, got %v", err)
			}
			first := verr.Violations[0]
			if first.Path != tc.path || !strings.Contains(first.Message, tc.msg2) {
				t.Fatalf("first violation %q, want path %q containing %q\n(all: %v)", first, tc.path, tc.msg2, err)
			}
		})
		// A receiver that decoded the frame itself gets the same answer without a second decode.
		t.Run(tc.desc+"/decoded", func(t *testing.T) {
			dec := json.NewDecoder(strings.NewReader(tc.msg))
			dec.UseNumber()
			var x any
			if dec.Decode(&x) != nil {
				t.Skip("not JSON: the receiver refuses it before validating")
			}
			if _, err := dec.Token(); err != io.EOF {
				t.Skip("more than one JSON value: the receiver refuses it before validating")
			}
			want := ahp.ValidateMessage([]byte(tc.msg))
			got := ahp.ValidateDecodedMessage([]byte(tc.msg), x)
			if fmt.Sprint(got) != fmt.Sprint(want) {
				t.Fatalf("ValidateDecodedMessage = %v, ValidateMessage = %v", got, want)
			}
		})
	}
}

func TestValidateStdioFrame(t *testing.T) {
	one := intercept(toolBeforeEvent, denyCaps)
	var pretty []byte
	{
		var x any
		_ = json.Unmarshal([]byte(one), &x)
		pretty, _ = json.MarshalIndent(x, "", "  ")
	}
	for _, tc := range []struct {
		desc  string
		frame string
		ok    bool
	}{
		{"with newline", one + "\n", true},
		{"without newline", one, true},
		{"pretty printed", string(pretty) + "\n", false},
		{"two frames", one + "\n" + one + "\n", false},
		{"crlf", one + "\r\n", false},
		{"empty", "\n", false},
		{"escaped newline in string is fine", strings.Replace(one, `"ls"`, `"ls\nrm"`, 1) + "\n", true},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			if err := ahp.ValidateStdioFrame([]byte(tc.frame)); (err == nil) != tc.ok {
				t.Fatalf("ok=%v, err=%v", tc.ok, err)
			}
		})
	}
}

func TestURIStrictness(t *testing.T) {
	for _, tc := range []struct {
		uri string
		ok  bool
	}{
		{"urn:uuid:8b1a9953-c461-4f8e-8f2b-1f2e3d4c5b6a", true},
		{"https://harness.example/runtime/42?x=1#f", true},
		{"https://[::1]:8080/x", true},
		{"urn:hookproxy:node a", false},
		{"urn:hookproxy:node%2", false},
		{"urn:hookproxy:nodé", false},
		{"1urn:x", false},
		{"no-scheme", false},
		{"https://[::1/x", false},
	} {
		err := ahp.ValidateMessage([]byte(observe(strings.Replace(toolBeforeEvent, "urn:hookproxy:test", tc.uri, 1))))
		if (err == nil) != tc.ok {
			t.Errorf("%q: ok=%v, err=%v", tc.uri, tc.ok, err)
		}
	}
}

func TestValidateHelpers(t *testing.T) {
	if err := ahp.ValidateEvent([]byte(toolBeforeEvent)); err != nil {
		t.Errorf("ValidateEvent: %v", err)
	}
	if err := ahp.ValidateEvent([]byte(`{"type":"tool.error"}`)); err == nil {
		t.Error("ValidateEvent accepted a removed event name")
	}
	if err := ahp.ValidateContentMessages([]byte(`[`+textMsg+`]`), ahp.RoleUser); err != nil {
		t.Errorf("ValidateContentMessages: %v", err)
	}
	if err := ahp.ValidateContentMessages([]byte(`[`+textMsg+`]`), ahp.RoleAssistant); err == nil {
		t.Error("ValidateContentMessages ignored the slot role")
	}
	if err := ahp.ValidateContentParts([]byte(`[{"id":"a","kind":"attachment","mediaType":"image/png","selection":"body","body":{"ref":"r"}}]`), true); err == nil {
		t.Error("ValidateContentParts(textOnly) accepted an attachment")
	}
	if err := ahp.ValidateCapabilities("turn.finish.before", []byte(`{"effects":["flow","modify"],"flow":{"operations":["continue"],"remainingContinuations":0,"continuationCount":2},"modify":{"response":{"replace":false,"merge":true}}}`)); err != nil {
		t.Errorf("ValidateCapabilities: %v", err)
	}
	if err := ahp.ValidateCapabilities("turn.end", []byte(`{"effects":[]}`)); err == nil {
		t.Error("ValidateCapabilities accepted an observe-only event")
	}
	// Every advertisement hookproxy could build from EventBounds passes its own bound.
	for event, b := range ahp.EventBounds {
		caps := ahp.Capabilities{Effects: b.Effects}
		for _, e := range b.Effects {
			switch e {
			case ahp.EffectModify:
				caps.Modify = map[string]ahp.ModifyOps{b.Target: {Replace: true, Merge: true}}
			case ahp.EffectFlow:
				zero := 0
				caps.Flow = &ahp.FlowCaps{Operations: b.FlowOps, RemainingContinuations: &zero, ContinuationCount: &zero}
			case ahp.EffectInject:
				caps.Inject = &ahp.InjectCaps{Context: ahp.InjectContextCaps{Append: true, DeliverAt: []string{ahp.DeliverNow}}}
			}
		}
		raw, _ := json.Marshal(caps)
		if err := ahp.ValidateCapabilities(event, raw); err != nil {
			t.Errorf("%s: maximal advertisement refused: %v", event, err)
		}
	}
}

func TestManifestRules(t *testing.T) {
	base := map[string]any{
		"events":                    []any{map[string]any{"event": "tool.before", "modes": []any{"intercept", "observe"}, "capabilities": map[string]any{"effects": []any{"deny"}}}},
		"gaps":                      []any{},
		"transports":                []any{"http", "in_process"},
		"authentication":            []any{"bearer"},
		"toolPaths":                 []any{"hookproxy.openai.chat"},
		"contentCategories":         []any{"text"},
		"limits":                    map[string]any{"maxContinuations": 0},
		"managedPolicy":             map[string]any{"scopes": []any{"user"}, "disableable": true},
		"correlationIdentityFields": []any{"id", "call.id"},
	}
	check := func(desc string, edit func(m map[string]any), ok bool) {
		t.Helper()
		m := map[string]any{}
		b, _ := json.Marshal(base)
		_ = json.Unmarshal(b, &m)
		edit(m)
		raw, _ := json.Marshal(m)
		if err := ahp.ValidateManifest(raw); (err == nil) != ok {
			t.Errorf("%s: ok=%v, err=%v", desc, ok, err)
		}
	}
	check("valid", func(map[string]any) {}, true)
	check("missing key", func(m map[string]any) { delete(m, "toolPaths") }, false)
	check("identity", func(m map[string]any) { m["identity"] = "x" }, false)
	check("bad transport", func(m map[string]any) { m["transports"] = []any{"grpc"} }, false)
	check("mtls", func(m map[string]any) { m["authentication"] = []any{"mtls"} }, false)
	check("managed disableable", func(m map[string]any) {
		m["managedPolicy"] = map[string]any{"scopes": []any{"managed"}, "disableable": true}
	}, false)
	check("intercept observe-only", func(m map[string]any) {
		m["events"] = []any{map[string]any{"event": "turn.end", "modes": []any{"intercept"}, "capabilities": map[string]any{"effects": []any{}}}}
	}, false)
	check("observe with effects", func(m map[string]any) {
		m["events"] = []any{map[string]any{"event": "tool.before", "modes": []any{"observe"}, "capabilities": map[string]any{"effects": []any{"deny"}}}}
	}, false)
	check("intercept without capabilities", func(m map[string]any) {
		m["events"] = []any{map[string]any{"event": "tool.before", "modes": []any{"intercept"}}}
	}, false)
	check("capabilities out of bound", func(m map[string]any) {
		m["events"] = []any{map[string]any{"event": "tool.after", "modes": []any{"intercept"}, "capabilities": map[string]any{"effects": []any{"deny"}}}}
	}, false)
	check("negative limit", func(m map[string]any) { m["limits"] = map[string]any{"maxTimeoutMs": -1} }, false)
}

func FuzzValidateMessage(f *testing.F) {
	f.Add([]byte(intercept(toolBeforeEvent, denyCaps)))
	f.Add([]byte(observe(ev("tool.after", tool+`,"outcome":"ok","execution":{"status":"executed"},"items":[`+textMsg+`]`))))
	f.Add([]byte(`{"jsonrpc":"2.0","id":"e1","result":{"protocolVersion":"draft","manifest":{"events":[{"event":"tool.before","modes":["intercept"],"capabilities":{"effects":["flow"],"flow":{"operations":["continue"]}}}]}}}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		err := ahp.ValidateMessage(data)
		var verr *ahp.ValidationError
		if err != nil && (!errors.As(err, &verr) || len(verr.Violations) == 0) {
			t.Fatalf("error without violations: %v", err)
		}
		_ = ahp.ValidateStdioFrame(data)
	})
}
