package audit

// Approval is what became of a tool call held for a person's decision (tool.before records
// whose settlement asked): the approval record's id, the decision (approved, denied,
// expired, or failed when the store failed and the call was refused), the name of the
// admin token that decided, and how long the call waited.
type Approval struct {
	ID       Text    `json:"id"`
	Decision Text    `json:"decision"`
	By       Text    `json:"by,omitempty"`
	WaitedMs float64 `json:"waitedMs"`
}
