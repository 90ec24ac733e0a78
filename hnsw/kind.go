package hnsw

import (
	"context"

	"github.com/vecside/vecside/indexer/kind"
	"github.com/vecside/vecside/indexer/store"
)

// kind=hnsw: m=N, ef_construction=N, ef_search=N (the default per query),
// store=ext6 (default) or ext4|ext8|float, bits=4|6|8. Each query may set
// ef_search.
//
// Its default store keeps 6-bit codes, whose top four bits the walk reads
// and whose whole code orders the rows it returns: 4-bit codes alone
// cannot order near rows finely enough for recall 0.99 on Fashion-MNIST,
// and 6-bit ones fit the memory budget.
func init() {
	kind.Register(kind.Configured(kind.Kind{
		Name:     "hnsw",
		Options:  []string{"m", "ef_construction", "ef_search"},
		Store:    store.Ext6,
		Sample:   func(_ map[string]string, _ store.CodedConfig, n, dims int) int { return SampleFor(n, dims) },
		Settings: []kind.Setting{{Name: "ef_search", Max: MaxEf}},
		Sweep:    kind.Sweep{Setting: "ef_search", Low: 32, High: 128},
		// A beam narrower than the 10 rows calibrated for is widened to them.
		Tuning:  kind.Tuning{Setting: "ef_search", From: 10},
		Figures: graphFigures,
	}, optionsConfig, New, Load, func(x *Index) kind.Index { return hnswKind{x} }))
}

// The graph's figures, which Stats reads: the memory of its neighbour
// lists, the deleted rows a repair pass has yet to take out of them
// (repair.go), the live rows a walk from the entry point missed when last
// counted, and the rows the writers linked themselves (see Admit).
var (
	graphBytes = &kind.Figure{Name: "graph_bytes", Type: kind.Memory,
		Help: "Memory of a graph index's neighbour lists and the rows waiting to be linked."}
	unrepairedRows = &kind.Figure{Name: "deleted_rows_unrepaired", Type: kind.Gauge,
		Help: "Rows deleted but still in a graph index, waiting for its repair pass."}
	unreachableRows = &kind.Figure{Name: "unreachable_rows", Type: kind.Gauge,
		Help: "Live rows of a graph index that a search from its entry point could not reach when last counted (-1: not counted yet)."}
	insertLinkedRows = &kind.Figure{Name: "insert_linked_rows_total", Type: kind.Counter,
		Help: "Rows of a graph index that its writers linked themselves, holding the apply lock, because its linkers had fallen behind."}
	graphFigures = []*kind.Figure{graphBytes, unrepairedRows, unreachableRows, insertLinkedRows}
)

func optionsConfig(o map[string]string, cfg store.CodedConfig) (Config, error) {
	c := Config{CodedConfig: cfg}
	for _, opt := range []struct {
		key         string
		dst         *int
		least, most int
	}{{"m", &c.M, 2, MaxM}, {"ef_construction", &c.EfConstruction, 1, MaxEf}, {"ef_search", &c.EfSearch, 1, MaxEf}} {
		n, err := kind.Int(o, opt.key, opt.least, opt.most)
		if err != nil {
			return Config{}, err
		}
		*opt.dst = n
	}
	return c, nil
}

// hnswKind is the index as a kind.Index. A rebuild's copy admits its rows
// to the graph before it takes the apply lock.
type hnswKind struct{ *Index }

var _ kind.Admitter = hnswKind{}

func (x hnswKind) Prepare(vec []float32) kind.Row  { return x.Index.Prepare(vec) }
func (x hnswKind) Insert(key string, row kind.Row) { x.Index.Insert(key, row.(Prepared)) }
func (x hnswKind) Admit(row kind.Row) kind.Row     { return x.Index.Admit(row.(Prepared)) }

func (x hnswKind) Search(ctx context.Context, vec []float32, q kind.Query) ([]store.Hit, error) {
	return x.Index.Search(ctx, vec, q.K, q.N, q.Settings["ef_search"], q.Allow)
}

var _ kind.Excluder = hnswKind{}

func (x hnswKind) SearchWithout(ctx context.Context, vec []float32, q kind.Query, key string) ([]store.Hit, error) {
	return x.Index.SearchWithout(ctx, vec, q.K, q.N, q.Settings["ef_search"], key)
}
