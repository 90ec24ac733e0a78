package indexer

import (
	"context"
	"io"

	"github.com/vecside/vecside/internal/store"
)

// streamFollower is implemented by kinds whose inserts may trade some
// quality for speed for the stream's rows, where lag counts (hnsw); the
// entry tells them when the stream's lag starts to count on them: when
// they become ready, or when a rebuild's copy into them begins beside
// the serving index.
type streamFollower interface{ FollowStream() }

// admitter is implemented by kinds whose Insert may do a backlog's work
// (hnsw links waiting rows when too many wait): Admit waits, before the
// apply lock is taken, until the Insert of a rebuild's prepared row will
// not have that work to do, so that the copy's rows never hold the
// serving index's stream back, and returns the row marked as the copy's. A first copy
// does not admit its rows: nothing serves or waits for it yet, so its
// reader links the backlog beside the linkers.
type admitter interface{ Admit(Row) Row }

// Index is what every index kind provides to an Entry (the kinds live in
// kinds.go). Each kind owns its concurrency: Search, Snapshot, Len, Stats
// and Each run beside the writers without waiting for them, and the
// writers (Insert, Delete, Rename, Clear) serialise among themselves
// inside the kind. A search sees every change that returned before it
// started, and returns no key deleted before it started.
type Index interface {
	Len() int
	ZeroVectors() int
	Has(key string) bool
	// Prepare does the work of storing vec that needs no lock (finding its
	// list, encoding it), for Insert; rows prepared by one index go into
	// that index only.
	Prepare(vec []float32) Row
	// Insert stores a prepared row under key, replacing any row of key.
	Insert(key string, row Row)
	Delete(key string) bool
	Rename(from, to string) bool
	// Vector returns a copy of key's float32 vector; kinds that keep only
	// codes have none and report false.
	Vector(key string) ([]float32, bool)
	// Each calls fn for every key held.
	Each(fn func(key string))
	Clear()
	// Search returns up to n candidates nearest to q: for the quantized
	// kinds, the smallest set that holds the k nearest by their error
	// bounds, where n = k × opts.Oversample. It gives up with ctx's error
	// once ctx ends, within about a millisecond of work.
	Search(ctx context.Context, q []float32, n int, opts SearchOptions) ([]Hit, error)
	// Snapshot captures the index as it is now, pausing writers only for
	// as long as copying its set of live rows takes, and returns the
	// function that writes it; release must be called once done.
	Snapshot() (write func(io.Writer) error, release func())
	// Stats reports size and shape, for vecside_status() and metrics.
	Stats() Stats
	// NeedsRebuild reports whether the structure has drifted from the
	// data (lists trained for far fewer rows, a mean taken over too few),
	// so that the index should be built again from a copy of the table.
	// It is asked only once the index holds its table: after the copy
	// that fills it, or its load.
	NeedsRebuild() bool
	// Keys is the current rows' keys, under which the entry records each
	// row's xid (see xid.go).
	Keys() *store.Keys
}

// Row is a row prepared by an Index for its Insert.
type Row any

// Hit is one candidate: a key and its distance under the index's metric.
type Hit = store.Hit

// Stats describe an index kind's size and shape (see store.Stats).
type Stats = store.Stats

// closer is what a kind with background work of its own (hnsw's linking
// and repair) provides to be told it was dropped.
type closer interface{ Close() }

// dropped tells x (nil: nothing), which nothing will change any more, to
// stop its background work; searches under way on it go on.
func dropped(x Index) {
	if c, ok := x.(closer); ok {
		c.Close()
	}
}
