package responses

import (
	"net/url"

	"github.com/hookproxy/hookproxy/mapping/openai/internal/oaiwire"
)

// Gap reasons of the Responses API alone; the first is the usual wording for
// server-held history. The shared ones are in oaiwire.
const (
	gapServerHistory = "earlier context held by provider"
	gapServerPrompt  = "prompt template held by provider"
)

// remoteType guesses a media type from a URL's extension, else fallback.
func remoteType(raw, fallback string) string {
	if u, err := url.Parse(raw); err == nil {
		if mt := oaiwire.TypeFromName(u.Path); mt != "" && !oaiwire.IsTextMediaType(mt) {
			return mt
		}
	}
	return fallback
}
