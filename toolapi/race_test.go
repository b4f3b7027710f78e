//go:build race

package toolapi

// raceEnabled: allocation counts are not asserted under the race detector.
const raceEnabled = true
