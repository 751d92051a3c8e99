package proxy

import (
	"context"
	"time"

	"github.com/hookproxy/hookproxy/chain"
	"github.com/hookproxy/hookproxy/chain/ahp"
	"github.com/hookproxy/hookproxy/enforcement"
)

// What hookproxy did with the traffic (Enforcement, Held) is the closed vocabulary of
// package enforcement, shared with the audit log and the metrics.

// Delivery modes of a BoundaryRecord.
const (
	DeliveryIntercept = "intercept" // the event went through the interceptor chain
	DeliveryObserve   = "observe"   // observe-only event (turn.end, model.error, denied tool.after)
)

// BoundaryRecord describes one settled boundary of one request. It is handed to the
// Auditor after hookproxy has decided how to enforce the settlement, so Enforcement is
// what really happened to the traffic.
type BoundaryRecord struct {
	Time      time.Time
	Route     string // route prefix
	API       string // route api kind
	EventID   string
	EventType string
	ParentID  string
	SessionID string
	TurnID    string
	CallID    string // tool.* events
	Model     string // model.* events
	ToolName  string // tool.* events
	Delivery  string // DeliveryIntercept | DeliveryObserve

	Records     []chain.Record // per matching subscription, in chain order
	Permission  string         // ahp.Permission*
	Flow        string         // ahp.Flow*
	StopReason  string
	Denial      *chain.Denial
	Modified    bool
	Injections  int
	Supplied    bool // a return candidate was bound
	Interrupted bool // the client went away while the chain ran
	Enforcement enforcement.Action
	// Reapplied counts, on a model.request.before record, the rewrites settled at earlier
	// requests of the conversation (tool.after modify(output), turn.start modify(prompt))
	// that were re-applied to this request's messages before its boundaries ran. When it
	// is above zero and the request is forwarded, Enforcement is "rewritten": the body
	// sent upstream differs from the client's.
	Reapplied int
	// Resettled is set on a tool.after or turn.start record of content from before the
	// request's last assistant message that no settlement record covered: it was settled
	// again (fail-safe, rewrites.go).
	Resettled bool
	// Held is set on response-side records (model.response.after, tool.before,
	// turn.finish.before): enforcement.HeldWhole, enforcement.HeldToolCalls or enforcement.HeldNone.
	Held enforcement.Held
	// Approval is set on a tool.before record of a call held for a person's decision.
	Approval *ApprovalAudit

	// ToolDefinitions is set on the records of tool-definition pinning (EventType
	// ahp.EventToolDefinitions): the changes and findings reported.
	ToolDefinitions []ahp.ToolDefinitionChange

	// Event is the effective event (content included). Auditors must not write its
	// content unless configured to (audit.includeContent); it never holds credentials.
	Event *ahp.Event
	// Original is the event as the chain received it, set only when the settlement changed
	// it (the chain copies on write, so Event and Original never share an edited part):
	// what a redaction replaced is Original's text against Event's. The same rule as
	// Event applies: it never holds credentials, and its content is the auditor's to
	// keep out of anything written unless configured otherwise.
	Original *ahp.Event
	// UpstreamStatus is the HTTP status of the upstream's answer on a model route, once
	// it arrived (response-side records); 0 before or without one.
	UpstreamStatus int
}

// settled fills in what the settlement st decided (nothing, when st is nil: the record's
// own none/none stands) and the event as the chain settled it.
func (rec *BoundaryRecord) settled(st *chain.Settlement) {
	if st == nil {
		return
	}
	rec.Records = st.Records
	rec.Permission, rec.Flow, rec.StopReason = st.Permission, st.Flow, st.StopReason
	rec.Denial, rec.Modified, rec.Injections = st.Denial, st.Modified, len(st.Injections)
	rec.Supplied, rec.Interrupted = st.Candidate != nil, st.Interrupted
	if st.Event != nil {
		rec.Event = st.Event
	}
}

// Auditor receives one record per settled boundary (decision audit log, metrics). It is
// called synchronously on the request path and must not block for long.
type Auditor interface {
	OnBoundary(ctx context.Context, rec BoundaryRecord)
}

// AuditorFunc adapts a function to Auditor.
type AuditorFunc func(ctx context.Context, rec BoundaryRecord)

// OnBoundary calls f.
func (f AuditorFunc) OnBoundary(ctx context.Context, rec BoundaryRecord) { f(ctx, rec) }

var _ Auditor = AuditorFunc(nil)
