package mapping

import (
	"strings"

	"github.com/tidwall/gjson"
	"github.com/tidwall/sjson"
)

// Residue builds a message-list residue (ResidueMembers): for each element of list, in
// order, the object pick returns, or {} when it returns "". ok is false when no element
// has any residue.
func Residue(list gjson.Result, pick func(e gjson.Result) string) (string, bool) {
	if !list.IsArray() {
		return "", false
	}
	var b strings.Builder
	found := false
	b.WriteByte('[')
	i := 0
	list.ForEach(func(_, e gjson.Result) bool {
		if i > 0 {
			b.WriteByte(',')
		}
		i++
		r := pick(e)
		if r == "" {
			b.WriteString("{}")
			return true
		}
		found = true
		b.WriteString(r)
		return true
	})
	b.WriteByte(']')
	return b.String(), found
}

// PickStrings returns an object holding only the string members of v found at paths
// (dotted member names, no wildcards) that keep accepts, nested as in v; "" when there is
// none.
func PickStrings(v gjson.Result, keep func(string) bool, paths ...string) string {
	out := ""
	for _, p := range paths {
		s := v.Get(p)
		if s.Type != gjson.String || (keep != nil && !keep(s.Str)) {
			continue
		}
		if out == "" {
			out = "{}"
		}
		if o, err := sjson.SetRaw(out, p, s.Raw); err == nil {
			out = o
		}
	}
	return out
}

// RemoteReference reports a URL or file reference the provider resolves, as opposed to
// inline data (a data: URL, whose bytes are an attachment): a signed URL or one with
// userinfo can carry a credential to the provider.
func RemoteReference(s string) bool {
	return s != "" && !strings.HasPrefix(strings.TrimSpace(s), "data:")
}
