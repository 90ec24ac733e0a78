package indexer

import (
	"flag"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/vecside/vecside/indexer/dataset"
)

var benchRows = flag.Int("indexer.rows", 200_000, "rows of the copy BenchmarkSync builds from")

// BenchmarkSync builds an index from a copy of -indexer.rows × 128
// clustered rows, read by two copy readers, while the stream applies
// changes at 2,000 per second, and reports how long the build took (the
// training on a sample, then the copy) and how long the changes waited:
// their p99 and the longest.
func BenchmarkSync(b *testing.B) {
	const dims, every = 128, 500 * time.Microsecond
	rows := *benchRows
	data, _ := dataset.Clustered{Seed: 3, Rows: rows + 50_000, Dims: dims}.Generate()
	for _, opts := range []string{"kind=ivf", "kind=flat store=ext4", "kind=hnsw"} {
		b.Run(opts, func(b *testing.B) {
			var builds, p99s, worst []float64
			for range b.N {
				spec, err := ParseSpec("e=t(v) key=id metric=l2 " + opts)
				if err != nil {
					b.Fatal(err)
				}
				e := newEntry(spec)
				began := time.Now()
				sample := data[:min(rows, e.Copies().SampleSize(rows, dims))]
				if err := e.Copies().BeginSync(sample, rows); err != nil {
					b.Fatal(err)
				}
				e.Copies().SetSyncPoint(0x100)
				var copiers sync.WaitGroup
				for part := range 2 {
					copiers.Go(func() {
						for i := part; i < rows; i += 2 {
							e.Copies().CopyUpsert(fmt.Sprint(i), data[i], 0)
						}
					})
				}
				done := make(chan struct{})
				go func() { copiers.Wait(); e.Copies().EndSync(); close(done) }()
				var waits []time.Duration
				for i := 0; !isClosed(done); i++ {
					t0 := time.Now()
					e.Stream().Begin(LSN(0x200 + i))
					e.Stream().Upsert(fmt.Sprint(rows+i%50_000), data[rows+i%50_000])
					waits = append(waits, time.Since(t0))
					time.Sleep(every - time.Since(t0))
				}
				slices.Sort(waits)
				builds = append(builds, time.Since(began).Seconds())
				p99s = append(p99s, ms(waits[len(waits)*99/100]))
				worst = append(worst, ms(waits[len(waits)-1]))
			}
			b.ReportMetric(median(builds), "build-s")
			b.ReportMetric(median(p99s), "p99-change-ms")
			b.ReportMetric(median(worst), "max-change-ms")
			b.ReportMetric(0, "ns/op")
		})
	}
}

func isClosed(c <-chan struct{}) bool {
	select {
	case <-c:
		return true
	default:
		return false
	}
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

func median(xs []float64) float64 {
	s := slices.Clone(xs)
	slices.Sort(s)
	return s[len(s)/2]
}
