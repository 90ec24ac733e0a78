//go:build cgo

package proxy

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/vecside/vecside/internal/pgtest"
)

// BenchmarkPassThrough measures what the proxy adds to a statement it
// passes through, SELECT 1 in the simple and the extended protocol,
// against the same statement direct: p50 and p99 latency.
//
//	go test ./internal/proxy -run '^$' -bench PassThrough -benchtime 5000x
func BenchmarkPassThrough(b *testing.B) {
	ctx := context.Background()
	dsn := pgtest.Shared(b).NewDatabase(b)
	_, via := startProxy(b, dsn, "")
	for _, target := range []struct{ name, dsn string }{{"direct", dsn}, {"proxy", via}} {
		c := connect(b, target.dsn)
		for _, mode := range []pgx.QueryExecMode{pgx.QueryExecModeSimpleProtocol, pgx.QueryExecModeCacheStatement} {
			b.Run(target.name+"/"+mode.String(), func(b *testing.B) {
				lat := make([]time.Duration, 0, b.N)
				var one int
				for b.Loop() {
					start := time.Now()
					if err := c.QueryRow(ctx, "SELECT 1", mode).Scan(&one); err != nil {
						b.Fatal(err)
					}
					lat = append(lat, time.Since(start))
				}
				slices.Sort(lat)
				b.ReportMetric(float64(lat[len(lat)/2].Microseconds()), "p50-µs")
				b.ReportMetric(float64(lat[len(lat)*99/100].Microseconds()), "p99-µs")
			})
		}
	}
}
