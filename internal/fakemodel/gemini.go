package fakemodel

import (
	"encoding/json"
	"net/http"
	"strings"
)

// Gemini paths: POST {PathGeminiModels}{model}:generateContent and
// :streamGenerateContent (with ?alt=sse, server-sent events; without, one JSON array),
// under v1beta and v1, as the Gemini API serves them.
const (
	PathGeminiModels   = "/v1beta/models/"
	pathGeminiModelsV1 = "/v1/models/"
)

// generateContentRequest is the part of a Gemini generateContent request the imitation
// reads.
type generateContentRequest struct {
	Contents []struct {
		Role  string `json:"role"`
		Parts []struct {
			Text             *string         `json:"text"`
			FunctionResponse json.RawMessage `json:"functionResponse"`
		} `json:"parts"`
	} `json:"contents"`
}

// geminiError is the Gemini API's error body (google.rpc.Status inside "error").
func geminiError(code int, status string) func(string) any {
	return func(msg string) any {
		return map[string]any{"error": map[string]any{"code": code, "message": msg, "status": status}}
	}
}

func (s *Server) gemini(w http.ResponseWriter, r *http.Request) {
	model, method, ok := strings.Cut(r.PathValue("modelMethod"), ":")
	if !ok || (method != "generateContent" && method != "streamGenerateContent") {
		writeJSON(w, http.StatusNotFound, geminiError(http.StatusNotFound, "NOT_FOUND")(
			"the model imitation serves models/{model}:generateContent and :streamGenerateContent"))
		return
	}
	var req generateContentRequest
	body, ok := s.read(w, r, &req, geminiError(http.StatusBadRequest, "INVALID_ARGUMENT"))
	if !ok {
		return
	}
	if len(req.Contents) == 0 {
		writeJSON(w, http.StatusBadRequest, geminiError(http.StatusBadRequest, "INVALID_ARGUMENT")("contents is not specified"))
		return
	}
	lastUser, toolResults := "", 0
	if last := req.Contents[len(req.Contents)-1]; last.Role == "user" || last.Role == "" {
		var texts []string
		for _, p := range last.Parts {
			switch {
			case p.Text != nil:
				texts = append(texts, *p.Text)
			case len(p.FunctionResponse) > 0:
				toolResults++
			}
		}
		lastUser = strings.Join(texts, "\n")
	}
	p := decide(body, lastUser, toolResults, len(req.Contents))
	var parts []any
	if p.text != "" {
		parts = append(parts, map[string]any{"text": p.text})
	}
	for _, c := range p.calls {
		parts = append(parts, map[string]any{"functionCall": map[string]any{"name": c.name, "args": json.RawMessage(c.input)}})
	}
	out := tokens(p.text) + 8*len(p.calls)
	response := func(parts []any, finish string, outTokens int) map[string]any {
		cand := map[string]any{"content": map[string]any{"role": "model", "parts": parts}, "index": 0}
		if finish != "" {
			cand["finishReason"] = finish
		}
		return map[string]any{"candidates": []any{cand},
			"usageMetadata": map[string]any{"promptTokenCount": p.in, "candidatesTokenCount": outTokens, "totalTokenCount": p.in + outTokens},
			"modelVersion":  model, "responseId": "fake_" + p.id}
	}
	if method == "generateContent" {
		writeJSON(w, http.StatusOK, response(parts, "STOP", out))
		return
	}
	// Streamed: the text in a few chunks, then the function calls, the last chunk with
	// finishReason, as the API sends them.
	var chunksOut []map[string]any
	if p.text != "" {
		for _, piece := range chunks(p.text) {
			chunksOut = append(chunksOut, response([]any{map[string]any{"text": piece}}, "", tokens(piece)))
		}
	}
	if len(p.calls) > 0 {
		chunksOut = append(chunksOut, response(parts[len(parts)-len(p.calls):], "", 8*len(p.calls)))
	}
	chunksOut[len(chunksOut)-1]["candidates"].([]any)[0].(map[string]any)["finishReason"] = "STOP"
	if r.URL.Query().Get("alt") != "sse" {
		writeJSON(w, http.StatusOK, chunksOut)
		return
	}
	ev := startSSE(w)
	for _, c := range chunksOut {
		ev.event("", c)
	}
}
