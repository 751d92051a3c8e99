package policies

// Prompt-injection detectors: instructions addressed to the model, chat-template role
// markers, and invisible or direction-changing Unicode characters. The phrase expressions
// require the object of the instruction ("ignore previous instructions", not "ignore the
// warnings above"), because tool outputs are full of everyday uses of these verbs.

import (
	"regexp"
	"unicode/utf8"
)

// Injection kinds, as used in placeholders, deny codes (hookproxy.injection.<kind>) and the
// kinds config list.
const (
	InjectionPhrase     = "prompt_injection" // instructions addressed to the model
	InjectionRoleMarker = "role_marker"      // chat-template tokens such as <|im_start|>
	InjectionUnicodeTag = "unicode_tag"      // U+E0000–U+E007F (invisible ASCII copies)
	InjectionZeroWidth  = "zero_width"       // U+200B–U+200D, U+2060, U+FEFF
	InjectionBidi       = "bidi_control"     // U+202A–U+202E, U+2066–U+2069
)

// InjectionKinds lists every kind the injection policy detects.
var InjectionKinds = []string{InjectionPhrase, InjectionRoleMarker, InjectionUnicodeTag, InjectionZeroWidth, InjectionBidi}

const injectionWindow = 240

var (
	// ignore/disregard/forget/override/bypass + [determiners] + an adjective naming the
	// earlier context + a noun naming instructions; or "... what you were told";
	// or "disregard the above" ending the clause.
	reOverride = regexp.MustCompile(`(?i)^(?:ignore|disregard|forget|override|bypass)\s+(?:` +
		`(?:(?:all|any|each|every|the|your|my|these|those|of|everything|that)\s+)*` +
		`(?:(?:previous|prior|above|earlier|preceding|original|initial|former|foregoing|system|developer|existing|safety|old)\s+)+` +
		`(?:instructions?|prompts?|directions?|directives?|rules|guidelines|guardrails|messages?|context|commands?|constraints|policies|programming|orders)\b` +
		`|(?:(?:all|everything)\s+)?(?:what\s+)?(?:you\s+(?:were|have\s+been)\s+told|your\s+(?:instructions|rules|programming|guidelines|system\s+prompt))\b` +
		`|(?:(?:all|everything|the|of)\s+)*(?:above|before)(?:\s*(?:[.,;:!]|$)|\s+(?:and|then|instead|now)\b))`)
	reYouAreNow = regexp.MustCompile(`(?i)^you\s+are\s+now\s+(?:in\s+)?(?:(?:a|an|the|my)\s+)?(?:[a-z-]+\s+)?` +
		`(?:DAN|jailbroken|unrestricted|unfiltered|uncensored|evil|rogue|free\s+(?:from|of)|no\s+longer\s+(?:bound|restricted|an?\s+(?:ai|assistant))|` +
		`(?:developer|god|admin|root|debug|jailbreak|dan)\s+mode|ai|assistant|model|chatbot|language\s+model|agent|persona|character)\b`)
	reNewInstructions = regexp.MustCompile(`(?i)^(?:system\s+prompt|(?:new|updated|revised|real|actual|secret|hidden)\s+(?:system\s+)?instructions?|` +
		`important\s+instructions?\s+for\s+(?:the\s+)?(?:ai\s+)?(?:ai|assistant|model|agent|llm))\s*:`)
	reDoNotTell = regexp.MustCompile(`(?i)^(?:do\s+not|don'?t|never)\s+(?:tell|inform|alert|notify|mention\s+(?:this\s+|it\s+)?to|reveal\s+(?:this\s+|it\s+)?to|show\s+(?:this\s+|it\s+)?to)\s+the\s+user\b`)
	// Role and turn markers of chat templates (ChatML, Llama 3). <|endoftext|> is left
	// out: it separates documents, opens no role, and is all over tokenizer docs.
	reRoleToken = regexp.MustCompile(`^<\|(?:im_start|im_end|im_sep|system|user|assistant|start_header_id|end_header_id|eot_id)\|>`)
)

// injectionScanner is the configured detector of the injection policy.
type injectionScanner struct {
	anchors anchorSet
	kinds   kindSet
	allow   allowList
	extra   []*regexp.Regexp
	cache   *scanCache // results by text digest (scan_cache.go)
}

var _ detector = (*injectionScanner)(nil)

func (s *injectionScanner) results() *scanCache { return s.cache }

func newInjectionScanner(kinds kindSet, allow allowList, extra []*regexp.Regexp) *injectionScanner {
	s := &injectionScanner{kinds: kinds, allow: allow, extra: extra, cache: newScanCache(scanCacheBytes)}
	a := &s.anchors
	if kinds.enabled(InjectionPhrase) {
		for _, w := range []string{"ignore", "disregard", "forget", "override", "bypass"} {
			a.add(anchor{lit: w, fold: true, cost: regexMatchCost, match: regexMatcher(reOverride, InjectionPhrase)})
		}
		a.add(anchor{lit: "you are now", fold: true, cost: regexMatchCost, match: regexMatcher(reYouAreNow, InjectionPhrase)})
		// Common words as anchors: a cheap look for the ':' or "user" the expression needs
		// keeps everyday prose ("a new version", "never mind") off the regex engine.
		for _, w := range []string{"system prompt", "new ", "updated ", "revised ", "real ", "actual ", "secret ", "hidden ", "important "} {
			a.add(anchor{lit: w, fold: true, need: ":", cost: regexMatchCost, match: regexMatcher(reNewInstructions, InjectionPhrase)})
		}
		for _, w := range []string{"do not ", "don't ", "dont ", "never "} {
			a.add(anchor{lit: w, fold: true, need: "user", cost: regexMatchCost, match: regexMatcher(reDoNotTell, InjectionPhrase)})
		}
	}
	if kinds.enabled(InjectionRoleMarker) {
		a.add(anchor{lit: "<|", inner: true, cost: regexMatchCost, match: regexMatcher(reRoleToken, InjectionRoleMarker)})
		for _, lit := range []string{"[INST]", "[/INST]", "<<SYS>>", "<</SYS>>"} {
			a.add(anchor{lit: lit, inner: true, match: func(dst []Finding, _ string, at int) ([]Finding, int) {
				return append(dst, Finding{Start: at, End: at + len(lit), Kind: InjectionRoleMarker, priority: 1}), at + len(lit)
			}})
		}
	}
	// Lead bytes of the invisible characters: E2 (U+2000–U+2FFF), EF (U+FEFF), F3 (tags).
	for _, lead := range []string{"\xe2", "\xef", "\xf3"} {
		a.add(anchor{lit: lead, inner: true, match: s.matchHidden})
	}
	return s
}

// regexMatcher reports the expression's match at the anchor.
func regexMatcher(re *regexp.Regexp, kind string) matchFunc {
	return func(dst []Finding, text string, at int) ([]Finding, int) {
		loc := re.FindStringIndex(window(text, at, injectionWindow))
		if loc == nil {
			return dst, 0
		}
		end := at + loc[1]
		return append(dst, Finding{Start: at, End: end, Kind: kind, priority: 1}), end
	}
}

// regexMatchCost is what a regexMatcher call costs the work meter: the case-folded
// expressions cost about twice the regexWeight of their window (measured).
const regexMatchCost = 2 * regexWeight * injectionWindow

// containsFold reports whether s contains the lower-case ASCII string sub, ignoring ASCII
// case.
func containsFold(s, sub string) bool {
	for i := 0; i+len(sub) <= len(s); i++ {
		if hasLiteral(s[i:], sub, true) {
			return true
		}
	}
	return false
}

func (s *injectionScanner) scanText(dst []Finding, text string) []Finding {
	return s.scanTextMetered(nil, dst, text)
}

func (s *injectionScanner) scanTextMetered(m *meter, dst []Finding, text string) []Finding {
	if m.stopped() != nil {
		return dst
	}
	start := len(dst)
	dst = s.anchors.scan(m, dst, text)
	for _, re := range s.extra {
		// A configured pattern runs over the whole text: charged before it runs.
		if !m.charge(regexWeight * len(text)) {
			return dst
		}
		for _, loc := range re.FindAllStringIndex(text, -1) {
			if loc[1] > loc[0] {
				dst = append(dst, Finding{Start: loc[0], End: loc[1], Kind: InjectionPhrase, priority: 1})
			}
		}
	}
	return finishScan(dst, start, text, s.kinds, s.allow)
}

func (s *injectionScanner) scanField(dst []Finding, _, value string) []Finding {
	return s.scanTextMetered(nil, dst, value)
}

func (s *injectionScanner) scanFieldMetered(m *meter, dst []Finding, _, value string) []Finding {
	return s.scanTextMetered(m, dst, value)
}

// hiddenKind classifies an invisible or direction-changing character.
func hiddenKind(r rune) string {
	switch {
	case r >= 0xE0000 && r <= 0xE007F:
		return InjectionUnicodeTag
	case r >= 0x200B && r <= 0x200D, r == 0x2060, r == 0xFEFF:
		return InjectionZeroWidth
	case r >= 0x202A && r <= 0x202E, r >= 0x2066 && r <= 0x2069:
		return InjectionBidi
	}
	return ""
}

// matchHidden reports a run of invisible characters of one kind, except the legitimate
// uses: a byte-order mark at the start of a text, a zero-width joiner inside an emoji
// sequence, a joiner/non-joiner between letters of scripts that need them (Arabic,
// Persian, Indic), and the tag sequence of a subdivision flag emoji (🏴 + tags + U+E007F).
func (s *injectionScanner) matchHidden(dst []Finding, text string, at int) ([]Finding, int) {
	r, size := utf8.DecodeRuneInString(text[at:])
	kind := hiddenKind(r)
	if kind == "" {
		return dst, at + size
	}
	end := at + size
	last := r
	for end < len(text) {
		r2, sz := utf8.DecodeRuneInString(text[end:])
		if hiddenKind(r2) != kind {
			break
		}
		last = r2
		end += sz
	}
	prev, _ := utf8.DecodeLastRuneInString(text[:at])
	next, _ := utf8.DecodeRuneInString(text[end:])
	switch kind {
	case InjectionZeroWidth:
		if r == 0xFEFF && at == 0 && end == size {
			return dst, end
		}
		if end == at+size && (r == 0x200D || r == 0x200C) {
			if r == 0x200D && isEmojiRune(prev) && isEmojiRune(next) {
				return dst, end
			}
			if joiningScript(prev) && joiningScript(next) {
				return dst, end
			}
		}
	case InjectionUnicodeTag:
		if prev == 0x1F3F4 && last == 0xE007F && tagLettersOnly(text[at:end]) {
			return dst, end
		}
	}
	return append(dst, Finding{Start: at, End: end, Kind: kind, priority: 1}), end
}

func isEmojiRune(r rune) bool {
	return r >= 0x1F000 && r <= 0x1FAFF || r >= 0x2600 && r <= 0x27BF || r == 0xFE0F || r == 0x2640 || r == 0x2642 || r == 0x2695
}

// joiningScript reports letters of scripts that use ZWJ/ZWNJ in ordinary text.
func joiningScript(r rune) bool {
	return r >= 0x0600 && r <= 0x06FF || r >= 0x0750 && r <= 0x077F || r >= 0x08A0 && r <= 0x08FF ||
		r >= 0x0900 && r <= 0x0DFF || r >= 0xFB50 && r <= 0xFDFF || r >= 0xFE70 && r <= 0xFEFC
}

// tagLettersOnly reports a flag tag sequence: tag digits/lower-case letters then CANCEL TAG.
func tagLettersOnly(s string) bool {
	for len(s) > 0 {
		r, sz := utf8.DecodeRuneInString(s)
		s = s[sz:]
		if r == 0xE007F {
			return len(s) == 0
		}
		if !(r >= 0xE0030 && r <= 0xE0039 || r >= 0xE0061 && r <= 0xE007A) {
			return false
		}
	}
	return false
}
