package proxy

import (
	"bytes"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"net/http"
	"strings"
	"time"

	"github.com/hookproxy/hookproxy/chain/ahp"
	"github.com/hookproxy/hookproxy/mapping"
)

// Identity rules (the proxy is stateless by design): every id that a
// later request must reproduce is derived from content with sha256, so any replica can
// serve any request; only ids of one-off occurrences are random.

// randomHex returns 128 random bits in hex, for ids of one-off occurrences (attempts,
// nonces). Event ids come from ahp.NewEventID.
func randomHex() string {
	var b [16]byte
	_, _ = rand.Read(b[:]) // crypto/rand.Read never fails on supported platforms
	return hex.EncodeToString(b[:])
}

// derive hashes the parts (NUL-separated, so ("ab","c") and ("a","bc") differ) into a
// 128-bit hex id with the given prefix.
func derive(prefix string, parts ...string) string { return mapping.HashID(prefix, 16, parts...) }

// eventTime is the RFC 3339 UTC timestamp of a new event.
func eventTime() string { return time.Now().UTC().Format(time.RFC3339Nano) }

// agentSessionHeaders carry known agents' own session ids: Claude Code's, and Codex's
// (sent as session_id, which Go keeps as "Session_id", or session-id).
var agentSessionHeaders = []string{"X-Claude-Code-Session-Id", "Session_id", "Session-Id"}

// sessionFor returns session.id: the X-Hookproxy-Session header, else a known
// agent's own session id header, else a synthesized id derived from the translator's
// native session hint, else from the ids of the conversation's opening system and user
// messages (stable for the conversation's lifetime because message ids are themselves
// derived from content).
func sessionFor(h http.Header, provider string, req *mapping.Request) ahp.Session {
	if v := strings.TrimSpace(h.Get(SessionHeader)); v != "" {
		return ahp.Session{ID: v}
	}
	for _, name := range agentSessionHeaders {
		if v := strings.TrimSpace(h.Get(name)); v != "" {
			return ahp.Session{ID: v}
		}
	}
	if req.SessionHint != "" {
		return ahp.Session{ID: derive("ses_", provider, "hint", req.SessionHint), Synthesized: true}
	}
	parts := []string{provider, "items"}
	for _, m := range req.Items {
		if m.Role == ahp.RoleSystem || m.Role == ahp.RoleDeveloper {
			parts = append(parts, m.ID)
		}
		if m.Role == ahp.RoleUser {
			parts = append(parts, m.ID)
			break // the first user message opens the conversation
		}
	}
	return ahp.Session{ID: derive("ses_", parts...), Synthesized: true}
}

// turnFor derives turn.id from the session and the latest user prompt, so every request
// of one tool loop (which repeats that prompt in its history) shares the turn.
func turnFor(session string, items []ahp.Message) ahp.Turn {
	prompt := ""
	for i := len(items) - 1; i >= 0; i-- {
		if items[i].Role == ahp.RoleUser {
			prompt = items[i].ID
			break
		}
	}
	return ahp.Turn{ID: derive("trn_", session, prompt), Synthesized: true}
}

// toolEventID is the id of a tool.before or tool.after event: derived from the session,
// the call id, the tool name and the call's input, so that the tool.after built from a
// later request can name its tool.before as parent without any state and a retried
// request re-sends the same identity (AHP-CORE-004), while two different calls never share
// an id even when their provider ids repeat (local model servers number calls call_0,
// call_1, ... in every response; a backend de-duplicating on event.id would otherwise
// replay one call's decision onto another).
func toolEventID(source, typ, session string, c mapping.ToolCall) string {
	return derive("evt_", source, typ, session, c.ID, c.Name, compactInput(c.Input))
}

// compactInput is the input's compact JSON text (its raw text when it is not JSON), so
// that whitespace differences between a response and the history that repeats it do not
// change the identity.
func compactInput(in json.RawMessage) string {
	var b bytes.Buffer
	if json.Compact(&b, in) != nil {
		return string(in)
	}
	return b.String()
}
