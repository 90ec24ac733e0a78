package ivf

import (
	"context"
	"flag"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/vecside/vecside/indexer/dataset"
	"github.com/vecside/vecside/indexer/store"
	"github.com/vecside/vecside/kernels"
)

var (
	probingSets    = flag.String("ivf.sets", "clustered,textlike,fashion", "data sets BenchmarkProbing sweeps: clustered, textlike, fashion")
	probingRows    = flag.Int("ivf.probing.rows", 200_000, "rows of the synthetic sets of BenchmarkProbing")
	probingMargins = flag.String("ivf.scales", "0.8,1,1.25", "margin scales BenchmarkProbing sweeps (see Config.MarginScale)")
	probingMins    = flag.String("ivf.minprobes", "1,2,4", "minimum probes BenchmarkProbing sweeps")
	probingOver    = flag.String("ivf.oversample", "1,2,3,4", "candidate caps, in multiples of k, BenchmarkProbing sweeps")
)

// probingSet is a data set with its metric.
type probingSet struct {
	name          string
	metric        kernels.Metric
	data, queries [][]float32
}

func loadProbingSets(b *testing.B) []probingSet {
	var sets []probingSet
	for _, name := range strings.Split(*probingSets, ",") {
		switch name {
		case "clustered":
			d, q := dataset.Clustered{Seed: 1, Rows: *probingRows, Queries: 500, Dims: 128, Normalize: true}.Generate()
			sets = append(sets, probingSet{"clustered-128 cosine", kernels.Cosine, d, q})
		case "textlike":
			d, q := dataset.TextLike{Seed: 1, Rows: *probingRows, Queries: 500, Dims: 384}.Generate()
			sets = append(sets, probingSet{"textlike-384 cosine", kernels.Cosine, d, q})
		case "fashion":
			d, q, err := dataset.FashionMNIST("")
			if err != nil {
				b.Skipf("fashion-mnist: %v (apt-get install dataset-fashion-mnist)", err)
			}
			sets = append(sets, probingSet{"fashion-784 l2", kernels.L2, d, q[:500]})
		}
	}
	return sets
}

// BenchmarkProbing sweeps adaptive probing (margin, minimum probes) and
// the candidate cap over data sets, with the default compact store, and
// logs recall@10 after an exact re-rank of the candidates (as the heap
// re-rank does), the mean number of candidates and the time per query on
// one core: the figures the defaults were chosen from.
func BenchmarkProbing(b *testing.B) {
	const k = 10
	for _, set := range loadProbingSets(b) {
		truth := dataset.GroundTruth(set.metric, set.data, set.queries, k)
		dims := len(set.data[0])
		n := len(set.data)
		sample := set.data[:min(n, SampleFor(n, dims))]
		base := Config{CodedConfig: store.CodedConfig{Metric: set.metric, Dims: dims, Store: store.Ext4, Seed: 1}}
		x, err := New(base, sample, n)
		if err != nil {
			b.Fatal(err)
		}
		var wg sync.WaitGroup
		for part := range 2 {
			wg.Go(func() {
				for i := part; i < n; i += 2 {
					x.Put(keyOf(i), set.data[i])
				}
			})
		}
		wg.Wait()
		fmt.Printf("%s: %d rows, %d lists, %.0f bytes/row, learned margins %.2f\n", set.name, n, x.Lists(), x.Stats().BytesPerRow(), x.learned)
		for _, scale := range floats(b, *probingMargins) {
			for _, minProbes := range floats(b, *probingMins) {
				x.cfg.MarginScale, x.cfg.MinProbes = scale, int(minProbes)
				for _, over := range floats(b, *probingOver) {
					limit := int(over * k)
					var hits, cands int
					began := time.Now()
					for qi, q := range set.queries {
						got, err := x.Search(context.Background(), q, k, limit, 0, nil)
						if err != nil {
							b.Fatal(err)
						}
						cands += len(got)
						hits += rerankedHits(set.metric, set.data, q, got, truth[qi])
					}
					per := time.Since(began) / time.Duration(len(set.queries))
					fmt.Printf("%-22s scale=%.2f (margin %.2f) min=%d cap=%2dk: recall@10 %.4f  candidates %5.1f  %6.0f µs/query\n",
						set.name, scale, x.margin(k), int(minProbes), int(over), float64(hits)/float64(k*len(set.queries)), float64(cands)/float64(len(set.queries)), float64(per.Microseconds()))
				}
			}
		}
	}
}

// rerankedHits re-ranks candidates by their exact distance and counts
// those of the first k within the true k-th distance.
func rerankedHits(m kernels.Metric, data [][]float32, q []float32, got []store.Hit, truth dataset.Truth) int {
	var ds []float64
	for _, h := range got {
		var i int
		fmt.Sscan(h.Key, &i)
		ds = append(ds, m.Distance(q, data[i]))
	}
	slices.Sort(ds)
	hits := 0
	for _, d := range ds[:min(len(truth.Rows), len(ds))] {
		if d <= truth.KthDistance()+1e-9 {
			hits++
		}
	}
	return hits
}

func floats(b *testing.B, list string) []float64 {
	var out []float64
	for _, f := range strings.Split(list, ",") {
		var v float64
		if _, err := fmt.Sscan(f, &v); err != nil {
			b.Fatalf("%q: %v", list, err)
		}
		out = append(out, v)
	}
	return out
}
