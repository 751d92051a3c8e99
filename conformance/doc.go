// Package conformance is hookproxy's AHP conformance claim: the implementation role, each
// transport binding and each capability profile, for the proxy (role harness) and for
// `hookproxy backend` (role backend). docs/conformance.md states the same claim, with a requirement
// table that this package's test regenerates from the code and the tests, so the claim
// cannot drift from what is implemented.
package conformance
