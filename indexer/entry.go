package indexer

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/vecside/vecside/indexer/kind"
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
// applied. See the package doc for who takes which lock.
type Entry struct {
	spec Spec

	// serving is all a search reads: one atomic load, no lock.
	serving atomic.Pointer[serving]

	// mu guards the lifecycle and bookkeeping fields below; it is held for
	// a few field reads or writes at a time, never across a search, a
	// build or a file write.
	mu             sync.Mutex
	keyType        pgvalue.KeyType
	vecType        pgvalue.VectorType
	dims           int
	state          State
	failure        string
	covered        LSN // what durable state reflects
	coveredVersion uint64
	checkpoints    int64
	lastPause      time.Duration // changes held up by the last checkpoint
	lastWrite      time.Duration // the last checkpoint's total time
	lastCheckpoint time.Time     // when the last checkpoint was written
	// Checkpoints that failed, and the last error while it persists.
	checkpointFailures int64
	checkpointError    string
	copied             int64 // rows read by the last sync's copy
	rebuilds           int64 // syncs that replaced a serving index
	// Rebuilds that failed, and why the last one did.
	rebuildFailures int64
	rebuildError    string

	// wmu serialises the apply path: every change, and the copy's rows.
	wmu     sync.Mutex
	index   Index               // nil until the dimension is known
	skipped map[string]struct{} // keys in the table whose vector is not indexable
	sync    *syncState          // a copy of the table under way
	// syncFrom is the last sync's point: transactions that committed
	// before it are in the copy (see SkipBelow).
	syncFrom LSN
	txLSN    LSN // commit LSN of the transaction being applied
	// txXID is the id of the transaction being applied (0: unknown), and
	// txWrites the rows it wrote, which carry it once it commits (see
	// xid.go). txWrites is made anew for each transaction that writes, not
	// cleared: a cleared map keeps its buckets, and one bulk UPDATE would
	// pin memory in proportion to its rows for the life of the process.
	txXID    uint32
	txWrites map[written]struct{}
	// pending holds the xmins of rows read ahead of the stream, by key,
	// until the applied position reaches them; pendingN is its size, for
	// SetApplied to read without the lock.
	pending  map[string]pendingRead
	pendingN atomic.Int64
	// version counts the changes applied; a checkpoint records it, so an
	// unchanged version later proves that only the LSN has moved since.
	version atomic.Uint64

	lsnMu    sync.Mutex
	applied  LSN
	advanced chan struct{} // closed and replaced whenever applied moves
}

// serving is what searches see of an entry, replaced whole on every
// change of state or index.
type serving struct {
	state   State
	failure string
	index   Index
	dims    int
	keyType pgvalue.KeyType
}

func newEntry(spec Spec) *Entry {
	e := &Entry{
		spec:     spec,
		dims:     spec.Dims,
		skipped:  map[string]struct{}{},
		pending:  map[string]pendingRead{},
		state:    StateBuilding,
		advanced: make(chan struct{}),
	}
	e.publish()
	return e
}

// publish makes the current state and index what searches see. The caller
// holds wmu or has no one else to race with; it takes mu.
func (e *Entry) publish() {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.serving.Store(&serving{state: e.state, failure: e.failure, index: e.index, dims: e.dims, keyType: e.keyType})
	if f, ok := e.index.(kind.StreamFollower); ok && e.state == StateReady {
		f.FollowStream()
	}
}

// Spec is the definition the entry was created from.
func (e *Entry) Spec() Spec { return e.spec }

// Configure records the types of the table's columns, learned from the
// catalog or a Relation message. typmodDims is vector(n)'s n, 0 if the
// column has none. A dimension that contradicts the one already fixed is
// an error: the caller puts the entry into StateError.
func (e *Entry) Configure(kt pgvalue.KeyType, vt pgvalue.VectorType, typmodDims int) error {
	e.wmu.Lock()
	defer e.wmu.Unlock()
	e.mu.Lock()
	if typmodDims > 0 && e.dims > 0 && typmodDims != e.dims {
		e.mu.Unlock()
		return fmt.Errorf("index %s: column %s is vector(%d), the index has %d dimensions", e.spec.Name, e.spec.Column, typmodDims, e.dims)
	}
	e.keyType, e.vecType = kt, vt
	if e.dims == 0 && typmodDims > 0 {
		e.dims = typmodDims
	}
	e.mu.Unlock()
	e.publish()
	return nil
}

// KeyType is the key column's type, set by Configure.
func (e *Entry) KeyType() pgvalue.KeyType { return e.serving.Load().keyType }

// VectorType is the vector column's type, set by Configure.
func (e *Entry) VectorType() pgvalue.VectorType {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.vecType
}

// Dims is the dimension of the index, 0 while unknown.
func (e *Entry) Dims() int { return e.serving.Load().dims }

// indexable reports whether vec can go into an index of dims dimensions
// (0: not fixed yet). While the dimension is unknown, a row's length is
// bounded by MaxDims: the first row fixes the dimension, and a table's
// value must never fix one no index can be made with.
func indexable(vec []float32, dims int) bool {
	return len(vec) > 0 && len(vec) <= MaxDims && (dims == 0 || len(vec) == dims) && pgvalue.CheckFinite(vec) == nil
}

// Begin starts applying a transaction that commits at final, and reports
// whether the entry wants its changes: not if they are already reflected
// (see SkipBelow).
func (e *Entry) Begin(final LSN) bool {
	e.wmu.Lock()
	defer e.wmu.Unlock()
	e.txLSN = final
	return final >= e.skipBelowLocked()
}

// SkipBelow is the commit position below which the stream's transactions
// are already reflected in the entry: its applied LSN, or, after a copy,
// the copy's snapshot point if that is later. While a copy rebuilds a
// serving index, the serving index still wants everything after its
// applied LSN.
func (e *Entry) SkipBelow() LSN {
	e.wmu.Lock()
	defer e.wmu.Unlock()
	return e.skipBelowLocked()
}

func (e *Entry) skipBelowLocked() LSN {
	applied := e.Applied()
	if e.sync != nil && e.sync.rebuild {
		return applied
	}
	if e.sync != nil {
		return max(applied, e.sync.point)
	}
	return max(applied, e.syncFrom)
}

// Upsert stores key's vector, or, if vec is not indexable (nil for NULL or
// undecodable, wrong dimension, NaN or infinite), removes key from the
// index and counts it as skipped until a later change fixes it. The
// encoding is done before the apply lock is taken, so that the copy's
// readers encode in parallel with the stream.
func (e *Entry) Upsert(key string, vec []float32) {
	dims := e.Dims()
	if !indexable(vec, dims) {
		e.Skip(key)
		return
	}
	main, shadow := e.targets()
	var mainRow, shadowRow Row
	if main != nil {
		mainRow = main.Prepare(vec)
	}
	if shadow != nil {
		shadowRow = shadow.Prepare(vec)
	}
	e.wmu.Lock()
	defer e.wmu.Unlock()
	e.changed()
	if toMain, toShadow := e.routes(key); toMain || toShadow {
		if toMain {
			e.insertLocked(&e.index, e.skipped, main, mainRow, key, vec)
			e.wrote(e.index, key)
		}
		if toShadow {
			s := e.sync
			e.insertLocked(&s.index, s.skipped, shadow, shadowRow, key, vec)
			e.wrote(s.index, key)
		}
	}
}

// targets returns the indexes a change is prepared for: the serving one,
// and the one a copy is building.
func (e *Entry) targets() (main, shadow Index) {
	e.wmu.Lock()
	defer e.wmu.Unlock()
	if e.sync != nil {
		shadow = e.sync.index
		if !e.sync.rebuild {
			return nil, shadow
		}
	}
	return e.index, shadow
}

// routes says where the change being applied to key goes, and records it
// against the copy: to the serving index unless a first copy is building
// it; to the index a copy builds unless the change is older than the
// copy's snapshot (which holds it already). Changes met before the
// snapshot point is known go to both and are sorted out when it is (see
// SetSyncPoint).
func (e *Entry) routes(key string) (toMain, toShadow bool) {
	e.dropPending(key)
	toMain, toShadow = e.route()
	if toShadow {
		e.sync.touched[key] = e.txLSN
	}
	return toMain, toShadow
}

// route is routes for a change of no one key.
func (e *Entry) route() (toMain, toShadow bool) {
	s := e.sync
	if s == nil {
		return true, false
	}
	return s.rebuild, s.point == 0 || e.txLSN >= s.point
}

// insertLocked puts a prepared row into *slot's index, making the index
// first if it is the first valid row (the table was empty when it was
// made); x and row are what was prepared, and are redone if the index
// changed since.
func (e *Entry) insertLocked(slot *Index, skipped map[string]struct{}, x Index, row Row, key string, vec []float32) {
	// The dimension is settled here, under the apply lock: a row checked
	// before it against a dimension not yet known may not fit. It is
	// published only once an index of it exists.
	e.mu.Lock()
	dims := e.dims
	e.mu.Unlock()
	fixed := dims == 0
	if fixed {
		dims = len(vec)
	}
	if len(vec) != dims {
		e.skipIn(*slot, skipped, key)
		return
	}
	if *slot == nil {
		made, err := newIndex(e.spec, e.keyType, dims, nil, 0)
		if err != nil {
			// The stream goes on: the index is failed, not the slot.
			e.skipIn(nil, skipped, key)
			e.Fail(fmt.Errorf("index %s: cannot make an index of %d dimensions: %w; restart vecside with dims= set to the column's dimension", e.spec.Name, dims, err))
			return
		}
		*slot = made
		if slot == &e.index && !fixed {
			defer e.publish()
		}
	}
	if fixed {
		e.mu.Lock()
		e.dims = dims
		e.mu.Unlock()
		defer e.publish()
	}
	if x != *slot || row == nil {
		row = (*slot).Prepare(vec)
	}
	(*slot).Insert(key, row)
	delete(skipped, key)
}

// Skip removes key from the index and counts it as skipped.
func (e *Entry) Skip(key string) {
	e.wmu.Lock()
	defer e.wmu.Unlock()
	e.changed()
	toMain, toShadow := e.routes(key)
	if toMain {
		e.skipIn(e.index, e.skipped, key)
	}
	if toShadow {
		e.skipIn(e.sync.index, e.sync.skipped, key)
	}
}

func (e *Entry) skipIn(x Index, skipped map[string]struct{}, key string) {
	if x != nil {
		x.Delete(key)
	}
	skipped[key] = struct{}{}
}

// Delete forgets key.
func (e *Entry) Delete(key string) {
	e.wmu.Lock()
	defer e.wmu.Unlock()
	e.changed()
	toMain, toShadow := e.routes(key)
	if toMain {
		deleteIn(e.index, e.skipped, key)
	}
	if toShadow {
		deleteIn(e.sync.index, e.sync.skipped, key)
	}
}

func deleteIn(x Index, skipped map[string]struct{}, key string) {
	if x != nil {
		x.Delete(key)
	}
	delete(skipped, key)
}

// Move gives key from's entry (indexed or skipped) to key to, for a key
// change whose vector did not change. It reports whether from was known
// to every index the change goes to; if not, the caller must read the row
// and Upsert it.
func (e *Entry) Move(from, to string) bool {
	e.wmu.Lock()
	defer e.wmu.Unlock()
	e.changed()
	e.routes(from)
	toMain, toShadow := e.routes(to)
	ok := true
	if toMain {
		ok = e.moveIn(e.index, e.skipped, from, to)
	}
	if toShadow {
		ok = e.moveIn(e.sync.index, e.sync.skipped, from, to) && ok
	}
	return ok
}

// moveIn moves from's row to to in x. The row keeps its vector, so the
// transaction's version of it has that vector if the row's xid was known
// or the transaction wrote it (see Unchanged).
func (e *Entry) moveIn(x Index, skipped map[string]struct{}, from, to string) bool {
	_, ours := e.txWrites[written{x, from}]
	keep := ours || xidOf(x, from) != 0
	if !moveIn(x, skipped, from, to) {
		return false
	}
	if keep {
		e.wrote(x, to)
	}
	return true
}

func moveIn(x Index, skipped map[string]struct{}, from, to string) bool {
	if x != nil && x.Rename(from, to) {
		delete(skipped, to)
		return true
	}
	if _, ok := skipped[from]; ok {
		delete(skipped, from)
		if x != nil {
			x.Delete(to)
		}
		skipped[to] = struct{}{}
		return true
	}
	return false
}

// Known reports whether key is indexed or counted as skipped, in the
// serving index and in the one a copy builds.
//
// A copy under way knows a key that no change since its snapshot has
// touched: its snapshot holds the key's current vector, and the copy
// brings it if it has not yet.
func (e *Entry) Known(key string) bool {
	e.wmu.Lock()
	defer e.wmu.Unlock()
	known := func(x Index, skipped map[string]struct{}) bool {
		_, ok := skipped[key]
		return ok || x != nil && x.Has(key)
	}
	if s := e.sync; s != nil {
		if !known(s.index, s.skipped) && s.newer(key) {
			return false
		}
		if !s.rebuild {
			return true
		}
	}
	return known(e.index, e.skipped)
}

// Truncate forgets every key.
func (e *Entry) Truncate() {
	e.wmu.Lock()
	defer e.wmu.Unlock()
	e.changed()
	e.forgetXIDs()
	toMain, toShadow := e.route()
	if s := e.sync; s != nil {
		if toShadow {
			s.truncated = max(s.truncated, e.txLSN)
			if s.index != nil {
				s.index.Clear()
			}
			clear(s.skipped)
		}
	}
	if toMain {
		if e.index != nil {
			e.index.Clear()
		}
		clear(e.skipped)
	}
}

// Keys calls fn for every indexed key of the serving index.
func (e *Entry) Keys(fn func(key string)) {
	if x := e.serving.Load().index; x != nil {
		x.Each(fn)
	}
}

// Vector returns a copy of key's stored vector, for the kinds that keep
// one (store=float).
func (e *Entry) Vector(key string) ([]float32, bool) {
	if x := e.serving.Load().index; x != nil {
		return x.Vector(key)
	}
	return nil, false
}

// changed counts a change.
func (e *Entry) changed() { e.version.Add(1) }

// SetReady marks an entry filled without a copy (by Upsert) as serving.
func (e *Entry) SetReady() {
	e.mu.Lock()
	if e.state == StateBuilding {
		e.state = StateReady
	}
	e.mu.Unlock()
	e.publish()
}

// Fail puts the entry into StateError with a message saying what happened
// and how to recover.
func (e *Entry) Fail(err error) {
	e.mu.Lock()
	e.state, e.failure = StateError, err.Error()
	e.mu.Unlock()
	e.publish()
}

// State returns the lifecycle state and, in StateError, the reason.
func (e *Entry) State() (State, string) {
	s := e.serving.Load()
	return s.state, s.failure
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
	if lsn <= e.applied {
		e.lsnMu.Unlock()
		return
	}
	e.applied = lsn
	close(e.advanced)
	e.advanced = make(chan struct{})
	e.lsnMu.Unlock()
	if e.pendingN.Load() > 0 {
		e.settle(lsn)
	}
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
// It takes no lock: it reads the serving index, which each kind keeps
// searchable while changes are applied (see the package doc).
func (e *Entry) Search(ctx context.Context, q []float32, n int, opts SearchOptions) ([]Hit, error) {
	s := e.serving.Load()
	switch s.state {
	case StateBuilding:
		return nil, fmt.Errorf("%w: index %s is still copying its table", ErrNotReady, e.spec.Name)
	case StateError:
		return nil, fmt.Errorf("%w: index %s is in error: %s", ErrNotReady, e.spec.Name, s.failure)
	}
	if err := pgvalue.CheckFinite(q); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrInvalidVector, err)
	}
	if s.dims > 0 && len(q) != s.dims {
		return nil, fmt.Errorf("%w: query has %d dimensions, index %s has %d", ErrInvalidVector, len(q), e.spec.Name, s.dims)
	}
	if s.index == nil {
		return nil, nil
	}
	hits, err := s.index.Search(ctx, q, kind.Query{K: wanted(n, opts), N: n, Allow: opts.Allow, Settings: opts.Settings})
	// A quantized estimate of a cosine or L2 distance can fall a little
	// below 0, where no distance is; exact ones are left bit for bit.
	if e.spec.Metric != kernels.IP {
		for i := range hits {
			if !hits[i].Exact {
				hits[i].Distance = max(hits[i].Distance, 0)
			}
		}
	}
	return hits, err
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
	Covered     LSN   // what durable state reflects
	CopiedRows  int64 // rows read by the copy under way, or by the last one
	Rebuilding  bool  // a copy is building a new index beside the serving one
	Rebuilds    int64 // serving indexes replaced by a rebuild since start
	// RebuildFailures counts rebuilds that failed (the serving index went
	// on); RebuildError is the last one's error.
	RebuildFailures int64
	RebuildError    string
	IndexStats      Stats  // the kind's size and shape
	SlotState       string // the shared slot's wal_status, see SourceHealth
	// SystemID and Timeline are the source's, from IDENTIFY_SYSTEM on the
	// replication connection (0 until it has connected).
	SystemID uint64
	Timeline uint32
	LagBytes int64 // source WAL position − Applied
	// LagSeconds is how long ago the source's WAL, as health checks saw
	// it, was at the oldest position not yet applied: 0 when caught up,
	// within a health-check interval otherwise.
	LagSeconds float64
	KeyType    pgvalue.KeyType
	// Checkpoints written, and the last one's pause of changes, total
	// time and end (zero before the first).
	Checkpoints     int64
	CheckpointPause time.Duration
	CheckpointTime  time.Duration
	LastCheckpoint  time.Time
	// CheckpointFailures counts failed checkpoints; CheckpointError is the
	// last one's error, until a checkpoint succeeds.
	CheckpointFailures int64
	CheckpointError    string
}

// Status reports the entry's current state.
func (e *Entry) Status() Status {
	applied := e.Applied()
	e.wmu.Lock()
	skipped, rebuilding, copying := len(e.skipped), e.sync != nil && e.sync.rebuild, int64(-1)
	if e.sync != nil {
		copying = e.sync.copied
		if !e.sync.rebuild {
			skipped = len(e.sync.skipped)
		}
	}
	e.wmu.Unlock()
	sv := e.serving.Load()
	e.mu.Lock()
	defer e.mu.Unlock()
	s := Status{
		Name:      e.spec.Name,
		Table:     e.spec.Schema + "." + e.spec.Table,
		Column:    e.spec.Column,
		KeyColumn: e.spec.Key,
		Kind:      e.spec.Kind,
		Metric:    e.spec.Metric,
		Dims:      e.dims,
		Skipped:   skipped,
		State:     e.state,
		Error:     e.failure,
		Applied:   applied,
		Covered:   e.covered,
		KeyType:   e.keyType,

		CopiedRows:      e.copied,
		Rebuilding:      rebuilding,
		Rebuilds:        e.rebuilds,
		RebuildFailures: e.rebuildFailures,
		RebuildError:    e.rebuildError,
		Checkpoints:     e.checkpoints,
		CheckpointPause: e.lastPause,
		CheckpointTime:  e.lastWrite,
		LastCheckpoint:  e.lastCheckpoint,

		CheckpointFailures: e.checkpointFailures,
		CheckpointError:    e.checkpointError,
	}
	if copying >= 0 {
		s.CopiedRows = copying
	}
	if sv.index != nil {
		s.Rows = sv.index.Len()
		s.ZeroVectors = sv.index.ZeroVectors()
		s.IndexStats = sv.index.Stats()
	}
	return s
}
