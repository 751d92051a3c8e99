package admin

import (
	"encoding/json"
	"errors"
	"io"
	"net/http"

	"github.com/go-chi/chi/v5"

	"github.com/hookproxy/hookproxy/pinning"
)

// Tool-definition pins on the admin listener, behind the admin authentication (Protected):
//
//	GET  /pins          every scope's pins and pending definitions
//	GET  /pins/export   the pins as a pins file (pinning.mode file reads it)
//	POST /pins/accept   {"tool": NAME, "scope": SCOPE?}: the definition last seen becomes the pin
//	POST /pins/forget   {"tool": NAME, "scope": SCOPE?}: the pin goes (tofu pins the next one)
//
// scope may be left out when one scope holds the tool; otherwise 409 lists the scopes.
// 404 answers an unknown tool, and every endpoint while pinning is off.

// PinsRoutes returns the routes of /pins; pinner returns the current pinning (nil: off).
func PinsRoutes(pinner func() *pinning.Pinner) func(r chi.Router) {
	h := &pinsHandler{pinner: pinner}
	return func(r chi.Router) {
		r.Get("/pins", h.list)
		r.Get("/pins/export", h.export)
		r.Post("/pins/accept", h.change(func(p *pinning.Pinner, r *http.Request, scope, tool string) (string, error) {
			return p.Accept(r.Context(), scope, tool)
		}))
		r.Post("/pins/forget", h.change(func(p *pinning.Pinner, r *http.Request, scope, tool string) (string, error) {
			return p.Forget(r.Context(), scope, tool)
		}))
	}
}

type pinsHandler struct{ pinner func() *pinning.Pinner }

// PinsList is the answer of GET /pins.
type PinsList struct {
	Mode   string          `json:"mode"`
	Scopes []pinning.Scope `json:"scopes"`
}

// PinChange is the body of POST /pins/accept and /pins/forget, and their answer.
type PinChange struct {
	Tool  string `json:"tool"`
	Scope string `json:"scope,omitempty"`
}

func (h *pinsHandler) current(w http.ResponseWriter) *pinning.Pinner {
	p := h.pinner()
	if p == nil {
		writePinsError(w, http.StatusNotFound, "tool-definition pinning is off (the configuration has no pinning block)", nil)
	}
	return p
}

func (h *pinsHandler) list(w http.ResponseWriter, r *http.Request) {
	p := h.current(w)
	if p == nil {
		return
	}
	scopes, err := p.List(r.Context())
	if err != nil {
		writePinsError(w, http.StatusServiceUnavailable, "the pins could not be read: "+err.Error(), nil)
		return
	}
	writePinsJSON(w, http.StatusOK, PinsList{Mode: p.Mode(), Scopes: scopes})
}

func (h *pinsHandler) export(w http.ResponseWriter, r *http.Request) {
	p := h.current(w)
	if p == nil {
		return
	}
	f, err := p.Export(r.Context())
	if err != nil {
		writePinsError(w, http.StatusServiceUnavailable, "the pins could not be read: "+err.Error(), nil)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(http.StatusOK)
	_, _ = w.Write(f.Encode())
}

func (h *pinsHandler) change(do func(p *pinning.Pinner, r *http.Request, scope, tool string) (string, error)) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		p := h.current(w)
		if p == nil {
			return
		}
		var req PinChange
		dec := json.NewDecoder(io.LimitReader(r.Body, 64<<10))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&req); err != nil || req.Tool == "" {
			writePinsError(w, http.StatusBadRequest, `the body must be {"tool": NAME} or {"tool": NAME, "scope": SCOPE}`, nil)
			return
		}
		scope, err := do(p, r, req.Scope, req.Tool)
		var amb *pinning.AmbiguousError
		switch {
		case errors.Is(err, pinning.ErrUnknownTool):
			writePinsError(w, http.StatusNotFound, "no scope holds a pin or pending definition of tool "+req.Tool, nil)
		case errors.As(err, &amb):
			writePinsError(w, http.StatusConflict, err.Error(), amb.Scopes)
		case err != nil:
			writePinsError(w, http.StatusServiceUnavailable, "the pins could not be changed: "+err.Error(), nil)
		default:
			writePinsJSON(w, http.StatusOK, PinChange{Tool: req.Tool, Scope: scope})
		}
	}
}

func writePinsJSON(w http.ResponseWriter, status int, v any) {
	b, _ := json.MarshalIndent(v, "", "  ")
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(status)
	_, _ = w.Write(append(b, '\n'))
}

func writePinsError(w http.ResponseWriter, status int, msg string, scopes []string) {
	writePinsJSON(w, status, struct {
		Error  string   `json:"error"`
		Scopes []string `json:"scopes,omitempty"`
	}{msg, scopes})
}
