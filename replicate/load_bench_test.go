package replicate

import (
	"context"
	"flag"
	"net"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/vecside/vecside/indexer"
	"github.com/vecside/vecside/indexer/dataset"
	"github.com/vecside/vecside/internal/loadgen"
	"github.com/vecside/vecside/internal/procs"
	"github.com/vecside/vecside/internal/writeload"
	"github.com/vecside/vecside/rpc"
)

var pacedRate = flag.Float64("replicate.paced", 500, "searches per second, in all, of BenchmarkLagUnderSearch's paced phases")

var loadRows = flag.Int("replicate.rows", 0, "rows of the table BenchmarkLagUnderSearch copies first; 0 for 200,000 (flat) and 1,000,000 (ivf)")

// BenchmarkLagUnderSearch: replication lag while clients search. Single-row
// commits at 2,000 rows/s of 128-d clustered vectors from pgbench, first
// with no searches, then while 8 pgwire clients search without pause
// through a real rpc server (SELECT * FROM knn($1, $2, $3), k = 10), then
// while the 8 clients search at -replicate.paced searches per second in
// all; every 10 ms, the time from taking the source's WAL position to the
// index having applied that far (see writeAtRate). It reports the lag's
// p50 and p99 in each phase, the rows per second the writer achieved, and
// the searches' p99 alone (half a phase before each loaded one) and under
// the writes, with their throughput. Searching without pause, the clients
// take every core the writes leave, so their latency follows that share;
// paced, it shows what the writes do to a search load the machine has
// room for. For the two loaded phases it also reports how busy the machine
// was, the share other tenants of the VM's host took from it (steal), and
// the cores this process (sidecar and clients) used: a phase whose machine
// was full measured capacity, not scheduling. The table holds 200,000 rows
// for flat store=float and 1,000,000 for ivf and hnsw before the phases;
// -replicate.rows sizes both, for a quick run (the phases add 120,000 rows:
// a table of fewer than 60,000 grows past the three times its codes were
// trained for, and the index is rebuilt from the table while the phases
// run):
//
//	go test ./replicate -run '^$' -bench LagUnderSearch -benchtime 1x -timeout 1h
//	go test ./replicate -run '^$' -bench LagUnderSearch -benchtime 1x -replicate.rows 20000
func BenchmarkLagUnderSearch(b *testing.B) {
	defer procs.Serve()() // as cmd/vecside serves
	const dims, rate, phase, clients = 128, 2000, 20 * time.Second, 8
	perPhase := rate * int(phase/time.Second)
	for _, c := range []struct {
		name, opts string
		rows       int
	}{
		{"flat-float", "kind=flat store=float", 200_000},
		{"ivf", "kind=ivf", 1_000_000},
		{"hnsw", "kind=hnsw", 1_000_000},
	} {
		b.Run(c.name, func(b *testing.B) {
			rows := c.rows
			if *loadRows > 0 {
				rows = *loadRows
			}
			for range b.N {
				h := benchHarness(b)
				queries := loadClustered(b, h, rows, dims)
				// Held-out draws beyond loadClustered's 1,000 queries: new
				// rows from the table's distribution.
				_, more := dataset.Clustered{Seed: 42, Rows: rows, Queries: len(queries) + 3*perPhase, Dims: dims, Normalize: true}.Generate()
				inserts := more[len(queries):]
				e := h.add("items_embedding=items(embedding) key=id metric=cosine " + c.opts)
				h.start(Config{DataDir: b.TempDir()})
				timeUntilCaughtUp(b, h, time.Now())
				// The first checkpoint follows the copy at once; its write
				// is no part of the steady state measured here.
				for e.Durable().Covered() == 0 {
					time.Sleep(50 * time.Millisecond)
				}
				conns := searchClients(b, h, clients)

				idleLag, idleRate := writeAtRate(b, h, e, inserts[:perPhase], rows+1, rate, phase)
				h.catchUp()
				search := func(client, i int) error {
					r, err := conns[client].Query(h.ctx, "SELECT * FROM knn($1, $2, $3)", "items_embedding", queries[(client*len(queries)/clients+i)%len(queries)], 10)
					if err != nil {
						return err
					}
					r.Close()
					return r.Err()
				}
				alone := loadgen.Start(clients, search)
				time.Sleep(phase / 2)
				quiet := alone.Stop()
				searches := loadgen.Start(clients, search)
				cpu0 := readCPU(b)
				lag, loadedRate := writeAtRate(b, h, e, inserts[perPhase:2*perPhase], rows+1+perPhase, rate, phase)
				loadedCPU := readCPU(b).Since(cpu0)
				searched := searches.Stop()
				h.catchUp()
				alonePaced := loadgen.Paced(clients, *pacedRate, search)
				time.Sleep(phase / 2)
				quietPaced := alonePaced.Stop()
				paced := loadgen.Paced(clients, *pacedRate, search)
				cpu0 = readCPU(b)
				pacedLag, _ := writeAtRate(b, h, e, inserts[2*perPhase:], rows+1+2*perPhase, rate, phase)
				pacedCPU := readCPU(b).Since(cpu0)
				searchedPaced := paced.Stop()
				h.stop()
				for _, r := range []loadgen.Result{quiet, searched, quietPaced, searchedPaced} {
					if r.Err != nil {
						b.Fatal(r.Err)
					}
				}
				b.ReportMetric(quiet.Latencies.Ms(0.99), "search-p99-ms-idle")
				b.ReportMetric(idleLag.Ms(0.5), "lag-p50-ms-idle")
				b.ReportMetric(idleLag.Ms(0.99), "lag-p99-ms-idle")
				b.ReportMetric(idleRate, "rows/s-idle")
				b.ReportMetric(lag.Ms(0.5), "lag-p50-ms-loaded")
				b.ReportMetric(lag.Ms(0.99), "lag-p99-ms-loaded")
				b.ReportMetric(loadedRate, "rows/s-loaded")
				b.ReportMetric(searched.PerSecond, "searches/s")
				b.ReportMetric(searched.Latencies.Ms(0.99), "search-p99-ms")
				b.ReportMetric(quietPaced.Latencies.Ms(0.99), "paced-search-p99-ms-idle")
				b.ReportMetric(searchedPaced.Latencies.Ms(0.99), "paced-search-p99-ms")
				b.ReportMetric(searchedPaced.Latencies.Ms(0.5), "paced-search-p50-ms")
				b.ReportMetric(searchedPaced.Latencies.Ms(0.9), "paced-search-p90-ms")
				b.ReportMetric(searchedPaced.PerSecond, "paced-searches/s")
				b.ReportMetric(pacedLag.Ms(0.99), "paced-lag-p99-ms")
				for _, u := range []struct {
					phase string
					use   loadgen.CPUUse
				}{{"loaded", loadedCPU}, {"paced", pacedCPU}} {
					b.ReportMetric(100*u.use.Busy, "machine-busy-%-"+u.phase)
					b.ReportMetric(100*u.use.Steal, "steal-%-"+u.phase)
					b.ReportMetric(u.use.Cores, "process-cores-"+u.phase)
				}
				b.ReportMetric(0, "ns/op")
			}
		})
	}
}

// readCPU reads the machine's and the process's CPU time.
func readCPU(b *testing.B) loadgen.CPU {
	b.Helper()
	c, err := loadgen.ReadCPU()
	if err != nil {
		b.Fatal(err)
	}
	return c
}

// searchClients serves h's indexes over pgwire on a loopback port until
// the benchmark ends, and opens n client connections to it.
func searchClients(b *testing.B, h *harness, n int) []*pgx.Conn {
	b.Helper()
	srv, err := rpc.NewServer(rpc.Config{Catalog: h.ix, Auth: "trust"})
	if err != nil {
		b.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	ctx, cancel := context.WithCancel(h.ctx)
	served := make(chan error, 1)
	go func() { served <- srv.Serve(ctx, ln) }()
	b.Cleanup(func() {
		cancel()
		if err := <-served; err != nil {
			b.Error(err)
		}
	})
	conns := make([]*pgx.Conn, n)
	for i := range conns {
		if conns[i], err = pgx.Connect(h.ctx, "postgres://bench@"+ln.Addr().String()+"/bench?sslmode=disable"); err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { conns[i].Close(h.ctx) })
	}
	return conns
}

// writeAtRate inserts vecs one row per transaction, with ids from
// firstID, at rate rows per second for d, from pgbench, probing every
// 10 ms how long the index takes to apply the source's WAL position (see
// internal/writeload). It returns the lags and the rows per second
// achieved.
func writeAtRate(b *testing.B, h *harness, e *indexer.Entry, vecs [][]float32, firstID, rate int, d time.Duration) (loadgen.Latencies, float64) {
	b.Helper()
	r, err := writeload.Run(h.ctx, writeload.Config{DSN: h.dsn, Conn: h.conn, Table: "items", Key: "id", Vector: "embedding",
		Vectors: vecs, FirstID: int64(firstID), Rate: rate, Duration: d, WaitApplied: e.WaitApplied, Dir: b.TempDir()})
	if err != nil {
		b.Fatal(err)
	}
	return r.Lag, r.PerSecond
}
