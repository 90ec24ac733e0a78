package ivf

import (
	"context"
	"flag"
	"fmt"
	"sync"
	"testing"

	"github.com/vecside/vecside/flat"
	"github.com/vecside/vecside/indexer/dataset"
	"github.com/vecside/vecside/indexer/store"
	"github.com/vecside/vecside/kernels"
)

var (
	benchRows = flag.Int("ivf.rows", 100000, "rows of the clustered set BenchmarkIVFSearch builds")
	benchDims = flag.Int("ivf.dims", 128, "dimensions of the clustered set BenchmarkIVFSearch builds")
)

var benchData struct {
	once          sync.Once
	data, queries [][]float32
}

func benchSet() ([][]float32, [][]float32) {
	benchData.once.Do(func() {
		benchData.data, benchData.queries = dataset.Clustered{Seed: 1, Rows: *benchRows, Queries: 1000, Dims: *benchDims, Normalize: true}.Generate()
	})
	return benchData.data, benchData.queries
}

// BenchmarkIVFSearch measures one query at a time (c1) and eight
// concurrent queries on GOMAXPROCS workers (c8), against the exact float
// scan of the same data (flat).
func BenchmarkIVFSearch(b *testing.B) {
	data, queries := benchSet()
	for _, kind := range []store.Kind{store.Ext4, store.Float} {
		x := build(b, config(kernels.Cosine, *benchDims, kind), data)
		for _, probes := range []int{0, 8, 32} {
			{
				name := fmt.Sprintf("store=%s/probes=%d", kind, probes)
				b.Run(name+"/c1", func(b *testing.B) {
					b.ReportAllocs()
					for i := 0; b.Loop(); i++ {
						x.Search(context.Background(), queries[i%len(queries)], 10, 20, probes, nil)
					}
				})
				b.Run(name+"/c8", func(b *testing.B) {
					b.SetParallelism(4)
					b.RunParallel(func(pb *testing.PB) {
						for i := 0; pb.Next(); i++ {
							x.Search(context.Background(), queries[i%len(queries)], 10, 20, probes, nil)
						}
					})
				})
			}
		}
	}
	f := flat.New(kernels.Cosine, *benchDims, 0)
	for i, v := range data {
		f.Put(keyOf(i), v)
	}
	b.Run("flat/c1", func(b *testing.B) {
		for i := 0; b.Loop(); i++ {
			f.Search(context.Background(), queries[i%len(queries)], 10, nil)
		}
	})
}
