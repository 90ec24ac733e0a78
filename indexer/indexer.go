package indexer

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/vecside/vecside/internal/pgvalue"
)

// Indexer is the set of live indexes of one sidecar, by name.
type Indexer struct {
	mu      sync.RWMutex
	entries map[string]*Entry
	order   []*Entry
	health  healthBox
	admit   *admission
}

// New returns an empty set that admits searches by DefaultLimits.
func New() *Indexer { return NewWithLimits(Limits{}) }

// NewWithLimits returns an empty set that admits searches by limits.
func NewWithLimits(limits Limits) *Indexer {
	return &Indexer{entries: map[string]*Entry{}, admit: newAdmission(limits)}
}

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

// Remove takes the index name out of the set, and returns it: searches
// no longer find it. It is not an error to remove an index that is not
// there (nil).
func (ix *Indexer) Remove(name string) *Entry {
	ix.mu.Lock()
	defer ix.mu.Unlock()
	e := ix.entries[name]
	if e != nil {
		delete(ix.entries, name)
		ix.order = slices.DeleteFunc(ix.order, func(x *Entry) bool { return x == e })
	}
	return e
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

// Status reports every index, in the order they were added, with the
// state of the slot they share and how far each is behind the source's
// WAL.
func (ix *Indexer) Status() []Status {
	entries := ix.Entries()
	health, src := ix.SourceHealth(), ix.Source()
	out := make([]Status, len(entries))
	now := time.Now()
	for i, e := range entries {
		out[i] = e.Status()
		out[i].SlotState = health.SlotState
		out[i].SystemID, out[i].Timeline, out[i].Database = src.SystemID, src.Timeline, src.Database
		if health.WAL > out[i].Applied {
			out[i].LagBytes = int64(health.WAL - out[i].Applied)
		}
		out[i].LagSeconds = ix.health.lagSeconds(out[i].Applied, now)
	}
	return out
}

// KeyType is the key type of the named index, 0 while it is unknown.
func (ix *Indexer) KeyType(name string) (pgvalue.KeyType, error) {
	e, err := ix.Get(name)
	if err != nil {
		return 0, err
	}
	return e.KeyType(), nil
}

// Result is the answer to a search: candidates nearest first, and the type
// their keys have.
type Result struct {
	KeyType pgvalue.KeyType
	Hits    []Hit
}

// Search finds the k × oversample candidates nearest to q in the named
// index, within opts.Timeout.
func (ix *Indexer) Search(ctx context.Context, name string, q []float32, k int, opts SearchOptions) (Result, error) {
	e, err := ix.Get(name)
	if err != nil {
		return Result{}, err
	}
	if opts.Oversample == 0 {
		opts.Oversample = DefaultOversample(e.c.spec)
	}
	n, err := opts.Candidates(k)
	if err != nil {
		return Result{}, err
	}
	if opts.MinLSN > 0 {
		if err := waitForLSN(ctx, e, opts.MinLSN); err != nil {
			return Result{}, err
		}
	}
	if err := ctx.Err(); err != nil {
		return Result{}, fmt.Errorf("%w: %v", ErrTimeout, err)
	}
	done, err := ix.admit.enter(ctx)
	if err != nil {
		return Result{}, err
	}
	defer done()
	before := ix.Source()
	hits, err := e.Search(ctx, q, n, opts)
	if err != nil {
		return Result{}, err
	}
	if want := opts.XIDSource; want != nil && !(sameSystem(before, *want) && sameSystem(ix.Source(), *want)) {
		// The replication layer forgets every xid before it reports a
		// new source: a search that saw the expected source before and
		// after holds none from another.
		for i := range hits {
			hits[i].XID = 0
		}
	}
	return Result{KeyType: e.KeyType(), Hits: hits}, nil
}

// LagError: the index had not applied the requested LSN when the wait for
// it ended (55000; the applied LSN goes in the error's DETAIL).
type LagError struct {
	Index           string
	Applied, Wanted LSN
}

func (e *LagError) Error() string {
	return fmt.Sprintf("index %s has not yet applied %s (min_lsn)", e.Index, e.Wanted)
}

// Detail says how far the index has come.
func (e *LagError) Detail() string { return "applied_lsn=" + e.Applied.String() }

func (e *LagError) Unwrap() error { return ErrNotReady }

// waitForLSN waits until e has applied lsn. The wait ends a little before
// ctx's deadline, so that the caller learns how far the index got rather
// than only that time ran out.
func waitForLSN(ctx context.Context, e *Entry, lsn LSN) error {
	wctx := ctx
	if deadline, ok := ctx.Deadline(); ok {
		margin := min(10*time.Millisecond, time.Until(deadline)/10)
		var cancel context.CancelFunc
		wctx, cancel = context.WithDeadline(ctx, deadline.Add(-margin))
		defer cancel()
	}
	if err := e.WaitApplied(wctx, lsn); err != nil {
		return &LagError{Index: e.c.spec.Name, Applied: e.Applied(), Wanted: lsn}
	}
	return nil
}
