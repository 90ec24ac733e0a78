package indexer

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/vecside/vecside/internal/pgvalue"
	"github.com/vecside/vecside/kernels"
)

// State is an index's place in its lifecycle.
type State string

const (
	// StateBuilding: the initial copy is running; searches get ErrNotReady.
	StateBuilding State = "building"
	// StateReady: caught up with the snapshot and following the stream.
	StateReady State = "ready"
	// StateError: the index cannot follow its table any more (its column
	// changed type or dimension, or was dropped); Status says why.
	StateError State = "error"
)

// Entry is one live index: its spec, the index kind holding the vectors,
// the rows left out for bad vectors, and how far the stream has been
// applied. Changes and searches may come from different goroutines: the
// index itself is guarded by mu, the applied LSN by its own lock so that
// waiting for it never blocks a search.
type Entry struct {
	spec Spec

	mu      sync.RWMutex
	index   Index // nil until the dimension is known
	keyType pgvalue.KeyType
	vecType pgvalue.VectorType
	dims    int
	skipped map[string]struct{} // keys in the table whose vector is not indexable
	state   State
	failure string
	// version counts the changes applied; a checkpoint records it, so an
	// unchanged version later proves that only the LSN has moved since.
	version uint64
	// covered is what durable state reflects: the LSN of the last
	// checkpoint, or a later idle position recorded in the state file.
	covered        LSN
	coveredVersion uint64
	checkpoints    int64
	// A sync copies the table under a snapshot taken at syncFrom while the
	// stream goes on: changes at or after syncFrom are applied and their
	// keys recorded in touched, so that the copy's older rows never
	// overwrite them.
	syncFrom  LSN
	touched   map[string]struct{} // nil outside a sync
	truncated bool                // a TRUNCATE during the sync voids the copy
	copied    int64               // rows read by the last sync's copy
	lastPause time.Duration       // changes held up by the last checkpoint
	lastWrite time.Duration       // the last checkpoint's total time

	lsnMu    sync.Mutex
	applied  LSN
	advanced chan struct{} // closed and replaced whenever applied moves
}

func newEntry(spec Spec) *Entry {
	return &Entry{
		spec:     spec,
		dims:     spec.Dims,
		skipped:  map[string]struct{}{},
		state:    StateBuilding,
		advanced: make(chan struct{}),
	}
}

// Spec is the definition the entry was created from.
func (e *Entry) Spec() Spec { return e.spec }

// Configure records the types of the table's columns, learned from the
// catalog or a Relation message. typmodDims is vector(n)'s n, 0 if the
// column has none. A dimension that contradicts the one already fixed is
// an error: the caller puts the entry into StateError.
func (e *Entry) Configure(kt pgvalue.KeyType, vt pgvalue.VectorType, typmodDims int) error {
	e.mu.Lock()
	defer e.mu.Unlock()
	if typmodDims > 0 && e.dims > 0 && typmodDims != e.dims {
		return fmt.Errorf("index %s: column %s is vector(%d), the index has %d dimensions", e.spec.Name, e.spec.Column, typmodDims, e.dims)
	}
	e.keyType, e.vecType = kt, vt
	if e.dims == 0 && typmodDims > 0 {
		e.dims = typmodDims
	}
	return nil
}

// KeyType is the key column's type, set by Configure.
func (e *Entry) KeyType() pgvalue.KeyType {
	e.mu.RLock()
	defer e.mu.RUnlock()
	return e.keyType
}

// VectorType is the vector column's type, set by Configure.
func (e *Entry) VectorType() pgvalue.VectorType {
	e.mu.RLock()
	defer e.mu.RUnlock()
	return e.vecType
}

// Upsert stores key's vector, or, if vec is not indexable (nil for NULL or
// undecodable, wrong dimension, NaN or infinite), removes key from the
// index and counts it as skipped until a later change fixes it.
func (e *Entry) Upsert(key string, vec []float32) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.changed(key)
	e.upsertLocked(key, vec)
}

func (e *Entry) upsertLocked(key string, vec []float32) {
	if len(vec) == 0 || (e.dims > 0 && len(vec) != e.dims) || pgvalue.CheckFinite(vec) != nil {
		e.skipLocked(key)
		return
	}
	if e.index == nil {
		e.dims = len(vec)
		e.index = newIndex(e.spec, e.dims)
		if e.state != StateBuilding {
			finishNew(e.index)
		}
	}
	e.index.Put(key, vec)
	delete(e.skipped, key)
}

// Skip removes key from the index and counts it as skipped.
func (e *Entry) Skip(key string) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.changed(key)
	e.skipLocked(key)
}

func (e *Entry) skipLocked(key string) {
	if e.index != nil {
		e.index.Delete(key)
	}
	e.skipped[key] = struct{}{}
}

// Delete forgets key.
func (e *Entry) Delete(key string) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.changed(key)
	if e.index != nil {
		e.index.Delete(key)
	}
	delete(e.skipped, key)
}

// Move gives key from's entry (indexed or skipped) to key to, for a key
// change whose vector did not change. It reports whether from was known;
// if not, the caller must read the row to learn its vector.
func (e *Entry) Move(from, to string) bool {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.changed(from)
	e.changed(to)
	if e.index != nil && e.index.Rename(from, to) {
		delete(e.skipped, to)
		return true
	}
	if _, ok := e.skipped[from]; ok {
		delete(e.skipped, from)
		if e.index != nil {
			e.index.Delete(to)
		}
		e.skipped[to] = struct{}{}
		return true
	}
	return false
}

// Known reports whether key is indexed or counted as skipped.
func (e *Entry) Known(key string) bool {
	e.mu.RLock()
	defer e.mu.RUnlock()
	if _, ok := e.skipped[key]; ok {
		return true
	}
	if e.index == nil {
		return false
	}
	return e.index.Has(key)
}

// Vector returns a copy of key's stored vector.
func (e *Entry) Vector(key string) ([]float32, bool) {
	e.mu.RLock()
	defer e.mu.RUnlock()
	if e.index == nil {
		return nil, false
	}
	v, ok := e.index.Vector(key)
	if !ok {
		return nil, false
	}
	return append([]float32(nil), v...), true
}

// Truncate forgets every key.
func (e *Entry) Truncate() {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.version++
	if e.touched != nil {
		e.truncated = true
	}
	if e.index != nil {
		e.index.Clear()
	}
	clear(e.skipped)
}

// Keys calls fn for every indexed key with its vector (aliased: copy to
// keep), under the read lock.
func (e *Entry) Keys(fn func(key string, vec []float32)) {
	e.mu.RLock()
	defer e.mu.RUnlock()
	if e.index != nil {
		e.index.Each(fn)
	}
}

// changed counts a change to key, and during a sync records it as newer
// than the copy.
func (e *Entry) changed(key string) {
	e.version++
	if e.touched != nil {
		e.touched[key] = struct{}{}
	}
}

// BeginSync empties the entry for a copy of its table under a snapshot
// taken at lsn, and puts it into StateBuilding: searches get ErrNotReady
// until EndSync. Meanwhile the stream may go on: transactions that
// committed before lsn are in the copy and skipped (see SkipBelow), later
// ones are applied and win over the copy's rows (see CopyUpsert).
func (e *Entry) BeginSync(lsn LSN) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.version++
	if e.index != nil {
		e.index.Clear()
	}
	clear(e.skipped)
	e.state, e.failure = StateBuilding, ""
	e.covered, e.coveredVersion = 0, 0
	e.syncFrom, e.touched, e.truncated, e.copied = lsn, map[string]struct{}{}, false, 0
}

// CopyUpsert stores a row read by the copy of a sync, unless the stream
// has already changed that key (or truncated the table) since the
// snapshot.
func (e *Entry) CopyUpsert(key string, vec []float32) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.copied++
	if _, newer := e.touched[key]; newer || e.truncated {
		return
	}
	e.version++
	e.upsertLocked(key, vec)
}

// EndSync ends a sync: the entry now reflects everything up to its sync
// point, is built (see Finisher) and serves searches.
func (e *Entry) EndSync() { e.SetApplied(e.finishCopy()) }

// finishCopy builds the kinds that build their structure from the whole
// copy (see Finisher), without holding the lock through the build: the
// stream keeps applying changes meanwhile, and the kind catches up on
// them. Then the entry serves searches. An index made after this point
// (the table was empty) is finished as it is made. It returns the sync
// point.
func (e *Entry) finishCopy() LSN {
	e.mu.Lock()
	e.touched, e.truncated = nil, false
	f, build := e.index.(Finisher)
	if build {
		e.mu.Unlock()
		f.Finish(&e.mu)
		e.mu.Lock()
	}
	e.state, e.failure = StateReady, ""
	from := e.syncFrom
	e.mu.Unlock()
	return from
}

// finishNew finishes an index made or loaded after the copy, which no one
// else can reach yet or whose entry's lock the caller holds.
func finishNew(x Index) {
	if f, ok := x.(Finisher); ok {
		f.Finish(heldLock{})
	}
}

// heldLock stands for a lock the caller holds already.
type heldLock struct{}

func (heldLock) Lock()   {}
func (heldLock) Unlock() {}

// SkipBelow is the commit position below which the stream's transactions
// are already reflected in the entry: its applied LSN, or during a sync
// the snapshot's position.
func (e *Entry) SkipBelow() LSN {
	applied := e.Applied()
	e.mu.RLock()
	defer e.mu.RUnlock()
	return max(applied, e.syncFrom)
}

// SetReady marks the initial copy as done. Kinds that build their
// structure from the whole copy (see Finisher) build it now, before the
// first search.
func (e *Entry) SetReady() { e.finishCopy() }

// Fail puts the entry into StateError with a message saying what happened
// and how to recover.
func (e *Entry) Fail(err error) { e.setState(StateError, err.Error()) }

func (e *Entry) setState(s State, failure string) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.state, e.failure = s, failure
}

// State returns the lifecycle state and, in StateError, the reason.
func (e *Entry) State() (State, string) {
	e.mu.RLock()
	defer e.mu.RUnlock()
	return e.state, e.failure
}

// Applied is the LSN up to which the stream has been applied.
func (e *Entry) Applied() LSN {
	e.lsnMu.Lock()
	defer e.lsnMu.Unlock()
	return e.applied
}

// SetApplied moves the applied LSN forward (never back) and wakes waiters.
// The replication layer calls it at each commit, and with a keepalive's
// WAL end when no transaction is open.
func (e *Entry) SetApplied(lsn LSN) {
	e.lsnMu.Lock()
	defer e.lsnMu.Unlock()
	if lsn <= e.applied {
		return
	}
	e.applied = lsn
	close(e.advanced)
	e.advanced = make(chan struct{})
}

// WaitApplied blocks until the applied LSN reaches lsn or ctx ends.
func (e *Entry) WaitApplied(ctx context.Context, lsn LSN) error {
	for {
		e.lsnMu.Lock()
		applied, ch := e.applied, e.advanced
		e.lsnMu.Unlock()
		if applied >= lsn {
			return nil
		}
		select {
		case <-ch:
		case <-ctx.Done():
			return fmt.Errorf("%w: index %s has applied up to %s, waiting for %s", ErrTimeout, e.spec.Name, applied, lsn)
		}
	}
}

// Search returns up to n candidates nearest to q, with their distances.
func (e *Entry) Search(ctx context.Context, q []float32, n int, opts SearchOptions) ([]Hit, error) {
	e.mu.RLock()
	defer e.mu.RUnlock()
	switch e.state {
	case StateBuilding:
		return nil, fmt.Errorf("%w: index %s is still copying its table", ErrNotReady, e.spec.Name)
	case StateError:
		return nil, fmt.Errorf("%w: index %s is in error: %s", ErrNotReady, e.spec.Name, e.failure)
	}
	if err := pgvalue.CheckFinite(q); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrInvalidVector, err)
	}
	if e.dims > 0 && len(q) != e.dims {
		return nil, fmt.Errorf("%w: query has %d dimensions, index %s has %d", ErrInvalidVector, len(q), e.spec.Name, e.dims)
	}
	if e.index == nil {
		return nil, nil
	}
	return e.index.Search(ctx, q, n, opts)
}

// Status is a snapshot of an index's state, for vecside_status() and
// metrics.
type Status struct {
	Name        string
	Table       string // schema.table
	Column      string
	KeyColumn   string
	Kind        string
	Metric      kernels.Metric
	Dims        int
	Rows        int
	Skipped     int
	ZeroVectors int // stored, but without a cosine distance
	State       State
	Error       string
	Applied     LSN
	Covered     LSN    // what durable state reflects
	CopiedRows  int64  // rows read by the last copy of the table for this index
	IndexStats  Stats  // the kind's size and shape
	SlotState   string // the shared slot's wal_status, see SourceHealth
	LagBytes    int64  // source WAL position − Applied
	KeyType     pgvalue.KeyType
	// Checkpoints written, and the last one's pause of changes and total
	// time.
	Checkpoints     int64
	CheckpointPause time.Duration
	CheckpointTime  time.Duration
}

// Status reports the entry's current state.
func (e *Entry) Status() Status {
	applied := e.Applied()
	e.mu.RLock()
	defer e.mu.RUnlock()
	s := Status{
		Name:      e.spec.Name,
		Table:     e.spec.Schema + "." + e.spec.Table,
		Column:    e.spec.Column,
		KeyColumn: e.spec.Key,
		Kind:      e.spec.Kind,
		Metric:    e.spec.Metric,
		Dims:      e.dims,
		Skipped:   len(e.skipped),
		State:     e.state,
		Error:     e.failure,
		Applied:   applied,
		Covered:   e.covered,
		KeyType:   e.keyType,

		CopiedRows:      e.copied,
		Checkpoints:     e.checkpoints,
		CheckpointPause: e.lastPause,
		CheckpointTime:  e.lastWrite,
	}
	if e.index != nil {
		s.Rows = e.index.Len()
		s.ZeroVectors = e.index.ZeroVectors()
		s.IndexStats = e.index.Stats()
	}
	return s
}
