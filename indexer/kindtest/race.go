//go:build race

package kindtest

const raceEnabled = true
