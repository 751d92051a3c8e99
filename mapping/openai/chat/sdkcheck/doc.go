// Package sdkcheck tests mapping/openai/chat against the official openai-go SDK over real HTTP,
// and its canonical output against the AHP content schema. It lives apart from the package
// so that the package's fuzz binary does not have to build (and instrument) the SDK.
//
// The package has no non-test code; this file only documents it.
package sdkcheck
