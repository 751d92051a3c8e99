package policies

// Credential detectors of the secrets policy. Each format is anchored on its literal
// prefix (see textscan.go) and confirmed by a precompiled RE2 expression on a short
// window, plus a check that the token ends where its alphabet ends, so that a key id glued
// into a longer identifier is not reported.

import (
	"encoding/base64"
	"regexp"
	"strings"
	"unicode/utf8"
)

// Secret kinds, as used in placeholders, deny codes (hookproxy.secrets.<kind>) and the
// kinds config list.
const (
	SecretOpenAIKey          = "openai_api_key"
	SecretAnthropicKey       = "anthropic_api_key"
	SecretAWSAccessKeyID     = "aws_access_key_id"
	SecretAWSSecretAccessKey = "aws_secret_access_key"
	SecretGitHubToken        = "github_token"
	SecretSlackToken         = "slack_token"
	SecretSlackWebhook       = "slack_webhook"
	SecretGoogleAPIKey       = "google_api_key"
	SecretStripeKey          = "stripe_key"
	SecretPrivateKey         = "private_key"
	SecretJWT                = "jwt"
	SecretBearerToken        = "bearer_token"
	SecretBasicAuth          = "basic_auth"
	SecretURLPassword        = "url_password"
	SecretGitLabToken        = "gitlab_token"
	SecretHuggingFaceToken   = "huggingface_token"
	SecretGeneric            = "generic_secret"
)

// SecretKinds lists every kind the secrets policy detects.
var SecretKinds = []string{
	SecretOpenAIKey, SecretAnthropicKey, SecretAWSAccessKeyID, SecretAWSSecretAccessKey,
	SecretGitHubToken, SecretSlackToken, SecretSlackWebhook, SecretGoogleAPIKey,
	SecretStripeKey, SecretPrivateKey, SecretJWT, SecretBearerToken, SecretBasicAuth,
	SecretURLPassword, SecretGitLabToken, SecretHuggingFaceToken, SecretGeneric,
}

// Priorities for overlapping findings: a recognised format beats a JWT, which beats a
// bearer header, which beats a name-based guess.
const (
	prioGeneric = 1
	prioURLPass = 2
	prioBearer  = 2
	prioJWT     = 3
	prioFormat  = 4
	prioBlock   = 5
)

// Fixed detector expressions, compiled once at package initialisation. All are anchored
// at the candidate position; the bounded repetitions keep each window small.
var (
	reAnthropicKey  = regexp.MustCompile(`^sk-ant-[A-Za-z0-9_-]{32,300}`)
	reOpenAIProject = regexp.MustCompile(`^sk-(?:proj|svcacct|admin|None)-[A-Za-z0-9_-]{32,300}`)
	reOpenAILegacy  = regexp.MustCompile(`^sk-[A-Za-z0-9]{48}`)
	// "T3BlbkFJ" is base64 for "OpenAI" and sits in the middle of every OpenAI key.
	reOpenAIMarked   = regexp.MustCompile(`^sk-[A-Za-z0-9_-]{8,200}T3BlbkFJ[A-Za-z0-9_-]{8,200}`)
	reStripeKey      = regexp.MustCompile(`^[rs]k_(?:live|test)_[A-Za-z0-9]{16,247}`)
	reAWSKeyID       = regexp.MustCompile(`^(?:AKIA|ASIA)[A-Z0-9]{16}`)
	reAWSSecretAfter = regexp.MustCompile(`^[ \t\r\n"',;:=|]{1,8}([A-Za-z0-9/+]{40})`)
	reGitHubToken    = regexp.MustCompile(`^gh[pousr]_[A-Za-z0-9]{36,251}`)
	reGitHubPAT      = regexp.MustCompile(`^github_pat_[A-Za-z0-9_]{70,255}`)
	reSlackToken     = regexp.MustCompile(`^xox(?:e\.xox)?[abeprs]-(?:[0-9]+-)+[A-Za-z0-9]{10,}(?:-[A-Za-z0-9]+)*`)
	reSlackWebhook   = regexp.MustCompile(`^(?:https?://)?hooks\.slack\.com/(?:services|workflows|triggers)/T[A-Z0-9]{6,12}/[A-Z0-9]{6,14}/[A-Za-z0-9/_-]{8,120}`)
	reGoogleAPIKey   = regexp.MustCompile(`^AIza[0-9A-Za-z_-]{35}`)
	rePrivKeyBegin   = regexp.MustCompile(`^-----BEGIN ((?:[A-Z0-9]+ )*PRIVATE KEY(?: BLOCK)?)-----`)
	// Body of a private key block whose END line is missing (a truncated paste): base64
	// lines, real or escaped line breaks, and RFC 1421 header lines.
	rePrivKeyBody = regexp.MustCompile(`^(?:[A-Za-z0-9+/=]+|\r|\n|\\[rn]|[A-Za-z-]+: [^\r\n\\]*)*`)
	reBearer      = regexp.MustCompile(`^(?i:bearer)[ \t]+([A-Za-z0-9._~+/-]{16,512}=*)`)
	// RFC 7617: "Basic" and base64("user-id:password"); the value is checked by decoding it.
	reBasic = regexp.MustCompile(`^(?i:basic)[ \t]+([A-Za-z0-9+/]{4,1000}={0,2})`)
	// GitLab tokens: personal/project/group access (glpat-), deploy (gldt-), runner
	// (glrt-), CI/CD job (glcbt-), pipeline trigger (glptt-), feed (glft-), SCIM/OAuth
	// (glsoat-, gloas-), incoming mail (glimt-), agent (glagent-), feature flags client
	// (glffct-). Routable tokens add dot-separated parts after the 20+ character body.
	reGitLabToken = regexp.MustCompile(`^gl(?:pat|dt|rt|cbt|ptt|ft|soat|oas|imt|agent|ffct)-[A-Za-z0-9_-]{20,255}(?:\.[A-Za-z0-9_-]{1,64}){0,3}`)
	// Hugging Face user access tokens (hf_ + 34 letters) and organization API tokens.
	reHuggingFaceToken = regexp.MustCompile(`^(?:hf_|api_org_)[A-Za-z0-9]{30,64}`)
)

// The windows the matchers read, and what a match call costs the work meter (work.go).
const (
	tokenWindow    = 512
	tokenMatchCost = regexWeight * tokenWindow
	bearerWindow   = 600
	// The three forms of an OpenAI key are tried in turn, each a regexp over the window;
	// measured, a call costs about twice what three passes are charged at regexWeight.
	openAIMatchCost = 2 * 3 * tokenMatchCost
	jwtWindow       = 8192
	// matchJWT's byte loops take about four nanoseconds a byte (a call per byte).
	jwtMatchCost = 4 * jwtWindow
	// A key block is searched for its END line (a vectorised search), then its body runs
	// through a regular expression when the line is missing.
	privateKeyMaxBlock  = 64 << 10
	privateKeyMatchCost = regexWeight*80 + 2*privateKeyMaxBlock
	// matchAssignment reads the name around the keyword (up to 96 bytes) and a value of
	// up to 256, then tests the value (entropy, shape): byte loops, no regexp.
	assignmentMatchCost = 2 * (96 + 256)
)

// secretNameKeywords are the words that make an assigned value a credential candidate
// (generic_secret). Longer words come first where they share a prefix.
var secretNameKeywords = []string{
	"password", "passwd", "passphrase", "pwd", "pass",
	"secret", "token", "apikey", "api_key", "api-key",
	"access_key", "accesskey", "access-key", "auth", "credentials", "credential",
	"private_key", "privatekey",
}

// refNameWords end names that hold a reference to, or a property of, a credential rather
// than the credential: secretName, token_type, password_file, api_key_id, token_count...
var refNameWords = map[string]bool{
	"name": true, "names": true, "ref": true, "id": true, "ids": true, "file": true,
	"files": true, "path": true, "dir": true, "env": true, "var": true, "type": true,
	"url": true, "uri": true, "endpoint": true, "count": true, "limit": true,
	"length": true, "len": true, "size": true, "max": true, "min": true, "policy": true,
	"field": true, "prompt": true, "label": true, "hint": true, "header": true,
	"expiry": true, "expires": true, "expiration": true, "ttl": true, "timeout": true,
	"format": true, "mode": true, "version": true, "kind": true, "usage": true,
	"required": true, "enabled": true, "rotation": true, "store": true, "provider": true,
	"manager": true, "source": true, "method": true, "location": true, "scope": true,
	"scopes": true, "template": true, "pattern": true, "regex": true, "input": true,
	"placeholder": true, "reset": true, "changed": true,
}

// secretScanner is the configured detector of the secrets policy.
type secretScanner struct {
	anchors    anchorSet
	kinds      kindSet
	allow      allowList
	minEntropy float64
	minLength  int
	cache      *scanCache // results by text digest (scan_cache.go)
}

var _ detector = (*secretScanner)(nil)

func (s *secretScanner) results() *scanCache { return s.cache }

func newSecretScanner(kinds kindSet, allow allowList, minEntropy float64, minLength int) *secretScanner {
	s := &secretScanner{kinds: kinds, allow: allow, minEntropy: minEntropy, minLength: minLength, cache: newScanCache(scanCacheBytes)}
	a := &s.anchors
	// Anchors of disabled kinds are left out: they would cost time and be filtered anyway.
	on := kinds.enabled
	if on(SecretAnthropicKey) {
		a.add(anchor{lit: "sk-ant-", cost: tokenMatchCost, match: tokenMatcher(reAnthropicKey, SecretAnthropicKey, isKeyChar)})
	}
	if on(SecretOpenAIKey) {
		a.add(anchor{lit: "sk-", cost: openAIMatchCost, match: s.matchOpenAI})
	}
	if on(SecretStripeKey) {
		for _, p := range []string{"sk_live_", "sk_test_", "rk_live_", "rk_test_"} {
			a.add(anchor{lit: p, cost: tokenMatchCost, match: tokenMatcher(reStripeKey, SecretStripeKey, isAlnumASCII)})
		}
	}
	if on(SecretAWSAccessKeyID) || on(SecretAWSSecretAccessKey) {
		a.add(anchor{lit: "AKIA", cost: regexWeight * (20 + 48), match: s.matchAWSKeyID})
		a.add(anchor{lit: "ASIA", cost: regexWeight * (20 + 48), match: s.matchAWSKeyID})
	}
	if on(SecretGitHubToken) {
		for _, p := range []string{"ghp_", "gho_", "ghu_", "ghs_", "ghr_"} {
			a.add(anchor{lit: p, cost: tokenMatchCost, match: tokenMatcher(reGitHubToken, SecretGitHubToken, isKeyChar)})
		}
		a.add(anchor{lit: "github_pat_", cost: tokenMatchCost, match: tokenMatcher(reGitHubPAT, SecretGitHubToken, isKeyChar)})
	}
	if on(SecretSlackToken) {
		a.add(anchor{lit: "xox", cost: tokenMatchCost, match: tokenMatcher(reSlackToken, SecretSlackToken, isKeyChar)})
	}
	if on(SecretSlackWebhook) {
		for _, p := range []string{"https://hooks.slack.com/", "http://hooks.slack.com/", "hooks.slack.com/"} {
			a.add(anchor{lit: p, cost: tokenMatchCost, match: tokenMatcher(reSlackWebhook, SecretSlackWebhook, isKeyChar)})
		}
	}
	if on(SecretGoogleAPIKey) {
		a.add(anchor{lit: "AIza", cost: tokenMatchCost, match: tokenMatcher(reGoogleAPIKey, SecretGoogleAPIKey, isKeyChar)})
	}
	if on(SecretPrivateKey) {
		a.add(anchor{lit: "-----BEGIN ", inner: true, cost: privateKeyMatchCost, match: matchPrivateKey})
	}
	if on(SecretJWT) {
		a.add(anchor{lit: "eyJ", cost: jwtMatchCost, match: matchJWT})
	}
	if on(SecretBearerToken) {
		a.add(anchor{lit: "bearer", fold: true, cost: regexWeight * bearerWindow, match: s.matchBearer})
	}
	if on(SecretBasicAuth) {
		a.add(anchor{lit: "basic", fold: true, match: matchBasic})
	}
	if on(SecretURLPassword) {
		a.add(anchor{lit: "://", inner: true, match: matchURLPassword})
	}
	if on(SecretGitLabToken) {
		a.add(anchor{lit: "gl", match: tokenMatcher(reGitLabToken, SecretGitLabToken, isKeyChar)})
	}
	if on(SecretHuggingFaceToken) {
		a.add(anchor{lit: "hf_", match: matchHuggingFace})
		a.add(anchor{lit: "api_org_", match: matchHuggingFace})
	}
	if on(SecretGeneric) || on(SecretAWSSecretAccessKey) {
		for _, kw := range secretNameKeywords {
			// Inside an upper-case name only the unambiguous words count (PGPASSWORD,
			// CLIENTSECRET), not PASS (COMPASS, BYPASS) or AUTH (OAUTH).
			caps := len(kw) >= 5
			a.add(anchor{lit: kw, fold: true, camel: true, caps: caps, cost: assignmentMatchCost, match: func(dst []Finding, text string, at int) ([]Finding, int) {
				return s.matchAssignment(dst, text, at, len(kw))
			}})
		}
	}
	return s
}

// scanText implements detector.
func (s *secretScanner) scanText(dst []Finding, text string) []Finding {
	return s.scanTextMetered(nil, dst, text)
}

func (s *secretScanner) scanTextMetered(m *meter, dst []Finding, text string) []Finding {
	if m.stopped() != nil {
		return dst
	}
	start := len(dst)
	dst = s.anchors.scan(m, dst, text)
	return s.finish(dst, start, text)
}

// scanField implements detector: the value is scanned as text, and a value stored under a
// credential-like key ("password", "apiKey", "AWS_SECRET_ACCESS_KEY") is itself a
// candidate when it passes the same tests as an assigned value in text.
func (s *secretScanner) scanField(dst []Finding, key, value string) []Finding {
	return s.scanFieldMetered(nil, dst, key, value)
}

func (s *secretScanner) scanFieldMetered(m *meter, dst []Finding, key, value string) []Finding {
	if m.stopped() != nil {
		return dst
	}
	start := len(dst)
	dst = s.anchors.scan(m, dst, value)
	if key != "" {
		if aws, ok := credentialName(key); ok && isSingleToken(value) {
			if f, ok := s.classifyValue(value, 0, len(value), aws); ok {
				dst = append(dst, f)
			}
		}
	}
	return s.finish(dst, start, value)
}

func (s *secretScanner) finish(dst []Finding, start int, text string) []Finding {
	return finishScan(dst, start, text, s.kinds, s.allow)
}

// isKeyChar is the alphabet of most API tokens: letters, digits, '_' and '-'.
func isKeyChar(c byte) bool { return isAlnumASCII(c) || c == '_' || c == '-' }

// tokenMatcher builds a matcher for a prefixed token format: re must match at the
// position, and the token must end where its alphabet (cont) ends.
func tokenMatcher(re *regexp.Regexp, kind string, cont func(byte) bool) matchFunc {
	return func(dst []Finding, text string, at int) ([]Finding, int) {
		loc := re.FindStringIndex(window(text, at, tokenWindow))
		if loc == nil {
			return dst, 0
		}
		end := at + loc[1]
		if end < len(text) && cont(text[end]) {
			return dst, 0
		}
		return append(dst, Finding{Start: at, End: end, Kind: kind, priority: prioFormat}), end
	}
}

// openAIForms are tried in order: project/service/admin keys, any key with the OpenAI
// marker, and the legacy 48-character form.
var openAIForms = []*regexp.Regexp{reOpenAIProject, reOpenAIMarked, reOpenAILegacy}

func (s *secretScanner) matchOpenAI(dst []Finding, text string, at int) ([]Finding, int) {
	w := window(text, at, tokenWindow)
	for _, re := range openAIForms {
		loc := re.FindStringIndex(w)
		if loc == nil {
			continue
		}
		end := at + loc[1]
		if end < len(text) && isKeyChar(text[end]) {
			continue
		}
		return append(dst, Finding{Start: at, End: end, Kind: SecretOpenAIKey, priority: prioFormat}), end
	}
	return dst, 0
}

// matchAWSKeyID finds an access key id and, right after it (a CSV line, "id:secret", two
// adjacent environment values), the 40-character secret access key that pairs with it.
func (s *secretScanner) matchAWSKeyID(dst []Finding, text string, at int) ([]Finding, int) {
	loc := reAWSKeyID.FindStringIndex(window(text, at, 20))
	if loc == nil {
		return dst, 0
	}
	end := at + loc[1]
	if end < len(text) && isAlnumASCII(text[end]) {
		return dst, 0
	}
	dst = append(dst, Finding{Start: at, End: end, Kind: SecretAWSAccessKeyID, priority: prioFormat})
	if m := reAWSSecretAfter.FindStringSubmatchIndex(window(text, end, 48)); m != nil {
		vs, ve := end+m[2], end+m[3]
		if (ve >= len(text) || !isBase64Char(text[ve])) && looksRandomAWSSecret(text[vs:ve]) {
			dst = append(dst, Finding{Start: vs, End: ve, Kind: SecretAWSSecretAccessKey, priority: prioFormat})
			return dst, ve
		}
	}
	return dst, end
}

func isBase64Char(c byte) bool { return isAlnumASCII(c) || c == '+' || c == '/' || c == '=' }

// looksRandomAWSSecret requires the mix of letter cases every real secret access key has,
// so that a 40-character hex digest next to a key id is not taken for one.
func looksRandomAWSSecret(v string) bool {
	if len(v) != 40 {
		return false
	}
	var upper, lower, other bool
	for i := 0; i < len(v); i++ {
		c := v[i]
		switch {
		case isUpperASCII(c):
			upper = true
		case isLowerASCII(c):
			lower = true
		case !isAlnumASCII(c) && c != '+' && c != '/':
			return false
		default:
			other = true
		}
	}
	return upper && lower && other
}

// matchPrivateKey covers a PEM/OpenSSH/PGP private key block from its BEGIN line to the
// matching END line, or, when the END line is missing, to the end of the key body.
func matchPrivateKey(dst []Finding, text string, at int) ([]Finding, int) {
	m := rePrivKeyBegin.FindStringSubmatchIndex(window(text, at, 80))
	if m == nil {
		return dst, 0
	}
	label := text[at+m[2] : at+m[3]]
	bodyStart := at + m[1]
	rest := window(text, bodyStart, privateKeyMaxBlock)
	// A key block holds no quote: stopping at one keeps the span inside a single quoted
	// string when the block sits in serialized JSON.
	if q := strings.IndexByte(rest, '"'); q >= 0 {
		rest = rest[:q]
	}
	endLine := "-----END " + label + "-----"
	if k := strings.Index(rest, endLine); k >= 0 {
		end := bodyStart + k + len(endLine)
		return append(dst, Finding{Start: at, End: end, Kind: SecretPrivateKey, priority: prioBlock}), end
	}
	end := bodyStart
	if loc := rePrivKeyBody.FindStringIndex(rest); loc != nil {
		end = bodyStart + loc[1]
	}
	end = trimTrailingBreaks(text, bodyStart, end)
	return append(dst, Finding{Start: at, End: end, Kind: SecretPrivateKey, priority: prioBlock}), end
}

// trimTrailingBreaks moves end back over real or escaped line breaks, down to lo, so that
// the line break after a truncated key body stays outside the placeholder.
func trimTrailingBreaks(text string, lo, end int) int {
	for end > lo {
		switch {
		case text[end-1] == '\n' || text[end-1] == '\r':
			end--
		case end-2 >= lo && text[end-2] == '\\' && (text[end-1] == 'n' || text[end-1] == 'r'):
			end -= 2
		default:
			return end
		}
	}
	return end
}

// matchJWT accepts three base64url segments whose first decodes to a JSON object with an
// "alg" member — the JOSE header every JWS/JWT carries. The segments are found with byte
// loops rather than a regular expression: a JWT may be 8 KiB long, Go's regexp takes tens
// of nanoseconds a byte over such a window, and every "eyJ" of a crafted text starts one.
func matchJWT(dst []Finding, text string, at int) ([]Finding, int) {
	limit := at + jwtWindow
	if limit > len(text) {
		limit = len(text)
	}
	// segment returns the end of the run of base64url characters from i (within limit).
	segment := func(i int) int {
		for i < limit && isKeyChar(text[i]) {
			i++
		}
		return i
	}
	// eyJ[A-Za-z0-9_-]{6,} "." [A-Za-z0-9_-]{6,} "." [A-Za-z0-9_-]*
	h := segment(at + 3)
	if h-(at+3) < 6 || h >= limit || text[h] != '.' {
		return dst, 0
	}
	p := segment(h + 1)
	if p-(h+1) < 6 || p >= limit || text[p] != '.' {
		return dst, 0
	}
	end := segment(p + 1)
	if end < len(text) && (isKeyChar(text[end]) || text[end] == '.') {
		return dst, 0
	}
	raw, err := base64.RawURLEncoding.DecodeString(strings.TrimRight(text[at:h], "="))
	if err != nil {
		return dst, 0
	}
	hasAlg := false
	if err := topLevelMembers(raw, func(k string) bool { return k == "alg" }, func(_ string, v jsonValue) {
		hasAlg = v.kind == jsonString && v.str != ""
	}); err != nil || !hasAlg {
		return dst, 0
	}
	return append(dst, Finding{Start: at, End: end, Kind: SecretJWT, priority: prioJWT}), end
}

// matchBearer finds "Bearer <token>" (an Authorization header or its value). The token
// must look random (letters and digits, not a dotted/dashed identifier), which rules out
// prose ("bearer tokens are...") and code ("Bearer " + token, "Bearer ${TOKEN}").
func (s *secretScanner) matchBearer(dst []Finding, text string, at int) ([]Finding, int) {
	m := reBearer.FindStringSubmatchIndex(window(text, at, bearerWindow))
	if m == nil {
		return dst, 0
	}
	vs, ve := at+m[2], at+m[3]
	if ve < len(text) && (isKeyChar(text[ve]) || text[ve] == '.') {
		return dst, 0
	}
	v := text[vs:ve]
	if !hasDigitAndLetter(v) || looksLikeIdentifier(v) {
		return dst, 0
	}
	return append(dst, Finding{Start: vs, End: ve, Kind: SecretBearerToken, priority: prioBearer}), at + 6
}

// matchBasic finds "Basic <base64>" (an Authorization header or its value) whose value
// decodes to printable "user-id:password" text, as RFC 7617 defines it. Prose ("Basic
// authentication", "basic usage") and WWW-Authenticate challenges (Basic realm="...") do
// not decode to that and are left alone.
func matchBasic(dst []Finding, text string, at int) ([]Finding, int) {
	m := reBasic.FindStringSubmatchIndex(window(text, at, 1100))
	if m == nil {
		return dst, 0
	}
	vs, ve := at+m[2], at+m[3]
	if ve < len(text) && (isBase64Char(text[ve]) || text[ve] == '-' || text[ve] == '_' || text[ve] == '.') {
		return dst, 0
	}
	v := text[vs:ve]
	raw, err := base64.StdEncoding.DecodeString(v)
	if err != nil {
		raw, err = base64.RawStdEncoding.DecodeString(strings.TrimRight(v, "="))
		if err != nil {
			return dst, 0
		}
	}
	colon := strings.IndexByte(string(raw), ':')
	if colon < 0 || len(raw) < 2 || !printableText(raw) {
		return dst, 0
	}
	return append(dst, Finding{Start: vs, End: ve, Kind: SecretBasicAuth, priority: prioBearer}), ve
}

// printableText reports UTF-8 text without control characters.
func printableText(b []byte) bool {
	if !utf8.Valid(b) {
		return false
	}
	for _, r := range string(b) {
		if r < ' ' || r == 0x7f {
			return false
		}
	}
	return true
}

// matchURLPassword finds the password of a URL's userinfo (scheme://user:password@host):
// database connection strings (postgres://, mysql://, mongodb+srv://, redis://, amqp://),
// proxies, git remotes. Only the password is reported, so a redacted connection string
// still names its user and host. References and masks are left alone: ${DB_PASSWORD},
// <password>, {password}, %(pw)s, ****, xxxx.
func matchURLPassword(dst []Finding, text string, at int) ([]Finding, int) {
	// A scheme must precede "://": a letter, then letters, digits, '+', '-', '.'.
	if at == 0 || !isSchemeChar(text[at-1]) {
		return dst, 0
	}
	// The authority runs to the first character that ends it (or ends a URL in text, or a
	// string of serialized JSON); the userinfo ends at its last '@', as URL parsers split
	// it, so a password holding a raw '@' is reported whole.
	auth := window(text, at+3, 600)
	if k := strings.IndexAny(auth, "/?#\"'<>\\ \t\r\n`"); k >= 0 {
		auth = auth[:k]
	}
	atSign := strings.LastIndexByte(auth, '@')
	if atSign < 0 || atSign+1 >= len(auth) || !(isAlnumASCII(auth[atSign+1]) || auth[atSign+1] == '[') {
		return dst, 0
	}
	colon := strings.IndexByte(auth[:atSign], ':')
	if colon < 0 || colon+1 == atSign {
		return dst, 0
	}
	ps, pe := at+3+colon+1, at+3+atSign
	if urlPasswordReference(text[ps:pe]) {
		return dst, 0
	}
	return append(dst, Finding{Start: ps, End: pe, Kind: SecretURLPassword, priority: prioURLPass}), pe
}

func isHexDigit(c byte) bool { return isDigitASCII(c) || c >= 'a' && c <= 'f' || c >= 'A' && c <= 'F' }

func isSchemeChar(c byte) bool { return isAlnumASCII(c) || c == '+' || c == '-' || c == '.' }

// urlPasswordReference reports a password slot that holds no password: a variable or
// template reference, or a mask of one repeated character.
func urlPasswordReference(p string) bool {
	switch p[0] {
	case '$', '<', '{', '[':
		return true
	}
	// A printf verb (%s, %v, %(pw)s) or an encoded reference (%7B, %24); a real password
	// may start with any other percent-encoded byte.
	if p[0] == '%' && (len(p) < 3 || !isHexDigit(p[1]) || !isHexDigit(p[2]) || strings.HasPrefix(p, "%7B") || strings.HasPrefix(p, "%24")) {
		return true
	}
	same := true
	for i := 1; i < len(p); i++ {
		if p[i] != p[0] {
			same = false
			break
		}
	}
	return same && (p[0] == '*' || p[0] == 'x' || p[0] == 'X' || p[0] == '.' || p[0] == '_')
}

// matchHuggingFace accepts hf_/api_org_ followed by a random letter-and-digit body that
// ends where the token alphabet ends; a long identifier made of words
// (hf_loadPretrainedModelFromHubWithCache) is not a token.
func matchHuggingFace(dst []Finding, text string, at int) ([]Finding, int) {
	loc := reHuggingFaceToken.FindStringIndex(window(text, at, 80))
	if loc == nil {
		return dst, 0
	}
	end := at + loc[1]
	if end < len(text) && isKeyChar(text[end]) {
		return dst, 0
	}
	body := text[at:end]
	body = body[strings.IndexByte(body, '_')+1:]
	body = strings.TrimPrefix(body, "org_")
	if wordy(body) {
		return dst, 0
	}
	return append(dst, Finding{Start: at, End: end, Kind: SecretHuggingFaceToken, priority: prioFormat}), end
}

// matchAssignment handles a credential-like name (kwLen bytes at at) followed by an
// assignment: password=..., "apiKey": "...", DB_PASSWORD: ..., --token ..., token := "...".
// It resumes right after the keyword, so the value is still offered to the format
// matchers (a GitHub token assigned to GITHUB_TOKEN is reported as github_token).
func (s *secretScanner) matchAssignment(dst []Finding, text string, at, kwLen int) ([]Finding, int) {
	n := len(text)
	kwEnd := at + kwLen
	// Glued into an upper-case name (PGPASSWORD): the keyword itself must be upper case.
	if !wordBoundaryBefore(text, at) && isUpperASCII(text[at-1]) && !allUpper(text[at:kwEnd]) {
		return dst, 0
	}
	// "passwords", "Tokens", "tokenizer": the keyword must end the word or a camel hump.
	if kwEnd < n && isLetterASCII(text[kwEnd]) && isLowerASCII(text[kwEnd]) == isLowerASCII(text[kwEnd-1]) {
		return dst, 0
	}
	// The rest of the name: token_secret, PASSWORD_HASH, apiKey.value ...
	nameEnd := kwEnd
	for nameEnd < n && nameEnd-at < 64 && (isKeyChar(text[nameEnd]) || text[nameEnd] == '.') {
		nameEnd++
	}
	// Include what precedes the keyword in the same name (AWS_, db_, client_), and notice a
	// command-line option (--password value).
	nameStart := at
	for nameStart > 0 && at-nameStart < 32 && (isKeyChar(text[nameStart-1]) || text[nameStart-1] == '.') {
		nameStart--
	}
	dashes := 0
	for nameStart+dashes < at && text[nameStart+dashes] == '-' {
		dashes++
	}
	nameStart += dashes
	cliFlag := dashes == 2
	name := text[nameStart:nameEnd]
	if refNameWords[lastNameWord(name)] {
		return dst, 0
	}
	j := nameEnd
	// closing quote of a quoted key, possibly JSON-escaped inside serialized text
	if j+1 < n && text[j] == '\\' && isQuote(text[j+1]) {
		j += 2
	} else if j < n && isQuote(text[j]) {
		j++
	}
	sp := j
	for j < n && (text[j] == ' ' || text[j] == '\t') {
		j++
	}
	switch {
	case strings.HasPrefix(text[j:], ":=") || strings.HasPrefix(text[j:], "=>"):
		j += 2
	case j < n && (text[j] == '=' || text[j] == ':'):
		j++
	case cliFlag && j > sp:
		// --password value
	default:
		return dst, 0
	}
	for j < n && (text[j] == ' ' || text[j] == '\t') {
		j++
	}
	var quote byte
	if j+1 < n && text[j] == '\\' && isQuote(text[j+1]) {
		quote = text[j+1]
		j += 2
	} else if j < n && isQuote(text[j]) {
		quote = text[j]
		j++
	}
	// A quoted value runs to its closing quote and may hold the punctuation that ends an
	// unquoted one (a password with '&' or ',').
	vs := j
	for j < n && j-vs < 256 && (isValueChar(text[j]) || (quote != 0 && text[j] > ' ' && text[j] != quote && text[j] != '\\' && text[j] != 0x7f)) {
		j++
	}
	if j < n && j-vs >= 256 {
		return dst, 0 // a blob, not a credential value
	}
	if quote == 0 && j < n && text[j] == '(' {
		return dst, 0 // auth = base64.b64encode(...): a call, not a value
	}
	aws := isAWSSecretName(name)
	if f, ok := s.classifyValue(text, vs, j, aws); ok {
		dst = append(dst, f)
	}
	return dst, kwEnd
}

// classifyValue decides whether text[vs:ve], assigned to a credential-like name, is a
// credential: a 40-character AWS secret under an AWS secret name, or a random-looking
// value (length, Shannon entropy, letters and digits, not an identifier or a reference).
func (s *secretScanner) classifyValue(text string, vs, ve int, aws bool) (Finding, bool) {
	v := text[vs:ve]
	if aws && looksRandomAWSSecret(v) {
		return Finding{Start: vs, End: ve, Kind: SecretAWSSecretAccessKey, priority: prioFormat}, true
	}
	if len(v) < s.minLength {
		return Finding{}, false
	}
	switch v[0] {
	case '$', '%', '&', '*', '@', '!', '=', '#', ':', '/', '.', '~', '-':
		// $VAR, %(name)s, YAML anchors/aliases/tags, paths, options: references, not values
		return Finding{}, false
	}
	if !hasDigitAndLetter(v) || looksLikeIdentifier(v) || wordy(v) || hasScheme(v) || shannonEntropy(v) < s.minEntropy {
		return Finding{}, false
	}
	return Finding{Start: vs, End: ve, Kind: SecretGeneric, priority: prioGeneric}, true
}

// hasScheme reports values that start like a URI or resource name (urn:uuid:…,
// arn:aws:…, https://…): references, not credentials.
func hasScheme(v string) bool {
	for i := 0; i < len(v) && i < 16; i++ {
		c := v[i]
		switch {
		case isLetterASCII(c), i > 0 && (isDigitASCII(c) || c == '+' || c == '.' || c == '-'):
		case c == ':' && i >= 2:
			return true
		default:
			return false
		}
	}
	return false
}

func isQuote(c byte) bool { return c == '"' || c == '\'' || c == '`' }

// isValueChar is what an unquoted or quoted credential value may contain: anything but
// whitespace, quotes, backslashes and the punctuation that ends values in code,
// configuration and URL query strings ('&').
func isValueChar(c byte) bool {
	if c <= ' ' || c == 0x7f {
		return false
	}
	switch c {
	case '"', '\'', '`', '\\', ',', ';', '<', '>', '(', ')', '{', '}', '[', ']', '|', '&':
		return false
	}
	return true
}

// isSingleToken reports a JSON field value without whitespace or control characters: a
// credential, not a sentence.
func isSingleToken(v string) bool {
	for i := 0; i < len(v); i++ {
		if v[i] <= ' ' || v[i] == 0x7f {
			return false
		}
	}
	return v != ""
}

func allUpper(s string) bool {
	for i := 0; i < len(s); i++ {
		if isLowerASCII(s[i]) {
			return false
		}
	}
	return true
}

func hasDigitAndLetter(v string) bool {
	var d, l bool
	for i := 0; i < len(v); i++ {
		switch {
		case isDigitASCII(v[i]):
			d = true
		case isLetterASCII(v[i]):
			l = true
		}
	}
	return d && l
}

// looksLikeIdentifier reports values made of words: every segment between - _ . / : is
// letters optionally followed by at most three digits (six in an upper-case word such as
// NL80211), or a number of at most four digits (my-app-secret-v2, prod_db_1,
// https://auth.example.com/token, release.2024). Random tokens do not look like this.
func looksLikeIdentifier(v string) bool {
	start := 0
	for i := 0; i <= len(v); i++ {
		if i < len(v) && strings.IndexByte("-_./:", v[i]) < 0 {
			continue
		}
		if !identSegment(v[start:i]) {
			return false
		}
		start = i + 1
	}
	return true
}

func identSegment(s string) bool {
	i := 0
	for i < len(s) && isLetterASCII(s[i]) {
		i++
	}
	letters := i
	for i < len(s) && isDigitASCII(s[i]) {
		i++
	}
	if i != len(s) {
		return false
	}
	digits := len(s) - letters
	if letters == 0 {
		return digits <= 4
	}
	return digits <= 3 || (letters >= 2 && digits <= 6 && allUpper(s))
}

// wordy reports values made of words, as code identifiers are (testP256PrivateKey →
// test P 256 Private Key, HTTPServerConfig2 → HTTP Server Config 2): at least three
// quarters of the characters sit in words of three or more letters (lower-case or
// Capitalized), in digit runs of three or more, or in an acronym directly followed by a
// Capitalized word. In a random token the character class changes every one or two
// characters, and long upper-case runs happen but are not followed by words. Values
// without lower-case letters (base32 secrets) are left to the other tests.
func wordy(v string) bool {
	inWords := 0
	hasLower := false
	for i := 0; i < len(v); {
		c := v[i]
		j := i + 1
		counted := false
		switch {
		case isLowerASCII(c):
			hasLower = true
			for j < len(v) && isLowerASCII(v[j]) {
				j++
			}
			counted = j-i >= 3
		case isUpperASCII(c) && j < len(v) && isLowerASCII(v[j]):
			hasLower = true
			for j < len(v) && isLowerASCII(v[j]) {
				j++
			}
			counted = j-i >= 3
		case isUpperASCII(c):
			for j < len(v) && isUpperASCII(v[j]) && !(j+1 < len(v) && isLowerASCII(v[j+1])) {
				j++
			}
			counted = j-i >= 2 && j+1 < len(v) && isUpperASCII(v[j]) && isLowerASCII(v[j+1])
		case isDigitASCII(c):
			for j < len(v) && isDigitASCII(v[j]) {
				j++
			}
			counted = j-i >= 3
		}
		if counted {
			inWords += j - i
		}
		i = j
	}
	return hasLower && 4*inWords >= 3*len(v)
}

// lastNameWord returns the last word of an identifier, lower-cased: "secretName" → "name",
// "TOKEN_TYPE" → "type", "api-key" → "key".
func lastNameWord(name string) string {
	end := len(name)
	for end > 0 && !isAlnumASCII(name[end-1]) {
		end--
	}
	start := end
	for start > 0 && isAlnumASCII(name[start-1]) {
		// camel hump: aB
		if isUpperASCII(name[start-1]) && start-1 > 0 && isLowerASCII(name[start-2]) {
			start--
			break
		}
		start--
	}
	return strings.ToLower(name[start:end])
}

// isAWSSecretName recognises aws_secret_access_key, AWS_SECRET_KEY, SecretAccessKey,
// secret_access_key and similar names.
func isAWSSecretName(name string) bool {
	var b strings.Builder
	for i := 0; i < len(name); i++ {
		if isAlnumASCII(name[i]) {
			b.WriteByte(lowerASCII(name[i]))
		}
	}
	n := b.String()
	return strings.Contains(n, "secretaccesskey") || (strings.Contains(n, "aws") && strings.Contains(n, "secret"))
}

// credentialName reports whether a JSON key names a credential, using the same keyword
// and suffix rules as an assignment in text. aws is true for AWS secret key names.
func credentialName(key string) (aws, ok bool) {
	for i := 0; i < len(key); i++ {
		if !wordBoundaryBefore(key, i) && !(isUpperASCII(key[i]) && isLowerASCII(key[i-1])) {
			continue
		}
		for _, kw := range secretNameKeywords {
			if !hasLiteral(key[i:], kw, true) {
				continue
			}
			end := i + len(kw)
			if end < len(key) && isLetterASCII(key[end]) && isLowerASCII(key[end]) == isLowerASCII(key[end-1]) {
				continue
			}
			if refNameWords[lastNameWord(key)] {
				return false, false
			}
			return isAWSSecretName(key), true
		}
	}
	return false, false
}
