package pinning

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/mtibben/confusables"
)

// Modes (pinning.mode).
const (
	ModeTOFU = "tofu" // the first definition seen is pinned
	ModeFile = "file" // pins come from a reviewed file; an unknown tool is a change
)

// Actions (pinning.onChange, pinning.onPoison).
const (
	ActionWarn  = "warn"  // audit and count; the definition and its calls pass
	ActionStrip = "strip" // the tool is taken out of the list the agent receives; its calls are refused
	ActionDeny  = "deny"  // the list passes; every call of the tool is refused at tool.before
	ActionAsk   = "ask"   // onChange only: the list passes; every call waits for a person's approval
)

// Kinds of Change, the label values of hookproxy_tool_definition_changes_total.
const (
	KindNew        = "new"        // a name not pinned before (in file mode: not in the file)
	KindRemoved    = "removed"    // a pinned name missing from a complete list
	KindChanged    = "changed"    // a pinned name with another description or schema
	KindRenamed    = "renamed"    // a pinned definition (same digest) under a new name
	KindConfusable = "confusable" // a new name confusable with a pinned one (Unicode, case)
	KindPoisoned   = "poisoned"   // findings of the poison scan
)

// Kinds lists every Change kind.
var Kinds = []string{KindNew, KindRemoved, KindChanged, KindRenamed, KindConfusable, KindPoisoned}

// Options configure a Pinner.
type Options struct {
	Mode     string // ModeTOFU (default) or ModeFile
	OnChange string // ActionWarn (default), ActionStrip, ActionDeny or ActionAsk
	OnPoison string // ActionWarn (default), ActionStrip or ActionDeny
	Store    Store  // default: NewMemory()
	Now      func() time.Time
}

// Pinner compares tool definitions with their pins.
type Pinner struct {
	mode, onChange, onPoison string
	store                    Store
	now                      func() time.Time
}

// New returns a Pinner. onChange ActionAsk makes CallVerdict ask for a person's approval;
// the caller holds the call (the proxy's approval path).
func New(o Options) (*Pinner, error) {
	p := &Pinner{mode: o.Mode, onChange: o.OnChange, onPoison: o.OnPoison, store: o.Store, now: o.Now}
	if p.mode == "" {
		p.mode = ModeTOFU
	}
	if p.onChange == "" {
		p.onChange = ActionWarn
	}
	if p.onPoison == "" {
		p.onPoison = ActionWarn
	}
	if p.store == nil {
		p.store = NewMemory()
	}
	if p.now == nil {
		p.now = time.Now
	}
	if p.mode != ModeTOFU && p.mode != ModeFile {
		return nil, fmt.Errorf("pinning.mode: %q is not tofu or file", p.mode)
	}
	switch p.onChange {
	case ActionWarn, ActionStrip, ActionDeny, ActionAsk:
	default:
		return nil, fmt.Errorf("pinning.onChange: %q is not warn, strip, deny or ask", p.onChange)
	}
	switch p.onPoison {
	case ActionWarn, ActionStrip, ActionDeny:
	default:
		return nil, fmt.Errorf("pinning.onPoison: %q is not warn, strip or deny", p.onPoison)
	}
	return p, nil
}

// Store returns the pins' store.
func (p *Pinner) Store() Store { return p.store }

// Mode returns the configured mode.
func (p *Pinner) Mode() string { return p.mode }

// Change is one difference between what an agent is shown and the pins.
type Change struct {
	Scope  string   `json:"scope"`
	Tool   string   `json:"tool"`
	Kind   string   `json:"kind"`
	Like   string   `json:"like,omitempty"`   // renamed, confusable: the pinned name
	Digest string   `json:"digest,omitempty"` // the definition seen ("" for removed)
	Pinned string   `json:"pinned,omitempty"` // the pinned digest, where one exists
	Poison []string `json:"poison,omitempty"` // poisoned: the finding kinds
	Action string   `json:"action"`           // what hookproxy does: warn, strip or deny
	// Repeat is set when the same change was reported before (the definition was seen
	// already): its action still applies, but it is not audited or counted again.
	Repeat bool `json:"-"`
}

// Verdict is the outcome of one Check.
type Verdict struct {
	Changes []Change
	strip   map[string]bool
}

// Strip reports whether the tool named name must be taken out of the list.
func (v Verdict) Strip(name string) bool { return v.strip[name] }

// Stripping reports whether any tool must be taken out.
func (v Verdict) Stripping() bool { return len(v.strip) > 0 }

// Check compares tools, one list an agent is about to be shown in scope, with the pins of
// scope, pins what tofu pins, records what differs, and returns the changes and what to
// strip. complete says whether tools is the whole set (a paginated MCP list is not; a
// model request may carry a subset), so that missing names count as removed.
func (p *Pinner) Check(ctx context.Context, scope string, tools []Tool, complete bool) (Verdict, error) {
	entries, err := p.store.Load(ctx, scope)
	if err != nil {
		return Verdict{}, err
	}
	now := p.now().UTC()
	firstSight := true
	byDigest := map[string][]string{}
	var pinned []string
	for _, e := range entries {
		if e.Digest != "" {
			firstSight = false
			byDigest[e.Digest] = append(byDigest[e.Digest], e.Name)
			pinned = append(pinned, e.Name)
		}
	}
	slices.Sort(pinned)
	present := make(map[string]bool, len(tools))
	for _, t := range tools {
		present[t.Name] = true
	}
	v := Verdict{strip: map[string]bool{}}
	var add, put []Entry
	report := func(c Change) {
		c.Scope = scope
		v.Changes = append(v.Changes, c)
		if c.Action == ActionStrip {
			v.strip[c.Tool] = true
		}
	}
	for _, t := range tools {
		d := Digest(t)
		e, ok := entries[t.Name]
		if ok && e.Digest == d {
			if e.Pending != nil {
				e.Pending = nil // the pinned definition is back
				put = append(put, e)
			}
			if len(e.Poison) > 0 {
				report(Change{Tool: t.Name, Kind: KindPoisoned, Digest: d, Pinned: d, Poison: e.Poison, Action: p.onPoison, Repeat: true})
			}
			continue
		}
		kind, like := KindNew, ""
		switch {
		case ok && e.Digest != "":
			kind = KindChanged
		default:
			if like = renamedFrom(byDigest[d], present); like != "" {
				kind = KindRenamed
			} else if like = confusableWith(t.Name, pinned); like != "" {
				kind = KindConfusable
			}
		}
		repeat := ok && e.Pending != nil && e.Pending.Digest == d && e.Pending.Kind == kind
		var poison []string
		if repeat {
			poison = e.Pending.Poison
		} else {
			poison = Scan(t)
		}
		if kind == KindNew && p.mode == ModeTOFU {
			add = append(add, Entry{Name: t.Name, Digest: d, Description: t.Description, Poison: poison, PinnedAt: now})
			byDigest[d] = append(byDigest[d], t.Name)
			pinned = append(pinned, t.Name)
			if !firstSight {
				report(Change{Tool: t.Name, Kind: KindNew, Digest: d, Action: ActionWarn})
			}
			if len(poison) > 0 {
				report(Change{Tool: t.Name, Kind: KindPoisoned, Digest: d, Poison: poison, Action: p.onPoison})
			}
			continue
		}
		if !repeat {
			e.Name = t.Name
			e.Pending = &Observed{Kind: kind, Digest: d, Description: t.Description, Poison: poison, Like: like, Since: now}
			put = append(put, e)
		}
		report(Change{Tool: t.Name, Kind: kind, Like: like, Digest: d, Pinned: e.Digest, Action: p.onChange, Repeat: repeat})
		if len(poison) > 0 {
			report(Change{Tool: t.Name, Kind: KindPoisoned, Digest: d, Pinned: e.Digest, Poison: poison, Action: p.onPoison, Repeat: repeat})
		}
	}
	if complete && !firstSight {
		for _, name := range pinned {
			e, ok := entries[name]
			if !ok || present[name] {
				continue
			}
			repeat := e.Pending != nil && e.Pending.Kind == KindRemoved
			if !repeat {
				e.Pending = &Observed{Kind: KindRemoved, Since: now}
				put = append(put, e)
			}
			report(Change{Tool: name, Kind: KindRemoved, Pinned: e.Digest, Action: ActionWarn, Repeat: repeat})
		}
	}
	if len(add) > 0 {
		if err := p.store.Add(ctx, scope, add); err != nil {
			return v, err
		}
	}
	if len(put) > 0 {
		if err := p.store.Put(ctx, scope, put); err != nil {
			return v, err
		}
	}
	return v, nil
}

// renamedFrom returns a pinned name with the same digest that the list no longer holds.
func renamedFrom(names []string, present map[string]bool) string {
	for _, n := range slices.Sorted(slices.Values(names)) {
		if !present[n] {
			return n
		}
	}
	return ""
}

// confusableWith returns the pinned name that name can be mistaken for: the same letters
// in another case, or the same UTS #39 skeleton (Cyrillic "а" for Latin "a", "rn" for
// "m", ...), compared case-insensitively. "" when there is none.
func confusableWith(name string, pinned []string) string {
	sk := confusables.Skeleton(strings.ToLower(name))
	for _, n := range pinned {
		if n == name {
			continue
		}
		if strings.EqualFold(n, name) || confusables.Skeleton(strings.ToLower(n)) == sk {
			return n
		}
	}
	return ""
}

// Blocked returns the reason the calls of tool name in scope are refused, or "" when they
// may run: its definition changed (or is unknown in file mode) under onChange deny or
// strip, or it carries poison findings under onPoison deny or strip (a stripped tool was
// not shown to the agent, so a call of it — a model that remembers the name, a client
// that cached the list — runs a definition nobody accepted). A name pinning never saw is
// not blocked.
func (p *Pinner) Blocked(ctx context.Context, scope, name string) (string, error) {
	reason, ask, err := p.CallVerdict(ctx, scope, name)
	if ask {
		return "", err
	}
	return reason, err
}

// CallVerdict is Blocked with onChange ask: reason is also set, with ask true, when a
// call of the changed tool must wait for a person's approval instead of being refused.
func (p *Pinner) CallVerdict(ctx context.Context, scope, name string) (reason string, ask bool, err error) {
	entries, err := p.store.Load(ctx, scope)
	if err != nil {
		return "", false, err
	}
	e, ok := entries[name]
	if !ok {
		return "", false, nil
	}
	if o := e.Pending; o != nil && o.Kind != KindRemoved {
		switch {
		case refuses(p.onChange):
			return blockedReason(name, o.Kind, o.Like), false, nil
		case refuses(p.onPoison) && len(o.Poison) > 0:
			return blockedReason(name, KindPoisoned, ""), false, nil
		case p.onChange == ActionAsk:
			return blockedReason(name, o.Kind, o.Like), true, nil
		}
		return "", false, nil
	}
	if e.Digest != "" && len(e.Poison) > 0 && refuses(p.onPoison) {
		return blockedReason(name, KindPoisoned, ""), false, nil
	}
	return "", false, nil
}

func refuses(action string) bool { return action == ActionDeny || action == ActionStrip }

func blockedReason(name, kind, like string) string {
	switch kind {
	case KindChanged:
		return fmt.Sprintf("the definition of tool %q changed since it was pinned; an operator must review it (hookproxy pins accept)", name)
	case KindRenamed:
		return fmt.Sprintf("tool %q is the pinned tool %q under a new name; an operator must review it (hookproxy pins accept)", name, like)
	case KindConfusable:
		return fmt.Sprintf("tool %q has a name confusable with the pinned tool %q; an operator must review it (hookproxy pins accept)", name, like)
	case KindPoisoned:
		return fmt.Sprintf("the description of tool %q holds instructions for the model or hidden text; an operator must review it (hookproxy pins accept)", name)
	}
	return fmt.Sprintf("tool %q is not pinned; an operator must review it (hookproxy pins accept)", name)
}

// ErrUnknownTool is returned by Accept and Forget for a name no scope holds.
var ErrUnknownTool = errors.New("no pin or pending definition of that tool")

// AmbiguousError is returned when a tool name is held by several scopes and none was named.
type AmbiguousError struct{ Scopes []string }

func (e *AmbiguousError) Error() string {
	return "the tool is pinned in several scopes; name one: " + strings.Join(e.Scopes, ", ")
}

// resolve finds the scope that holds name when scope is "".
func (p *Pinner) resolve(ctx context.Context, scope, name string) (string, Entry, error) {
	scopes := []string{scope}
	if scope == "" {
		var err error
		if scopes, err = p.store.Scopes(ctx); err != nil {
			return "", Entry{}, err
		}
	}
	var found []string
	var entry Entry
	for _, s := range scopes {
		m, err := p.store.Load(ctx, s)
		if err != nil {
			return "", Entry{}, err
		}
		if e, ok := m[name]; ok {
			found, entry = append(found, s), e
		}
	}
	switch len(found) {
	case 0:
		return "", Entry{}, ErrUnknownTool
	case 1:
		return found[0], entry, nil
	}
	return "", Entry{}, &AmbiguousError{Scopes: found}
}

// Accept makes the definition last seen of name the pin (and clears its findings): an
// operator reviewed it. Accepting a removed tool forgets it. It returns the scope.
func (p *Pinner) Accept(ctx context.Context, scope, name string) (string, error) {
	scope, e, err := p.resolve(ctx, scope, name)
	if err != nil {
		return "", err
	}
	if o := e.Pending; o != nil && o.Kind == KindRemoved {
		_, err := p.store.Delete(ctx, scope, name)
		return scope, err
	}
	if o := e.Pending; o != nil {
		e.Digest, e.Description, e.PinnedAt = o.Digest, o.Description, p.now().UTC()
	}
	e.Pending, e.Poison = nil, nil
	return scope, p.store.Put(ctx, scope, []Entry{e})
}

// Forget removes the pin of name: in tofu mode the next definition seen is pinned anew.
func (p *Pinner) Forget(ctx context.Context, scope, name string) (string, error) {
	scope, _, err := p.resolve(ctx, scope, name)
	if err != nil {
		return "", err
	}
	_, err = p.store.Delete(ctx, scope, name)
	return scope, err
}

// Scope is one scope's entries, sorted by name.
type Scope struct {
	Scope string  `json:"scope"`
	Tools []Entry `json:"tools"`
}

// List returns every scope's entries.
func (p *Pinner) List(ctx context.Context) ([]Scope, error) {
	scopes, err := p.store.Scopes(ctx)
	if err != nil {
		return nil, err
	}
	out := make([]Scope, 0, len(scopes))
	for _, s := range scopes {
		m, err := p.store.Load(ctx, s)
		if err != nil {
			return nil, err
		}
		sc := Scope{Scope: s, Tools: make([]Entry, 0, len(m))}
		for _, n := range slices.Sorted(maps.Keys(m)) {
			sc.Tools = append(sc.Tools, m[n])
		}
		out = append(out, sc)
	}
	return out, nil
}
