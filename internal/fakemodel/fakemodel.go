package fakemodel

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"unicode/utf8"
)

// Paths served. The route prefixes of hookproxy (/openai, /anthropic, /gemini) are stripped before
// forwarding, so these are the APIs' own paths.
const (
	PathChatCompletions = "/v1/chat/completions"
	PathMessages        = "/v1/messages"
	PathReceived        = "/_received"
	PathHealth          = "/healthz"
)

// CleanUpTrigger is the phrase that makes the imitation answer with tool calls.
const CleanUpTrigger = "clean up"

// The two tool calls of a "clean up" answer. The first is what the default destructive
// rules refuse; the second is harmless.
const (
	DestructiveTool  = "Bash"
	DestructiveInput = `{"command":"rm -rf /"}`
	HarmlessTool     = "Read"
	HarmlessInput    = `{"path":"README.md"}`
)

// maxBody bounds one request body; the imitation answers larger ones with 413.
const maxBody = 8 << 20

// created is the fixed creation time of every answer: answers are deterministic.
const created = 1700000000

// Server is the imitation. The zero value is not usable; call New.
type Server struct {
	mu       sync.Mutex
	received []byte // body of the last model request
	path     string // its path
}

// New returns an imitation with nothing received yet.
func New() *Server { return &Server{} }

// Handler serves the imitation's endpoints on any host.
func (s *Server) Handler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("POST "+PathChatCompletions, s.chat)
	mux.HandleFunc("POST "+PathMessages, s.messages)
	mux.HandleFunc("POST "+PathGeminiModels+"{modelMethod}", s.gemini)
	mux.HandleFunc("POST "+pathGeminiModelsV1+"{modelMethod}", s.gemini)
	mux.HandleFunc("GET "+PathReceived, s.receivedHandler)
	mux.HandleFunc("GET "+PathHealth, func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		_, _ = io.WriteString(w, "ok\n")
	})
	mux.HandleFunc("/", func(w http.ResponseWriter, _ *http.Request) {
		writeJSON(w, http.StatusNotFound, map[string]any{"error": map[string]any{
			"message": "the model imitation serves POST " + PathChatCompletions + ", POST " + PathMessages +
				", POST " + PathGeminiModels + "{model}:generateContent (and :streamGenerateContent) and GET " + PathReceived,
			"type": "not_found_error"}})
	})
	return mux
}

// Received returns the body and path of the last model request (nil before the first).
func (s *Server) Received() (body []byte, path string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]byte(nil), s.received...), s.path
}

func (s *Server) receivedHandler(w http.ResponseWriter, _ *http.Request) {
	body, path := s.Received()
	if body == nil {
		writeJSON(w, http.StatusNotFound, map[string]any{"error": map[string]any{
			"message": "no model request received yet", "type": "not_found_error"}})
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("X-Received-Path", path)
	_, _ = w.Write(body)
	if len(body) > 0 && body[len(body)-1] != '\n' {
		_, _ = io.WriteString(w, "\n") // so the shell prompt starts on its own line
	}
}

// read records and decodes one model request and returns its body. ok is false when an
// error was written.
func (s *Server) read(w http.ResponseWriter, r *http.Request, dst any, errorBody func(string) any) (body []byte, ok bool) {
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, maxBody))
	if err != nil {
		writeJSON(w, http.StatusRequestEntityTooLarge, errorBody("request body too large or unreadable"))
		return nil, false
	}
	s.mu.Lock()
	s.received, s.path = body, r.URL.Path
	s.mu.Unlock()
	if err := json.Unmarshal(body, dst); err != nil {
		writeJSON(w, http.StatusBadRequest, errorBody("the request body is not valid JSON"))
		return nil, false
	}
	return body, true
}

// plan is the imitation's decision for one request, independent of the API.
type plan struct {
	text  string     // answer text ("" when only tool calls)
	calls []toolCall // requested tool calls
	id    string     // deterministic id suffix, from the request body
	in    int        // pretend input tokens
}

type toolCall struct {
	id, name, input string
}

// decide picks the canned answer. lastUser is the text of the last user message;
// toolResults counts the tool results that end the conversation.
func decide(body []byte, lastUser string, toolResults, messages int) plan {
	sum := sha256.Sum256(body)
	p := plan{id: hex.EncodeToString(sum[:6]), in: tokens(string(body))}
	switch {
	case toolResults > 0:
		p.text = fmt.Sprintf("Received %d tool result(s). Done.", toolResults)
	case strings.Contains(strings.ToLower(lastUser), CleanUpTrigger):
		p.calls = []toolCall{
			{id: "call_" + p.id + "_0", name: DestructiveTool, input: DestructiveInput},
			{id: "call_" + p.id + "_1", name: HarmlessTool, input: HarmlessInput},
		}
	default:
		p.text = fmt.Sprintf("You said: %q (%d message(s) received)", clip(lastUser, 300), messages)
	}
	return p
}

// tokens is a deterministic stand-in for a token count.
func tokens(s string) int { return len(strings.Fields(s)) + 1 }

func clip(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n] + "…"
}

// chunks splits text into a few pieces for streaming, on word boundaries.
func chunks(text string) []string {
	words := strings.SplitAfter(text, " ")
	var out []string
	for i := 0; i < len(words); i += 4 {
		end := min(i+4, len(words))
		out = append(out, strings.Join(words[i:end], ""))
	}
	return out
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	b, err := json.Marshal(v)
	if err != nil {
		status, b = http.StatusInternalServerError, []byte(`{"error":{"message":"encoding failed"}}`)
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_, _ = w.Write(b)
}

// sse writes server-sent events and flushes each one.
type sse struct {
	w http.ResponseWriter
	f http.Flusher
}

func startSSE(w http.ResponseWriter) *sse {
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("Cache-Control", "no-cache")
	w.WriteHeader(http.StatusOK)
	f, _ := w.(http.Flusher)
	return &sse{w: w, f: f}
}

// event writes one event; name "" writes a data-only event (the OpenAI style).
func (s *sse) event(name string, data any) {
	var b []byte
	switch d := data.(type) {
	case string:
		b = []byte(d)
	default:
		var err error
		if b, err = json.Marshal(d); err != nil {
			return
		}
	}
	if name != "" {
		_, _ = fmt.Fprintf(s.w, "event: %s\n", name)
	}
	_, _ = fmt.Fprintf(s.w, "data: %s\n\n", b)
	if s.f != nil {
		s.f.Flush()
	}
}
