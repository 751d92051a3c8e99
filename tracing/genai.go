package tracing

// Names from the OpenTelemetry GenAI semantic conventions' guardrail proposal (the
// run_guardrail spans and the gen_ai.security.finding event, open-telemetry/
// semantic-conventions-genai). They have development status there: not yet stable, so
// they may be renamed; hookproxy follows the proposal and says so in docs/operations.md.
const (
	// Span names of one interceptor call: an in-process policy is a check inside
	// hookproxy, an HTTP or stdio backend a call to a guardrail service.
	SpanGuardrailInternal = "gen_ai.run_guardrail.internal"
	SpanGuardrailClient   = "gen_ai.run_guardrail.client"
	// EventFinding is one finding of a guardrail run.
	EventFinding = "gen_ai.security.finding"

	AttrOperationName   = "gen_ai.operation.name" // OperationRunGuardrail
	AttrConversationID  = "gen_ai.conversation.id"
	AttrGuardrailID     = "gen_ai.security.guardrail.id"   // the hook (backend) id
	AttrGuardrailName   = "gen_ai.security.guardrail.name" // the built-in policy's name, else the hook id
	AttrTargetType      = "gen_ai.security.target.type"    // what was judged (TargetType)
	AttrVerdictType     = "gen_ai.security.verdict.type"   // the hook's strongest effect
	AttrVerdictCode     = "gen_ai.security.verdict.code"   // the deny code
	AttrActionType      = "gen_ai.security.action.type"    // what hookproxy enforced at the boundary
	AttrPolicyID        = "gen_ai.security.policy.id"      // the built-in policy's name
	AttrPolicyRuleID    = "gen_ai.security.policy.rule.id" // the rule a built-in policy names
	AttrContentModified = "gen_ai.security.content.modified"

	OperationRunGuardrail = "run_guardrail"
)

// Verdicts and actions beyond the protocol's own effect names.
const (
	VerdictAllow = "allow" // the hook answered with no effect
	VerdictError = "error" // the call failed; its failure policy decided
	ActionAllow  = "allow"
	ActionBlock  = "block"
	ActionModify = "modify"
)

// TargetType names what a boundary judges, in the proposal's target vocabulary where it
// has a word for it (llm_input, llm_output, tool_call), else the AHP event type.
func TargetType(eventType string) string {
	switch eventType {
	case "model.request.before", "turn.start", "user.message.inbound":
		return "llm_input"
	case "model.response.after", "turn.finish.before":
		return "llm_output"
	case "tool.before", "tool.permission.request":
		return "tool_call"
	case "tool.after":
		return "tool_output"
	}
	return eventType
}
