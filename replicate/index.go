package replicate

import (
	"github.com/vecside/vecside/indexer"
	"github.com/vecside/vecside/internal/pgvalue"
)

// Index is what the replication layer needs of an index: its definition
// and column types, its lifecycle, and the entry's parts that apply the
// stream, copy the table and checkpoint it. Index provides it.
type Index interface {
	Spec() indexer.Spec
	Configure(kt pgvalue.KeyType, vt pgvalue.VectorType, typmodDims int) error
	KeyType() pgvalue.KeyType
	VectorType() pgvalue.VectorType
	Dims() int
	State() (indexer.State, string)
	Fail(err error)
	Status() indexer.Status
	// Applied is how far the stream has been applied to the index.
	Applied() indexer.LSN
	Stream() *indexer.Applier
	Copies() *indexer.Syncer
	Durable() *indexer.Durability
}

// An index entry is what replicate drives.
var _ Index = (*indexer.Entry)(nil)
