package indexer

import (
	"context"
	"fmt"
	"sync"
)

// Indexer is the set of live indexes of one sidecar, by name.
type Indexer struct {
	mu      sync.RWMutex
	entries map[string]*Entry
	order   []*Entry
}

// New returns an empty set.
func New() *Indexer { return &Indexer{entries: map[string]*Entry{}} }

// Add registers a new index. Names are unique.
func (ix *Indexer) Add(spec Spec) (*Entry, error) {
	if err := ValidName(spec.Name); err != nil {
		return nil, err
	}
	ix.mu.Lock()
	defer ix.mu.Unlock()
	if _, dup := ix.entries[spec.Name]; dup {
		return nil, fmt.Errorf("index %s is defined twice", spec.Name)
	}
	e := newEntry(spec)
	ix.entries[spec.Name] = e
	ix.order = append(ix.order, e)
	return e, nil
}

// Get finds an index by name.
func (ix *Indexer) Get(name string) (*Entry, error) {
	ix.mu.RLock()
	defer ix.mu.RUnlock()
	e, ok := ix.entries[name]
	if !ok {
		return nil, fmt.Errorf("%w: %q", ErrUnknownIndex, name)
	}
	return e, nil
}

// Entries lists the indexes in the order they were added.
func (ix *Indexer) Entries() []*Entry {
	ix.mu.RLock()
	defer ix.mu.RUnlock()
	return append([]*Entry(nil), ix.order...)
}

// Status reports every index, in the order they were added.
func (ix *Indexer) Status() []Status {
	entries := ix.Entries()
	out := make([]Status, len(entries))
	for i, e := range entries {
		out[i] = e.Status()
	}
	return out
}

// Result is the answer to a search: candidates nearest first, and the type
// their keys have.
type Result struct {
	KeyType KeyType
	Hits    []Hit
}

// Search finds the k × oversample candidates nearest to q in the named
// index, within opts.Timeout.
func (ix *Indexer) Search(ctx context.Context, name string, q []float32, k int, opts SearchOptions) (Result, error) {
	e, err := ix.Get(name)
	if err != nil {
		return Result{}, err
	}
	n, err := opts.Candidates(k)
	if err != nil {
		return Result{}, err
	}
	if err := ctx.Err(); err != nil {
		return Result{}, fmt.Errorf("%w: %v", ErrTimeout, err)
	}
	hits, err := e.Search(q, n, opts)
	if err != nil {
		return Result{}, err
	}
	return Result{KeyType: e.KeyType(), Hits: hits}, nil
}
