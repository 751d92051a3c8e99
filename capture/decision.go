package capture

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"regexp"
	"slices"
	"strings"

	"github.com/hookproxy/hookproxy/chain"
	"github.com/hookproxy/hookproxy/chain/ahp"
	"github.com/hookproxy/hookproxy/enforcement"
)

// Decision is the summary of one settlement that a capture line, a shadow audit part and
// a replay report compare: what the host would do (Outcome, in the proxy's enforcement
// vocabulary), the settled permission and flow, the accepted effect types, who denied
// and why, and a digest of the effective target so that two different rewrites of the
// same content are told apart.
type Decision struct {
	Outcome    enforcement.Action `json:"outcome"`
	Permission string             `json:"permission"`
	Flow       string             `json:"flow"`
	Effects    []string           `json:"effects"`
	Denial     *Denial            `json:"denial,omitempty"`
	Modified   bool               `json:"modified,omitempty"`
	// Calls is the number of tool_call parts of the effective response content
	// (model.response.after and turn.finish.before), so a removed call is visible.
	Calls int `json:"calls,omitempty"`
	// Target is the sha256 (first 16 hex) of the effective target's JSON when Modified.
	Target string `json:"target,omitempty"`
	// Failed names the backends whose call failed (operational failure, either policy).
	Failed []string `json:"failed,omitempty"`
}

// Denial says who refused and why.
type Denial struct {
	Code      string `json:"code,omitempty"`
	BackendID string `json:"backendId,omitempty"`
	Reason    string `json:"reason,omitempty"`
	Synthetic bool   `json:"synthetic,omitempty"`
}

// Summarize makes the Decision of a settlement.
func Summarize(st *chain.Settlement) Decision {
	d := Decision{Outcome: enforcement.Forwarded, Permission: ahp.PermissionNone, Flow: ahp.FlowNone, Effects: []string{}}
	if st == nil {
		return d
	}
	d.Permission, d.Flow = st.Permission, st.Flow
	for _, r := range st.Records {
		d.Effects = append(d.Effects, r.Effects...)
		if r.Outcome == chain.OutcomeFailed {
			d.Failed = append(d.Failed, r.BackendID)
		}
	}
	if st.Denial != nil {
		d.Denial = &Denial{Code: st.Denial.Code, BackendID: st.Denial.BackendID, Reason: st.Denial.Reason, Synthetic: st.Denial.Synthetic}
	}
	d.Modified = st.Modified
	if ev := st.Event; ev != nil {
		if ev.Type == ahp.EventModelResponseAfter || ev.Type == ahp.EventTurnFinishBefore {
			d.Calls = toolCalls(ev.Items)
		}
		if st.Modified {
			d.Target = digest(ev)
		}
	}
	switch {
	case st.Refused():
		d.Outcome = enforcement.Refused
	case st.Candidate != nil:
		d.Outcome = enforcement.Supplied
	case st.Stopped():
		d.Outcome = enforcement.Stopped
	case st.Modified || len(st.Injections) > 0:
		d.Outcome = enforcement.Rewritten
	}
	return d
}

func toolCalls(items []ahp.Message) int {
	n := 0
	for _, m := range items {
		for _, p := range m.Parts {
			if p.Category == ahp.CategoryToolCall {
				n++
			}
		}
	}
	return n
}

// digest fingerprints the effective event's content: items, tool input, params. The
// value hash of each redaction placeholder ([REDACTED:<kind>:<8 hex>]) is left out: a
// replay of a redacted capture stands a made-up credential in for the original, which
// the same policy redacts in the same place under another hash.
func digest(ev *ahp.Event) string {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	_ = enc.Encode(ev.Items)
	if ev.Tool != nil {
		_ = enc.Encode(ev.Tool.Input)
	}
	_ = enc.Encode(ev.Params)
	sum := sha256.Sum256(placeholderHash.ReplaceAll(b.Bytes(), []byte("[REDACTED:$1]")))
	return hex.EncodeToString(sum[:8])
}

var placeholderHash = regexp.MustCompile(`\[REDACTED:([a-z0-9_]+):[0-9a-f]{8}\]`)

// Compare reports whether candidate would be enforced differently from recorded at the
// boundary of eventType, and says in a few words what would change ("" when nothing
// would). Latency and the backends' reasons do not count: only what a client or an
// agent would see.
func Compare(eventType string, recorded, candidate Decision) (differs bool, diff string) {
	what := subject(eventType)
	var parts []string
	switch {
	case recorded.Permission != ahp.PermissionDeny && candidate.Permission == ahp.PermissionDeny:
		parts = append(parts, "would refuse the "+what+denialSuffix(candidate.Denial))
	case recorded.Permission == ahp.PermissionDeny && candidate.Permission != ahp.PermissionDeny:
		parts = append(parts, "would no longer refuse the "+what)
	case recorded.Permission != candidate.Permission:
		parts = append(parts, fmt.Sprintf("permission %s → %s", recorded.Permission, candidate.Permission))
	}
	switch {
	case recorded.Flow != ahp.FlowStop && candidate.Flow == ahp.FlowStop:
		parts = append(parts, "would stop the agent")
	case recorded.Flow == ahp.FlowStop && candidate.Flow != ahp.FlowStop:
		parts = append(parts, "would no longer stop the agent")
	case recorded.Flow != candidate.Flow:
		parts = append(parts, fmt.Sprintf("flow %s → %s", recorded.Flow, candidate.Flow))
	}
	if recorded.Outcome == enforcement.Supplied != (candidate.Outcome == enforcement.Supplied) {
		if candidate.Outcome == enforcement.Supplied {
			parts = append(parts, "would answer without the upstream")
		} else {
			parts = append(parts, "would no longer answer without the upstream")
		}
	}
	switch {
	case candidate.Calls < recorded.Calls:
		parts = append(parts, plural(recorded.Calls-candidate.Calls, "tool call")+" removed")
	case candidate.Calls > recorded.Calls:
		parts = append(parts, plural(candidate.Calls-recorded.Calls, "tool call")+" kept that were removed")
	case !recorded.Modified && candidate.Modified:
		parts = append(parts, "would rewrite the "+what)
	case recorded.Modified && !candidate.Modified:
		parts = append(parts, "would no longer rewrite the "+what)
	case recorded.Target != candidate.Target:
		parts = append(parts, "would rewrite the "+what+" differently")
	}
	if len(parts) == 0 && effectSet(recorded.Effects) != effectSet(candidate.Effects) {
		parts = append(parts, fmt.Sprintf("effects [%s] → [%s]", effectSet(recorded.Effects), effectSet(candidate.Effects)))
	}
	if len(parts) == 0 {
		return false, ""
	}
	return true, strings.Join(parts, "; ")
}

// effectSet is the sorted, deduplicated effect types, which is what a client would notice.
func effectSet(effects []string) string {
	s := slices.Clone(effects)
	slices.Sort(s)
	return strings.Join(slices.Compact(s), " ")
}

func denialSuffix(d *Denial) string {
	if d == nil || d.Code == "" {
		return ""
	}
	return " (" + d.Code + ")"
}

func plural(n int, noun string) string {
	if n == 1 {
		return "1 " + noun
	}
	return fmt.Sprintf("%d %ss", n, noun)
}

// subject names what a boundary governs, for a diff.
func subject(eventType string) string {
	switch eventType {
	case ahp.EventToolBefore:
		return "tool call"
	case ahp.EventToolAfter:
		return "tool output"
	case ahp.EventModelRequestBefore:
		return "model request"
	case ahp.EventModelResponseAfter:
		return "model response"
	case ahp.EventTurnStart:
		return "prompt"
	case ahp.EventTurnFinishBefore:
		return "final answer"
	}
	return "operation"
}
