package heapfetch_test

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"math"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/vecside/vecside/cmd/vecside/sidecar"
	"github.com/vecside/vecside/deploy"
	"github.com/vecside/vecside/heapfetch"
	"github.com/vecside/vecside/indexer"
	"github.com/vecside/vecside/internal/pgtest"
	"github.com/vecside/vecside/internal/workload"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

var metrics = []string{"l2", "cosine", "ip"}

// TestMatchesExactSQL is the end-to-end acceptance test: 5,000 TOASTed
// 768-d rows, a sidecar following them through every kind of change, and
// for 20 held-out queries and each metric, heapfetch's top 10 equal to an
// exact ORDER BY … LIMIT 10 computed in SQL.
func TestMatchesExactSQL(t *testing.T) {
	const dims, rows, queries, k = 768, 5000, 20, 10
	ctx := context.Background()
	dsn, db := newDatabase(t)
	mustExec(t, db, deploy.DistanceSQL)
	mustExec(t, db, workload.CreateTable(rows, dims))

	var defs []string
	for _, m := range metrics {
		defs = append(defs, fmt.Sprintf("items_%s=public.items(embedding) key=id metric=%s", m, m))
	}
	sc, side := startSidecar(t, dsn, defs...)
	rng := rand.New(rand.NewPCG(3, 4))
	for _, sql := range workload.Changes(rng, dims) {
		mustExec(t, db, sql)
	}
	waitApplied(t, db, sc)
	client := heapfetch.New(side, db)
	for _, m := range metrics {
		st := mustEntry(t, sc, "items_"+m).Status()
		if st.Skipped != 2 {
			t.Errorf("%s: skipped_rows = %d, want 2", m, st.Skipped)
		}
	}
	qs := make([][]float32, queries)
	for i := range qs {
		qs[i] = make([]float32, dims)
		for j := range qs[i] {
			qs[i][j] = rng.Float32()*2 - 1
		}
	}
	truth := exactTopKs(t, dsn, qs, k)
	for qi, q := range qs {
		for _, m := range metrics {
			got, err := client.Search(ctx, heapfetch.Request{Index: "items_" + m, Vector: q, K: k})
			if err != nil {
				t.Fatalf("query %d, %s: %v", qi, m, err)
			}
			if msg := compareTopK(got, truth[qi][m]); msg != "" {
				t.Errorf("query %d, %s: %s", qi, m, msg)
			}
		}
	}
}

// newDatabase creates a database for the test and connects to it.
func newDatabase(t testing.TB) (string, *pgx.Conn) {
	t.Helper()
	dsn := pgtest.Shared(t).NewDatabase(t)
	db, err := pgx.Connect(context.Background(), dsn)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close(context.Background()) })
	return dsn, db
}

var discard = slog.New(slog.NewTextHandler(io.Discard, nil))

// startSidecar runs a sidecar over dsn's database until the test ends,
// and connects to it.
func startSidecar(t testing.TB, dsn string, defs ...string) (*sidecar.Sidecar, *pgx.Conn) {
	t.Helper()
	return startSidecarConfig(t, sidecar.Config{Source: dsn, Indexes: defs})
}

// startNamedSidecar is startSidecar with a publication and slot of the
// given name, so that several sidecars can follow one database.
func startNamedSidecar(t testing.TB, dsn, name string, defs ...string) (*sidecar.Sidecar, *pgx.Conn) {
	t.Helper()
	return startSidecarConfig(t, sidecar.Config{Source: dsn, Name: name, Indexes: defs})
}

// startSidecarConfig is startSidecar with cfg's fields (Name defaults to
// vecside), and a loopback listener without authentication and a silent
// logger.
func startSidecarConfig(t testing.TB, cfg sidecar.Config) (*sidecar.Sidecar, *pgx.Conn) {
	t.Helper()
	ctx := context.Background()
	if cfg.Name == "" {
		cfg.Name = "vecside"
	}
	cfg.Listen, cfg.Auth, cfg.Logger = "127.0.0.1:0", "trust", discard
	sc, err := sidecar.Start(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := sc.Stop(); err != nil {
			t.Errorf("sidecar: %v", err)
		}
	})
	side, err := pgx.Connect(ctx, "postgres://vecside@"+sc.Addr.String()+"/vecside?sslmode=disable")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { side.Close(ctx) })
	return sc, side
}

// TestReadYourWrites: a client that writes, reads pg_current_wal_lsn()
// and searches with it as MinLSN finds its row every time, also while
// long transactions write to another table around it.
func TestReadYourWrites(t *testing.T) {
	const dims, rounds = 8, 100
	ctx := context.Background()
	dsn, db := newDatabase(t)
	mustExec(t, db, `CREATE TABLE docs (id bigint PRIMARY KEY, v real[]); CREATE TABLE other (x int, pad text);
		INSERT INTO docs SELECT g, array_fill(g::real, ARRAY[8]) FROM generate_series(1, 1000) g`)
	sc, side := startSidecar(t, dsn, "docs_v=public.docs(v) key=id metric=l2")
	waitApplied(t, db, sc)

	// Long transactions on another table, open across many of the
	// client's writes.
	stop := make(chan struct{})
	longDone := make(chan error, 1)
	go func() {
		longDone <- func() error {
			conn, err := pgx.Connect(ctx, dsn)
			if err != nil {
				return err
			}
			defer conn.Close(ctx)
			for {
				tx, err := conn.Begin(ctx)
				if err != nil {
					return err
				}
				for i := 0; i < 50; i++ {
					if _, err := tx.Exec(ctx, `INSERT INTO other SELECT g, repeat('x', 200) FROM generate_series(1, 20) g`); err != nil {
						return err
					}
					select {
					case <-stop:
						return tx.Commit(ctx)
					case <-time.After(2 * time.Millisecond):
					}
				}
				if err := tx.Commit(ctx); err != nil {
					return err
				}
			}
		}()
	}()

	client := heapfetch.New(side, db)
	rng := rand.New(rand.NewPCG(5, 6))
	found := 0
	for i := 0; i < rounds; i++ {
		id := int64(100000 + i)
		v, lsn := writeOwnRow(t, db, rng, id, dims)
		rows, err := client.Search(ctx, heapfetch.Request{Index: "docs_v", Vector: v, K: 1, MinLSN: lsn})
		if err != nil {
			t.Fatalf("round %d: %v", i, err)
		}
		if len(rows) == 1 && rows[0].Key == id && rows[0].Distance == 0 {
			found++
		}
	}
	close(stop)
	if err := <-longDone; err != nil {
		t.Fatal(err)
	}
	if found != rounds {
		t.Fatalf("found the row just written %d times out of %d", found, rounds)
	}
}

// writeOwnRow inserts a row far from the others into docs(id, v), and
// returns its vector and the LSN after the write.
func writeOwnRow(t testing.TB, db *pgx.Conn, rng *rand.Rand, id int64, dims int) ([]float32, string) {
	t.Helper()
	v := make([]float32, dims)
	for j := range v {
		v[j] = rng.Float32()*1000 + 2000
	}
	mustExecArgs(t, db, `INSERT INTO docs VALUES ($1, $2)`, id, v)
	var lsn string
	if err := db.QueryRow(context.Background(), `SELECT pg_current_wal_lsn()::text`).Scan(&lsn); err != nil {
		t.Fatal(err)
	}
	return v, lsn
}

func mustExecArgs(t testing.TB, db *pgx.Conn, sql string, args ...any) {
	t.Helper()
	if _, err := db.Exec(context.Background(), sql, args...); err != nil {
		t.Fatalf("%s: %v", sql, err)
	}
}

type exactRow struct {
	ID       int64
	Distance float64
}

// exactSQL ranks the table for one query under every metric in one scan:
// the distance functions vecside installs, each ORDER BY … LIMIT k.
const exactSQL = `
WITH d AS (
  SELECT id, vecside.l2_distance(embedding, $1) AS l2, vecside.cosine_distance(embedding, $1) AS cosine,
         vecside.negative_inner_product(embedding, $1) AS ip
  FROM items)
(SELECT 'l2', id, l2 FROM d WHERE l2 IS NOT NULL AND l2 <> 'NaN' ORDER BY l2, id LIMIT $2)
UNION ALL
(SELECT 'cosine', id, cosine FROM d WHERE cosine IS NOT NULL AND cosine <> 'NaN' ORDER BY cosine, id LIMIT $2)
UNION ALL
(SELECT 'ip', id, ip FROM d WHERE ip IS NOT NULL AND ip <> 'NaN' ORDER BY ip, id LIMIT $2)`

// exactTopKs is the ground truth for every query and metric, computed in
// SQL on two connections at once (one per core).
func exactTopKs(t *testing.T, dsn string, qs [][]float32, k int) []map[string][]exactRow {
	t.Helper()
	out := make([]map[string][]exactRow, len(qs))
	errs := make(chan error, 2)
	for w := 0; w < 2; w++ {
		go func() {
			errs <- func() error {
				conn, err := pgx.Connect(context.Background(), dsn)
				if err != nil {
					return err
				}
				defer conn.Close(context.Background())
				for i := w; i < len(qs); i += 2 {
					rows, err := conn.Query(context.Background(), exactSQL, qs[i], k)
					if err != nil {
						return err
					}
					out[i] = map[string][]exactRow{}
					var metric string
					var r exactRow
					if _, err := pgx.ForEachRow(rows, []any{&metric, &r.ID, &r.Distance}, func() error {
						out[i][metric] = append(out[i][metric], r)
						return nil
					}); err != nil {
						return err
					}
				}
				return nil
			}()
		}()
	}
	for w := 0; w < 2; w++ {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
	return out
}

// compareTopK accepts got when each rank matches the SQL answer's key, or
// has a distance equal to the SQL distance at that rank within 1e-5
// relative (a tie, most often at rank k).
func compareTopK(got []heapfetch.Row, want []exactRow) string {
	if len(got) != len(want) {
		return fmt.Sprintf("%d rows, want %d", len(got), len(want))
	}
	for i := range want {
		id, ok := got[i].Key.(int64)
		if !ok {
			return fmt.Sprintf("rank %d: key %T, want int64", i+1, got[i].Key)
		}
		close := math.Abs(got[i].Distance-want[i].Distance) <= 1e-5*math.Max(math.Abs(want[i].Distance), 1e-9)
		if !close {
			return fmt.Sprintf("rank %d: id %d at %.9g, want id %d at %.9g", i+1, id, got[i].Distance, want[i].ID, want[i].Distance)
		}
	}
	return ""
}

func waitApplied(t testing.TB, db *pgx.Conn, sc *sidecar.Sidecar) {
	t.Helper()
	var lsn string
	if err := db.QueryRow(context.Background(), "SELECT pg_current_wal_lsn()::text").Scan(&lsn); err != nil {
		t.Fatal(err)
	}
	target, _ := indexer.ParseLSN(lsn)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	for _, e := range sc.Indexer.Entries() {
		for {
			if state, msg := e.State(); state == indexer.StateError {
				t.Fatalf("index %s: %s", e.Spec().Name, msg)
			} else if state == indexer.StateReady {
				break
			}
			time.Sleep(20 * time.Millisecond)
		}
		if err := e.WaitApplied(ctx, target); err != nil {
			t.Fatal(err)
		}
	}
}

func mustEntry(t testing.TB, sc *sidecar.Sidecar, name string) *indexer.Entry {
	t.Helper()
	e, err := sc.Indexer.Get(name)
	if err != nil {
		t.Fatal(err)
	}
	return e
}

func mustExec(t testing.TB, db *pgx.Conn, sql string) {
	t.Helper()
	if _, err := db.Exec(context.Background(), sql); err != nil {
		t.Fatalf("%.80s: %v", sql, err)
	}
}

// TestStaleVectorSkipped: rows whose vector became NULL, shorter, longer,
// two-dimensional or holed by a NULL element after the sidecar answered
// are left out like rows deleted meanwhile, and
// the search widens to find k others. The sidecar is made stale by cutting
// its replication connection before the rows change.
func TestStaleVectorSkipped(t *testing.T) {
	for _, typ := range []string{"real[]", "double precision[]"} {
		t.Run(typ, func(t *testing.T) {
			ctx := context.Background()
			dsn, db := newDatabase(t)
			mustExec(t, db, `CREATE TABLE docs (id bigint PRIMARY KEY, v `+typ+`);
				INSERT INTO docs SELECT g, array_fill(g, ARRAY[8]) FROM generate_series(1, 20) g`)
			proxy := pgtest.NewProxy(t, fmt.Sprintf("127.0.0.1:%d", pgtest.Shared(t).Port))
			sc, side := startSidecar(t, proxy.Via(t, dsn), "docs_v=public.docs(v) key=id metric=l2")
			waitApplied(t, db, sc)
			proxy.Isolate(true)
			if proxy.Partition() == 0 {
				t.Fatal("no replication connection to cut")
			}
			mustExec(t, db, `UPDATE docs SET v = NULL WHERE id = 1;
				UPDATE docs SET v = '{1,1}' WHERE id = 2;
				UPDATE docs SET v = array_fill(3, ARRAY[9]) WHERE id = 3;
				UPDATE docs SET v = array_fill(4, ARRAY[2, 4]) WHERE id = 4;
				UPDATE docs SET v = array_append(array_fill(5, ARRAY[7]), NULL) WHERE id = 5`)

			q := []float32{1, 1, 1, 1, 1, 1, 1, 1}
			got, err := heapfetch.New(side, db).Search(ctx, heapfetch.Request{Index: "docs_v", Vector: q, K: 2})
			if err != nil {
				t.Fatal(err)
			}
			// Rows 6 and 7 are the nearest that still have an 8-d vector.
			want := []heapfetch.Row{{Key: int64(6), Distance: math.Sqrt(8 * 25)}, {Key: int64(7), Distance: math.Sqrt(8 * 36)}}
			if fmt.Sprint(got) != fmt.Sprint(want) {
				t.Fatalf("got %v, want %v", got, want)
			}
			if st := mustEntry(t, sc, "docs_v").Status(); st.Skipped != 0 {
				t.Fatalf("the sidecar saw the changes (%d rows skipped): the test did not make its answer stale", st.Skipped)
			}
		})
	}
}
