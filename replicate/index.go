package replicate

import (
	"github.com/vecside/vecside/indexer"
	"github.com/vecside/vecside/internal/pgvalue"
)

// Index is what the replication layer needs of an index: its definition
// and column types, its lifecycle, and the parts that apply the stream,
// copy the table and checkpoint it. Each is an interface of replicate's
// own, listing only the calls the replicator makes, so that the indexer's
// types can grow without this package depending on more of them.
type Index interface {
	Spec() indexer.Spec
	Configure(kt pgvalue.KeyType, vt pgvalue.VectorType, typmodDims int) error
	KeyType() pgvalue.KeyType
	VectorType() pgvalue.VectorType
	Dims() int
	State() (indexer.State, string)
	Fail(err error)
	Wait(why string)
	Status() indexer.Status
	// Applied is how far the stream has been applied to the index.
	Applied() indexer.LSN
	Stream() Stream
	Copies() Copies
	Durable() Checkpoints
}

// Stream applies the changes and transactions of the stream to an index,
// in commit order (see indexer.Applier).
type Stream interface {
	BeginTx(final indexer.LSN, xid uint32) bool
	Commit(end indexer.LSN)
	Upsert(key string, vec []float32)
	UpsertRead(key string, vec []float32, xmin uint32, at indexer.LSN)
	Unchanged(key string)
	Known(key string) bool
	Move(from, to string) bool
	Skip(key string)
	Delete(key string)
	Truncate()
	SetApplied(lsn indexer.LSN)
	ForgetAllXIDs()
}

// Copies fills an index from a copy of its table, the first time and on
// rebuilds (see indexer.Syncer).
type Copies interface {
	SampleSize(tableRows, dims int) int
	BeginSync(sample [][]float32, tableRows int) error
	BeginRebuild(sample [][]float32, tableRows int) error
	WantsRebuild() bool
	SetSyncPoint(point indexer.LSN)
	CopyUpsert(key string, vec []float32, xmin uint32)
	EndSync()
	AbortSync(err error)
}

// Checkpoints are an index's files on disk: where they are, how far they
// cover the stream, the table they are bound to (its OID, as resolved
// from the catalog, and its current name), and loading them at start (see
// indexer.Durability).
type Checkpoints interface {
	CheckpointPath(dir string) string
	Covered() indexer.LSN
	SetTable(t indexer.Table)
	LoadCheckpoint(dir string, src indexer.Source, state indexer.IdleState) (indexer.LSN, error)
}

// entry is an indexer entry as the replicator drives it. Go has no
// covariant results, so the parts' concrete types become replicate's
// interfaces here.
type entry struct{ *indexer.Entry }

func (e entry) Stream() Stream       { return e.Entry.Stream() }
func (e entry) Copies() Copies       { return e.Entry.Copies() }
func (e entry) Durable() Checkpoints { return e.Entry.Durable() }
