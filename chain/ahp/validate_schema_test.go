package ahp_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"sort"
	"strconv"
	"strings"
	"testing"

	"github.com/hookproxy/hookproxy/chain/ahp"
	"github.com/hookproxy/hookproxy/internal/ahptest"
)

// TestAgreesWithSchemas mutates every message fixture (each member removed, each value
// replaced by values of other types and boundary values, an unknown member added to each
// object) and checks that the Go validator reaches the same verdict as the draft JSON
// Schemas, except for the rules the schemas cannot state (request id equal to event id,
// observe params holding only protocolVersion and event). The Go URI check is also stricter
// than the schema library's (RFC 3986 characters only, e.g. no spaces); the mutations do not
// probe that difference, TestURIStrictness covers it.
func TestAgreesWithSchemas(t *testing.T) {
	if testing.Short() {
		t.Skip("differential test against the JSON Schemas")
	}
	// The full run validates ~35 000 documents against the schemas (minutes); by default a
	// fixed 1-in-200 sample keeps the test fast while still covering every fixture.
	every := 200
	if os.Getenv("AHP_DIFF_FULL") != "" {
		every = 1
	}
	m := ahptest.LoadManifest(t)
	var mismatches []string
	total := 0
	for i := range m.Cases {
		c := &m.Cases[i]
		if replySchemas[c.SchemaFile()] {
			continue
		}
		data := bytes.TrimSuffix(ahptest.ReadCase(t, c), []byte("\n"))
		var doc any
		dec := json.NewDecoder(bytes.NewReader(data))
		dec.UseNumber()
		if err := dec.Decode(&doc); err != nil {
			t.Fatalf("%s: %v", c.ID, err)
		}
		for j, mu := range mutations(doc) {
			if (i+j)%every != 0 {
				continue
			}
			total++
			b, err := json.Marshal(mu.doc)
			if err != nil {
				t.Fatal(err)
			}
			schemaOK := ahptest.Validate(t, c.SchemaFile(), b) == nil && crossFieldOK(mu.doc)
			goErr := ahp.ValidateMessage(b)
			if schemaOK != (goErr == nil) {
				mismatches = append(mismatches, fmt.Sprintf("%s: %s: schema valid=%v, Go: %v", c.ID, mu.desc, schemaOK, goErr))
			}
		}
	}
	t.Logf("%d mutations checked", total)
	sort.Strings(mismatches)
	for i, s := range mismatches {
		if i == 40 {
			t.Errorf("... and %d more", len(mismatches)-40)
			break
		}
		t.Error(s)
	}
}

// crossFieldOK applies the aggregate rules no schema states.
func crossFieldOK(doc any) bool {
	msg, ok := doc.(map[string]any)
	if !ok {
		return true
	}
	params, _ := msg["params"].(map[string]any)
	switch msg["method"] {
	case ahp.MethodIntercept:
		ev, _ := params["event"].(map[string]any)
		id, hasID := msg["id"].(string)
		evID, hasEvID := ev["id"].(string)
		if hasID && hasEvID && id != evID || !hasID && hasEvID {
			return false
		}
	case ahp.MethodObserve:
		for k := range params {
			if k != "protocolVersion" && k != "event" {
				return false
			}
		}
	}
	return true
}

type mutation struct {
	desc string
	doc  any
}

// mutations enumerates single-point edits of doc.
func mutations(doc any) []mutation {
	var out []mutation
	var walk func(path []any)
	walk = func(path []any) {
		node := at(doc, path)
		p := pathString(path)
		switch n := node.(type) {
		case map[string]any:
			out = append(out, mutation{p + " +zzUnknown", with(doc, append(clonePath(path), "zzUnknown"), json.Number("1"))})
			keys := make([]string, 0, len(n))
			for k := range n {
				keys = append(keys, k)
			}
			sort.Strings(keys)
			for _, k := range keys {
				out = append(out, mutation{p + "." + k + " deleted", without(doc, append(clonePath(path), k))})
				walk(append(clonePath(path), k))
			}
		case []any:
			if len(n) > 0 {
				out = append(out, mutation{p + " emptied", with(doc, path, []any{})})
			}
			for i := range n {
				walk(append(clonePath(path), i))
			}
		}
		if len(path) == 0 {
			return
		}
		for _, r := range replacements(node) {
			out = append(out, mutation{fmt.Sprintf("%s = %s", p, short(r)), with(doc, path, r)})
		}
	}
	walk(nil)
	return out
}

func replacements(node any) []any {
	rs := []any{nil, true, json.Number("7"), "x", map[string]any{}, []any{}}
	switch n := node.(type) {
	case string:
		rs = append(rs, "", "2026-09-15T12:00:00Z", "urn:x", "user", "assistant", "body", "metadata", "skipped")
	case json.Number:
		rs = append(rs, json.Number("-1"), json.Number("0"), json.Number("1.5"), json.Number("2.0"))
	case bool:
		rs = append(rs, !n, "true")
	}
	return rs
}

func short(x any) string {
	b, _ := json.Marshal(x)
	return string(b)
}

func pathString(path []any) string {
	var b strings.Builder
	b.WriteString("$")
	for _, p := range path {
		switch k := p.(type) {
		case string:
			b.WriteString("." + k)
		case int:
			b.WriteString("[" + strconv.Itoa(k) + "]")
		}
	}
	return b.String()
}

func clonePath(p []any) []any { return append([]any(nil), p...) }

func at(doc any, path []any) any {
	for _, p := range path {
		switch k := p.(type) {
		case string:
			doc = doc.(map[string]any)[k]
		case int:
			doc = doc.([]any)[k]
		}
	}
	return doc
}

// deepCopy copies a generic JSON tree.
func deepCopy(x any) any {
	switch n := x.(type) {
	case map[string]any:
		m := make(map[string]any, len(n))
		for k, v := range n {
			m[k] = deepCopy(v)
		}
		return m
	case []any:
		a := make([]any, len(n))
		for i, v := range n {
			a[i] = deepCopy(v)
		}
		return a
	}
	return x
}

func with(doc any, path []any, val any) any {
	cp := deepCopy(doc)
	if len(path) == 0 {
		return val
	}
	parent := at(cp, path[:len(path)-1])
	switch k := path[len(path)-1].(type) {
	case string:
		parent.(map[string]any)[k] = val
	case int:
		parent.([]any)[k] = val
	}
	return cp
}

func without(doc any, path []any) any {
	cp := deepCopy(doc)
	parent := at(cp, path[:len(path)-1])
	delete(parent.(map[string]any), path[len(path)-1].(string))
	return cp
}
