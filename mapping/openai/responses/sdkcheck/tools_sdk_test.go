package sdkcheck

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/openai/openai-go/v3/responses"
	"github.com/tidwall/gjson"

	"github.com/hookproxy/hookproxy/chain/ahp"
	"github.com/hookproxy/hookproxy/mapping"
	"github.com/hookproxy/hookproxy/mapping/mappingtest"
	translator "github.com/hookproxy/hookproxy/mapping/openai/responses"
)

// The client-run tool items other than function calls, as the SDK writes and
// reads them.

const sdkAWSKey = "AKIAW4162OR5EL2XEMIE" // made up, real format

// TestToolItemsRequestFromSDK: the history items the SDK sends for custom, local shell,
// shell and apply_patch calls with their outputs decode into tool calls and results; a
// credential in the custom call's input and output is visible, and its redaction renders
// into a body the SDK reads back into the same item types.
func TestToolItemsRequestFromSDK(t *testing.T) {
	var got []byte
	client := newClient(t, func(w http.ResponseWriter, r *http.Request) {
		got, _ = io.ReadAll(r.Body)
		serving(200, "application/json", fixture(t, "responses/tool_response.json"))(w, r)
	})
	patch := "*** Begin Patch\n*** Update File: deploy.sh\n-KEY=" + sdkAWSKey + "\n+KEY=$KEY\n*** End Patch\n"
	params := responses.ResponseNewParams{
		Model: "gpt-5-codex",
		Input: responses.ResponseNewParamsInputUnion{OfInputItemList: responses.ResponseInputParam{
			responses.ResponseInputItemParamOfMessage("Fix deploy.sh", responses.EasyInputMessageRoleUser),
			responses.ResponseInputItemParamOfCustomToolCall("call_p", patch, "apply_patch"),
			responses.ResponseInputItemParamOfCustomToolCallOutput("call_p", "Success. Removed "+sdkAWSKey),
			{OfLocalShellCall: &responses.ResponseInputItemLocalShellCallParam{ID: "lsh_1", CallID: "call_l", Status: "completed",
				Action: responses.ResponseInputItemLocalShellCallActionParam{Command: []string{"bash", "-lc", "make test"}, Env: map[string]string{"CI": "1"}}}},
			responses.ResponseInputItemParamOfLocalShellCallOutput("call_l", `{"output":"ok"}`),
			responses.ResponseInputItemParamOfShellCall(responses.ResponseInputItemShellCallActionParam{Commands: []string{"ls", "git status"}}, "call_s"),
			responses.ResponseInputItemParamOfShellCallOutput("call_s", []responses.ResponseFunctionShellCallOutputContentParam{{
				Stdout: "a.txt\n", Stderr: "",
				Outcome: responses.ResponseFunctionShellCallOutputContentOutcomeUnionParam{OfExit: &responses.ResponseFunctionShellCallOutputContentOutcomeExitParam{ExitCode: 0}}}}),
			responses.ResponseInputItemParamOfApplyPatchCall("call_a", responses.ResponseInputItemApplyPatchCallOperationDeleteFileParam{Path: "old.txt"}, "completed"),
			responses.ResponseInputItemParamOfApplyPatchCallOutput("call_a", "completed"),
			responses.ResponseInputItemParamOfMessage("Go on.", responses.EasyInputMessageRoleUser),
		}},
	}
	if _, err := client.Responses.New(context.Background(), params); err != nil {
		t.Fatal(err)
	}
	tr := translator.New()
	req, err := tr.DecodeRequest(got)
	if err != nil {
		t.Fatalf("DecodeRequest(%s): %v", got, err)
	}
	validItems(t, req.Items)
	if len(req.Gaps) != 0 {
		t.Errorf("gaps %+v: every item is represented", req.Gaps)
	}
	var names []string
	for _, c := range mapping.ToolCalls(req.Items) {
		names = append(names, c.Name)
	}
	if strings.Join(names, " ") != "apply_patch local_shell shell apply_patch" || len(req.ToolResults) != 4 {
		t.Fatalf("calls %q, results %+v", names, req.ToolResults)
	}
	for _, r := range req.ToolResults {
		if !r.CallFound {
			t.Errorf("result %+v without its call", r)
		}
	}
	if out, err := tr.EncodeRequest(req, req.Items); err != nil || !bytes.Equal(out, got) {
		t.Errorf("unchanged request must go out byte-identical: %v", err)
	}

	// A redaction of the key wherever it is (what the secrets policy does).
	items := ahp.CloneMessages(req.Items)
	seen := 0
	for i := range items {
		for j := range items[i].Parts {
			p := &items[i].Parts[j]
			if p.Text != nil && strings.Contains(*p.Text, sdkAWSKey) {
				s := strings.ReplaceAll(*p.Text, sdkAWSKey, "[REDACTED]")
				p.Text = &s
				seen++
			}
		}
	}
	if seen != 2 {
		t.Fatalf("the key is in %d parts, want the call and its output", seen)
	}
	out, err := tr.EncodeRequest(req, items)
	if err != nil {
		t.Fatal(err)
	}
	if bytes.Contains(out, []byte(sdkAWSKey)) {
		t.Fatalf("key still sent: %s", out)
	}
	// The SDK's own reading of input items (its ResponseInputItemUnion) takes every item
	// back as the type it was sent as.
	var list []responses.ResponseInputItemUnion
	if err := json.Unmarshal([]byte(gjson.GetBytes(out, "input").Raw), &list); err != nil {
		t.Fatalf("the SDK cannot read the rendered input: %v\n%s", err, out)
	}
	var types []string
	for _, it := range list {
		types = append(types, it.Type)
	}
	if want := " custom_tool_call custom_tool_call_output local_shell_call local_shell_call_output shell_call shell_call_output apply_patch_call apply_patch_call_output "; strings.Join(types, " ") != want {
		t.Fatalf("item types %q, want %q", types, want)
	}
	if c := list[1].AsCustomToolCall(); c.Input != strings.ReplaceAll(patch, sdkAWSKey, "[REDACTED]") || c.Name != "apply_patch" || c.CallID != "call_p" {
		t.Errorf("custom call read back: %+v", c)
	}
	if o := list[2].AsCustomToolCallOutput(); o.Output.AsString() != "Success. Removed [REDACTED]" || o.CallID != "call_p" {
		t.Errorf("custom output read back: %s", o.RawJSON())
	}
	if a := list[3].AsLocalShellCall().Action; strings.Join(a.Command, " ") != "bash -lc make test" || a.Env["CI"] != "1" {
		t.Errorf("local shell call read back: %+v", a)
	}
	if o := list[6].AsShellCallOutput(); len(o.Output) != 1 || o.Output[0].Stdout != "a.txt\n" || o.Output[0].Outcome.ExitCode != 0 {
		t.Errorf("shell output read back: %s", o.RawJSON())
	}
}

// toolItemsEdited is tool_items_response with the custom apply_patch call and the local
// shell rm -rf call removed (as a deny does), and the shell call's commands rewritten.
func toolItemsEdited(t *testing.T) []byte {
	t.Helper()
	tr := translator.New()
	resp, err := tr.DecodeResponse(fixture(t, "responses/tool_items_response.json"))
	if err != nil {
		t.Fatal(err)
	}
	items := ahp.CloneMessages(resp.Items)
	var parts []ahp.Part
	for _, p := range items[0].Parts {
		c, ok := mapping.ParseToolCall(&p)
		switch {
		case ok && (c.ID == "call_p" || c.ID == "call_l"):
			continue
		case ok && c.ID == "call_s":
			p = mapping.ToolCallPart(p.ID, mapping.ToolCall{ID: c.ID, Name: c.Name, Input: json.RawMessage(`{"command":"git status"}`)})
		}
		parts = append(parts, p)
	}
	items[0].Parts = append(parts, ahp.TextPart(items[0].ID+".hookproxy.9", "Tool calls apply_patch and local_shell were blocked by policy."))
	body, err := tr.EncodeResponse(resp, items, "")
	if err != nil {
		t.Fatal(err)
	}
	return body
}

// checkToolItemsOutput checks the SDK's reading of the edited tool items output.
func checkToolItemsOutput(t *testing.T, out []responses.ResponseOutputItemUnion) {
	t.Helper()
	var types []string
	for _, it := range out {
		types = append(types, it.Type)
		switch it.Type {
		case "custom_tool_call", "local_shell_call":
			t.Errorf("a removed call reached the client: %s", it.RawJSON())
		case "shell_call":
			sc := it.AsShellCall()
			if sc.CallID == "call_s" && strings.Join(sc.Action.Commands, "|") != "git status" {
				t.Errorf("shell call: %+v", sc.Action)
			}
			if sc.CallID == "call_h" && sc.Environment.Type != "container_reference" {
				t.Errorf("hosted shell call: %s", it.RawJSON())
			}
		case "apply_patch_call":
			if op := it.AsApplyPatchCall().Operation; op.Type != "update_file" || op.Path != "README.md" {
				t.Errorf("apply_patch: %+v", op)
			}
		case "computer_call":
			if a := it.AsComputerCall().Action; a.Type != "type" || a.Text != "hello" {
				t.Errorf("computer: %+v", a)
			}
		}
	}
	// The note joins the response's message after its last call, before the hosted items
	// that followed it (EncodeResponse's placement of new items).
	want := "reasoning message shell_call shell_call shell_call_output apply_patch_call computer_call message web_search_call mcp_call"
	if strings.Join(types, " ") != want {
		t.Errorf("output types %q, want %q", types, want)
	}
}

func TestToolItemsResponseParsedBySDK(t *testing.T) {
	client := newClient(t, serving(200, "application/json", toolItemsEdited(t)))
	res, err := client.Responses.New(context.Background(), responses.ResponseNewParams{Model: "gpt-5-codex"})
	if err != nil {
		t.Fatal(err)
	}
	checkToolItemsOutput(t, res.Output)
	if res.OutputText() != "Cleaning up.Tool calls apply_patch and local_shell were blocked by policy." {
		t.Errorf("output text %q", res.OutputText())
	}
}

// TestSDKReadsEditedToolItemStreams: edited streams of the tool items parse event by event
// (custom_tool_call_input deltas included), and the terminal response is the held path's.
func TestSDKReadsEditedToolItemStreams(t *testing.T) {
	tr := translator.New()
	var rendered bytes.Buffer
	if err := tr.WriteStream(&rendered, fixture(t, "responses/tool_items_response.json")); err != nil {
		t.Fatal(err)
	}
	streams := map[string][]byte{
		"rendered tool items":        rendered.Bytes(),
		"custom call as API streams": fixture(t, "responses/custom_tool_stream.sse"),
	}
	scripts := map[string]mappingtest.Script{
		"allowed":              nil,
		"apply_patch denied":   {0: {Remove: true, Note: "Tool call apply_patch was blocked by policy."}},
		"rm -rf denied":        {1: {Remove: true, Note: "Tool call local_shell was blocked by policy."}},
		"custom input rewrite": {0: {Input: json.RawMessage(`{"input":"*** Begin Patch\n*** End Patch\n"}`)}},
		"flow stop":            {0: {Remove: true, Stop: true, Note: "stopped"}},
	}
	for sdesc, upstream := range streams {
		for desc, script := range scripts {
			t.Run(sdesc+"/"+desc, func(t *testing.T) {
				edited, err := mappingtest.Edit(tr, upstream, 0, &mappingtest.Decider{Script: script})
				if err != nil {
					t.Fatal(err)
				}
				held, err := mappingtest.Held(tr, upstream, script)
				if err != nil {
					t.Fatal(err)
				}
				client := newClient(t, serving(200, "text/event-stream", edited))
				stream := client.Responses.NewStreaming(context.Background(), responses.ResponseNewParams{Model: "gpt-5-codex"})
				defer stream.Close()
				var final *responses.Response
				var input strings.Builder
				for stream.Next() {
					ev := stream.Current()
					switch ev.Type {
					case "response.custom_tool_call_input.delta":
						input.WriteString(ev.AsResponseCustomToolCallInputDelta().Delta)
					case "response.completed":
						r := ev.Response
						final = &r
					}
				}
				if err := stream.Err(); err != nil {
					t.Fatal(err)
				}
				if final == nil {
					t.Fatal("no response.completed")
				}
				// The calls the client gets are the held path's (the note's placement
				// differs: the stream writes it as an item before the terminal event, the
				// held path joins it to the last message; mappingtest.Equivalent compares the
				// canonical views in the package's tests).
				calls := map[string]bool{"custom_tool_call": true, "local_shell_call": true, "shell_call": true,
					"apply_patch_call": true, "computer_call": true, "shell_call_output": true}
				var want []string
				for _, it := range gjson.GetBytes(held, "output").Array() {
					if calls[it.Get("type").String()] {
						want = append(want, it.Get("type").String()+" "+it.Get("call_id").String()+" "+it.Get("input").String())
					}
				}
				var gotItems []string
				for _, it := range final.Output {
					if calls[it.Type] {
						gotItems = append(gotItems, it.Type+" "+it.CallID+" "+gjson.Get(it.RawJSON(), "input").String())
					}
				}
				if strings.Join(gotItems, "\n") != strings.Join(want, "\n") {
					t.Errorf("terminal output\n%s\nwant\n%s", strings.Join(gotItems, "\n"), strings.Join(want, "\n"))
				}
				// The deltas the client saw build the input of the custom call it got.
				for _, it := range final.Output {
					if it.Type == "custom_tool_call" && it.AsCustomToolCall().Input != input.String() {
						t.Errorf("deltas %q, item input %q", input.String(), it.AsCustomToolCall().Input)
					}
				}
			})
		}
	}
}
