package mapping

import (
	"strconv"
	"strings"

	"github.com/tidwall/gjson"
	"github.com/tidwall/sjson"

	"github.com/hookproxy/hookproxy/chain/ahp"
)

// RedactParams applies hookproxy.redact_params redactions (ahp.ExtRedactParams) to a
// native request body: every occurrence of each Find in every string value under the
// top-level members that make up the request's params (Request.Params: every member but
// the message-bearing ones) is replaced by its Replace. Members and strings that hold no
// Find keep their bytes; a changed string is re-encoded by sjson in place. It reports
// whether anything changed.
func RedactParams(body []byte, params []byte, reds []ahp.ParamsRedaction) ([]byte, bool, error) {
	if len(reds) == 0 || !gjson.ValidBytes(params) {
		return body, false, nil
	}
	var sets []stringSet
	gjson.ParseBytes(params).ForEach(func(k, v gjson.Result) bool {
		sets = collectRedactions(sets, gjson.Escape(k.String()), v, reds)
		return true
	})
	if len(sets) == 0 {
		return body, false, nil
	}
	out := body
	for _, s := range sets {
		var err error
		if out, err = sjson.SetBytes(out, s.path, s.value); err != nil {
			return body, false, err
		}
	}
	return out, true, nil
}

type stringSet struct{ path, value string }

// collectRedactions walks v (at sjson path) and records the new value of every string
// that holds a Find.
func collectRedactions(dst []stringSet, path string, v gjson.Result, reds []ahp.ParamsRedaction) []stringSet {
	switch {
	case v.Type == gjson.String:
		s := v.String()
		changed := false
		for _, r := range reds {
			if r.Find != "" && strings.Contains(s, r.Find) {
				s, changed = strings.ReplaceAll(s, r.Find, r.Replace), true
			}
		}
		if changed {
			dst = append(dst, stringSet{path: path, value: s})
		}
	case v.IsArray():
		i := 0
		v.ForEach(func(_, e gjson.Result) bool {
			dst = collectRedactions(dst, path+"."+strconv.Itoa(i), e, reds)
			i++
			return true
		})
	case v.IsObject():
		v.ForEach(func(k, e gjson.Result) bool {
			dst = collectRedactions(dst, path+"."+gjson.Escape(k.String()), e, reds)
			return true
		})
	}
	return dst
}
