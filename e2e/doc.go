// Package e2e holds hookproxy's end-to-end tests: the official OpenAI and Anthropic Go SDKs,
// changed only in their base URL, talk to the real proxy (proxy.New on a loopback listener),
// which calls a loopback fake upstream that records every byte it receives, and real AHP
// backends over HTTP and over stdio (a child process). Nothing is mocked between the SDK
// and the upstream, so each test asserts what a user of the proxy would notice.
//
// The package has no non-test code; this file only documents it.
package e2e
