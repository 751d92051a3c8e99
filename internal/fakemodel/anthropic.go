package fakemodel

import (
	"encoding/json"
	"net/http"
	"strconv"
	"strings"
)

// messagesRequest is the part of an Anthropic messages request the imitation reads.
type messagesRequest struct {
	Model    string `json:"model"`
	Messages []struct {
		Role    string          `json:"role"`
		Content json.RawMessage `json:"content"`
	} `json:"messages"`
	Stream bool `json:"stream"`
}

func anthropicError(msg string) any {
	return map[string]any{"type": "error", "error": map[string]any{"type": "invalid_request_error", "message": msg}}
}

// anthropicContent returns the text blocks of a message content (a string or a block
// list) and the number of tool_result blocks.
func anthropicContent(raw json.RawMessage) (text string, toolResults int) {
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return s, 0
	}
	var blocks []struct {
		Type string `json:"type"`
		Text string `json:"text"`
	}
	if json.Unmarshal(raw, &blocks) != nil {
		return "", 0
	}
	var b strings.Builder
	for _, bl := range blocks {
		switch bl.Type {
		case "text":
			if b.Len() > 0 {
				b.WriteString("\n")
			}
			b.WriteString(bl.Text)
		case "tool_result":
			toolResults++
		}
	}
	return b.String(), toolResults
}

type anthropicBlock struct {
	Type  string          `json:"type"`
	Text  *string         `json:"text,omitempty"`
	ID    string          `json:"id,omitempty"`
	Name  string          `json:"name,omitempty"`
	Input json.RawMessage `json:"input,omitempty"`
}

type anthropicUsage struct {
	InputTokens  int `json:"input_tokens"`
	OutputTokens int `json:"output_tokens"`
}

type anthropicMessage struct {
	ID           string           `json:"id"`
	Type         string           `json:"type"`
	Role         string           `json:"role"`
	Model        string           `json:"model"`
	Content      []anthropicBlock `json:"content"`
	StopReason   *string          `json:"stop_reason"`
	StopSequence *string          `json:"stop_sequence"`
	Usage        anthropicUsage   `json:"usage"`
}

func (s *Server) messages(w http.ResponseWriter, r *http.Request) {
	var req messagesRequest
	body, ok := s.read(w, r, &req, anthropicError)
	if !ok {
		return
	}
	if len(req.Messages) == 0 {
		writeJSON(w, http.StatusBadRequest, anthropicError("messages: at least one message is required"))
		return
	}
	lastUser, toolResults := "", 0
	if last := req.Messages[len(req.Messages)-1]; last.Role == "user" {
		lastUser, toolResults = anthropicContent(last.Content)
	}
	p := decide(body, lastUser, toolResults, len(req.Messages))
	model := req.Model
	if model == "" {
		model = "fake-model"
	}
	stop := "end_turn"
	if len(p.calls) > 0 {
		stop = "tool_use"
	}
	var blocks []anthropicBlock
	if p.text != "" {
		blocks = append(blocks, anthropicBlock{Type: "text", Text: &p.text})
	}
	for i, c := range p.calls {
		blocks = append(blocks, anthropicBlock{Type: "tool_use", ID: "toolu_" + p.id + "_" + strconv.Itoa(i),
			Name: c.name, Input: json.RawMessage(c.input)})
	}
	out := tokens(p.text) + 8*len(p.calls)
	msg := anthropicMessage{ID: "msg_fake_" + p.id, Type: "message", Role: "assistant", Model: model,
		Content: blocks, StopReason: &stop, Usage: anthropicUsage{InputTokens: p.in, OutputTokens: out}}

	if !req.Stream {
		writeJSON(w, http.StatusOK, msg)
		return
	}

	ev := startSSE(w)
	start := msg
	start.Content, start.StopReason = []anthropicBlock{}, nil
	start.Usage.OutputTokens = 1
	ev.event("message_start", map[string]any{"type": "message_start", "message": start})
	for i, b := range blocks {
		switch b.Type {
		case "text":
			empty := ""
			ev.event("content_block_start", map[string]any{"type": "content_block_start", "index": i,
				"content_block": anthropicBlock{Type: "text", Text: &empty}})
			for _, piece := range chunks(*b.Text) {
				ev.event("content_block_delta", map[string]any{"type": "content_block_delta", "index": i,
					"delta": map[string]any{"type": "text_delta", "text": piece}})
			}
		case "tool_use":
			ev.event("content_block_start", map[string]any{"type": "content_block_start", "index": i,
				"content_block": anthropicBlock{Type: "tool_use", ID: b.ID, Name: b.Name, Input: json.RawMessage(`{}`)}})
			ev.event("content_block_delta", map[string]any{"type": "content_block_delta", "index": i,
				"delta": map[string]any{"type": "input_json_delta", "partial_json": string(b.Input)}})
		}
		ev.event("content_block_stop", map[string]any{"type": "content_block_stop", "index": i})
	}
	ev.event("message_delta", map[string]any{"type": "message_delta",
		"delta": map[string]any{"stop_reason": stop, "stop_sequence": nil},
		"usage": map[string]any{"output_tokens": out}})
	ev.event("message_stop", map[string]any{"type": "message_stop"})
}
