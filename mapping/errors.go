package mapping

import (
	"strconv"

	"github.com/tidwall/gjson"
)

// Error-type names that hookproxy puts into the error bodies it answers with. They are
// the providers' own names, so unmodified SDKs raise their usual exception for each case
// (a refusal is always answered in the provider's own error format). Unknown providers get
// the OpenAI names, which most OpenAI-compatible SDKs understand.

// DeniedType is the error type of a policy refusal (HTTP 403).
func DeniedType(provider string) string {
	if provider == "anthropic" {
		return "permission_error"
	}
	return "policy_denied"
}

// InvalidRequestType is the error type of a request hookproxy could not parse (HTTP 400).
func InvalidRequestType(provider string) string {
	return "invalid_request_error" // both providers use this name
}

// TooLargeType is the error type of a request body over the configured limit (HTTP 413).
func TooLargeType(provider string) string {
	if provider == "anthropic" {
		return "request_too_large"
	}
	return "invalid_request_error"
}

// UpstreamFailureType is the error type of an upstream that could not be reached or
// answered with something hookproxy could not hold or decode (HTTP 502).
func UpstreamFailureType(provider string) string {
	if provider == "anthropic" {
		return "api_error"
	}
	return "server_error"
}

// UpstreamErrorFromBody reads the provider error carried by an upstream HTTP error body.
// OpenAI ({"error":{"message","type","code"}}), Anthropic
// ({"type":"error","error":{"type","message"}}) and Gemini ({"error":{"code","message",
// "status"}}) keep the details under "error"; a body
// that is not JSON yields only the status.
func UpstreamErrorFromBody(status int, body []byte) *UpstreamError {
	e := &UpstreamError{Status: status}
	if !gjson.ValidBytes(body) {
		e.Type = "http_" + strconv.Itoa(status)
		return e
	}
	eo := gjson.GetBytes(body, "error")
	switch {
	case eo.IsObject():
		e.Message = eo.Get("message").String()
		e.Type = eo.Get("type").String()
		if e.Type == "" && eo.Get("status").Type == gjson.String {
			e.Type = eo.Get("status").Str // Gemini: {"error":{"code":400,"message","status":"INVALID_ARGUMENT"}}
		}
		if e.Type == "" {
			e.Type = eo.Get("code").String()
		}
	case eo.Type == gjson.String: // some compatible servers answer {"error":"text"}
		e.Message = eo.String()
	}
	if e.Type == "" {
		e.Type = "http_" + strconv.Itoa(status)
	}
	return e
}
