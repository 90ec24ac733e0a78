package indexer

import (
	"flag"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/vecside/vecside/internal/dataset"
)

var benchRows = flag.Int("indexer.rows", 200_000, "rows of the copy BenchmarkEndSync builds from")

// BenchmarkEndSync builds an index from a copy of -indexer.rows × 128
// clustered rows while changes arrive at 2,000 per second, as the stream
// applies them during a table sync, and reports how long the build took
// and how long the changes waited: their p99 and the longest.
func BenchmarkEndSync(b *testing.B) {
	const dims, every = 128, 500 * time.Microsecond
	rows := *benchRows
	data, _ := dataset.Clustered{Seed: 3, Rows: rows + 50_000, Dims: dims}.Generate()
	for _, k := range buildingKinds {
		b.Run(k.opts, func(b *testing.B) {
			var builds, p99s, worst []float64
			for range b.N {
				spec, err := ParseSpec("e=t(v) key=id metric=l2 " + k.opts)
				if err != nil {
					b.Fatal(err)
				}
				e := newEntry(spec)
				e.BeginSync(0x100)
				for i, v := range data[:rows] {
					e.CopyUpsert(fmt.Sprint(i), v)
				}
				done, took := endSyncInBackground(e)
				var waits []time.Duration
				for i := 0; !isClosed(done); i++ {
					began := time.Now()
					e.Upsert(fmt.Sprint(rows+i%50_000), data[rows+i%50_000])
					waits = append(waits, time.Since(began))
					time.Sleep(every - time.Since(began))
				}
				if !k.built(e.Status().IndexStats) {
					b.Fatalf("not built: %+v", e.Status().IndexStats)
				}
				slices.Sort(waits)
				builds = append(builds, took.Seconds())
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

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

func median(xs []float64) float64 {
	s := slices.Clone(xs)
	slices.Sort(s)
	return s[len(s)/2]
}
