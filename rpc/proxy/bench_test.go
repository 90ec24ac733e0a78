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
// passes through, SELECT 1 in the simple and the extended protocol: the
// same statement direct and through the proxy, alternated query by
// query so that a change in the machine's load falls on both; p50 and
// p99 of each, and the difference of the p50s. The client runs in the
// proxy's own process, so this is the proxy's own work: a client in a
// process of its own also pays the wake-ups of one more process each
// way, which pgbench -S through vecside proxy against direct measures.
//
//	go test ./rpc/proxy -run '^$' -bench PassThrough -benchtime 5000x
func BenchmarkPassThrough(b *testing.B) {
	ctx := context.Background()
	dsn := pgtest.Shared(b).NewDatabase(b)
	_, via := startProxy(b, dsn, "")
	direct, proxied := connect(b, dsn), connect(b, via)
	for _, mode := range []pgx.QueryExecMode{pgx.QueryExecModeSimpleProtocol, pgx.QueryExecModeCacheStatement} {
		b.Run(mode.String(), func(b *testing.B) {
			var lat [2][]time.Duration
			var one int
			for b.Loop() {
				for i, c := range []*pgx.Conn{direct, proxied} {
					start := time.Now()
					if err := c.QueryRow(ctx, "SELECT 1", mode).Scan(&one); err != nil {
						b.Fatal(err)
					}
					lat[i] = append(lat[i], time.Since(start))
				}
			}
			p50 := func(l []time.Duration) float64 { return float64(l[len(l)/2].Nanoseconds()) / 1000 }
			for i, name := range []string{"direct", "proxy"} {
				slices.Sort(lat[i])
				b.ReportMetric(p50(lat[i]), name+"-p50-µs")
				b.ReportMetric(float64(lat[i][len(lat[i])*99/100].Nanoseconds())/1000, name+"-p99-µs")
			}
			b.ReportMetric(p50(lat[1])-p50(lat[0]), "added-p50-µs")
		})
	}
}
