//go:build !race

package kindtest

// raceEnabled: under the race detector the suite skips. Its builds and
// searches run one after another, so the detector finds nothing in them,
// and it slows a graph's build some twentyfold (minutes for hnsw); the
// kinds' own concurrency tests, and the indexer's, run under it.
const raceEnabled = false
