package approvals

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"time"

	"github.com/go-chi/chi/v5"

	"github.com/hookproxy/hookproxy/admin"
)

// sseHeartbeat keeps an idle event stream open through proxies that close quiet
// connections.
const sseHeartbeat = 15 * time.Second

// Routes mounts the admin endpoints (behind admin.Auth: admin.Options.Protected):
//
//	GET  /approvals?state=pending|decided|all   the records, newest first (default pending)
//	GET  /approvals/events                      server-sent events, one per record change
//	GET  /approvals/{id}                        one record
//	POST /approvals/{id}  {"decision": "approve"|"deny", "reason": "...", "digest": "..."}
//	                      200 the record, 404 unknown, 409 decided or expired (or another digest)
func (s *Service) Routes(r chi.Router) {
	r.Get("/approvals", s.list)
	r.Get("/approvals/events", s.events)
	r.Get("/approvals/{id}", s.get)
	r.Post("/approvals/{id}", s.decide)
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		http.Error(w, "internal error", http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(status)
	_, _ = w.Write(append(b, '\n'))
}

func writeError(w http.ResponseWriter, status int, msg string) {
	writeJSON(w, status, map[string]string{"error": msg})
}

func (s *Service) list(w http.ResponseWriter, r *http.Request) {
	filter := r.URL.Query().Get("state")
	switch filter {
	case "":
		filter = "pending"
	case "pending", "decided", "all":
	default:
		writeError(w, http.StatusBadRequest, "state must be pending, decided or all")
		return
	}
	recs, err := s.List(r.Context(), filter)
	if err != nil {
		writeError(w, http.StatusServiceUnavailable, "the approvals store is unavailable")
		return
	}
	writeJSON(w, http.StatusOK, recs)
}

func (s *Service) get(w http.ResponseWriter, r *http.Request) {
	rec, err := s.Get(r.Context(), chi.URLParam(r, "id"))
	switch {
	case errors.Is(err, ErrNotFound):
		writeError(w, http.StatusNotFound, "no such approval")
	case err != nil:
		writeError(w, http.StatusServiceUnavailable, "the approvals store is unavailable")
	default:
		writeJSON(w, http.StatusOK, rec)
	}
}

// maxDecisionBytes bounds a decision body: a decision and a reason.
const maxDecisionBytes = 16 << 10

func (s *Service) decide(w http.ResponseWriter, r *http.Request) {
	var body struct {
		Decision string `json:"decision"`
		Reason   string `json:"reason"`
		Digest   string `json:"digest"`
	}
	raw, err := io.ReadAll(http.MaxBytesReader(w, r.Body, maxDecisionBytes))
	if err != nil {
		writeError(w, http.StatusRequestEntityTooLarge, "the decision body is too large")
		return
	}
	if err := json.Unmarshal(raw, &body); err != nil {
		writeError(w, http.StatusBadRequest, fmt.Sprintf(`the body must be {"decision": "approve"|"deny", "reason": "..."}: %v`, err))
		return
	}
	by := admin.Caller(r.Context())
	rec, err := s.Decide(r.Context(), chi.URLParam(r, "id"), body.Decision, by, body.Reason, body.Digest)
	switch {
	case errors.Is(err, ErrBadDecision):
		writeError(w, http.StatusBadRequest, err.Error())
	case errors.Is(err, ErrNotFound):
		writeError(w, http.StatusNotFound, "no such approval")
	case errors.Is(err, ErrSettled):
		writeJSON(w, http.StatusConflict, map[string]any{"error": "already " + rec.State, "approval": rec})
	case errors.Is(err, ErrDigestMismatch):
		writeJSON(w, http.StatusConflict, map[string]any{"error": err.Error(), "approval": rec})
	case err != nil:
		writeError(w, http.StatusServiceUnavailable, "the approvals store is unavailable")
	default:
		writeJSON(w, http.StatusOK, rec)
	}
}

// events streams record changes: "event: approval" with the record's JSON as data. The
// stream starts with the pending records, so a console that connects late sees them.
func (s *Service) events(w http.ResponseWriter, r *http.Request) {
	fl, ok := w.(http.Flusher)
	if !ok {
		writeError(w, http.StatusInternalServerError, "streaming unsupported")
		return
	}
	ch, cancel := s.Subscribe()
	defer cancel()
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("Cache-Control", "no-store")
	w.Header().Set("X-Accel-Buffering", "no")
	w.WriteHeader(http.StatusOK)
	send := func(rec Record) bool {
		b, _ := json.Marshal(rec)
		if _, err := fmt.Fprintf(w, "event: approval\nid: %s\ndata: %s\n\n", rec.ID, b); err != nil {
			return false
		}
		fl.Flush()
		return true
	}
	if pending, err := s.List(r.Context(), "pending"); err == nil {
		for i := len(pending) - 1; i >= 0; i-- {
			if !send(pending[i]) {
				return
			}
		}
	}
	_, _ = io.WriteString(w, ": ready\n\n")
	fl.Flush()
	hb := time.NewTicker(sseHeartbeat)
	defer hb.Stop()
	for {
		select {
		case <-r.Context().Done():
			return
		case rec := <-ch:
			if !send(rec) {
				return
			}
		case <-hb.C:
			if _, err := io.WriteString(w, ": keep-alive\n\n"); err != nil {
				return
			}
			fl.Flush()
		}
	}
}
