package indexer

import "github.com/vecside/vecside/indexer/kind"

// Index is what every index kind provides to an Entry (see kind.Index;
// the kinds register themselves, see package indexer/kind).
type Index = kind.Index

// Row is a row prepared by an Index for its Insert.
type Row = kind.Row

// Hit is one candidate: a key and its distance under the index's metric.
type Hit = kind.Hit

// Stats describe an index kind's size and shape (see kind.Stats).
type Stats = kind.Stats

// dropped tells x (nil: nothing), which nothing will change any more, to
// stop its background work; searches under way on it go on.
func dropped(x Index) {
	if c, ok := x.(kind.Closer); ok {
		c.Close()
	}
}
