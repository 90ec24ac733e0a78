package indexer

import (
	"context"
	"flag"
	"slices"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/vecside/vecside/indexer/dataset"
	"github.com/vecside/vecside/internal/loadgen"
	"github.com/vecside/vecside/internal/pgvalue"
)

// searchSink keeps the searches of the load benchmarks from being
// optimised away.
var searchSink atomic.Int64

// BenchmarkApplyUnderSearch measures, in process and through exported
// API only, how fast changes are applied to an index while clients
// search it: one goroutine upserts existing keys with new vectors as fast
// as it can (as the stream applies changes), first alone, then while 8
// goroutines search without pause through Indexer.Search with the default
// options (k = 10); and the searches' latency alone and while the writes
// run. Each phase lasts loadPhase; the data is clustered and normalised,
// compared by cosine. It reports the upserts applied per second idle and
// loaded, their ratio, and search p50/p99 and throughput idle and loaded.
//
// Sizes: flat store=float over 200,000 × 768, ivf and hnsw over
// 1,000,000 × 128;
// -indexer.rows, when given, sizes both, for a quick run:
//
//	go test ./indexer -run '^$' -bench ApplyUnderSearch -benchtime 1x -timeout 1h
//	go test ./indexer -run '^$' -bench ApplyUnderSearch -benchtime 1x -indexer.rows 20000
func BenchmarkApplyUnderSearch(b *testing.B) {
	const searchers, extra = 8, 50_000
	for _, c := range []struct {
		name, opts string
		rows, dims int
	}{
		{"flat-float-768d", "kind=flat store=float", 200_000, 768},
		{"ivf-128d", "kind=ivf", 1_000_000, 128},
		{"hnsw-128d", "kind=hnsw", 1_000_000, 128},
	} {
		b.Run(c.name, func(b *testing.B) {
			rows := rowsUnlessFlagged(c.rows)
			data, queries := dataset.Clustered{Seed: 3, Rows: rows + extra, Queries: 1000, Dims: c.dims, Normalize: true}.Generate()
			ix, e, keys := copiedIndexer(b, "e=t(v) key=id metric=cosine "+c.opts, data[:rows])
			upserts := 0
			write := func() float64 { // upserts per second for one phase
				began := time.Now()
				for n := 0; ; n++ {
					if elapsed := time.Since(began); elapsed >= loadPhase {
						return float64(n) / elapsed.Seconds()
					}
					e.Stream().Upsert(keys[upserts%rows], data[rows+upserts%extra])
					upserts++
				}
			}
			search := func(worker, i int) error {
				res, err := ix.Search(context.Background(), "e", queries[(worker*len(queries)/searchers+i)%len(queries)], 10, DefaultSearchOptions())
				searchSink.Add(int64(len(res.Hits)))
				return err
			}
			m := map[string][]float64{}
			b.ReportAllocs()
			b.ResetTimer()
			for range b.N {
				idle := write()
				alone := loadgen.Start(searchers, search)
				time.Sleep(loadPhase)
				quiet := alone.Stop()
				busy := loadgen.Start(searchers, search)
				loaded := write()
				contended := busy.Stop()
				for _, r := range []loadgen.Result{quiet, contended} {
					if r.Err != nil {
						b.Fatal(r.Err)
					}
				}
				for name, v := range map[string]float64{
					"applied/s-idle": idle, "applied/s-loaded": loaded, "ratio": loaded / idle,
					"search-p50-ms-idle": quiet.Latencies.Ms(0.5), "search-p99-ms-idle": quiet.Latencies.Ms(0.99), "searches/s-idle": quiet.PerSecond,
					"search-p50-ms-loaded": contended.Latencies.Ms(0.5), "search-p99-ms-loaded": contended.Latencies.Ms(0.99), "searches/s-loaded": contended.PerSecond,
				} {
					m[name] = append(m[name], v)
				}
			}
			for name, vs := range m {
				b.ReportMetric(median(vs), name)
			}
			b.ReportMetric(0, "ns/op")
		})
	}
}

// loadPhase is how long each phase of the load benchmarks lasts.
const loadPhase = 5 * time.Second

// rowsUnlessFlagged is n, or -indexer.rows if the command line sets it.
func rowsUnlessFlagged(n int) int {
	flag.Visit(func(f *flag.Flag) {
		if f.Name == "indexer.rows" {
			n = *benchRows
		}
	})
	return n
}

// copiedIndexer builds an indexer holding one index, e, defined by def,
// filled with rows as a table sync copies them (keys 0, 1, … as bigint)
// and built, and returns it with the index and the keys.
func copiedIndexer(b *testing.B, def string, rows [][]float32) (*Indexer, *Entry, []string) {
	b.Helper()
	spec, err := ParseSpec(def)
	if err != nil {
		b.Fatal(err)
	}
	ix := New()
	e, err := ix.Add(spec)
	if err != nil {
		b.Fatal(err)
	}
	if err := e.Configure(pgvalue.KeyInt8, pgvalue.VectorFloat4Array, 0); err != nil {
		b.Fatal(err)
	}
	keys := make([]string, len(rows))
	sample := rows[:min(len(rows), e.Copies().SampleSize(len(rows), len(rows[0])))]
	if err := e.Copies().BeginSync(sample, len(rows)); err != nil {
		b.Fatal(err)
	}
	e.Copies().SetSyncPoint(0x100)
	for i, v := range rows {
		if keys[i], err = pgvalue.KeyInt8.DecodeText(strconv.Itoa(i)); err != nil {
			b.Fatal(err)
		}
		e.Copies().CopyUpsert(keys[i], v, 0)
	}
	e.Copies().EndSync()
	return ix, e, keys
}

// BenchmarkCheckpointLoad measures a restart's part in process: an index
// of 1,000,000 × 128 clustered rows (-indexer.rows for fewer), built as a
// copy builds it, checkpointed to a file, then loaded from that file with
// the page cache warm (the file just written), reading and checking the
// whole file; and the p99 of the first 1,000 searches after the load
// against the steady state's (the same 1,000 queries, run again).
func BenchmarkCheckpointLoad(b *testing.B) {
	for _, c := range []struct{ name, opts string }{{"ivf-128d", "kind=ivf"}, {"hnsw-128d", "kind=hnsw"}} {
		b.Run(c.name, func(b *testing.B) {
			rows := rowsUnlessFlagged(1_000_000)
			data, queries := dataset.Clustered{Seed: 3, Rows: rows, Queries: 1000, Dims: 128, Normalize: true}.Generate()
			def := "e=t(v) key=id metric=cosine " + c.opts
			_, e, _ := copiedIndexer(b, def, data)
			if x, ok := e.c.serving.Load().index.(interface{ Flush() }); ok {
				x.Flush()
			}
			dir := b.TempDir()
			if _, err := e.Durable().Checkpoint(dir, Source{SystemID: 7, Timeline: 1, Slot: "vecside"}); err != nil {
				b.Fatal(err)
			}
			p99 := func(e *Entry) float64 {
				lat := make([]time.Duration, len(queries))
				for i, q := range queries {
					t0 := time.Now()
					if _, err := e.Search(context.Background(), q, 10, DefaultSearchOptions()); err != nil {
						b.Fatal(err)
					}
					lat[i] = time.Since(t0)
				}
				slices.Sort(lat)
				return ms(lat[len(lat)*99/100])
			}
			var loads, firsts, steadies []float64
			for range b.N {
				spec, err := ParseSpec(def)
				if err != nil {
					b.Fatal(err)
				}
				loaded := newEntry(spec)
				t0 := time.Now()
				if _, err := loaded.Durable().LoadCheckpoint(dir, Source{SystemID: 7, Timeline: 1, Slot: "vecside"}, nil); err != nil {
					b.Fatal(err)
				}
				loads = append(loads, time.Since(t0).Seconds())
				firsts = append(firsts, p99(loaded))
				steadies = append(steadies, p99(loaded))
				dropped(loaded.c.index)
			}
			b.ReportMetric(median(loads), "load-s")
			b.ReportMetric(median(firsts), "first1000-p99-ms")
			b.ReportMetric(median(steadies), "steady-p99-ms")
			b.ReportMetric(0, "ns/op")
		})
	}
}
