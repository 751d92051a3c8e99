package conformance

import "github.com/hookproxy/hookproxy/chain/ahp"

// ExtensionKey is the reverse-DNS extension key (AHP-EXT-001) under which the claim
// travels in hooks/capabilities answers. No core behaviour depends on it.
const ExtensionKey = "dev.hookproxy.conformance"

// Roles of a claim (AHP spec, base/index.md "Conformance profiles": harness, backend or both).
const (
	RoleHarness = "harness"
	RoleBackend = "backend"
)

// Claim is one conformance claim (AHP-CORE-001, AHP-CORE-002): role, bindings, profiles.
type Claim struct {
	ProtocolVersion string   `json:"protocolVersion"`
	Role            string   `json:"role"`
	Bindings        []string `json:"bindings"` // transport bindings: http, stdio
	Profiles        []string `json:"profiles"` // capability profiles, base included
}

// Profiles of the draft (requirements.json "profile"): the Base Protocol, the Tool
// Interception capability profile and the two transport-binding profiles.
const (
	ProfileBase             = "base"
	ProfileToolInterception = "tool-interception"
	ProfileHTTP             = "http"
	ProfileStdio            = "stdio"
)

// Harness is the proxy's claim: it delivers hooks/intercept and hooks/observe to
// backends over HTTP and stdio (and in-process policies, which are no binding), and
// enforces Tool Interception at tool.before on every mapped API.
func Harness() Claim {
	return Claim{
		ProtocolVersion: ahp.ProtocolVersion,
		Role:            RoleHarness,
		Bindings:        []string{ProfileHTTP, ProfileStdio},
		Profiles:        []string{ProfileBase, ProfileToolInterception, ProfileHTTP, ProfileStdio},
	}
}

// Backend is the claim of `hookproxy backend`: it answers hooks/intercept and accepts
// hooks/observe over HTTP (--listen) or stdio (--stdio), returning only advertised effects.
func Backend() Claim {
	return Claim{
		ProtocolVersion: ahp.ProtocolVersion,
		Role:            RoleBackend,
		Bindings:        []string{ProfileHTTP, ProfileStdio},
		Profiles:        []string{ProfileBase, ProfileToolInterception, ProfileHTTP, ProfileStdio},
	}
}
