package replicate

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/vecside/vecside/indexer"
	"github.com/vecside/vecside/indexer/dataset"
	"github.com/vecside/vecside/internal/pgtest"
)

// These benchmarks measure replication end to end against the test
// cluster; each iteration is one whole scenario, so run them with
// -benchtime 1x (and -count for medians):
//
//	go test ./replicate -run '^$' -bench . -benchtime 1x -count 3 -timeout 1h

// benchRows sizes the restart benchmark (1M × 128 as in the issue);
// VECSIDE_BENCH_ROWS overrides it for quicker runs.
func benchRows() int {
	if n, err := strconv.Atoi(os.Getenv("VECSIDE_BENCH_ROWS")); err == nil && n > 0 {
		return n
	}
	return 1_000_000
}

// benchIndex is the kind and options of the restart benchmark's index
// (default: the flat float index); VECSIDE_BENCH_INDEX overrides it, e.g.
// "kind=hnsw".
func benchIndex() string { return os.Getenv("VECSIDE_BENCH_INDEX") }

// loadClustered fills items(id bigint primary key, embedding real[])
// with the benchmark data set and returns its queries.
func loadClustered(b *testing.B, h *harness, rows, dims int) [][]float32 {
	b.Helper()
	data, queries := dataset.Clustered{Seed: 42, Rows: rows, Queries: 1000, Dims: dims, Normalize: true}.Generate()
	h.exec(`CREATE TABLE items (id bigint PRIMARY KEY, embedding real[])`)
	_, err := h.conn.CopyFrom(h.ctx, pgx.Identifier{"items"}, []string{"id", "embedding"},
		pgx.CopyFromSlice(len(data), func(i int) ([]any, error) { return []any{int64(i + 1), data[i]}, nil }))
	if err != nil {
		b.Fatal(err)
	}
	// Vacuumed as well as analyzed: an autovacuum of the freshly loaded
	// table would otherwise run during the measurement, a transient of
	// the load, not of the steady state measured.
	h.exec(`VACUUM (ANALYZE) items`)
	return queries
}

func benchHarness(b *testing.B) *harness {
	ctx := context.Background()
	dsn := pgtest.Shared(b).NewDatabase(b)
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { conn.Close(ctx) })
	return &harness{t: b, ctx: ctx, dsn: dsn, conn: conn, ix: indexer.New()}
}

// timeUntilCaughtUp measures from now until every index is ready and has
// applied the WAL written so far.
func timeUntilCaughtUp(b *testing.B, h *harness, began time.Time) time.Duration {
	b.Helper()
	for _, e := range h.ix.Entries() {
		waitReadyWithin(b, e, 15*time.Minute) // a graph over 1M rows takes minutes
	}
	h.catchUp()
	return time.Since(began)
}

// p99 of n searches of the first index, one after another.
func searchP99(b *testing.B, h *harness, queries [][]float32, n int) time.Duration {
	e := h.ix.Entries()[0]
	lat := make([]time.Duration, n)
	for i := range lat {
		t0 := time.Now()
		if _, err := e.Search(h.ctx, queries[i%len(queries)], 10, indexer.DefaultSearchOptions()); err != nil {
			b.Fatal(err)
		}
		lat[i] = time.Since(t0)
	}
	slices.Sort(lat)
	return lat[n*99/100]
}

// dropPageCache empties the kernel's page cache, for a cold restart; it
// needs root, and reports whether it could.
func dropPageCache() bool {
	exec.Command("sync").Run()
	return os.WriteFile("/proc/sys/vm/drop_caches", []byte("3\n"), 0) == nil
}

// BenchmarkRestart: a sidecar restarting from its checkpoint, with a WAL
// backlog written while it was down, until it serves caught up; warm and
// cold page cache; against copying the table again. Also the p99 of the
// first 1,000 searches after the restart against steady state.
func BenchmarkRestart(b *testing.B) {
	const dims = 128
	rows := benchRows()
	for i := 0; i < b.N; i++ {
		h := benchHarness(b)
		queries := loadClustered(b, h, rows, dims)
		h.add("items_embedding=items(embedding) key=id metric=cosine " + benchIndex())
		dir := b.TempDir()
		cfg := Config{DataDir: dir}

		began := time.Now()
		h.start(cfg)
		snapshot := timeUntilCaughtUp(b, h, began)
		searchP99(b, h, queries, 1000) // warm-up
		steady := searchP99(b, h, queries, 1000)
		e := h.ix.Entries()[0]
		for deadline := time.Now().Add(5 * time.Minute); e.Status().Checkpoints == 0; time.Sleep(50 * time.Millisecond) {
			if time.Now().After(deadline) {
				b.Fatal("no checkpoint after the copy")
			}
		}
		st := e.Status()
		b.ReportMetric(float64(st.CheckpointPause.Microseconds())/1000, "checkpoint-pause-ms")
		b.ReportMetric(st.CheckpointTime.Seconds(), "checkpoint-s")

		for _, mode := range []string{"warm", "cold"} {
			h.stop()                                                            // a clean stop writes the final checkpoint
			h.exec(`UPDATE items SET embedding = embedding WHERE id % 100 = 0`) // a backlog of 1% of the rows
			if mode == "cold" && !dropPageCache() {
				b.Log("cannot drop the page cache here (needs root and /proc/sys/vm): cold restart not measured")
				continue
			}
			began = time.Now()
			h.restart(cfg)
			restart := timeUntilCaughtUp(b, h, began)
			first := searchP99(b, h, queries, 1000)
			if n := h.rep.Stats().CopiedRows.Load(); n != 0 {
				b.Fatalf("%s restart copied %d rows", mode, n)
			}
			b.ReportMetric(restart.Seconds(), mode+"-restart-s")
			b.ReportMetric(float64(first)/float64(steady), mode+"-first1000-p99/steady")
		}
		b.ReportMetric(snapshot.Seconds(), "resnapshot-s")
		size, _ := os.Stat(filepath.Join(dir, "items_embedding.ckpt"))
		b.ReportMetric(float64(size.Size())/float64(rows), "checkpoint-B/row")
		h.stop()
	}
}

// drainScenario builds a backlog in a slot while the sidecar is stopped,
// then times the sidecar draining it against pg_recvlogical draining the
// same backlog from a second slot created at the same moment.
func drainScenario(b *testing.B, backlog func(h *harness)) {
	h := benchHarness(b)
	h.exec(`CREATE TABLE items (id bigint PRIMARY KEY, embedding real[])`)
	h.add("items_embedding=items(embedding) key=id metric=l2")
	cfg := Config{DataDir: b.TempDir(), StatusInterval: 100 * time.Millisecond}
	h.start(cfg)
	timeUntilCaughtUp(b, h, time.Now())
	h.stop()
	h.exec(`SELECT pg_create_logical_replication_slot('recvlogical', 'pgoutput')`)
	backlog(h)
	var end string
	if err := h.conn.QueryRow(h.ctx, `SELECT pg_current_wal_lsn()::text`).Scan(&end); err != nil {
		b.Fatal(err)
	}

	u, _ := pgx.ParseConfig(h.dsn)
	recv := exec.Command(filepath.Join(pgtest.DefaultBinDir, "pg_recvlogical"),
		"-h", u.Host, "-p", strconv.Itoa(int(u.Port)), "-U", u.User, "-d", u.Database,
		"-S", "recvlogical", "--start", "-E", end, "-f", "/dev/null", "--no-loop",
		"-o", "proto_version=1", "-o", "publication_names=vecside", "-o", "binary=true")
	began := time.Now()
	if out, err := recv.CombinedOutput(); err != nil {
		b.Fatalf("pg_recvlogical: %v\n%s", err, out)
	}
	reference := time.Since(began)

	began = time.Now()
	h.restart(cfg)
	ours := timeUntilCaughtUp(b, h, began)
	h.stop()
	h.exec(`SELECT pg_drop_replication_slot('recvlogical')`)
	b.ReportMetric(ours.Seconds(), "vecside-s")
	b.ReportMetric(reference.Seconds(), "pg_recvlogical-s")
	b.ReportMetric(reference.Seconds()/ours.Seconds(), "throughput-vs-recvlogical")
}

// BenchmarkDrain: a backlog of 200,000 single-row transactions, and one
// transaction of 1,000,000 rows, of 128-d vectors.
func BenchmarkDrain(b *testing.B) {
	const dims = 128
	b.Run("200k-single-row-transactions", func(b *testing.B) {
		for i := 0; i < b.N; i++ {
			drainScenario(b, func(h *harness) {
				// Many sessions commit one row each, as an application does.
				const writers = 4
				errs := make(chan error, writers)
				for w := 0; w < writers; w++ {
					go func() {
						conn, err := pgx.Connect(h.ctx, h.dsn)
						if err != nil {
							errs <- err
							return
						}
						defer conn.Close(h.ctx)
						for id := w; id < 200_000; id += writers {
							if _, err := conn.Exec(h.ctx, `INSERT INTO items SELECT $1::bigint, array_fill(($1::bigint % 97)::real, ARRAY[128])`, id+1); err != nil {
								errs <- err
								return
							}
						}
						errs <- nil
					}()
				}
				for w := 0; w < writers; w++ {
					if err := <-errs; err != nil {
						b.Fatal(err)
					}
				}
			})
		}
	})
	b.Run("one-1M-row-transaction", func(b *testing.B) {
		for i := 0; i < b.N; i++ {
			drainScenario(b, func(h *harness) {
				h.exec(fmt.Sprintf(`INSERT INTO items SELECT g, array_fill((g %% 97)::real, ARRAY[%d]) FROM generate_series(1, 1000000) g`, dims))
			})
		}
	})
}

// BenchmarkLag: replication lag under a steady 2,000 rows/s: for each
// commit, the time from COMMIT returning to the index having applied it.
func BenchmarkLag(b *testing.B) {
	const rate, seconds, perTx = 2000, 20, 10
	for i := 0; i < b.N; i++ {
		h := benchHarness(b)
		h.exec(`CREATE TABLE items (id bigint PRIMARY KEY, embedding real[])`)
		e := h.add("items_embedding=items(embedding) key=id metric=l2")
		h.start(Config{DataDir: b.TempDir()})
		timeUntilCaughtUp(b, h, time.Now())
		tick := time.NewTicker(time.Second * perTx / rate)
		var lags []time.Duration
		id := 0
		deadline := time.Now().Add(seconds * time.Second)
		for time.Now().Before(deadline) {
			<-tick.C
			if _, err := h.conn.Exec(h.ctx, `INSERT INTO items SELECT g, array_fill((g % 97)::real, ARRAY[128]) FROM generate_series($1::int, $2::int) g`, id+1, id+perTx); err != nil {
				b.Fatal(err)
			}
			id += perTx
			committed := time.Now()
			var lsn string
			if err := h.conn.QueryRow(h.ctx, `SELECT pg_current_wal_lsn()::text`).Scan(&lsn); err != nil {
				b.Fatal(err)
			}
			want, _ := indexer.ParseLSN(lsn)
			ctx, cancel := context.WithTimeout(h.ctx, 10*time.Second)
			err := e.WaitApplied(ctx, want)
			cancel()
			if err != nil {
				b.Fatal(err)
			}
			lags = append(lags, time.Since(committed))
		}
		tick.Stop()
		h.stop()
		slices.Sort(lags)
		b.ReportMetric(float64(lags[len(lags)/2].Microseconds())/1000, "lag-p50-ms")
		b.ReportMetric(float64(lags[len(lags)*99/100].Microseconds())/1000, "lag-p99-ms")
		b.ReportMetric(float64(id)/seconds, "rows/s")
	}
}
