package mapping

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"

	"github.com/tidwall/gjson"
	"github.com/tidwall/sjson"
)

func TestMembersWithoutMatchesSjsonDelete(t *testing.T) {
	bodies := []string{
		`{"model":"m","messages":[{"role":"user","content":"hi"}],"stream":true}`,
		`{"messages":[],"model":"m"}`,
		`{"model":"m","messages":[]}`,
		`{"messages":[]}`,
		"{ \"a\" : 1 ,\n  \"messages\" : [ 1, 2 ] ,\n  \"b\" : {\"messages\":3}\n}",
		`{"input":"x","instructions":"y"}`,
		`{"a":1,"input":"x","b":2,"instructions":"y","c":3}`,
		`{"input":"x","a":1,"instructions":"y"}`,
		`{"a":1}`,
		`{}`,
	}
	for _, body := range bodies {
		m := TopMembers(gjson.Parse(body))
		for _, names := range [][]string{{"messages"}, {"input", "instructions"}, {"a"}, {"nothing"}} {
			want := body
			for _, n := range names {
				if gjson.Get(want, n).Exists() {
					var err error
					if want, err = sjson.Delete(want, n); err != nil {
						t.Fatal(err)
					}
				}
			}
			got := m.Without(names...)
			if !gjson.Valid(got) {
				t.Errorf("Without(%v) of %s = %s: not valid JSON", names, body, got)
			}
			// Compact bodies (what SDKs send) come out byte-identical; around the cut in an
			// indented body the two keep slightly different whitespace, and sjson keeps
			// the whitespace of an emptied object where ours answers "{}".
			if compact(got) != compact(want) {
				t.Errorf("Without(%v) of %s\n got %s\nwant %s", names, body, got, want)
			}
			if !strings.ContainsAny(body, " \n") && got != want {
				t.Errorf("Without(%v) of compact %s = %s, want exactly %s", names, body, got, want)
			}
		}
		if got, want := m.Get("model").Raw, gjson.Get(body, "model").Raw; got != want {
			t.Errorf("Get(model) of %s = %q, want %q", body, got, want)
		}
	}
}

func TestMembersOfNestedRoot(t *testing.T) {
	outer := `{"x":{"a":1,"b":[2],"c":"3"}}`
	m := TopMembers(gjson.Get(outer, "x"))
	if got := m.Without("b"); got != `{"a":1,"c":"3"}` {
		t.Fatalf("Without(b) = %s", got)
	}
	if m.Get("c").Str != "3" {
		t.Fatalf("Get(c) = %q", m.Get("c").Str)
	}
}

func compact(s string) string {
	var b bytes.Buffer
	if err := json.Compact(&b, []byte(s)); err != nil {
		return s
	}
	return b.String()
}

// gjsonMembers is the reference for TopMembers: gjson's own walk.
func sameResult(a, b gjson.Result) bool {
	return a.Type == b.Type && a.Raw == b.Raw && a.Str == b.Str && a.Index == b.Index &&
		a.Num == b.Num
}

func checkAgainstGjson(t *testing.T, doc string) {
	t.Helper()
	outer := gjson.Parse(`{"wrap":` + doc + `}`) // nested, so Index has a non-zero base
	root := outer.Get("wrap")
	switch {
	case root.IsObject():
		m := TopMembers(root)
		i := 0
		root.ForEach(func(k, v gjson.Result) bool {
			if i >= len(m.keys) {
				t.Fatalf("%s: TopMembers found %d members, gjson more", doc, len(m.keys))
			}
			gk, gv := m.keys[i], m.vals[i]
			gk.Index += root.Index
			gv.Index += root.Index
			if gk.Str != k.Str || gk.Index != k.Index || !sameResult(gv, v) {
				t.Fatalf("%s: member %d = %q %+v, gjson %q %+v", doc, i, gk.Str, gv, k.Str, v)
			}
			i++
			return true
		})
		if i != len(m.keys) {
			t.Fatalf("%s: TopMembers found %d members, gjson %d", doc, len(m.keys), i)
		}
		// Pick, with and without an arena, gives each name's first value (a repeated key
		// gives its first value, as gjson's Get does) and leaves absent names alone.
		names := []string{"\x00absent"}
		first := map[string]gjson.Result{}
		root.ForEach(func(k, v gjson.Result) bool {
			if _, ok := first[k.Str]; !ok && len(names) < 8 {
				first[k.Str] = v
				names = append(names, k.Str)
			}
			return true
		})
		var a Arena
		for _, pick := range []func(gjson.Result, []string, []gjson.Result){Pick, a.Pick} {
			out := make([]gjson.Result, len(names))
			out[0] = gjson.Result{Type: gjson.True, Raw: "true"}
			pick(root, names, out)
			if out[0].Type != gjson.True {
				t.Fatalf("%s: Pick changed the result of an absent member", doc)
			}
			for j, n := range names[1:] {
				if !sameResult(out[j+1], first[n]) || out[j+1].Str != first[n].Str {
					t.Fatalf("%s: Pick(%q) = %+v, gjson's first %+v", doc, n, out[j+1], first[n])
				}
			}
		}
	case root.IsArray():
		var got []gjson.Result
		Elements(root, func(e gjson.Result) bool { got = append(got, e); return true })
		i := 0
		root.ForEach(func(_, v gjson.Result) bool {
			if i >= len(got) || !sameResult(got[i], v) {
				t.Fatalf("%s: element %d differs from gjson's %+v (got %d elements)", doc, i, v, len(got))
			}
			i++
			return true
		})
		if i != len(got) {
			t.Fatalf("%s: Elements found %d, gjson %d", doc, len(got), i)
		}
		// PickElements sees the same elements, with each object's members as Pick picks
		// them (every key of the first object is asked for, plus an absent one).
		names := []string{"\x00absent"}
		for _, e := range got {
			if e.IsObject() {
				e.ForEach(func(k, _ gjson.Result) bool {
					if len(names) < 8 {
						names = append(names, k.Str)
					}
					return true
				})
				break
			}
		}
		var a Arena
		out := make([]gjson.Result, len(names))
		k := 0
		a.PickElements(root, names, out, func(e gjson.Result) bool {
			if k >= len(got) || !sameResult(e, got[k]) {
				t.Fatalf("%s: PickElements element %d = %+v, Elements %+v", doc, k, e, got[min(k, len(got)-1)])
			}
			want := make([]gjson.Result, len(names))
			if e.IsObject() {
				Pick(e, names, want)
			}
			for j := range names {
				if !sameResult(out[j], want[j]) || out[j].Str != want[j].Str {
					t.Fatalf("%s: element %d member %q = %+v, Pick %+v", doc, k, names[j], out[j], want[j])
				}
			}
			k++
			return true
		})
		if k != len(got) {
			t.Fatalf("%s: PickElements found %d, Elements %d", doc, k, len(got))
		}
	}
}

func TestTopMembersAndElementsMatchGjson(t *testing.T) {
	for _, doc := range []string{
		`{"a":"x","b":"e\"sc\\aped\\","c":[1,{"d":"]"}],"e":{"f":"}"},"g":-1.5e3,"h":true,"i":null}`,
		"{ \"k\" : \"v\" ,\n \"n\" : [ ] , \"o\" : { } }",
		`[{"role":"user","content":"hi \"there\""}, "s", 3, [[]], {}, false]`,
		`[]`, `{}`, `[ ]`,
		`{"\u0061":"\u00e9\n"}`,
	} {
		checkAgainstGjson(t, doc)
	}
}

func FuzzTopMembers(f *testing.F) {
	f.Add(`{"a":"x","b":[1,"]"],"c":{"d":"\\\""}}`)
	f.Add(`[{"role":"user"}, "x", 1]`)
	f.Add(`[ {"role":"user","content":"a\nb"} , {"role":"tool","c\u006fntent":[1,{"x":"}"}]}, "s\"", null, [] ]`)
	f.Add(`{"k":"first","k":"second","e\u0301":"\n","function":{"name":"a"},"function":{"name":"b"}}`)
	f.Fuzz(func(t *testing.T, doc string) {
		if !json.Valid([]byte(doc)) {
			return
		}
		checkAgainstGjson(t, strings.TrimSpace(doc))
	})
}
