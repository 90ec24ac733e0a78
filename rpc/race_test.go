//go:build race

package rpc

// raceEnabled: the race detector slows the tests down several times.
const raceEnabled = true
