package oaiwire

import (
	"fmt"

	"github.com/hookproxy/hookproxy/chain/ahp"
	"github.com/hookproxy/hookproxy/mapping"
)

// ResponseState begins an EncodeResponse: the state S that codec's DecodeResponse left in
// resp, and the finish reason to write (finish, or resp's own when finish is "").
func ResponseState[S any](codec string, resp *mapping.Response, finish string) (S, string, error) {
	st, ok := resp.Native.(S)
	if !ok {
		return st, "", fmt.Errorf("%s: response was not decoded by this translator", codec)
	}
	if finish == "" {
		finish = resp.FinishReason
	}
	return st, finish, nil
}

// AssistantParts begins a SynthesizeResponse: the parts of items, which must all be
// assistant messages, since the response (what, e.g. "a chat completion") carries nothing
// else.
func AssistantParts(codec, what string, items []ahp.Message) ([]ahp.Part, error) {
	var parts []ahp.Part
	for i := range items {
		if items[i].Role != ahp.RoleAssistant {
			return nil, fmt.Errorf("%s: supplied item %s has role %q; %s carries assistant messages only", codec, items[i].ID, items[i].Role, what)
		}
		parts = append(parts, items[i].Parts...)
	}
	return parts, nil
}
