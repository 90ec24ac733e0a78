package hnsw

import (
	"bytes"
	"context"
	"flag"
	"fmt"
	"math/rand/v2"
	"os"
	"runtime"
	"sort"
	"sync"
	"testing"
	"time"

	"github.com/vecside/vecside/indexer/dataset"
	"github.com/vecside/vecside/indexer/store"
	"github.com/vecside/vecside/kernels"
)

var (
	benchRows  = flag.Int("hnsw.rows", 100000, "rows of the set the benchmarks build")
	benchSet   = flag.String("hnsw.set", "clustered", "the set the benchmarks build: clustered or textlike (indexer/dataset)")
	benchDims  = flag.Int("hnsw.dims", 128, "dimensions of the set the benchmarks build")
	benchStore = flag.String("hnsw.store", "ext6", "store of the benchmarks' index")
	benchM     = flag.Int("hnsw.m", DefaultM, "m of the benchmarks' index")
	benchEfc   = flag.Int("hnsw.efc", DefaultEfConstruction, "ef_construction of the benchmarks' index")
	benchEfs   = flag.String("hnsw.ef", "16,24,32,48,64,96,128,192,256", "ef_search values BenchmarkSearch sweeps")
	benchOver  = flag.Int("hnsw.oversample", 3, "candidates per k BenchmarkSearch asks for")
	benchCache = flag.String("hnsw.cache", "", "a file to load the benchmarks' index from if it exists, else to save it to once built")
)

// benchIndex is the -hnsw.set cosine set (128-d clustered by default) of
// -hnsw.rows rows, 1,000 held-out queries, their exact top 10, and an
// index built over it, once per test binary.
var benchIndex struct {
	once          sync.Once
	data, queries [][]float32
	truth         []dataset.Truth
	x             *Index
	build         time.Duration
	heap          uint64 // live heap after the build, less the data set's
}

func benchSetup(b *testing.B) {
	benchIndex.once.Do(func() {
		bi := &benchIndex
		switch *benchSet {
		case "clustered":
			bi.data, bi.queries = dataset.Clustered{Seed: 1, Rows: *benchRows, Queries: 1000, Dims: *benchDims, Normalize: true}.Generate()
		case "textlike":
			bi.data, bi.queries = dataset.TextLike{Seed: 1, Rows: *benchRows, Queries: 1000, Dims: *benchDims}.Generate()
		default:
			b.Fatalf("-hnsw.set %q: want clustered or textlike", *benchSet)
		}
		bi.truth = dataset.GroundTruth(kernels.Cosine, bi.data, bi.queries, 10)
		kind, err := store.ParseKind(*benchStore)
		if err != nil {
			b.Fatal(err)
		}
		cfg := config(kernels.Cosine, *benchDims, kind)
		cfg.M, cfg.EfConstruction = *benchM, *benchEfc
		if body, err := os.ReadFile(*benchCache); err == nil && *benchCache != "" {
			if bi.x, err = Load(bytes.NewReader(body), cfg); err != nil {
				b.Fatal(err)
			}
			bi.x.cur.Load().countUnreachable()
			return
		}
		before := heapInUse()
		t0 := time.Now()
		x, err := New(cfg, bi.data[:SampleFor(len(bi.data), 128)], len(bi.data))
		if err != nil {
			b.Fatal(err)
		}
		put(x, bi.data, 0, len(bi.data))
		x.Flush()
		bi.build = time.Since(t0)
		x.cur.Load().countUnreachable()
		bi.x = x
		bi.heap = heapInUse() - before
		if *benchCache != "" {
			var buf bytes.Buffer
			write, release := x.Snapshot()
			if err := write(&buf); err != nil {
				b.Fatal(err)
			}
			release()
			if err := os.WriteFile(*benchCache, buf.Bytes(), 0o600); err != nil {
				b.Fatal(err)
			}
		}
	})
}

func heapInUse() uint64 {
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return ms.HeapInuse
}

// BenchmarkBuild reports the build of the -hnsw.set set (every core:
// rows prepared in parallel, linked by Config.Linkers goroutines) and the
// index's bytes per row, by its Stats and by the Go heap it holds.
func BenchmarkBuild(b *testing.B) {
	benchSetup(b)
	bi := &benchIndex
	st := bi.x.Stats()
	for b.Loop() {
	}
	b.ReportMetric(bi.build.Seconds(), "build-s")
	b.ReportMetric(float64(len(bi.data))/bi.build.Seconds(), "rows/s")
	b.ReportMetric(st.BytesPerRow(), "B/row")
	b.ReportMetric(float64(bi.heap)/float64(st.Rows), "heapB/row")
	b.ReportMetric(float64(figure(b, st, unreachableRows)), "unreachable")
	b.Logf("%d rows, m=%d ef_construction=%d store=%s: built in %.1fs; %s", st.Rows, *benchM, *benchEfc, *benchStore, bi.build.Seconds(), st.FigurePairs())
}

// BenchmarkSearch sweeps ef_search, one query at a time on one goroutine:
// recall@10 after an exact re-rank of the candidates (k × -hnsw.oversample
// at most), recall of the first 10 returned, and QPS.
func BenchmarkSearch(b *testing.B) {
	benchSetup(b)
	bi := &benchIndex
	efs, err := intList(*benchEfs)
	if err != nil {
		b.Fatal(err)
	}
	for _, ef := range efs {
		b.Run(fmt.Sprintf("ef=%d", ef), func(b *testing.B) {
			search := searcher(b, bi.x, 10, 10**benchOver, ef)
			rec := recall(b, kernels.Cosine, bi.data, bi.queries, bi.truth, search)
			first := recall(b, kernels.Cosine, bi.data, bi.queries, bi.truth, func(q []float32) []store.Hit {
				h := search(q)
				return h[:min(10, len(h))]
			})
			i := 0
			for b.Loop() {
				search(bi.queries[i%len(bi.queries)])
				i++
			}
			b.ReportMetric(rec, "recall")
			b.ReportMetric(first, "recall-first-k")
			b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "qps")
		})
	}
}

// BenchmarkLoad reports the time to load a checkpoint body of the index
// (from memory: the file system's part is the indexer's) and the size of
// the body.
func BenchmarkLoad(b *testing.B) {
	benchSetup(b)
	bi := &benchIndex
	var buf bytes.Buffer
	write, release := bi.x.Snapshot()
	if err := write(&buf); err != nil {
		b.Fatal(err)
	}
	release()
	for b.Loop() {
		y, err := Load(bytes.NewReader(buf.Bytes()), bi.x.Config())
		if err != nil {
			b.Fatal(err)
		}
		y.Close()
	}
	b.ReportMetric(float64(buf.Len())/float64(bi.x.Len()), "bodyB/row")
}

func intList(s string) ([]int, error) {
	var out []int
	for _, f := range bytes.Split([]byte(s), []byte(",")) {
		var n int
		if _, err := fmt.Sscan(string(f), &n); err != nil {
			return nil, err
		}
		out = append(out, n)
	}
	sort.Ints(out)
	return out, nil
}

// BenchmarkFilter measures filtered searches (allow-sets of 50%, 10%, 1%
// and 0.1% of the rows, drawn at random) at the default ef_search: recall
// @10 after an exact re-rank against an exact filtered search (200 of the
// held-out queries), µs per search given the allowed row ids, and µs to
// turn the allowed keys into row ids, which Search does for each query.
func BenchmarkFilter(b *testing.B) {
	benchSetup(b)
	bi := &benchIndex
	queries := bi.queries[:200]
	rng := rand.New(rand.NewPCG(11, 12))
	for _, share := range []float64{0.5, 0.1, 0.01, 0.001} {
		var allowed []string
		var sub [][]float32
		var rows []int
		for i := range bi.data {
			if rng.Float64() < share {
				allowed = append(allowed, keyOf(i))
				sub = append(sub, bi.data[i])
				rows = append(rows, i)
			}
		}
		truth := dataset.GroundTruth(kernels.Cosine, sub, queries, 10)
		for i := range truth {
			for j, row := range truth[i].Rows {
				truth[i].Rows[j] = rows[row]
			}
		}
		b.Run(fmt.Sprintf("allowed=%g%%", 100*share), func(b *testing.B) {
			mode := "graph"
			if bi.x.cur.Load().scanCheaper(len(allowed), bi.x.cfg.EfSearch) {
				mode = "scan"
			}
			search := func(q []float32) []store.Hit {
				hits, err := bi.x.Search(context.Background(), q, 10, 30, 0, allowed)
				if err != nil {
					b.Fatal(err)
				}
				return hits
			}
			rec := recall(b, kernels.Cosine, bi.data, queries, truth, search)
			r := bi.x.cur.Load()
			guard := r.ep.Pin()
			defer guard.Unpin()
			t0 := time.Now()
			a := r.allowSet(allowed)
			set := time.Since(t0)
			sc := bi.x.getScratch(10)
			i := 0
			for b.Loop() {
				sc.s.Reset(10)
				sc.budget, sc.spent = 0, 0
				r.codes.setQuery(&sc.q, queries[i%len(queries)])
				r.search(sc, 10, bi.x.cfg.EfSearch, a, true)
				sc.s.Result(30)
				i++
			}
			b.ReportMetric(rec, "recall")
			b.ReportMetric(float64(b.Elapsed().Microseconds())/float64(b.N), "µs/search")
			b.ReportMetric(float64(set.Microseconds()), "µs/keys-to-ids")
			b.Logf("%.1f%% allowed (%d rows): %s", 100*share, len(allowed), mode)
		})
	}
}
