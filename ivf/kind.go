package ivf

import (
	"context"
	"slices"

	"github.com/vecside/vecside/indexer/kind"
	"github.com/vecside/vecside/indexer/store"
	"github.com/vecside/vecside/ivf/lists"
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
		Tuning:   kind.Tuning{Setting: "probes", From: 1},
		Figures:  listFigures,
	}, optionsConfig, New, Load, func(x *Index) kind.Index { return ivfKind{x} }))
}

// listFigures are an IVF index's figures: its lists, and the live rows
// of its smallest list, of those at the 50th, 90th and 99th percentiles
// of list sizes (listQuantiles), and of its largest. A list far above the
// median is one the probes scan at a cost the others do not have, and
// asks for a split (see ListCap).
var listFigures = []*kind.Figure{
	{Name: "lists", Help: "Lists of an IVF index.", Type: kind.Gauge},
	{Name: "list_min", Help: "Live rows in an IVF index's smallest list.", Type: kind.Gauge},
	{Name: "list_p50", Help: "Live rows in the median list of an IVF index, by size.", Type: kind.Gauge},
	{Name: "list_p90", Help: "Live rows in the list at the 90th percentile of an IVF index's list sizes.", Type: kind.Gauge},
	{Name: "list_p99", Help: "Live rows in the list at the 99th percentile of an IVF index's list sizes.", Type: kind.Gauge},
	{Name: "list_max", Help: "Live rows in an IVF index's largest list.", Type: kind.Gauge},
}

// listQuantiles are where in the lists sorted by size listFigures[1:]
// read theirs.
var listQuantiles = []float64{0, 0.5, 0.9, 0.99, 1}

// listReadings are listFigures' readings for lists holding lives rows.
func listReadings(lives []int) []kind.Reading {
	out := []kind.Reading{{Figure: listFigures[0], Value: float64(len(lives))}}
	sorted := slices.Sorted(slices.Values(lives))
	for i, q := range listQuantiles {
		var n int
		if len(sorted) > 0 {
			n = sorted[min(len(sorted)-1, int(q*float64(len(sorted))))]
		}
		out = append(out, kind.Reading{Figure: listFigures[i+1], Value: float64(n)})
	}
	return out
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
func (x ivfKind) Insert(key string, row kind.Row) { x.Coded.Insert(key, row.(*lists.Prepared)) }

func (x ivfKind) Search(ctx context.Context, vec []float32, q kind.Query) ([]store.Hit, error) {
	return kind.Restrict(q.Allow, x.Allow, func(allow *store.Allow) ([]store.Hit, error) {
		return x.Index.Search(ctx, vec, q.K, q.N, q.Settings["probes"], allow)
	})
}
