package registration

import (
	"fmt"
	"path/filepath"
	"strings"
)

// Secret reference schemes hookproxy resolves at delivery (tokenRef, clientSecretRef).
// A reference names where a deployment keeps the secret, never the secret itself
// (AHP spec, capability-auth.md "Authentication bindings"); anything else — vault:, k8s:, a
// bare word — is a deployment's own secret provider, which hookproxy does not have, so
// validation refuses it rather than letting every delivery fail as "credentials".
const (
	SecretRefEnv  = "env"  // env:NAME — an environment variable of the hookproxy process
	SecretRefFile = "file" // file:/ABSOLUTE/PATH — a file such as a mounted secret, re-read at every delivery
)

// SecretRef is a parsed secret reference.
type SecretRef struct {
	Scheme string // SecretRefEnv | SecretRefFile
	Target string // variable name or absolute path
}

func (r SecretRef) String() string { return r.Scheme + ":" + r.Target }

// ParseSecretRef parses a tokenRef or clientSecretRef. A bare absolute path is accepted
// as file:PATH (the usual way to name a mounted secret).
func ParseSecretRef(ref string) (SecretRef, error) {
	if strings.HasPrefix(ref, "/") {
		ref = SecretRefFile + ":" + ref
	}
	scheme, target, ok := strings.Cut(ref, ":")
	if !ok {
		return SecretRef{}, fmt.Errorf("%q is not a secret reference hookproxy can resolve (use env:NAME or file:/absolute/path)", ref)
	}
	switch scheme {
	case SecretRefEnv:
		if !envName.MatchString(target) {
			return SecretRef{}, fmt.Errorf("env:%s: %q is not an environment variable name ([A-Za-z_][A-Za-z0-9_]*)", target, target)
		}
	case SecretRefFile:
		if !filepath.IsAbs(target) {
			return SecretRef{}, fmt.Errorf("file:%s: the path must be absolute", target)
		}
		target = filepath.Clean(target)
	default:
		return SecretRef{}, fmt.Errorf("secret reference scheme %q is not supported by hookproxy (use env:NAME or file:/absolute/path; "+
			"a deployment secret provider can write the secret to a file or variable)", scheme)
	}
	return SecretRef{Scheme: scheme, Target: target}, nil
}
