//go:build !race

package toolapi

const raceEnabled = false
