package mcp

import (
	"encoding/json"
	"math"
	"math/big"
	"strconv"
	"strings"
	"unicode"

	"github.com/tidwall/gjson"
)

// How a response is paired with the request it answers. JSON-RPC 2.0 (§5) says a response
// carries the id of its request; it does not say how the two are compared, and the SDKs
// differ:
//
//   - The MCP TypeScript SDK numbers its requests 0, 1, 2, ... and looks a response up by
//     Number(response.id) (Protocol._onresponse): the number 1 is answered by 1, 1.0, 1e0,
//     and also by the strings "1", "01", " 1 " and "0x1"; the string "" stands for 0.
//   - Other SDKs compare by JSON value: strings by their text, numbers by their value.
//
// A proxy that paired by literal text would pass a result answering `id: 1` with
// `"id": "1"` or `1.0` unchecked, and the TypeScript client would take it as the answer.
// hookproxy therefore pairs in two steps: by JSON value (IDKey), then by the value the
// TypeScript SDK computes (LooseIDKey); a response that pairs with no request either way
// answers nothing the client asked through hookproxy and is refused by the caller.

// IDKey returns a comparable form of a JSON-RPC id by JSON value: strings by their
// unescaped text ("a" and "\u0061" are one id), numbers by their exact decimal value (1,
// 1.0, 1e0 and 10e-1 are one id; -0 is 0). The string "1" and the number 1 differ.
func IDKey(id json.RawMessage) string {
	v := gjson.ParseBytes(id)
	switch v.Type {
	case gjson.String:
		return "s:" + v.Str
	case gjson.Number:
		if k, ok := decimalKey(v.Raw); ok {
			return "n:" + k
		}
		return "r:" + v.Raw
	}
	return "?:" + string(id)
}

// LooseIDKey returns the key the MCP TypeScript SDK matches a response id by: the id as
// JavaScript's Number() reads it, as a double. It is "" for an id that is no number there
// (NaN: "abc", "1x"), which pairs with nothing.
func LooseIDKey(id json.RawMessage) string {
	v := gjson.ParseBytes(id)
	var f float64
	switch v.Type {
	case gjson.Number:
		var err error
		if f, err = strconv.ParseFloat(v.Raw, 64); err != nil && !math.IsInf(f, 0) {
			return ""
		}
	case gjson.String:
		var ok bool
		if f, ok = jsNumber(v.Str); !ok {
			return ""
		}
	default:
		return ""
	}
	if f == 0 {
		f = 0 // -0 and 0 are one key (SameValueZero, as a JavaScript Map compares)
	}
	return "f:" + strconv.FormatFloat(f, 'g', -1, 64)
}

// decimalKey normalises a JSON number to digits and exponent: sign, significant digits
// without leading or trailing zeros, and the power of ten of the last one. ok is false
// for an exponent beyond int64 (such an id only equals itself).
func decimalKey(raw string) (string, bool) {
	s := raw
	neg := strings.HasPrefix(s, "-")
	s = strings.TrimPrefix(s, "-")
	mant, exp := s, "0"
	if i := strings.IndexAny(s, "eE"); i >= 0 {
		mant, exp = s[:i], strings.TrimPrefix(s[i+1:], "+")
	}
	e, err := strconv.ParseInt(exp, 10, 64)
	if err != nil {
		return "", false
	}
	intPart, frac, _ := strings.Cut(mant, ".")
	digits := strings.TrimLeft(intPart+frac, "0")
	if digits == "" {
		return "0", true
	}
	if len(frac) > 0 {
		if e < math.MinInt64+int64(len(frac)) {
			return "", false
		}
		e -= int64(len(frac))
	}
	trimmed := strings.TrimRight(digits, "0")
	if z := int64(len(digits) - len(trimmed)); z > 0 {
		if e > math.MaxInt64-z {
			return "", false
		}
		e += z
	}
	sign := ""
	if neg {
		sign = "-"
	}
	return sign + trimmed + "e" + strconv.FormatInt(e, 10), true
}

// jsNumber is JavaScript's Number() applied to a string (ECMAScript StringToNumber): white
// space and line terminators around it are ignored, an empty string is 0, 0x/0o/0b
// prefixes read an unsigned integer in base 16, 8 or 2, and otherwise the text must be a
// decimal literal or Infinity with an optional sign. ok is false where Number() is NaN.
func jsNumber(s string) (float64, bool) {
	s = strings.TrimFunc(s, isJSSpace)
	if s == "" {
		return 0, true
	}
	if len(s) > 2 && s[0] == '0' {
		base := 0
		switch s[1] {
		case 'x', 'X':
			base = 16
		case 'o', 'O':
			base = 8
		case 'b', 'B':
			base = 2
		}
		if base != 0 {
			n, ok := new(big.Int).SetString(s[2:], base)
			if !ok || strings.ContainsAny(s[2:], "_+-") {
				return 0, false
			}
			f, _ := new(big.Float).SetInt(n).Float64()
			return f, true
		}
	}
	body := strings.TrimLeft(s, "+-")
	if len(s)-len(body) > 1 {
		return 0, false
	}
	if body == "Infinity" {
		if s[0] == '-' {
			return math.Inf(-1), true
		}
		return math.Inf(1), true
	}
	if !isDecimalLiteral(body) {
		return 0, false
	}
	f, err := strconv.ParseFloat(s, 64)
	if err != nil && !math.IsInf(f, 0) {
		return 0, false
	}
	return f, true
}

// isDecimalLiteral reports whether s is an unsigned StrUnsignedDecimalLiteral without
// Infinity: digits with an optional point (at least one digit on a side) and an optional
// exponent. Go's ParseFloat alone would also take "inf", "nan", hex floats and
// underscores, which Number() does not.
func isDecimalLiteral(s string) bool {
	i, n := 0, len(s)
	digits := func() int {
		start := i
		for i < n && s[i] >= '0' && s[i] <= '9' {
			i++
		}
		return i - start
	}
	d := digits()
	if i < n && s[i] == '.' {
		i++
		d += digits()
	}
	if d == 0 {
		return false
	}
	if i < n && (s[i] == 'e' || s[i] == 'E') {
		i++
		if i < n && (s[i] == '+' || s[i] == '-') {
			i++
		}
		if digits() == 0 {
			return false
		}
	}
	return i == n
}

// isJSSpace is ECMAScript's StrWhiteSpaceChar: WhiteSpace (tab, vertical tab, form feed,
// ZWNBSP and every space separator) or LineTerminator.
func isJSSpace(r rune) bool {
	switch r {
	case '\t', '\v', '\f', '\uFEFF', '\n', '\r', '\u2028', '\u2029':
		return true
	}
	return unicode.Is(unicode.Zs, r)
}
