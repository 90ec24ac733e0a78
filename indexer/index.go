package indexer

import (
	"context"
	"io"

	"github.com/vecside/vecside/flat"
)

// Index is what every index kind provides to an Entry. Implementations
// need not be safe for concurrent use: the Entry serialises writers
// against readers.
type Index interface {
	Len() int
	ZeroVectors() int
	Put(key string, vec []float32)
	Delete(key string) bool
	Rename(from, to string) bool
	Vector(key string) ([]float32, bool)
	Each(fn func(key string, vec []float32))
	Clear()
	// Search returns up to n nearest entries; it gives up with ctx's error
	// once ctx ends.
	Search(ctx context.Context, q []float32, n int, opts SearchOptions) ([]Hit, error)
	// Snapshot captures the index as it is now, for a checkpoint written
	// without the lock (see flat.Index.Snapshot).
	Snapshot() func(io.Writer) error
}

// Finisher is implemented by kinds that build their structure once the
// initial copy is in, such as IVF training its lists on the copied rows.
type Finisher interface {
	Finish()
}

// Hit is one candidate: a key and its distance under the index's metric.
type Hit = flat.Hit

// newIndex builds an empty index of spec's kind.
func newIndex(spec Spec, dims int) Index {
	return flatIndex{flat.New(spec.Metric, dims)}
}

// loadIndex reads a checkpoint body of spec's kind.
func loadIndex(spec Spec, dims int, r io.Reader) (Index, error) {
	x, err := flat.Load(r, spec.Metric, dims)
	if err != nil {
		return nil, err
	}
	return flatIndex{x}, nil
}

type flatIndex struct{ *flat.Index }

func (f flatIndex) Search(ctx context.Context, q []float32, n int, _ SearchOptions) ([]Hit, error) {
	return f.Index.Search(ctx, q, n)
}
