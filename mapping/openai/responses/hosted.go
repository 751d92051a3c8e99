package responses

import (
	"encoding/json"
	"strings"

	"github.com/tidwall/gjson"

	"github.com/hookproxy/hookproxy/mapping"
)

// hostedTools names the output items of tools the provider runs itself, by the tool name
// hosted calls are reported under (observed, never preventable by a proxy).
var hostedTools = map[string]string{
	"web_search_call":       "web_search",
	"file_search_call":      "file_search",
	"code_interpreter_call": "code_interpreter",
	"image_generation_call": "image_generation",
	"mcp_call":              "", // the item's own name
}

// maxHostedResult bounds the result text an observation carries.
const maxHostedResult = 16 << 10

// hostedCalls lists the hosted tool items of a response's output.
func hostedCalls(output gjson.Result) []mapping.HostedCall {
	var out []mapping.HostedCall
	for _, it := range arrayOf(output) {
		typ := it.Get("type").String()
		name, ok := hostedTools[typ]
		if !ok {
			continue
		}
		c := mapping.HostedCall{ID: it.Get("id").String(), Name: name}
		var input, result gjson.Result
		switch typ {
		case "web_search_call":
			input = it.Get("action")
		case "file_search_call":
			input, result = it, it.Get("results")
		case "code_interpreter_call":
			input, result = it, it.Get("outputs")
		case "image_generation_call":
			input = gjson.Result{} // the prompt is not in the item; the image is not text
		case "mcp_call":
			c.Name = it.Get("name").String()
			if a := it.Get("arguments"); a.Type == gjson.String && gjson.Valid(a.Str) {
				input = gjson.Parse(a.Str)
			}
			result = it.Get("output")
			if e := it.Get("error"); e.Exists() && e.Type != gjson.Null {
				c.IsError, result = true, e
			}
		}
		c.Input = hostedInput(typ, it, input)
		if result.Exists() && result.Type != gjson.Null {
			r := result.Raw
			if result.Type == gjson.String {
				r = result.Str
			}
			if len(r) > maxHostedResult {
				r = r[:maxHostedResult]
			}
			c.Result = r
		}
		if it.Get("status").String() == "failed" {
			c.IsError = true
		}
		out = append(out, c)
	}
	return out
}

// HostedCalls implements mapping.HostedCallReporter from the items the stream finished.
func (e *editor) HostedCalls() []mapping.HostedCall {
	var raws []string
	for i := 0; i <= e.maxIndex; i++ {
		if it := e.items[i]; it != nil && it.done != "" {
			if _, ok := hostedTools[it.typ]; ok {
				raws = append(raws, it.done)
			}
		}
	}
	if len(raws) == 0 {
		return nil
	}
	return hostedCalls(gjson.Parse("[" + strings.Join(raws, ",") + "]"))
}

// hostedInput is the call's input as a JSON object: the item's own fields that say what
// was asked (the query, code, arguments), without the results.
func hostedInput(typ string, it, input gjson.Result) json.RawMessage {
	switch typ {
	case "file_search_call":
		return json.RawMessage(`{"queries":` + rawOr(it.Get("queries"), "[]") + `}`)
	case "code_interpreter_call":
		return json.RawMessage(`{"code":` + rawOr(it.Get("code"), `""`) + `,"container_id":` + rawOr(it.Get("container_id"), "null") + `}`)
	case "mcp_call":
		if !input.IsObject() {
			return json.RawMessage(`{"server_label":` + rawOr(it.Get("server_label"), `""`) + `}`)
		}
	}
	if input.IsObject() {
		return json.RawMessage(mapping.CompactJSON(input.Raw))
	}
	return json.RawMessage(`{}`)
}

func rawOr(v gjson.Result, def string) string {
	if !v.Exists() {
		return def
	}
	return mapping.CompactJSON(v.Raw)
}
