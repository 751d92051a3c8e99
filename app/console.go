package app

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"
	"unicode/utf8"

	"github.com/hookproxy/hookproxy/admin"
	"github.com/hookproxy/hookproxy/audit"
	"github.com/hookproxy/hookproxy/chain"
	"github.com/hookproxy/hookproxy/chain/ahp"
	"github.com/hookproxy/hookproxy/chain/registration"
	"github.com/hookproxy/hookproxy/enforcement"
	"github.com/hookproxy/hookproxy/proxy"
)

// The console's window is fed here, from the record the audit line is made of
// (AuditRecord), so it shows what the audit log says. It adds what a person reviewing a
// session needs and the log does not carry: the text a settlement changed, with the
// removed text masked, and a tool call's arguments. Every text goes through the audit
// scrubber (audit.Text) on its way in, so no credential enters the window, and a removed
// string is masked wherever else in the same decision it would appear.

const (
	// redactionContext is how much unchanged text is shown each side of a change.
	redactionContext = 40
	// maxConsoleText bounds one text of a decision in the window.
	maxConsoleText = 4096
	// maskVisible is the most of a removed string ever shown: enough to tell an "sk-"
	// key from an AWS one, never enough to use it.
	maskVisible = 4
)

// ConsoleDecision converts a settled boundary into the console's view of it.
func ConsoleDecision(requestID string, rec proxy.BoundaryRecord, ch *chain.Chain) admin.Decision {
	ar := AuditRecord(rec)
	d := admin.Decision{
		Time: ar.Time, RequestID: requestID, Route: scrub(rec.Route), API: rec.API,
		Session: scrub(rec.SessionID), Turn: scrub(rec.TurnID), EventID: scrub(rec.EventID),
		EventType: closedText(ar.EventType), Delivery: rec.Delivery, CallID: scrub(rec.CallID),
		Tool: scrub(rec.ToolName), Model: scrub(rec.Model), Enforcement: closedText(ar.Enforcement),
		Permission: closedText(ar.Permission), Flow: closedText(ar.Flow), Held: closedText(ar.Held),
		UpstreamStatus: rec.UpstreamStatus, Injections: rec.Injections, Reapplied: rec.Reapplied,
		Resettled: rec.Resettled, Interceptors: consoleInterceptors(ar.Interceptors, ch),
	}
	if len(rec.ToolDefinitions) > 0 {
		d.ToolDefinitions, d.Scope = toolDefinitionChanges(rec)
	}
	var removed []string
	d.Redactions, removed = redactions(rec.Original, rec.Event)
	if ar.Denial != nil {
		d.Denial = &admin.DecisionDenial{Reason: maskAll(scrub(string(ar.Denial.Reason)), removed),
			Code: scrub(string(ar.Denial.Code)), Backend: scrub(string(ar.Denial.BackendID)), Synthetic: ar.Denial.Synthetic}
	}
	if ev := rec.Event; ev != nil && ev.Tool != nil && len(ev.Tool.Input) > 0 {
		d.ToolInput = maskAll(toolInputText(ev.Tool.Input), removed)
	}
	return d
}

// consoleInterceptors converts the audit record's interceptors; ch names their transports.
func consoleInterceptors(ics []audit.Interceptor, ch *chain.Chain) []admin.DecisionInterceptor {
	out := make([]admin.DecisionInterceptor, 0, len(ics))
	for _, ic := range ics {
		effects := make([]string, len(ic.Effects))
		for i, e := range ic.Effects {
			effects[i] = closedText(e)
		}
		out = append(out, admin.DecisionInterceptor{
			Backend: scrub(string(ic.BackendID)), Transport: ch.TransportOf(string(ic.BackendID)),
			Subscription: ic.Subscription, Outcome: closedText(ic.Outcome), Effects: effects,
			LatencyMs: ic.LatencyMs, FailureKind: closedText(ic.FailureKind), Violation: closedText(ic.Violation),
			FailurePolicy: closedText(ic.FailurePolicy),
		})
	}
	return out
}

// toolDefinitionChanges is what pinning reported on a hookproxy.tool_definitions record:
// the changes (names, kinds, digests and finding kinds, scrubbed like every text of the
// window) and the scope, from the event's report.
func toolDefinitionChanges(rec proxy.BoundaryRecord) ([]admin.ToolDefinitionChange, string) {
	out := make([]admin.ToolDefinitionChange, 0, len(rec.ToolDefinitions))
	for _, c := range rec.ToolDefinitions {
		poison := make([]string, len(c.Poison))
		for i, p := range c.Poison {
			poison[i] = scrub(p)
		}
		out = append(out, admin.ToolDefinitionChange{Tool: scrub(c.Tool), Kind: scrub(c.Kind), Like: scrub(c.Like),
			Digest: scrub(c.Digest), Pinned: scrub(c.Pinned), Poison: poison, Action: scrub(c.Action)})
	}
	scope := ""
	if ev := rec.Event; ev != nil {
		var rep ahp.ToolDefinitionReport
		if raw, ok := ev.Extensions[ahp.ExtToolDefinitions]; ok && json.Unmarshal(raw, &rep) == nil {
			scope = scrub(rep.Scope)
		}
	}
	return out, scope
}

// ConsoleShadowDecision converts a shadow settlement (the audit record with its shadow
// part) into the console's view of it; live is what the proxy did at that boundary and
// ch is the shadow chain (naming its backends' transports).
func ConsoleShadowDecision(rec audit.Record, live enforcement.Action, ch *chain.Chain) admin.Decision {
	d := admin.Decision{
		Time: rec.Time, Session: closedText(rec.SessionID), Turn: closedText(rec.TurnID),
		EventID: closedText(rec.EventID), EventType: closedText(rec.EventType), CallID: closedText(rec.CallID),
		Tool: closedText(rec.Tool), Model: closedText(rec.Model), Enforcement: closedText(live),
		Permission: closedText(rec.Permission), Flow: closedText(rec.Flow),
		Interceptors: consoleInterceptors(rec.Interceptors, nil),
	}
	if dn := rec.Denial; dn != nil {
		d.Denial = &admin.DecisionDenial{Reason: closedText(dn.Reason), Code: closedText(dn.Code),
			Backend: closedText(dn.BackendID), Synthetic: dn.Synthetic}
	}
	if sh := rec.Shadow; sh != nil {
		effects := make([]string, len(sh.Effects))
		for i, e := range sh.Effects {
			effects[i] = closedText(e)
		}
		d.Shadow = &admin.DecisionShadow{LiveOutcome: closedText(live), Outcome: closedText(sh.Outcome),
			Effects: effects, Differs: sh.Differs, Diff: closedText(sh.Diff), Interceptors: consoleInterceptors(sh.Interceptors, ch)}
		if dn := sh.Denial; dn != nil {
			d.Shadow.Denial = &admin.DecisionDenial{Reason: closedText(dn.Reason), Code: closedText(dn.Code),
				Backend: closedText(dn.BackendID), Synthetic: dn.Synthetic}
		}
	}
	return d
}

// scrub is the audit log's scrubbing of a free text (credential-shaped values replaced,
// length bounded).
func scrub(s string) string {
	b, _ := audit.Text(s).MarshalText()
	return string(b)
}

// closedText renders a closed-vocabulary value as the audit log writes it ("" stays "").
func closedText[T interface{ MarshalText() ([]byte, error) }](v T) string {
	b, _ := v.MarshalText()
	if s := string(b); s != audit.Unknown || fmt.Sprint(v) != "" {
		return s
	}
	return ""
}

// toolInputText is the tool input as the audit log would write it: every string scrubbed,
// credential-named members replaced; a non-JSON input is left out.
func toolInputText(in json.RawMessage) string {
	b, err := json.Marshal(audit.Content{ToolInput: in})
	if err != nil {
		return ""
	}
	var out struct {
		ToolInput json.RawMessage `json:"toolInput"`
	}
	if json.Unmarshal(b, &out) != nil || len(out.ToolInput) == 0 {
		return ""
	}
	var buf bytes.Buffer
	if json.Indent(&buf, out.ToolInput, "", "  ") != nil {
		return ""
	}
	return truncate(buf.String())
}

// redactions lists what the settlement changed in the text of the event: each changed
// text part, and a changed tool input. It also returns the removed strings, for masking
// elsewhere in the decision.
func redactions(orig, eff *ahp.Event) ([]admin.Redaction, []string) {
	if orig == nil || eff == nil {
		return nil, nil
	}
	var out []admin.Redaction
	var removed []string
	add := func(where, before, after string) {
		r, gone := textChange(before, after)
		if len(gone) == 0 && r.Before == r.After {
			return
		}
		r.Where = where
		out = append(out, r)
		removed = append(removed, gone...)
	}
	byID := make(map[string]*ahp.Message, len(orig.Items))
	for i := range orig.Items {
		if id := orig.Items[i].ID; id != "" {
			byID[id] = &orig.Items[i]
		}
	}
	for i := range eff.Items {
		m := &eff.Items[i]
		var o *ahp.Message
		if m.ID != "" {
			o = byID[m.ID]
		} else if i < len(orig.Items) {
			o = &orig.Items[i]
		}
		if o == nil {
			continue // an injected message: not a change of existing text
		}
		for j := range m.Parts {
			if j >= len(o.Parts) || m.Parts[j].Text == nil || o.Parts[j].Text == nil || *m.Parts[j].Text == *o.Parts[j].Text {
				continue
			}
			add(fmt.Sprintf("message %d (%s), part %d", i+1, m.Role, j+1), *o.Parts[j].Text, *m.Parts[j].Text)
		}
	}
	if orig.Tool != nil && eff.Tool != nil && !bytes.Equal(orig.Tool.Input, eff.Tool.Input) {
		add("tool "+orig.Tool.Name+" arguments", string(orig.Tool.Input), string(eff.Tool.Input))
	}
	// Every removed string is masked in every shown text, including the other changes'.
	for i := range out {
		out[i].Before = maskAll(out[i].Before, removed)
		out[i].After = maskAll(out[i].After, removed)
	}
	return out, removed
}

// textChange shows where after differs from before: the changed stretches (a token-level
// diff, so two secrets in one message are two stretches and the words between them stay
// readable), with up to redactionContext runes of unchanged text around each and the
// rest elided. In Before each removed stretch is masked; After shows what went on in its
// place. gone lists the removed stretches.
func textChange(before, after string) (r admin.Redaction, gone []string) {
	// The unchanged head and tail are set aside first, so the diff runs over the stretch
	// from the first change to the last only.
	p := commonPrefix(before, after)
	sfx := commonSuffix(before[p:], after[p:])
	a, b := tokens(before[p:len(before)-sfx]), tokens(after[p:len(after)-sfx])
	if len(a)*len(b) > maxDiffCells {
		// Too long to diff token by token on the request path: one masked stretch.
		a, b = []string{before[p : len(before)-sfx]}, []string{after[p : len(after)-sfx]}
	}
	a = append([]string{before[:p]}, append(a, before[len(before)-sfx:])...)
	b = append([]string{after[:p]}, append(b, after[len(after)-sfx:])...)
	// Segments alternate: unchanged text, then a change (removed, inserted), and so on.
	type segment struct {
		same     string
		del, ins string
		change   bool
	}
	var segs []segment
	for _, op := range diffTokens(a, b) {
		n := len(segs)
		if op.kind == '=' {
			if n == 0 || segs[n-1].change {
				segs = append(segs, segment{})
				n++
			}
			segs[n-1].same += op.text
			continue
		}
		if n == 0 || !segs[n-1].change {
			segs = append(segs, segment{change: true})
			n++
		}
		if op.kind == '-' {
			segs[n-1].del += op.text
		} else {
			segs[n-1].ins += op.text
		}
	}
	var bb, ab strings.Builder
	for i, sg := range segs {
		if sg.change {
			if sg.del != "" {
				gone = append(gone, sg.del)
			}
			bb.WriteString(mask(sg.del))
			ab.WriteString(sg.ins)
			continue
		}
		t := sg.same
		first, last := i == 0, i == len(segs)-1
		switch {
		case first && last: // no change at all
		case first:
			t = lastRunes(t, redactionContext)
		case last:
			t = firstRunes(t, redactionContext)
		case utf8.RuneCountInString(t) > 2*redactionContext:
			t = firstRunes(t, redactionContext) + lastRunes(t, redactionContext)
		}
		bb.WriteString(t)
		ab.WriteString(t)
	}
	r.Before, r.After = scrubContent(bb.String()), scrubContent(ab.String())
	return r, gone
}

// maxDiffCells bounds the token diff's table (tokens before × tokens after, 4 bytes each):
// it runs on the request path.
const maxDiffCells = 250_000

// tokens splits s into words (letters, digits and the -_ that keys are made of) and the
// single characters between them; concatenated they are s again.
func tokens(s string) []string {
	var out []string
	start := -1
	for i, r := range s {
		word := r == '-' || r == '_' || r >= '0' && r <= '9' || r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r > 127
		switch {
		case word && start < 0:
			start = i
		case !word:
			if start >= 0 {
				out = append(out, s[start:i])
				start = -1
			}
			out = append(out, string(r))
		}
	}
	if start >= 0 {
		out = append(out, s[start:])
	}
	return out
}

type diffOp struct {
	kind byte // '=', '-', '+'
	text string
}

// diffTokens is the longest-common-subsequence diff of two token lists.
func diffTokens(a, b []string) []diffOp {
	n, m := len(a), len(b)
	lcs := make([][]int32, n+1)
	for i := range lcs {
		lcs[i] = make([]int32, m+1)
	}
	for i := n - 1; i >= 0; i-- {
		for j := m - 1; j >= 0; j-- {
			if a[i] == b[j] {
				lcs[i][j] = lcs[i+1][j+1] + 1
			} else {
				lcs[i][j] = max(lcs[i+1][j], lcs[i][j+1])
			}
		}
	}
	var out []diffOp
	i, j := 0, 0
	for i < n && j < m {
		switch {
		case a[i] == b[j]:
			out = append(out, diffOp{'=', a[i]})
			i++
			j++
		case lcs[i+1][j] >= lcs[i][j+1]:
			out = append(out, diffOp{'-', a[i]})
			i++
		default:
			out = append(out, diffOp{'+', b[j]})
			j++
		}
	}
	for ; i < n; i++ {
		out = append(out, diffOp{'-', a[i]})
	}
	for ; j < m; j++ {
		out = append(out, diffOp{'+', b[j]})
	}
	return out
}

// scrubContent is scrub for a text that must keep its shape: it keeps the audit
// scrubber's replacements and bound.
func scrubContent(s string) string { return scrub(s) }

// mask hides all of s but its first few runes (at most a quarter of it, at most
// maskVisible), and says how long it was.
func mask(s string) string {
	n := utf8.RuneCountInString(s)
	if n == 0 {
		return ""
	}
	show := min(maskVisible, n/4)
	return firstRunes(s, show) + strings.Repeat("•", min(n-show, 12)) + fmt.Sprintf("[%d chars removed]", n)
}

// maskAll masks every occurrence of each removed stretch in s (stretches of 6 bytes or
// more: shorter ones are too common to be secrets, and masking them would mangle text).
func maskAll(s string, removed []string) string {
	for _, g := range removed {
		if len(g) >= 6 && strings.Contains(s, g) {
			s = strings.ReplaceAll(s, g, mask(g))
		}
	}
	return s
}

func commonPrefix(a, b string) int {
	n := 0
	for n < len(a) && n < len(b) && a[n] == b[n] {
		n++
	}
	for n > 0 && n < len(a) && !utf8.RuneStart(a[n]) {
		n--
	}
	return n
}

func commonSuffix(a, b string) int {
	n := 0
	for n < len(a) && n < len(b) && a[len(a)-1-n] == b[len(b)-1-n] {
		n++
	}
	for n > 0 && n < len(a) && !utf8.RuneStart(a[len(a)-n]) {
		n--
	}
	return n
}

func lastRunes(s string, n int) string {
	if utf8.RuneCountInString(s) <= n {
		return s
	}
	i := len(s)
	for range n {
		_, size := utf8.DecodeLastRuneInString(s[:i])
		i -= size
	}
	return "…" + s[i:]
}

func firstRunes(s string, n int) string {
	if utf8.RuneCountInString(s) <= n {
		return s
	}
	i := 0
	for range n {
		_, size := utf8.DecodeRuneInString(s[i:])
		i += size
	}
	if n == 0 {
		return ""
	}
	return s[:i] + "…"
}

func truncate(s string) string {
	if len(s) <= maxConsoleText {
		return s
	}
	cut := maxConsoleText
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + "…[truncated]"
}

// hookViews is the chain in force as the console's Health page lists it: ids, transport,
// what each reaches (a policy name, a URL without credentials, a command name) and the
// subscriptions. Authentication settings and policy configuration are left out.
func hookViews(doc *registration.Document) []admin.HookView {
	if doc == nil {
		return nil
	}
	out := make([]admin.HookView, 0, len(doc.Hooks))
	for _, h := range doc.Hooks {
		v := admin.HookView{ID: scrub(h.ID), Transport: h.Transport.Type}
		switch h.Transport.Type {
		case registration.TransportInProcess:
			v.Target = h.Transport.Policy
		case registration.TransportHTTP:
			v.Target = urlWithoutSecrets(h.Transport.URL)
		default:
			v.Target = scrub(h.Transport.Command)
		}
		for _, s := range h.Subscriptions {
			v.Subscriptions = append(v.Subscriptions, admin.SubscriptionView{Events: s.Events, Mode: s.Mode,
				FailurePolicy: s.FailurePolicy, TimeoutMs: s.TimeoutMs})
		}
		out = append(out, v)
	}
	return out
}

// urlWithoutSecrets keeps scheme, host and path of a backend URL: userinfo and query may
// carry credentials.
func urlWithoutSecrets(raw string) string {
	if i := strings.IndexAny(raw, "?#"); i >= 0 {
		raw = raw[:i]
	}
	if i := strings.Index(raw, "://"); i >= 0 {
		rest := raw[i+3:]
		if at := strings.LastIndex(strings.SplitN(rest, "/", 2)[0], "@"); at >= 0 {
			raw = raw[:i+3] + rest[at+1:]
		}
	}
	return scrub(raw)
}

// consoleShadow reports whether the generation in force runs a shadow chain (the
// console's Shadow page).
func (rt *Runtime) consoleShadow() bool {
	g := rt.cur.Load()
	return g != nil && g.rollout != nil && g.rollout.shadow != nil
}

// consoleHealth is the Health page's view of the current generation and the state store.
func (rt *Runtime) consoleHealth() admin.Health {
	g := rt.cur.Load()
	if g == nil {
		return admin.Health{}
	}
	h := admin.Health{Generation: g.seq, Registration: RegistrationSource(g.cfg), Hooks: g.hooks,
		Store: admin.StoreView{Backend: g.cfg.State.Backend, Down: rt.health.Down()}}
	if h.Store.Backend == "" {
		h.Store.Backend = "memory"
	}
	if g.audit != nil && g.audit.w.Enabled() {
		h.AuditPath = scrub(g.cfg.Audit.Path)
		h.AuditDropped, h.AuditQueue = g.audit.w.Dropped(), g.audit.w.QueueDepth()
	}
	return h
}
