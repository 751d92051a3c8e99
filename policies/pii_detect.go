package policies

// Personal-data detectors of the pii policy. Numbers are the hard part: a prompt full of
// logs holds dates, versions, build numbers, timestamps and ids. Every numeric format is
// therefore checked structurally (grouping, consistent separators, ranges) and, where the
// format has one, by its check digits (Luhn for cards, mod-97 for IBANs).

import (
	"regexp"
	"strings"
)

// PII kinds, as used in placeholders, deny codes (hookproxy.pii.<kind>) and the kinds
// config list.
const (
	PIIEmail       = "email"
	PIIPhone       = "phone"
	PIIPaymentCard = "payment_card"
	PIIIBAN        = "iban"
	PIIUSSSN       = "us_ssn"
)

// PIIKinds lists every kind the pii policy detects.
var PIIKinds = []string{PIIEmail, PIIPhone, PIIPaymentCard, PIIIBAN, PIIUSSSN}

const (
	prioPhone = 2
	prioPII   = 3
)

var (
	reSSN = regexp.MustCompile(`^(\d{3})-(\d{2})-(\d{4})`)
	// Card layouts: 4-4-4-4 (optionally a 1–3 digit fifth group for 19 digits), 4-6-5
	// (American Express), 4-6-4 (Diners), or 13–19 contiguous digits.
	reCard = regexp.MustCompile(`^(?:\d{4}[ -]\d{4}[ -]\d{4}[ -]\d{4}(?:[ -]\d{1,3})?|\d{4}[ -]\d{6}[ -]\d{4,5}|\d{13,19})`)
	// North American numbers: optional leading 1, area code and exchange 2–9xx.
	reNANP = regexp.MustCompile(`^(?:1([ .-]))?(?:\(([2-9]\d{2})\) ?|([2-9]\d{2})([ .-]))([2-9]\d{2})([ .-])(\d{4})`)
	// National numbers with a trunk 0 (UK 020 7946 0958, 07700 900123, DE 030 12345678,
	// FR 01 23 45 67 89), grouped by spaces or hyphens.
	reTrunk = regexp.MustCompile(`^(?:\(0[1-9]\d{0,3}\) ?|0[1-9]\d{0,3}[ -])\d{2,8}(?:[ -]\d{2,8}){0,3}`)
)

// ibanLength is the IBAN length of each country (ISO 13616 registry).
var ibanLength = map[string]int{
	"AD": 24, "AE": 23, "AL": 28, "AT": 20, "AZ": 28, "BA": 20, "BE": 16, "BG": 22, "BH": 22,
	"BR": 29, "BY": 28, "CH": 21, "CR": 22, "CY": 28, "CZ": 24, "DE": 22, "DK": 18, "DO": 28,
	"EE": 20, "EG": 29, "ES": 24, "FI": 18, "FO": 18, "FR": 27, "GB": 22, "GE": 22, "GI": 23,
	"GL": 18, "GR": 27, "GT": 28, "HR": 21, "HU": 28, "IE": 22, "IL": 23, "IQ": 23, "IS": 26,
	"IT": 27, "JO": 30, "KW": 30, "KZ": 20, "LB": 28, "LC": 32, "LI": 21, "LT": 20, "LU": 20,
	"LV": 21, "LY": 25, "MC": 27, "MD": 24, "ME": 22, "MK": 19, "MR": 27, "MT": 31, "MU": 30,
	"NL": 18, "NO": 15, "PK": 24, "PL": 28, "PS": 29, "PT": 25, "QA": 29, "RO": 24, "RS": 22,
	"SA": 24, "SC": 31, "SE": 24, "SI": 19, "SK": 24, "SM": 27, "ST": 25, "SV": 28, "TL": 23,
	"TN": 24, "TR": 26, "UA": 29, "VA": 22, "VG": 24, "XK": 20,
}

// piiScanner is the configured detector of the pii policy.
type piiScanner struct {
	anchors anchorSet
	kinds   kindSet
	allow   allowList
	cache   *scanCache // results by text digest (scan_cache.go)
}

var _ detector = (*piiScanner)(nil)

func (s *piiScanner) results() *scanCache { return s.cache }

func newPIIScanner(kinds kindSet, allow allowList) *piiScanner {
	s := &piiScanner{kinds: kinds, allow: allow, cache: newScanCache(scanCacheBytes)}
	a := &s.anchors
	if kinds.enabled(PIIEmail) {
		a.add(anchor{lit: "@", inner: true, match: matchEmail})
	}
	if kinds.enabled(PIIPhone) || kinds.enabled(PIIPaymentCard) || kinds.enabled(PIIUSSSN) {
		// A number of nine digits or more goes through up to four expressions over a
		// 32-byte window: the match costs more than the default.
		for c := byte('0'); c <= '9'; c++ {
			a.add(anchor{lit: string(c), cost: numberMatchCost, match: s.matchNumber})
		}
		a.add(anchor{lit: "(", cost: numberMatchCost, match: s.matchNumber})
	}
	if kinds.enabled(PIIPhone) {
		a.add(anchor{lit: "+", match: matchE164})
	}
	if kinds.enabled(PIIIBAN) {
		for c := byte('A'); c <= 'Z'; c++ {
			a.add(anchor{lit: string(c), match: matchIBAN})
		}
	}
	return s
}

// numberMatchCost is what a matchNumber call costs the work meter.
const numberMatchCost = 2 * defaultMatchCost

func (s *piiScanner) scanText(dst []Finding, text string) []Finding {
	return s.scanTextMetered(nil, dst, text)
}

func (s *piiScanner) scanField(dst []Finding, _, value string) []Finding {
	return s.scanTextMetered(nil, dst, value)
}

func (s *piiScanner) scanTextMetered(m *meter, dst []Finding, text string) []Finding {
	if m.stopped() != nil {
		return dst
	}
	start := len(dst)
	dst = s.anchors.scan(m, dst, text)
	return finishScan(dst, start, text, s.kinds, s.allow)
}

func (s *piiScanner) scanFieldMetered(m *meter, dst []Finding, _, value string) []Finding {
	return s.scanTextMetered(m, dst, value)
}

// matchEmail expands around an '@' to an address: a local part of the RFC 5322 atom
// characters and a domain of at least two labels ending in an alphabetic TLD. Not
// reported: scp-style "git@github.com:org/repo", retina asset names "icon@2x.png",
// package specs "lodash@4.17.21" (numeric TLD), decorators and handles (no local part).
func matchEmail(dst []Finding, text string, at int) ([]Finding, int) {
	n := len(text)
	k := at
	for k > 0 && at-k < 64 && isEmailLocalChar(text[k-1]) {
		k--
	}
	for k < at && text[k] == '.' {
		k++
	}
	if k == at || text[at-1] == '.' {
		return dst, 0
	}
	d := at + 1
	for d < n && d-at <= 253 && (isAlnumASCII(text[d]) || text[d] == '-' || text[d] == '.') {
		d++
	}
	for d > at+1 && (text[d-1] == '.' || text[d-1] == '-') {
		d--
	}
	if !validDomain(text[at+1 : d]) {
		return dst, 0
	}
	if d+1 < n && text[d] == ':' && text[d+1] != ' ' && text[d+1] != '\n' {
		return dst, 0 // user@host:path
	}
	if inURLAuthority(text, k) {
		return dst, 0 // ssh://user@host, https://user:pass@host: a login, not an address
	}
	return append(dst, Finding{Start: k, End: d, Kind: PIIEmail, priority: prioPII}), d
}

// inURLAuthority reports whether position k follows "://" within the same
// whitespace-delimited token.
func inURLAuthority(text string, k int) bool {
	for j := k - 1; j >= 2 && k-j < 256; j-- {
		c := text[j]
		if c <= ' ' || c == '"' || c == '\'' || c == '<' || c == '(' {
			return false
		}
		if c == '/' && text[j-1] == '/' && text[j-2] == ':' {
			return true
		}
	}
	return false
}

// codeContext reports a number written as a code literal: the previous non-blank byte is
// '=', '(', '[', '{' or ',' — or ':' after a label that does not name a phone — as in
// "Seconds: +1257894123" or "uint64(343796328169361)".
func codeContext(text string, at int, phone bool) bool {
	j := at - 1
	for j >= 0 && (text[j] == ' ' || text[j] == '\t') {
		j--
	}
	if j < 0 {
		return false
	}
	switch text[j] {
	case '=', '(', '[', '{':
		return true
	case ',':
		return phone
	case ':':
		if !phone {
			return false
		}
		k := j
		for k > 0 && j-k < 24 && (isAlnumASCII(text[k-1]) || text[k-1] == '_' || text[k-1] == '-') {
			k--
		}
		label := text[k:j]
		for _, w := range []string{"tel", "phone", "mobile", "cell", "fax", "sms", "number", "whatsapp", "contact"} {
			if containsFold(label, w) {
				return false
			}
		}
		return true
	}
	return false
}

func isEmailLocalChar(c byte) bool {
	if isAlnumASCII(c) {
		return true
	}
	switch c {
	case '.', '_', '%', '+', '-':
		return true
	}
	return false
}

func validDomain(dom string) bool {
	labels := 0
	start := 0
	for i := 0; i <= len(dom); i++ {
		if i < len(dom) && dom[i] != '.' {
			continue
		}
		l := dom[start:i]
		if len(l) == 0 || len(l) > 63 || l[0] == '-' || l[len(l)-1] == '-' {
			return false
		}
		if labels == 0 && len(l) >= 2 && l[len(l)-1] == 'x' && allDigits(l[:len(l)-1]) {
			return false // icon@2x.png
		}
		labels++
		if i == len(dom) {
			// top-level domain: letters only, one case (m.Path@m.Version is code)
			if len(l) < 2 || len(l) > 24 {
				return false
			}
			lower, upper := false, false
			for j := 0; j < len(l); j++ {
				switch {
				case isLowerASCII(l[j]):
					lower = true
				case isUpperASCII(l[j]):
					upper = true
				default:
					return false
				}
			}
			if lower && upper {
				return false
			}
		}
		start = i + 1
	}
	return labels >= 2
}

func allDigits(s string) bool {
	for i := 0; i < len(s); i++ {
		if !isDigitASCII(s[i]) {
			return false
		}
	}
	return s != ""
}

// matchNumber handles a number starting at at: US SSN, payment card, North American or
// trunk-0 national phone number.
func (s *piiScanner) matchNumber(dst []Finding, text string, at int) ([]Finding, int) {
	// Not the continuation of a dotted, dashed or slashed number: 1.2.3456, 2024-01-15.
	if at >= 2 && isDigitASCII(text[at-2]) {
		switch text[at-1] {
		case '.', '-', '/', ':', ',':
			return dst, 0
		}
	}
	// Cheap structural pre-checks: every format needs at least 9 digits in the run of
	// digits and separators that starts here, and each has a recognisable first group.
	// Most numbers in text (years, versions, counts, dates, times) fail these without
	// reaching a regular expression.
	digits, first, end := 0, 0, at
	inFirst := true
	for j := at; j < len(text) && j-at < 32; j++ {
		c := text[j]
		if isDigitASCII(c) {
			digits++
			if inFirst {
				first++
			}
			end = j + 1
			continue
		}
		if c != ' ' && c != '-' && c != '.' && c != '(' && c != ')' {
			break
		}
		if first > 0 {
			inFirst = false
		}
	}
	if digits < 9 {
		if end > at {
			return dst, end
		}
		return dst, 0
	}
	lead := text[at]
	w := window(text, at, 32)
	// A minus sign or decimal point in front makes it a number, not a card or a phone.
	signed := at > 0 && (text[at-1] == '-' || text[at-1] == '.') && (at == 1 || !isAlnumASCII(text[at-2]))
	if s.kinds.enabled(PIIUSSSN) && first == 3 && at+3 < len(text) && text[at+3] == '-' {
		if f, ok := matchSSN(text, at, w); ok {
			return append(dst, f), f.End
		}
	}
	if s.kinds.enabled(PIIPaymentCard) && !signed && digits >= 13 && (first == 4 || first >= 13) {
		if f, ok := matchCard(text, at, w); ok {
			return append(dst, f), f.End
		}
	}
	if s.kinds.enabled(PIIPhone) && !signed && !continuesGroups(text, at) {
		if (lead == '(' || first == 3 || (lead == '1' && first == 1)) && digits >= 10 {
			if f, ok := matchNANP(text, at, w); ok {
				return append(dst, f), f.End
			}
		}
		if lead == '0' || (lead == '(' && at+1 < len(text) && text[at+1] == '0') {
			if f, ok := matchTrunk(text, at, w); ok {
				return append(dst, f), f.End
			}
		}
	}
	return dst, 0
}

// continuesGroups reports a number that continues a sequence of short digit or hex
// groups ("… 4b 03 04 14 00 00" in a hex dump, "12 03 04 …"): the token before the single
// separator in front of it is 1–8 hex characters with a digit (a dump offset, a group), or
// a hex pair.
func continuesGroups(text string, at int) bool {
	if at < 2 || (text[at-1] != ' ' && text[at-1] != '-' && text[at-1] != '.') {
		return false
	}
	k := at - 1
	digit := false
	for k > 0 && at-1-k < 9 && isHexASCII(text[k-1]) {
		k--
		if isDigitASCII(text[k]) {
			digit = true
		}
	}
	n := at - 1 - k
	if n == 0 || n > 8 || (k > 0 && isAlnumASCII(text[k-1])) {
		return false
	}
	return digit || n == 2
}

func isHexASCII(c byte) bool {
	return isDigitASCII(c) || c >= 'a' && c <= 'f' || c >= 'A' && c <= 'F'
}

// numberEnds reports whether a number ending at end is not continued by another digit,
// letter, or separator-and-digit (which would make it part of a longer number).
func numberEnds(text string, end int) bool {
	if end >= len(text) {
		return true
	}
	c := text[end]
	if isAlnumASCII(c) || c == '_' {
		return false
	}
	if (c == '-' || c == '.' || c == '/') && end+1 < len(text) && isDigitASCII(text[end+1]) {
		return false
	}
	return true
}

// matchSSN accepts AAA-GG-SSSS with the ranges the SSA never issues excluded: area 000,
// 666 and 900–999, group 00, serial 0000. Only the dashed form is reported; nine bare
// digits are too often something else.
func matchSSN(text string, at int, w string) (Finding, bool) {
	m := reSSN.FindStringSubmatchIndex(w)
	if m == nil {
		return Finding{}, false
	}
	end := at + m[1]
	if !numberEnds(text, end) {
		return Finding{}, false
	}
	area, group, serial := w[m[2]:m[3]], w[m[4]:m[5]], w[m[6]:m[7]]
	if area == "000" || area == "666" || area[0] == '9' || group == "00" || serial == "0000" {
		return Finding{}, false
	}
	return Finding{Start: at, End: end, Kind: PIIUSSSN, priority: prioPII}, true
}

// matchCard accepts 13–19 digits, contiguous or in the usual groups with one consistent
// separator, that pass the Luhn check and start with an issuer prefix of a card network
// (Visa, Mastercard, American Express, Discover, JCB, Diners, UnionPay, Maestro).
func matchCard(text string, at int, w string) (Finding, bool) {
	loc := reCard.FindStringIndex(w)
	if loc == nil {
		return Finding{}, false
	}
	end := at + loc[1]
	if !numberEnds(text, end) {
		return Finding{}, false
	}
	if end+1 < len(text) && text[end] == ' ' && isDigitASCII(text[end+1]) && !allDigits(text[at:end]) {
		return Finding{}, false // more groups follow: not a card layout
	}
	var digits [19]byte
	nd := 0
	var sep byte
	for i := at; i < end; i++ {
		c := text[i]
		if isDigitASCII(c) {
			if nd == len(digits) {
				return Finding{}, false
			}
			digits[nd] = c - '0'
			nd++
			continue
		}
		if sep != 0 && c != sep {
			return Finding{}, false
		}
		sep = c
	}
	if sep == 0 && codeContext(text, at, false) {
		return Finding{}, false
	}
	if !cardPrefixOK(digits[:nd], sep != 0) || !luhn(digits[:nd]) {
		return Finding{}, false
	}
	return Finding{Start: at, End: end, Kind: PIIPaymentCard, priority: prioPII}, true
}

// cardPrefixOK checks the issuer identification number range and length of the major
// networks. A 13–19 digit number outside them (timestamps, order numbers starting with 1,
// 7, 8, 9) is not a card. Written without separators, only the common lengths count
// (15 American Express, 14 Diners, 13/16 others): 17–19 contiguous digits are far more
// often 64-bit integers and ids than the rare long card.
func cardPrefixOK(d []byte, separated bool) bool {
	n := len(d)
	if !separated && n > 16 {
		return false
	}
	p2 := int(d[0])*10 + int(d[1])
	p4 := p2*100 + int(d[2])*10 + int(d[3])
	switch {
	case d[0] == 4: // Visa
		return n == 13 || n == 16 || n == 19
	case p2 >= 51 && p2 <= 55, p4 >= 2221 && p4 <= 2720: // Mastercard
		return n == 16
	case p2 == 34 || p2 == 37: // American Express
		return n == 15
	case !separated && n != 16 && !(n == 14 && (p2 == 36 || p2 == 38 || (p4/10 >= 300 && p4/10 <= 305))) && !(n == 13 && d[0] == 4):
		return false
	case p4 == 6011, p2 == 65, p4/10 >= 644 && p4/10 <= 649: // Discover
		return n >= 16 && n <= 19
	case p2 == 62: // UnionPay
		return n >= 16 && n <= 19
	case p4 >= 3528 && p4 <= 3589: // JCB
		return n >= 16 && n <= 19
	case p2 == 36 || p2 == 38 || (p4/10 >= 300 && p4/10 <= 305): // Diners Club
		return n >= 14 && n <= 19
	case p2 == 50 || (p2 >= 56 && p2 <= 69): // Maestro
		return n >= 13 && n <= 19
	}
	return false
}

func luhn(d []byte) bool {
	sum := 0
	double := false
	for i := len(d) - 1; i >= 0; i-- {
		v := int(d[i])
		if double {
			v *= 2
			if v > 9 {
				v -= 9
			}
		}
		sum += v
		double = !double
	}
	return sum%10 == 0
}

// matchNANP accepts (415) 555-2671, 415-555-2671, 415.555.2671, 415 555 2671 and the
// same with a leading 1: area code and exchange start with 2–9 and, without
// parentheses, both separators are the same character.
func matchNANP(text string, at int, w string) (Finding, bool) {
	m := reNANP.FindStringSubmatchIndex(w)
	if m == nil {
		return Finding{}, false
	}
	end := at + m[1]
	if !numberEnds(text, end) {
		return Finding{}, false
	}
	if m[6] >= 0 { // no parentheses: area sep must equal exchange sep
		if w[m[8]:m[9]] != w[m[12]:m[13]] {
			return Finding{}, false
		}
	}
	if m[2] >= 0 && m[6] >= 0 && w[m[2]:m[3]] != w[m[8]:m[9]] {
		return Finding{}, false // 1-415.555.2671
	}
	return Finding{Start: at, End: end, Kind: PIIPhone, priority: prioPhone}, true
}

// matchTrunk accepts national numbers with a trunk 0 and 10–11 digits in 2–5 groups
// separated by one kind of separator.
func matchTrunk(text string, at int, w string) (Finding, bool) {
	loc := reTrunk.FindStringIndex(w)
	if loc == nil {
		return Finding{}, false
	}
	end := at + loc[1]
	if !numberEnds(text, end) {
		return Finding{}, false
	}
	if end+1 < len(text) && text[end] == ' ' && isDigitASCII(text[end+1]) {
		return Finding{}, false // more digit groups follow
	}
	digits := 0
	var sep byte
	if text[at] == '(' {
		sep = ' ' // (020) 7946 0958; "(012) 345-6789" is a malformed North American number
	}
	for i := at; i < end; i++ {
		c := text[i]
		switch {
		case isDigitASCII(c):
			digits++
		case c == ' ' || c == '-':
			if text[i-1] == ')' {
				continue
			}
			if sep != 0 && c != sep {
				return Finding{}, false
			}
			sep = c
		}
	}
	if digits < 10 || digits > 11 {
		return Finding{}, false
	}
	return Finding{Start: at, End: end, Kind: PIIPhone, priority: prioPhone}, true
}

// matchE164 accepts an international number: '+', a country code starting 1–9, and 8–15
// digits in total; without separators at least 10 digits. Separators are single spaces,
// hyphens or dots, and one parenthesised group is allowed (+44 (0)20 7946 0958).
func matchE164(dst []Finding, text string, at int) ([]Finding, int) {
	n := len(text)
	j := at + 1
	if j >= n || text[j] < '1' || text[j] > '9' {
		return dst, 0
	}
	digits, groups, end := 0, 1, j
	parens := 0
	prevSep := false
scan:
	for ; j < n && j-at < 24; j++ {
		c := text[j]
		switch {
		case isDigitASCII(c):
			if prevSep && digits > 0 {
				groups++
			}
			digits++
			end = j + 1
			prevSep = false
		case (c == ' ' || c == '-' || c == '.') && !prevSep:
			prevSep = true
		case c == '(' && parens == 0 && (prevSep || j == at+1):
			parens = 1
			prevSep = true
		case c == ')' && parens == 1 && !prevSep:
			parens = 2 // a separator may follow: +1 (415) 555-2671
		default:
			break scan
		}
	}
	if parens == 1 || digits < 8 || digits > 15 || (groups == 1 && digits < 10) {
		return dst, 0
	}
	// "+1130 2010" in a date is a UTC offset; "+123.456789" is a decimal number.
	if g := firstGroup(text[at+1 : end]); len(g) == 4 && isUTCOffset(g) {
		return dst, 0
	}
	if groups == 2 && strings.IndexByte(text[at:end], '.') >= 0 {
		return dst, 0
	}
	if continuesGroups(text, at) || (groups == 1 && codeContext(text, at, true)) {
		return dst, 0
	}
	if !numberEnds(text, end) {
		return dst, 0
	}
	return append(dst, Finding{Start: at, End: end, Kind: PIIPhone, priority: prioPhone}), end
}

func firstGroup(s string) string {
	i := 0
	for i < len(s) && isDigitASCII(s[i]) {
		i++
	}
	return s[:i]
}

// isUTCOffset reports an HHMM offset: hours up to 14, minutes 00, 15, 30 or 45.
func isUTCOffset(g string) bool {
	h := int(g[0]-'0')*10 + int(g[1]-'0')
	m := g[2:]
	return h <= 14 && (m == "00" || m == "15" || m == "30" || m == "45")
}

// matchIBAN accepts a country code with a registered IBAN length, two check digits and the
// account part, contiguous or in groups of four separated by single spaces, and verifies
// the ISO 7064 mod-97 checksum.
func matchIBAN(dst []Finding, text string, at int) ([]Finding, int) {
	n := len(text)
	if at+4 > n || !isUpperASCII(text[at+1]) || !isDigitASCII(text[at+2]) || !isDigitASCII(text[at+3]) {
		return dst, 0
	}
	want := ibanLength[text[at:at+2]]
	if want == 0 {
		return dst, 0
	}
	var buf [34]byte
	count := 0
	j := at
scan:
	for j < n && count < want {
		c := text[j]
		switch {
		case isUpperASCII(c) || isDigitASCII(c):
			buf[count] = c
			count++
			j++
		case c == ' ' && count > 0 && count%4 == 0 && j+1 < n && isAlnumASCII(text[j+1]):
			j++
		default:
			break scan
		}
	}
	if count != want || (j < n && isAlnumASCII(text[j])) {
		return dst, 0
	}
	if !ibanChecksumOK(buf[:count]) {
		return dst, 0
	}
	return append(dst, Finding{Start: at, End: j, Kind: PIIIBAN, priority: prioPII}), j
}

// ibanChecksumOK moves the first four characters to the end, reads letters as 10..35 and
// checks that the number is 1 modulo 97, computed digit by digit.
func ibanChecksumOK(s []byte) bool {
	rem := 0
	add := func(c byte) {
		if isDigitASCII(c) {
			rem = (rem*10 + int(c-'0')) % 97
			return
		}
		v := int(c-'A') + 10
		rem = (rem*100 + v) % 97
	}
	for _, c := range s[4:] {
		add(c)
	}
	for _, c := range s[:4] {
		add(c)
	}
	return rem == 1
}
