package store

import (
	"fmt"
	"slices"
)

// Stats describe an index's size and shape, for vecside_status() and
// metrics. Every byte an index holds resident is counted in one of the
// three byte fields.
type Stats struct {
	Rows int // keys held
	// CodeBytes is codes and their factors, extended codes, centroids and
	// list structure (or the vectors, for the exact float index).
	CodeBytes int64
	// FloatBytes is float32 vectors kept beside the codes (store=float).
	FloatBytes int64
	// KeyBytes is keys, the key index, row locations and live sets.
	KeyBytes int64
	// GraphBytes is a graph index's neighbour lists, node headers and the
	// rows waiting to be linked.
	GraphBytes int64
	Lists      []int // live rows per list
	// Graph indexes only: rows deleted but still in the graph, waiting
	// for their neighbours' lists to be repaired; and live rows that a
	// search from the entry point could not reach when last counted
	// (after the build and after each repair), -1 before the first count.
	Tombstones, Unreachable int
	// InsertLinked counts the rows a graph index's writers linked
	// themselves, holding the apply lock, because the linkers had fallen
	// the index's bound of waiting rows behind: the stream's waits for the
	// graph.
	InsertLinked int64
}

// Bytes is everything the index holds.
func (s Stats) Bytes() int64 { return s.CodeBytes + s.FloatBytes + s.KeyBytes + s.GraphBytes }

// BytesPerRow is Bytes per row held.
func (s Stats) BytesPerRow() float64 {
	if s.Rows == 0 {
		return 0
	}
	return float64(s.Bytes()) / float64(s.Rows)
}

// ListHistogram summarises list sizes as min/p50/p90/p99/max.
func (s Stats) ListHistogram() string {
	if len(s.Lists) == 0 {
		return ""
	}
	l := slices.Clone(s.Lists)
	slices.Sort(l)
	at := func(p float64) int { return l[min(len(l)-1, int(p*float64(len(l))))] }
	return fmt.Sprintf("min=%d p50=%d p90=%d p99=%d max=%d", l[0], at(0.5), at(0.9), at(0.99), l[len(l)-1])
}
