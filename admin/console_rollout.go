package admin

import (
	"context"
	"errors"
	"net/http"
	"net/url"
	"sort"
	"strings"
	"time"

	"github.com/go-chi/chi/v5"
	"go.uber.org/zap"

	"github.com/hookproxy/hookproxy/pinning"
)

// The console's Shadow and Pins pages. Each is in the navigation, and served, only while
// the configuration in force enables its capability: a shadow registration, a pinning
// block. Both read what the proxy already keeps: the window (shadow disagreements, the
// pinning decisions with their changes and findings) and the pins' store.

func (c *console) shadowOn() bool { return c.opts.Shadow != nil && c.opts.Shadow() }

func (c *console) pinner() *pinning.Pinner {
	if c.opts.Pins == nil {
		return nil
	}
	return c.opts.Pins()
}

func (c *console) shadowPage(w http.ResponseWriter, r *http.Request) {
	if !c.shadowOn() {
		http.NotFound(w, r)
		return
	}
	c.render(w, "shadow", map[string]any{"Counts": c.opts.Window.ShadowCounts(),
		"Disagreements": c.opts.Window.ShadowDisagreements(pageLimit)})
}

// pinView is one tool of a scope as the Pins page shows it; descriptions scrubbed.
type pinView struct {
	Scope, Name, Digest, Description string
	Poison                           []string
	PinnedAt                         time.Time
	Pending                          *pendingView
}

// pendingView is a definition seen that is not the pin, waiting for a person's review.
type pendingView struct {
	Kind, Digest, Description, Like string
	Poison                          []string
	Since                           time.Time
}

// scopeView is one scope's tools.
type scopeView struct {
	Scope string
	Tools []pinView
}

func (c *console) pinsPage(w http.ResponseWriter, r *http.Request) {
	p := c.pinner()
	if p == nil {
		http.NotFound(w, r)
		return
	}
	data := map[string]any{"Mode": p.Mode(), "Changes": c.opts.Window.ToolDefinitionChanges(pageLimit),
		"Notice": r.URL.Query().Get("notice")}
	scopes, err := p.List(r.Context())
	if err != nil {
		data["Error"] = "the pins could not be read: " + err.Error()
	}
	var views []scopeView
	var pending []pinView
	for _, s := range scopes {
		sv := scopeView{Scope: s.Scope}
		for _, e := range s.Tools {
			v := pinView{Scope: s.Scope, Name: e.Name, Digest: e.Digest, Description: c.scrub(e.Description),
				Poison: e.Poison, PinnedAt: e.PinnedAt}
			if o := e.Pending; o != nil {
				v.Pending = &pendingView{Kind: o.Kind, Digest: o.Digest, Description: c.scrub(o.Description),
					Like: o.Like, Poison: o.Poison, Since: o.Since}
				pending = append(pending, v)
			}
			sv.Tools = append(sv.Tools, v)
		}
		views = append(views, sv)
	}
	data["Scopes"], data["Pending"] = views, pending
	c.render(w, "pins", data)
}

// reviewPin is the Pins page's Accept and Forget buttons: the same change as POST
// /pins/accept and /pins/forget (and `hookproxy pins accept|forget`), made by the person
// signed in, who is logged. It returns to the page with a notice saying what happened.
func (c *console) reviewPin(w http.ResponseWriter, r *http.Request) {
	p := c.pinner()
	if p == nil {
		http.NotFound(w, r)
		return
	}
	action, scope, tool := chi.URLParam(r, "action"), r.FormValue("scope"), r.FormValue("tool")
	var change func(context.Context, string, string) (string, error)
	switch action {
	case "accept":
		change = p.Accept
	case "forget":
		change = p.Forget
	default:
		http.NotFound(w, r)
		return
	}
	if tool == "" || scope == "" {
		http.Error(w, "the form must name the tool and its scope", http.StatusBadRequest)
		return
	}
	notice := action + "ed " + tool + " in " + scope
	if action == "forget" {
		notice = "forgot " + tool + " in " + scope
	}
	var amb *pinning.AmbiguousError
	switch _, err := change(r.Context(), scope, tool); {
	case errors.Is(err, pinning.ErrUnknownTool):
		notice = "no pin or pending definition of " + tool + " in " + scope
	case errors.As(err, &amb):
		notice = err.Error()
	case err != nil:
		notice = "the pins could not be changed: " + err.Error()
	default:
		c.log.Info("tool definition reviewed in the console", zap.String("action", action),
			zap.String("scope", scope), zap.String("tool", tool), zap.String("by", Caller(r.Context())))
	}
	http.Redirect(w, r, "/ui/pins?notice="+url.QueryEscape(notice), http.StatusSeeOther)
}

// scrub passes a tool description through Options.Scrub; without one none is shown.
func (c *console) scrub(s string) string {
	if s == "" || c.opts.Scrub == nil {
		return ""
	}
	return c.opts.Scrub(s)
}

// shortDigest shortens a "sha256:<hex>" digest to its algorithm and first 12 hex digits.
func shortDigest(d string) string {
	if i := strings.IndexByte(d, ':'); i >= 0 && len(d) > i+13 {
		return d[:i+13] + "…"
	}
	return d
}

// countView is one label and its count.
type countView struct {
	Name  string
	Count int
}

// sortedCounts lists a map's counts, largest first.
func sortedCounts(m map[string]int) []countView {
	out := make([]countView, 0, len(m))
	for k, v := range m {
		out = append(out, countView{k, v})
	}
	sort.Slice(out, func(i, j int) bool {
		return out[i].Count > out[j].Count || out[i].Count == out[j].Count && out[i].Name < out[j].Name
	})
	return out
}
