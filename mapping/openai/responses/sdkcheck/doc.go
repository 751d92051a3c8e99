// Package sdkcheck tests mapping/openai/responses against the official openai-go SDK over
// real HTTP on loopback, and end to end through the real proxy. It lives apart from the
// package so that the package's fuzz binary does not build (and instrument) the SDK.
//
// The package has no non-test code; this file only documents it.
package sdkcheck
