//go:build !race

package hnsw

// raceEnabled: the race detector slows the tests down several times; the
// tests that measure recall on larger sets skip under it.
const raceEnabled = false
