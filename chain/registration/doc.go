// Package registration loads and validates the AHP registration document (the portable
// format: AHP-REG-001; AHP spec, capability-auth.md "Registration"; plus hookproxy's
// in_process transport for built-in policies).
//
// Design: it checks the document only; the chain is built from the result (chain.New),
// and the built-in policies' configs are checked through Options (app).
package registration
