//go:build race

package testsupport

// RaceEnabled reports whether the test binary was built with -race.
const RaceEnabled = true
