package proxy

import (
	"net/http"
	"net/url"
	"regexp"
	"strings"
)

// The client's credentials as a lifecycle uses them: hashed into the principal that
// scopes the state store, and their values scrubbed from provider error text before it
// enters an event. They are forwarded untouched and never logged.

// credentialHeaders carry client credentials. Their values are forwarded untouched and
// otherwise only hashed (store scoping) or used to scrub error text; never logged.
// X-Goog-Api-Key is Gemini's (and Azure's api-key is Api-Key): they scope the store as the
// others do, so two Gemini tenants never share remembered rewrites or injections.
var credentialHeaders = []string{"Authorization", "X-Api-Key", "Api-Key", "X-Goog-Api-Key", "Proxy-Authorization"}

// echoedHeaders carry values an upstream may echo in an error body and that must not
// reach events either: cookies, OpenAI organization and project ids. They do
// not scope the store.
var echoedHeaders = []string{"Cookie", "Openai-Organization", "Openai-Project", "Anthropic-Admin-Key"}

// credentialQueryKeys are query parameters that carry a key (?key= for Gemini).
var credentialQueryKeys = []string{"key", "api_key", "api-key"}

func credentialsOf(h http.Header) (principal string, secrets []string) {
	parts := make([]string, 0, len(credentialHeaders))
	addSecret := func(v string) {
		secrets = append(secrets, v)
		if _, tok, ok := strings.Cut(v, " "); ok && tok != "" {
			secrets = append(secrets, strings.TrimSpace(tok))
		}
	}
	for _, name := range credentialHeaders {
		v := h.Get(name)
		parts = append(parts, v)
		if v != "" {
			addSecret(v)
		}
	}
	for _, name := range echoedHeaders {
		for _, v := range h.Values(name) {
			if name == "Cookie" {
				for _, c := range strings.Split(v, ";") {
					if _, val, ok := strings.Cut(c, "="); ok && strings.TrimSpace(val) != "" {
						secrets = append(secrets, strings.TrimSpace(val))
					}
				}
				continue
			}
			if v != "" {
				addSecret(v)
			}
		}
	}
	return derive("", parts...), secrets
}

// querySecrets adds the credential values of a request's query to secrets.
func querySecrets(q url.Values, secrets []string) []string {
	for _, k := range credentialQueryKeys {
		for _, v := range q[k] {
			if v != "" {
				secrets = append(secrets, v)
			}
		}
	}
	return secrets
}

// keyLike matches API-key-shaped tokens that providers echo (partly masked) in errors.
var keyLike = regexp.MustCompile(`\b(?:sk|pk|rk|key)-[A-Za-z0-9_*\-]{4,}`)

// scrub removes the client's credentials, and anything shaped like an API key, from
// provider error text before it enters an event (credentials never appear in hook events).
func (x *lifecycle) scrub(s string) string {
	for _, sec := range x.secrets {
		if len(sec) >= 8 {
			s = strings.ReplaceAll(s, sec, "[redacted]")
		}
	}
	return keyLike.ReplaceAllString(s, "[redacted]")
}
