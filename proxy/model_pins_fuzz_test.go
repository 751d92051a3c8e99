package proxy

import (
	"encoding/json"
	"testing"

	"github.com/hookproxy/hookproxy/config"
	"github.com/hookproxy/hookproxy/pinning"
)

// FuzzPinStrip: whatever a client sends, reading its tools never panics, and stripping
// every one of them from a JSON body leaves JSON with none of them left.
func FuzzPinStrip(f *testing.F) {
	f.Add(config.APIOpenAI, chatWithTools(pinAddOrig, pinSub))
	f.Add(config.APIOpenAI, `{"tools":[{"type":"function","name":"a","parameters":{}},{"type":"custom","name":"b","format":{"type":"text"}}],"tool_choice":{"type":"function","name":"a"}}`)
	f.Add(config.APIAnthropic, `{"tools":[{"name":"a","input_schema":{}},{"type":"web_search_20250305","name":"web_search"}],"tool_choice":{"type":"tool","name":"a"}}`)
	f.Add(config.APIGemini, `{"tools":[{"functionDeclarations":[{"name":"a"},{"name":"b","parametersJsonSchema":{}}]},{"googleSearch":{}}],"toolConfig":{"functionCallingConfig":{"allowedFunctionNames":["a"]}}}`)
	f.Fuzz(func(t *testing.T, api, body string) {
		tools := modelTools(api, []byte(body))
		if len(tools) == 0 || !json.Valid([]byte(body)) {
			return
		}
		p, _ := pinning.New(pinning.Options{Mode: pinning.ModeFile, OnChange: pinning.ActionStrip})
		defs := make([]pinning.Tool, len(tools))
		for i, tl := range tools {
			defs[i] = tl.tool
		}
		v, err := p.Check(t.Context(), "s", defs, false)
		if err != nil {
			t.Fatal(err)
		}
		out, err := stripModelTools(api, []byte(body), tools, v)
		if err != nil {
			return // refused with a 400, never forwarded
		}
		if !json.Valid(out) {
			t.Fatalf("stripping made invalid JSON: %s", out)
		}
		left := modelTools(api, out)
		for _, tl := range left {
			if v.Strip(tl.tool.Name) {
				t.Fatalf("%q survived the strip: %s", tl.tool.Name, out)
			}
		}
	})
}
