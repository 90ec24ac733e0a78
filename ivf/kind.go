package ivf

import (
	"context"

	"github.com/vecside/vecside/indexer/kind"
	"github.com/vecside/vecside/internal/ivflists"
	"github.com/vecside/vecside/internal/store"
)

// MaxLists bounds lists= and probes=.
const MaxLists = 1 << 20

// kind=ivf: lists=N (default by ListsFor), probes=N (a fixed default per
// query; without it, adaptive), store=ext4 (default) or ext6|ext8|float,
// bits=4|6|8. Each query may set probes.
func init() {
	kind.Register(kind.Configured(kind.Kind{
		Name:     "ivf",
		Options:  []string{"lists", "probes"},
		Store:    store.Ext4,
		Sample:   func(_ map[string]string, _ store.CodedConfig, n, dims int) int { return SampleFor(n, dims) },
		Settings: []kind.Setting{{Name: "probes", Max: MaxLists}},
		Sweep:    kind.Sweep{Setting: "probes", Low: 4, High: 16},
	}, optionsConfig, New, Load, func(x *Index) kind.Index { return ivfKind{x} }))
}

func optionsConfig(o map[string]string, cfg store.CodedConfig) (Config, error) {
	lists, err := kind.Int(o, "lists", 1, MaxLists)
	if err != nil {
		return Config{}, err
	}
	probes, err := kind.Int(o, "probes", 1, MaxLists)
	if err != nil {
		return Config{}, err
	}
	return Config{CodedConfig: cfg, Lists: lists, Probes: probes}, nil
}

// ivfKind is the index as a kind.Index.
type ivfKind struct{ *Index }

func (x ivfKind) Prepare(vec []float32) kind.Row  { return x.Coded.Prepare(vec) }
func (x ivfKind) Insert(key string, row kind.Row) { x.Coded.Insert(key, row.(*ivflists.Prepared)) }

func (x ivfKind) Search(ctx context.Context, vec []float32, q kind.Query) ([]store.Hit, error) {
	return kind.Restrict(q.Allow, x.Allow, func(allow *store.Allow) ([]store.Hit, error) {
		return x.Index.Search(ctx, vec, q.K, q.N, q.Settings["probes"], allow)
	})
}
