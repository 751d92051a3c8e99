package testsupport

import "time"

// raceSlowdown is how many times longer a CPU-bound step may take under the race
// detector: its instrumentation slows code 2–20×, more on a busy machine.
const raceSlowdown = 10

// Bound returns the wall-clock bound d a test puts on a CPU-bound step, stretched when
// the test binary is built with -race (RaceEnabled). A bound that exists to catch a
// runaway (exponential work, a missing cut-off) still catches it at ten times its size.
func Bound(d time.Duration) time.Duration {
	if RaceEnabled {
		return d * raceSlowdown
	}
	return d
}
