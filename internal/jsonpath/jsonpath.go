package jsonpath

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math/big"
	"regexp"
	"strconv"
)

// identifier is a member name that can be written as .key.
var identifier = regexp.MustCompile(`^[A-Za-z_$][A-Za-z0-9_$]*$`)

// Member renders path.key; a key that is not an identifier is written path["key"]. The
// document itself is "$" (or ""), and its members are written without it: key, $["k y"].
func Member(path, key string) string {
	if !identifier.MatchString(key) {
		k, _ := json.Marshal(key)
		return path + "[" + string(k) + "]"
	}
	if path == "$" || path == "" {
		return key
	}
	return path + "." + key
}

// Index renders path[i].
func Index(path string, i int) string { return path + "[" + strconv.Itoa(i) + "]" }

// TypeName names the JSON type of a generically decoded value with its article, for
// messages such as "must be a string, not an object".
func TypeName(x any) string {
	switch x.(type) {
	case nil:
		return "null"
	case bool:
		return "a boolean"
	case json.Number:
		return "a number"
	case string:
		return "a string"
	case []any:
		return "an array"
	case map[string]any:
		return "an object"
	}
	return fmt.Sprintf("%T", x)
}

// Integer reports whether n has an integer value and returns it. As in JSON Schema
// 2020-12, 1.0 and 1e3 are integers; the value is exact, however large.
func Integer(n json.Number) (*big.Int, bool) {
	if i, ok := new(big.Int).SetString(string(n), 10); ok {
		return i, true
	}
	f, _, err := big.ParseFloat(string(n), 10, 256, big.ToNearestEven)
	if err != nil || !f.IsInt() {
		return nil, false
	}
	i, _ := f.Int(nil)
	return i, true
}

// Int64 is Integer for values that must fit an int64 (counts, sizes, timeouts).
func Int64(n json.Number) (int64, bool) {
	i, ok := Integer(n)
	if !ok || !i.IsInt64() {
		return 0, false
	}
	return i.Int64(), true
}

// Duplicates returns the path of every object member written more than once in data, in
// document order. encoding/json silently keeps the last copy, and parsers disagree about
// which copy wins, so a duplicate can make a reader see another value than the validator
// did. data must be well-formed JSON; scanning stops at the first syntax error.
func Duplicates(data []byte) []string {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	var dups []string
	var walk func(path string) error
	walk = func(path string) error {
		tok, err := dec.Token()
		if err != nil {
			return err
		}
		d, isDelim := tok.(json.Delim)
		if !isDelim {
			return nil
		}
		switch d {
		case '{':
			seen := map[string]bool{}
			for dec.More() {
				kt, err := dec.Token()
				if err != nil {
					return err
				}
				k, _ := kt.(string)
				if seen[k] {
					dups = append(dups, Member(path, k))
				}
				seen[k] = true
				if err := walk(Member(path, k)); err != nil {
					return err
				}
			}
		case '[':
			for i := 0; dec.More(); i++ {
				if err := walk(Index(path, i)); err != nil {
					return err
				}
			}
		}
		_, err = dec.Token() // the closing delimiter
		return err
	}
	_ = walk("$")
	return dups
}
