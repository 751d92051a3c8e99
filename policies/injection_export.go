package policies

// DetectInjection runs the injection policy's detectors, every kind on and nothing
// allowed, over text and returns what they find (Finding.Kind is one of InjectionKinds).
// It serves callers that judge text no event carries, such as tool-definition pinning,
// with the same detector the injection policy applies at the boundaries.
func DetectInjection(text string) []Finding {
	return defaultInjectionScanner.scanText(nil, text)
}

var defaultInjectionScanner = newInjectionScanner(nil, nil, nil)
