package mapping

import (
	"errors"
	"fmt"

	"github.com/tidwall/gjson"

	"github.com/hookproxy/hookproxy/chain/ahp"
	"github.com/hookproxy/hookproxy/internal/jsontext"
)

// opaqueJSON is the translator of an endpoint a route forwards without mapping it
// (routes[].unmapped: forward: files, batches, moderations, ...) when its body is a JSON
// object. It has no message list to offer: the whole body is the event's params, so that
// model.request.before still sees the model it names (the models policy applies to every
// endpoint that names one) and the content policies still scan its strings.
// Only deny and flow stop can be enforced on it. The provider's own translator answers
// for the provider name and the error format.
type opaqueJSON struct {
	Translator
}

// maxOpaqueDepth bounds the nesting of an opaque body, as the codecs bound theirs.
const maxOpaqueDepth = 256

// GapUnmapped is the gap of an opaque request: its content is params only.
const GapUnmapped = "endpoint not mapped: its body is the event's params, with no message list"

// OpaqueJSON wraps a provider translator as the translator of an unmapped JSON endpoint.
func OpaqueJSON(provider Translator) Translator { return opaqueJSON{provider} }

// IsOpaque reports whether tr is an OpaqueJSON translator.
func IsOpaque(tr Translator) bool { _, ok := tr.(opaqueJSON); return ok }

// DecodeRequest implements Translator: a JSON object without duplicate keys (so the model
// a policy reads is the one the upstream reads).
func (opaqueJSON) DecodeRequest(body []byte) (*Request, error) {
	if err := jsontext.Check(body, maxOpaqueDepth); err != nil {
		return nil, &BadRequest{Reason: fmt.Sprintf("malformed JSON body: %v", err)}
	}
	root := gjson.ParseBytes(body)
	if !root.IsObject() {
		return nil, &BadRequest{Reason: "the request body must be a JSON object"}
	}
	model := root.Get("model")
	req := &Request{Params: body, PromptStart: -1, Original: body,
		Gaps: []ahp.Gap{{Path: "items", Reason: GapUnmapped}}}
	if model.Type == gjson.String {
		req.Model = model.Str
	}
	return req, nil
}

// EncodeRequest implements Translator: the body is forwarded as sent (params redactions
// are applied by RedactParams); there is no message list to render edits onto.
func (opaqueJSON) EncodeRequest(req *Request, items []ahp.Message) ([]byte, error) {
	if len(items) == 0 {
		return req.Original, nil
	}
	return nil, errors.New("an unmapped endpoint has no message list to render edits onto")
}
