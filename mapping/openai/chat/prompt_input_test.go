package chat

import (
	"bytes"
	"testing"

	"github.com/tidwall/gjson"

	"github.com/hookproxy/hookproxy/chain/ahp"
)

func TestPromptInputRoundTrip(t *testing.T) {
	for _, tc := range []struct {
		tr   *PromptInput
		body string
		want []string // texts
	}{
		{NewEmbeddings(), `{"model":"e","input":"hello","dimensions":8}`, []string{"hello"}},
		{NewEmbeddings(), `{"model":"e","input":["a","b"]}`, []string{"a", "b"}},
		{NewCompletions(), `{"model":"c","prompt":"say hi","max_tokens":5}`, []string{"say hi"}},
		{NewEmbeddings(), `{"model":"e","input":[1,2,3]}`, nil},
	} {
		req, err := tc.tr.DecodeRequest([]byte(tc.body))
		if err != nil {
			t.Fatal(err)
		}
		var got []string
		for _, m := range req.Items {
			for _, p := range m.Parts {
				got = append(got, p.TextOf())
			}
		}
		if len(got) != len(tc.want) || (len(got) > 0 && got[0] != tc.want[0]) {
			t.Errorf("%s: texts %q", tc.body, got)
		}
		if tc.want == nil && len(req.Gaps) != 1 {
			t.Errorf("%s: token ids without a gap", tc.body)
		}
		if gjson.GetBytes(req.Params, tc.tr.field).Exists() || gjson.GetBytes(req.Params, "model").String() == "" {
			t.Errorf("%s: params %s", tc.body, req.Params)
		}
		out, err := tc.tr.EncodeRequest(req, ahp.CloneMessages(req.Items))
		if err != nil || !bytes.Equal(out, []byte(tc.body)) {
			t.Errorf("%s: unchanged encode %s %v", tc.body, out, err)
		}
		if len(req.Items) == 0 {
			continue
		}
		items := ahp.CloneMessages(req.Items)
		red := "[REDACTED]"
		items[0].Parts[0].Text = &red
		out, err = tc.tr.EncodeRequest(req, items)
		if err != nil {
			t.Fatal(err)
		}
		v := gjson.GetBytes(out, tc.tr.field)
		if (v.IsArray() && v.Array()[0].Str != red) || (!v.IsArray() && v.Str != red) {
			t.Errorf("%s: edited %s", tc.body, out)
		}
	}
}
