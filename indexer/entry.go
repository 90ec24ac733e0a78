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
	// StateWaiting: the index holds nothing and waits for the database:
	// its table to be created (again), or the publication to include it;
	// Status says what it waits for and what to run.
	StateWaiting State = "waiting"
)

// Follows reports whether an index in state s keeps in step with its
// table: one in error or waiting holds nothing the stream could bring up
// to date, so it holds no position back.
func (s State) Follows() bool { return s == StateBuilding || s == StateReady }

// Entry is one live index: its spec, the index holding the vectors, the
// rows left out for bad vectors, and how far the stream has been applied.
// It is made of parts with one job each, which share the entry's state
// (core):
//
//   - Applier applies the stream's changes and transactions under the
//     apply lock;
//   - Syncer runs the copies of the table that fill the index and rebuild
//     it;
//   - Durability writes and loads checkpoints and says what is covered;
//   - Clock is the applied LSN, which read-your-writes searches wait for;
//     it is embedded, so that Applied and WaitApplied are the entry's.
//
// See the package doc for who takes which lock.
type Entry struct {
	c *core
	*Clock
	stream  *Applier
	copies  *Syncer
	durable *Durability
}

// Applier applies the stream's changes to an entry (apply.go, xid.go).
type Applier struct{ c *core }

// Syncer runs an entry's table syncs: its first copy and its rebuilds
// (sync.go).
type Syncer struct{ c *core }

// Durability writes an entry's checkpoints and loads them, and keeps
// what they cover (durability.go).
type Durability struct{ c *core }

// core is the state an entry's parts share, and the routing of a change
// between the serving index and the one a copy builds, which every part
// that writes follows.
type core struct {
	spec     Spec
	clock    *Clock
	coverage coverage // what checkpoints cover (durability.go)

	// serving is all a search reads: one atomic load, no lock.
	serving atomic.Pointer[serving]

	// mu guards the lifecycle and bookkeeping fields below; it is held for
	// a few field reads or writes at a time, never across a search, a
	// build or a file write.
	mu       sync.Mutex
	table    Table // as the replication layer resolved it (SetTable)
	keyType  pgvalue.KeyType
	vecType  pgvalue.VectorType
	dims     int
	state    State
	failure  string
	copied   int64 // rows read by the last sync's copy
	rebuilds int64 // syncs that replaced a serving index
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
	txLSN    LSN    // commit LSN of the transaction being applied
	tx       txBook // transaction ids waiting to be recorded (xid.go)
	// version counts the changes applied; a checkpoint records it, so an
	// unchanged version later proves that only the LSN has moved since.
	version atomic.Uint64
}

// serving is what searches see of an entry, replaced whole on every
// change of state or index.
type serving struct {
	state   State
	failure string
	index   Index
	dims    int
	keyType pgvalue.KeyType
	vecType pgvalue.VectorType
}

func newEntry(spec Spec) *Entry {
	c := &core{
		spec:    spec,
		clock:   newClock(spec.Name),
		dims:    spec.Dims,
		skipped: map[string]struct{}{},
		tx:      txBook{pending: map[string]pendingRead{}},
		state:   StateBuilding,
	}
	c.publish()
	return &Entry{c: c, Clock: c.clock, stream: &Applier{c}, copies: &Syncer{c}, durable: &Durability{c}}
}

// Stream is the entry's part that applies the stream.
func (e *Entry) Stream() *Applier { return e.stream }

// Copies is the entry's part that runs its table syncs.
func (e *Entry) Copies() *Syncer { return e.copies }

// Durable is the entry's part that checkpoints it.
func (e *Entry) Durable() *Durability { return e.durable }

// publish makes the current state and index what searches see. The caller
// holds wmu or has no one else to race with; it takes mu.
func (e *core) publish() {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.serving.Store(&serving{state: e.state, failure: e.failure, index: e.index, dims: e.dims, keyType: e.keyType, vecType: e.vecType})
	if f, ok := e.index.(kind.StreamFollower); ok && e.state == StateReady {
		f.FollowStream()
	}
}

// Spec is the definition the entry was created from.
func (e *Entry) Spec() Spec { return e.c.spec }

// Configure records the types of the table's columns, learned from the
// catalog or a Relation message. typmodDims is vector(n)'s n, 0 if the
// column has none. A dimension that contradicts the one already fixed is
// an error: the caller puts the entry into StateError.
func (e *Entry) Configure(kt pgvalue.KeyType, vt pgvalue.VectorType, typmodDims int) error {
	e.c.wmu.Lock()
	defer e.c.wmu.Unlock()
	e.c.mu.Lock()
	if typmodDims > 0 && e.c.dims > 0 && typmodDims != e.c.dims {
		e.c.mu.Unlock()
		return fmt.Errorf("index %s: column %s is vector(%d), the index has %d dimensions", e.c.spec.Name, e.c.spec.Column, typmodDims, e.c.dims)
	}
	e.c.keyType, e.c.vecType = kt, vt
	if e.c.dims == 0 && typmodDims > 0 {
		e.c.dims = typmodDims
	}
	e.c.mu.Unlock()
	e.c.publish()
	return nil
}

// KeyType is the key column's type, set by Configure.
func (e *Entry) KeyType() pgvalue.KeyType { return e.c.serving.Load().keyType }

// VectorType is the vector column's type, set by Configure.
func (e *Entry) VectorType() pgvalue.VectorType {
	e.c.mu.Lock()
	defer e.c.mu.Unlock()
	return e.c.vecType
}

// Dims is the dimension of the index, 0 while unknown.
func (e *Entry) Dims() int { return e.c.serving.Load().dims }

// Keys calls fn for every indexed key of the serving index.
func (e *Entry) Keys(fn func(key string)) {
	if x := e.c.serving.Load().index; x != nil {
		x.Each(fn)
	}
}

// Vector returns a copy of key's stored vector, for the kinds that keep
// one (store=float).
func (e *Entry) Vector(key string) ([]float32, bool) {
	if x := e.c.serving.Load().index; x != nil {
		return x.Vector(key)
	}
	return nil, false
}

// SetReady marks an entry filled without a copy (by Upsert) as serving.
func (e *Entry) SetReady() {
	e.c.mu.Lock()
	if e.c.state == StateBuilding {
		e.c.state = StateReady
	}
	e.c.mu.Unlock()
	e.c.publish()
}

// Fail puts the entry into StateError with a message saying what happened
// and how to recover.
func (e *Entry) Fail(err error) { e.c.fail(err) }

func (e *core) fail(err error) {
	e.mu.Lock()
	e.state, e.failure = StateError, err.Error()
	e.mu.Unlock()
	e.publish()
}

// State returns the lifecycle state and, in StateError, the reason (in
// StateWaiting, what it waits for).
func (e *Entry) State() (State, string) {
	s := e.c.serving.Load()
	return s.state, s.failure
}

// Search returns up to n candidates nearest to q, with their distances.
// It takes no lock: it reads the serving index, which each kind keeps
// searchable while changes are applied (see the package doc).
func (e *Entry) Search(ctx context.Context, q []float32, n int, opts SearchOptions) ([]Hit, error) {
	s := e.c.serving.Load()
	switch s.state {
	case StateBuilding:
		return nil, fmt.Errorf("%w: index %s is still copying its table", ErrNotReady, e.c.spec.Name)
	case StateError:
		return nil, fmt.Errorf("%w: index %s is in error: %s", ErrNotReady, e.c.spec.Name, s.failure)
	case StateWaiting:
		return nil, fmt.Errorf("%w: index %s is waiting: %s", ErrNotReady, e.c.spec.Name, s.failure)
	}
	if err := pgvalue.CheckFinite(q); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrInvalidVector, err)
	}
	// As the column's type holds it: a halfvec's query in half precision.
	q, err := s.vecType.Round(q)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrInvalidVector, err)
	}
	if s.dims > 0 && len(q) != s.dims {
		return nil, fmt.Errorf("%w: query has %d dimensions, index %s has %d", ErrInvalidVector, len(q), e.c.spec.Name, s.dims)
	}
	if s.index == nil {
		return nil, nil
	}
	settings := opts.Settings
	c, calibrated := s.index.(*calibrated)
	if calibrated {
		settings = c.tune.settings(settings, opts.Recall, q)
	}
	hits, err := s.index.Search(ctx, q, kind.Query{K: wanted(n, opts), N: n, Allow: opts.Allow, Settings: settings})
	// A quantized estimate of a cosine or L2 distance can fall a little
	// below 0, where no distance is; exact ones are left bit for bit.
	if e.c.spec.Metric != kernels.IP {
		for i := range hits {
			if !hits[i].Exact {
				hits[i].Distance = max(hits[i].Distance, 0)
			}
		}
	}
	// A filtered search's nearest candidate says little of the queries.
	if calibrated && opts.Allow == nil {
		c.tune.observe(hits)
	}
	return hits, err
}

// Status is a snapshot of an index's state, for vecside_status() and
// metrics.
type Status struct {
	Name  string
	Table string // schema.table, as the table is named now (see Table)
	// TableOID is the pg_class OID of the table the index follows, as the
	// replication layer resolved it: 0 until known. A drop and re-create
	// changes it, a rename keeps it.
	TableOID       uint32
	Column         string
	KeyColumn      string
	Kind           string
	ExactDistances bool // see Spec.ExactDistances
	Metric         kernels.Metric
	Dims           int
	Rows           int
	Skipped        int
	ZeroVectors    int // stored, but without a cosine distance
	State          State
	Error          string
	Applied        LSN
	Covered        LSN   // what durable state reflects
	CopiedRows     int64 // rows read by the copy under way, or by the last one
	Rebuilding     bool  // a copy is building a new index beside the serving one
	Rebuilds       int64 // serving indexes replaced by a rebuild since start
	// RebuildFailures counts rebuilds that failed (the serving index went
	// on); RebuildError is the last one's error.
	RebuildFailures int64
	RebuildError    string
	IndexStats      Stats // the kind's size and shape
	Recall          RecallStatus
	SlotState       string // the shared slot's wal_status, see SourceHealth
	// SystemID and Timeline are the source's, from IDENTIFY_SYSTEM on the
	// replication connection (0 until it has connected).
	SystemID uint64
	Timeline uint32
	// Database is the source database's name (current_database() there),
	// as the replication connection reports it: "" until it has connected.
	Database string
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
	applied := e.c.clock.Applied()
	e.c.wmu.Lock()
	skipped, rebuilding, copying := len(e.c.skipped), e.c.sync != nil && e.c.sync.rebuild, int64(-1)
	if e.c.sync != nil {
		copying = e.c.sync.copied
		if !e.c.sync.rebuild {
			skipped = len(e.c.sync.skipped)
		}
	}
	e.c.wmu.Unlock()
	sv := e.c.serving.Load()
	e.c.mu.Lock()
	defer e.c.mu.Unlock()
	table := e.c.spec.Schema + "." + e.c.spec.Table
	if e.c.table.Name != "" {
		table = e.c.table.Schema + "." + e.c.table.Name
	}
	s := Status{
		Name:           e.c.spec.Name,
		Table:          table,
		TableOID:       e.c.table.OID,
		Column:         e.c.spec.Column,
		KeyColumn:      e.c.spec.Key,
		Kind:           e.c.spec.Kind,
		ExactDistances: e.c.spec.ExactDistances(),
		Metric:         e.c.spec.Metric,
		Dims:           e.c.dims,
		Skipped:        skipped,
		State:          e.c.state,
		Error:          e.c.failure,
		Applied:        applied,
		KeyType:        e.c.keyType,

		CopiedRows:      e.c.copied,
		Rebuilding:      rebuilding,
		Rebuilds:        e.c.rebuilds,
		RebuildFailures: e.c.rebuildFailures,
		RebuildError:    e.c.rebuildError,
	}
	e.c.coverage.report(&s)
	if copying >= 0 {
		s.CopiedRows = copying
	}
	if sv.index != nil {
		s.Rows = sv.index.Len()
		s.ZeroVectors = sv.index.ZeroVectors()
		s.IndexStats = sv.index.Stats()
		s.Recall = recallOf(sv.index)
	}
	return s
}
