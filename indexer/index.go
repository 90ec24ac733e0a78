package indexer

import (
	"context"
	"io"
	"sync"

	"github.com/vecside/vecside/flat"
)

// Index is what every index kind provides to an Entry. Implementations
// need not be safe for concurrent use: the Entry serialises writers
// against readers. The kinds themselves live in kinds.go.
type Index interface {
	Len() int
	ZeroVectors() int
	Has(key string) bool
	Put(key string, vec []float32)
	Delete(key string) bool
	Rename(from, to string) bool
	// Vector returns key's float32 vector; kinds that keep only codes
	// (flat store=ext4|ext8) have none and report false.
	Vector(key string) ([]float32, bool)
	// Each calls fn for every key; vec is nil for kinds that keep only
	// codes.
	Each(fn func(key string, vec []float32))
	Clear()
	// Search returns up to n candidates nearest to q: for the quantized
	// kinds, the smallest set that holds the k nearest by their error
	// bounds, where n = k × opts.Oversample. It gives up with ctx's error
	// once ctx ends.
	Search(ctx context.Context, q []float32, n int, opts SearchOptions) ([]Hit, error)
	// Snapshot captures the index as it is now, for a checkpoint written
	// without the lock (see flat.Index.Snapshot).
	Snapshot() func(io.Writer) error
	// Stats reports size and shape, for vecside_status() and metrics.
	Stats() Stats
}

// Finisher is implemented by kinds that build their structure once the
// initial copy is in, such as IVF training its lists on the copied rows.
// The entry calls Finish without holding its lock, so that changes keep
// being applied during a long build; lock is the entry's write lock, which
// Finish takes whenever it reads or changes the index, and it catches up
// on the changes made while it worked. An index made or loaded after the
// copy is finished at once.
type Finisher interface {
	Finish(lock sync.Locker)
}

// Hit is one candidate: a key and its distance under the index's metric.
type Hit = flat.Hit

// Stats describe an index kind's size and shape (see flat.Stats).
type Stats = flat.Stats
