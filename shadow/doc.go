// Package shadow owns the tap on the live chain that hookproxy's rollout tools hang from:
// every settled boundary is copied, off the request path, to the shadow chain (a second
// registration that settles the same canonical event and never enforces anything) and
// to the capture writer.
//
// The tap costs the request one copy of the event and a non-blocking send: the shadow
// chain runs on its own goroutines behind a bounded queue (a full queue drops the event
// and counts it), and its backends' failures, hangs and crashes never reach a client or
// the live decision. Each shadow settlement is written to the audit log beside the live
// one, as a record with a shadow part saying whether, and how, it differs; the same record
// goes to Options.OnSettled (the console's window), audit log or not.
package shadow
