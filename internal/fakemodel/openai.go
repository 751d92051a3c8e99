package fakemodel

import (
	"encoding/json"
	"net/http"
	"strings"
)

// chatRequest is the part of a chat completions request the imitation reads.
type chatRequest struct {
	Model    string `json:"model"`
	Messages []struct {
		Role    string          `json:"role"`
		Content json.RawMessage `json:"content"`
	} `json:"messages"`
	Stream        bool `json:"stream"`
	StreamOptions *struct {
		IncludeUsage bool `json:"include_usage"`
	} `json:"stream_options"`
}

func openAIError(msg string) any {
	return map[string]any{"error": map[string]any{"message": msg, "type": "invalid_request_error", "param": nil, "code": nil}}
}

// chatText returns the text of an OpenAI message content: a string, or the text parts of
// a part list.
func chatText(raw json.RawMessage) string {
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return s
	}
	var parts []struct {
		Type string `json:"type"`
		Text string `json:"text"`
	}
	if json.Unmarshal(raw, &parts) != nil {
		return ""
	}
	var b strings.Builder
	for _, p := range parts {
		if p.Type == "text" {
			if b.Len() > 0 {
				b.WriteString("\n")
			}
			b.WriteString(p.Text)
		}
	}
	return b.String()
}

type chatToolCall struct {
	Index    *int         `json:"index,omitempty"` // streaming deltas only
	ID       string       `json:"id,omitempty"`
	Type     string       `json:"type,omitempty"`
	Function chatFunction `json:"function"`
}

type chatFunction struct {
	Name      string `json:"name,omitempty"`
	Arguments string `json:"arguments"`
}

type chatMessage struct {
	Role      string         `json:"role"`
	Content   *string        `json:"content"`
	ToolCalls []chatToolCall `json:"tool_calls,omitempty"`
	Refusal   *string        `json:"refusal"`
}

type chatChoice struct {
	Index        int          `json:"index"`
	Message      *chatMessage `json:"message,omitempty"`
	Delta        *chatDelta   `json:"delta,omitempty"`
	Logprobs     *struct{}    `json:"logprobs"`
	FinishReason *string      `json:"finish_reason"`
}

type chatDelta struct {
	Role      string         `json:"role,omitempty"`
	Content   *string        `json:"content,omitempty"`
	ToolCalls []chatToolCall `json:"tool_calls,omitempty"`
}

type chatUsage struct {
	PromptTokens     int `json:"prompt_tokens"`
	CompletionTokens int `json:"completion_tokens"`
	TotalTokens      int `json:"total_tokens"`
}

type chatCompletion struct {
	ID      string       `json:"id"`
	Object  string       `json:"object"`
	Created int64        `json:"created"`
	Model   string       `json:"model"`
	Choices []chatChoice `json:"choices"`
	Usage   *chatUsage   `json:"usage,omitempty"`
}

func (s *Server) chat(w http.ResponseWriter, r *http.Request) {
	var req chatRequest
	body, ok := s.read(w, r, &req, openAIError)
	if !ok {
		return
	}
	if len(req.Messages) == 0 {
		writeJSON(w, http.StatusBadRequest, openAIError("messages must not be empty"))
		return
	}
	lastUser, toolResults := "", 0
	for i := len(req.Messages) - 1; i >= 0 && req.Messages[i].Role == "tool"; i-- {
		toolResults++
	}
	for i := len(req.Messages) - 1; i >= 0; i-- {
		if req.Messages[i].Role == "user" {
			lastUser = chatText(req.Messages[i].Content)
			break
		}
	}
	p := decide(body, lastUser, toolResults, len(req.Messages))
	model := req.Model
	if model == "" {
		model = "fake-model"
	}
	finish := "stop"
	if len(p.calls) > 0 {
		finish = "tool_calls"
	}
	out := tokens(p.text) + 8*len(p.calls)
	usage := &chatUsage{PromptTokens: p.in, CompletionTokens: out, TotalTokens: p.in + out}
	base := chatCompletion{ID: "chatcmpl-fake-" + p.id, Created: created, Model: model}

	if !req.Stream {
		msg := &chatMessage{Role: "assistant"}
		if p.text != "" {
			msg.Content = &p.text
		}
		for _, c := range p.calls {
			msg.ToolCalls = append(msg.ToolCalls, chatToolCall{ID: c.id, Type: "function",
				Function: chatFunction{Name: c.name, Arguments: c.input}})
		}
		resp := base
		resp.Object = "chat.completion"
		resp.Choices = []chatChoice{{Message: msg, FinishReason: &finish}}
		resp.Usage = usage
		writeJSON(w, http.StatusOK, resp)
		return
	}

	ev := startSSE(w)
	chunk := func(d *chatDelta, finish *string) {
		c := base
		c.Object = "chat.completion.chunk"
		c.Choices = []chatChoice{{Delta: d, FinishReason: finish}}
		ev.event("", c)
	}
	empty := ""
	chunk(&chatDelta{Role: "assistant", Content: &empty}, nil)
	for _, piece := range chunks(p.text) {
		chunk(&chatDelta{Content: &piece}, nil)
	}
	for i, c := range p.calls {
		idx := i
		chunk(&chatDelta{ToolCalls: []chatToolCall{{Index: &idx, ID: c.id, Type: "function",
			Function: chatFunction{Name: c.name}}}}, nil)
		chunk(&chatDelta{ToolCalls: []chatToolCall{{Index: &idx, Function: chatFunction{Arguments: c.input}}}}, nil)
	}
	chunk(&chatDelta{}, &finish)
	if req.StreamOptions != nil && req.StreamOptions.IncludeUsage {
		c := base
		c.Object = "chat.completion.chunk"
		c.Choices = []chatChoice{}
		c.Usage = usage
		ev.event("", c)
	}
	ev.event("", "[DONE]")
}
