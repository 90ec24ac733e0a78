package main

import (
	"context"
	"flag"
	"fmt"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/vecside/vecside/cmd/vecside/sidecar"
	"github.com/vecside/vecside/deploy"
	"github.com/vecside/vecside/internal/pgtest"
	"github.com/vecside/vecside/internal/resident"
	"github.com/vecside/vecside/replicate"
)

var migrationRows = flag.Int("migration-rows", 20000, "rows of the table TestMigrationUnderLoad drops and creates again (the new table under the old name gets half)")

// migrationStep is a step of an application's migration: its SQL, run in
// one transaction, and what the table the clients search holds after it.
type migrationStep struct {
	name, sql string
	gen, dims int // the rows' gen column and vector dimension after it
	// served is the index that answers the clients' statements after the
	// step (they pass through until it is ready).
	served string
	// created is a table the step creates with a pgvector index, which
	// must be accelerated too.
	created, createdIndex string
}

// TestMigrationUnderLoad runs a migration against a live vecside serve
// --proxy, given no --index, while 8 clients search the table through the
// proxy: DROP + CREATE of a table with new rows (-migration-rows, 20,000
// by default), RENAME with a new table under the old name, ADD COLUMN, a
// new table with its pgvector index, the renamed-away table's pgvector
// index dropped, another dropped and its column declared instead, ALTER
// COLUMN TYPE to another dimension. Every answer is judged against
// the table as PostgreSQL holds it: LIMIT rows, each a row of the table
// the statement names (its generation, its distance), in order of
// distance; acceleration resumes after each step within 10 s of the
// index being ready again; nothing restarts; with 100,000 rows or more,
// the process's resident memory stays within 1.5 times its steady state. Stand-in access
// methods play pgvector's indexes over real[].
func TestMigrationUnderLoad(t *testing.T) {
	const name, clients = "cli_migration", 8
	rows := *migrationRows
	dsn := pgtest.Shared(t).NewDatabase(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	db := pgtest.Connect(t, dsn)
	exec := func(sql string) {
		t.Helper()
		if _, err := db.Exec(ctx, sql, pgx.QueryExecModeSimpleProtocol); err != nil {
			t.Fatalf("%s: %v", sql, err)
		}
	}
	fill := func(table string, gen, n, dims int) string {
		return fmt.Sprintf(`INSERT INTO %s (id, gen, body, embedding) SELECT g, %d, 'doc ' || g,
			ARRAY(SELECT sin(g * 0.37 + d * 1.71 + %d)::real FROM generate_series(1, %d) d) FROM generate_series(1, %d) g`, table, gen, gen, dims, n)
	}
	create := "CREATE TABLE docs (id bigint PRIMARY KEY, gen int NOT NULL, body text, embedding real[]);"
	exec(deploy.DistanceSQL)
	exec(deploy.RealOperatorsSQL)
	exec(pgtest.StandInPgvectorIndexes)
	// pgvector's operator over double precision[], for the column altered
	// to that type.
	exec(`CREATE FUNCTION l2_float8(a float8[], b float8[]) RETURNS float8 IMMUTABLE STRICT LANGUAGE sql AS 'SELECT vecside.l2_distance(a::real[], b::real[])';
		CREATE OPERATOR public.<-> (LEFTARG = float8[], RIGHTARG = float8[], FUNCTION = l2_float8)`)
	exec(create + fill("docs", 1, rows, 8) + "; CREATE INDEX docs_idx ON docs USING hnsw (embedding vector_l2_ops)")
	steps := []migrationStep{
		{name: "start", gen: 1, dims: 8, served: "docs_idx"},
		{name: "DROP and CREATE", gen: 2, dims: 8, served: "docs_idx",
			sql: "DROP TABLE docs; " + create + fill("docs", 2, rows, 8) + "; CREATE INDEX docs_idx ON docs USING hnsw (embedding vector_l2_ops)"},
		{name: "RENAME, a new table under the old name", gen: 3, dims: 8, served: "docs_embedding_idx",
			sql: "ALTER TABLE docs RENAME TO docs_old; CREATE TABLE docs (LIKE docs_old INCLUDING ALL); " + fill("docs", 3, rows/2, 8)},
		{name: "ADD COLUMN", gen: 3, dims: 8, served: "docs_embedding_idx", sql: "ALTER TABLE docs ADD COLUMN extra int DEFAULT 7"},
		{name: "a new table with its pgvector index", gen: 3, dims: 8, served: "docs_embedding_idx",
			sql: "CREATE TABLE notes (LIKE docs_old INCLUDING ALL); " + fill("notes", 9, 20000, 8), created: "notes", createdIndex: "notes_embedding_idx"},
		{name: "the renamed-away table's pgvector index dropped", gen: 3, dims: 8, served: "docs_embedding_idx", sql: "DROP INDEX docs_idx"},
		{name: "the pgvector index dropped, the column declared instead", gen: 3, dims: 8, served: "docs_embedding",
			sql: "DROP INDEX docs_embedding_idx; COMMENT ON COLUMN docs.embedding IS 'vecside: metric=l2'"},
		{name: "ALTER COLUMN TYPE to another dimension", gen: 4, dims: 9, served: "docs_embedding",
			sql: `ALTER PUBLICATION "` + name + `" DROP TABLE docs;
				ALTER TABLE docs ALTER COLUMN embedding TYPE double precision[] USING embedding || 0.5::real;
				ALTER PUBLICATION "` + name + `" ADD TABLE docs (id, embedding); UPDATE docs SET gen = 4`},
	}

	t.Cleanup(func() {
		if _, err := replicate.Teardown(context.Background(), dsn, name, sidecar.TeardownWait); err != nil {
			t.Error(err)
		}
	})
	listen, sidecarListen, dataDir := freeAddr(t), freeAddr(t), t.TempDir()
	done := make(chan error, 1)
	go func() {
		done <- newApp().RunContext(ctx, []string{"vecside", "--log-level", "error", "serve", "--source", dsn, "--name", name,
			"--listen", sidecarListen, "--metrics-listen", "", "--data-dir", dataDir, "--auth", "trust", "--discover-interval", "1s",
			"--proxy", "--proxy-listen", listen, "--proxy-metrics-listen", ""})
	}()
	t.Cleanup(func() { cancel(); <-done })
	status := sidecarStatus(t, ctx, sidecarListen)

	// phase is 2·step while step holds, 2·step−1 while its transaction
	// runs: an answer is judged when the phase held from before the
	// statement to after the oracle's.
	var phase atomic.Int64
	var mu sync.Mutex
	resumed := make([]time.Time, len(steps)) // when the first statement its index answered began
	var judged, spanning, accelerated atomic.Int64
	var failures []string
	fail := func(format string, args ...any) {
		mu.Lock()
		defer mu.Unlock()
		if len(failures) < 20 {
			failures = append(failures, fmt.Sprintf(format, args...))
		}
	}
	var wg sync.WaitGroup
	for i := range clients {
		via, direct := dialProxy(t, ctx, dsn, listen, done), pgtest.Connect(t, dsn)
		wg.Go(func() {
			rng := rand.New(rand.NewPCG(uint64(i), 7))
			for ctx.Err() == nil {
				before := phase.Load()
				at := int(before+1) / 2
				s := steps[at]
				q := make([]string, s.dims)
				for d := range q {
					q[d] = strconv.FormatFloat(rng.Float64()*2-1, 'f', 4, 64)
				}
				vec := "{" + strings.Join(q, ",") + "}"
				began := time.Now()
				got, plan, err := searchDocs(ctx, via, vec)
				if ctx.Err() != nil {
					return
				}
				why := judgeDocs(ctx, direct, vec, got, err, s.gen)
				if ctx.Err() != nil {
					return
				}
				if before%2 == 1 || phase.Load() != before {
					spanning.Add(1) // the table changed meanwhile: either side may be right
					continue
				}
				judged.Add(1)
				if why != "" {
					fail("step %q: %s (plan %q)", s.name, why, plan)
				}
				if s.served != "" && strings.HasPrefix(plan, "accelerated: index "+s.served+";") {
					accelerated.Add(1)
					mu.Lock()
					if resumed[at].IsZero() || began.Before(resumed[at]) {
						resumed[at] = began
					}
					mu.Unlock()
				}
			}
		})
	}
	defer func() { cancel(); wg.Wait() }()

	// waitServed waits for a statement of step at that its index answered,
	// and returns when the first began.
	waitServed := func(at int) time.Time {
		t.Helper()
		for deadline := time.Now().Add(3 * time.Minute); ; time.Sleep(50 * time.Millisecond) {
			mu.Lock()
			first := resumed[at]
			mu.Unlock()
			if !first.IsZero() {
				return first
			}
			if time.Now().After(deadline) {
				t.Fatalf("step %q: not accelerated by %s; the sidecar says:\n%s", steps[at].name, steps[at].served, status())
			}
		}
	}
	waitServed(0)
	time.Sleep(5 * time.Second)
	steady := resident.MiB(t)
	stopWatch := resident.Peak(t, 100*time.Millisecond)
	for at := 1; at < len(steps); at++ {
		s := steps[at]
		committed := time.Now()
		phase.Store(int64(2*at - 1))
		exec("BEGIN; " + s.sql + "; COMMIT")
		phase.Store(int64(2 * at))
		var oid uint32
		if err := db.QueryRow(ctx, "SELECT 'docs'::regclass::oid").Scan(&oid); err != nil {
			t.Fatal(err)
		}
		ready := waitIndexReady(t, status, s.served, oid, s.dims, 3*time.Minute)
		first := waitServed(at)
		t.Logf("step %q: %s ready %v after the commit, the first statement it answered began %v after; resident memory %.0f MiB",
			s.name, s.served, ready.Sub(committed).Round(time.Millisecond), first.Sub(committed).Round(time.Millisecond), resident.MiB(t))
		if first.Sub(ready) > 10*time.Second {
			t.Errorf("step %q: acceleration resumed %v after the index was ready, want within 10 s", s.name, first.Sub(ready).Round(time.Millisecond))
		}
		if s.created != "" {
			if err := db.QueryRow(ctx, "SELECT $1::regclass::oid", s.created).Scan(&oid); err != nil {
				t.Fatal(err)
			}
			ready := waitIndexReady(t, status, s.createdIndex, oid, s.dims, 3*time.Minute)
			c := dialProxy(t, ctx, dsn, listen, done)
			search := "SELECT id FROM " + s.created + " ORDER BY embedding <-> '{1,0,0,0,0,0,0,0}' LIMIT 10"
			for plan := ""; !strings.HasPrefix(plan, "accelerated: index "+s.createdIndex+";"); time.Sleep(50 * time.Millisecond) {
				if time.Since(ready) > 10*time.Second {
					t.Fatalf("%s: not accelerated within 10 s of its index being ready; last plan %q", search, plan)
				}
				if _, err := c.Exec(ctx, search); err != nil {
					t.Fatal(err)
				}
				if err := c.QueryRow(ctx, "SHOW vecside.last_plan", pgx.QueryExecModeSimpleProtocol).Scan(&plan); err != nil {
					t.Fatal(err)
				}
			}
			t.Logf("step %q: %s ready %v after the commit, accelerated %v after", s.name, s.createdIndex,
				ready.Sub(committed).Round(time.Millisecond), time.Since(committed).Round(time.Millisecond))
		}
		time.Sleep(time.Second)
	}
	peak := stopWatch()
	cancel()
	wg.Wait()
	select {
	case err := <-done:
		t.Fatalf("vecside serve stopped: %v", err)
	default:
	}
	t.Logf("%d answers judged (%d accelerated), %d spanning a step; resident memory %.0f MiB steady, %.0f MiB at the peak (%.2f×)",
		judged.Load(), accelerated.Load(), spanning.Load(), steady, peak, peak/steady)
	for _, f := range failures {
		t.Error(f)
	}
	// Judged at the acceptance's size: with fewer rows the process's own
	// size and the collector's slack are most of it.
	if rows >= 100000 && peak > 1.5*steady {
		t.Errorf("resident memory peaked at %.0f MiB, %.2f× its steady %.0f MiB", peak, peak/steady, steady)
	}
}

// docRow is a row of the clients' search: id, generation, distance as
// PostgreSQL prints it.
type docRow struct {
	id       int64
	gen      int
	distance float64
}

// searchDocs runs the clients' search through the proxy and returns its
// rows and the plan the proxy reports for it.
func searchDocs(ctx context.Context, via *pgx.Conn, vec string) ([]docRow, string, error) {
	// The simple protocol: a prepared statement would fail after the
	// column's type changed, straight to PostgreSQL as through the proxy.
	rows, err := via.Query(ctx, "SELECT id, gen, embedding <-> $1 AS distance FROM docs ORDER BY distance LIMIT 10", pgx.QueryExecModeSimpleProtocol, vec)
	if err != nil {
		return nil, "", err
	}
	got, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (docRow, error) {
		var d docRow
		return d, r.Scan(&d.id, &d.gen, &d.distance)
	})
	if err != nil {
		return nil, "", err
	}
	var plan string
	err = via.QueryRow(ctx, "SHOW vecside.last_plan", pgx.QueryExecModeSimpleProtocol).Scan(&plan)
	return got, plan, err
}

// judgeDocs says what is wrong with an answer for vec while the table
// holds generation gen, or "": ten rows, each a row of docs now, of that
// generation and at the distance PostgreSQL computes for it, nearest
// first.
func judgeDocs(ctx context.Context, direct *pgx.Conn, vec string, got []docRow, err error, gen int) string {
	if err != nil {
		return "error: " + err.Error()
	}
	if len(got) != 10 {
		return fmt.Sprintf("%d rows, want 10", len(got))
	}
	ids := make([]int64, len(got))
	for i, r := range got {
		ids[i] = r.id
	}
	rows, err := direct.Query(ctx, "SELECT id, gen, embedding <-> $1 FROM docs WHERE id = ANY($2)", pgx.QueryExecModeSimpleProtocol, vec, ids)
	if err != nil {
		return "the oracle's statement: " + err.Error()
	}
	now, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (docRow, error) {
		var d docRow
		return d, r.Scan(&d.id, &d.gen, &d.distance)
	})
	if err != nil {
		return "the oracle's statement: " + err.Error()
	}
	for i, r := range got {
		if r.gen != gen {
			return fmt.Sprintf("row %d (id %d) is of generation %d, want %d: a row of another table", i, r.id, r.gen, gen)
		}
		if !slices.Contains(now, r) {
			return fmt.Sprintf("row %d %+v is no row of docs as it is", i, r)
		}
		if i > 0 && r.distance < got[i-1].distance {
			return fmt.Sprintf("row %d out of order", i)
		}
	}
	return ""
}

// sidecarStatus returns what prints vecside_status() of the sidecar at
// addr, for failures.
func sidecarStatus(t *testing.T, ctx context.Context, addr string) func() string {
	return func() string {
		c, err := pgx.Connect(ctx, "postgres://vecside@"+addr+"/vecside?sslmode=disable")
		if err != nil {
			return err.Error()
		}
		defer c.Close(ctx)
		rows, err := c.Query(ctx, "SELECT index_name, state, dims, table_oid, rows, table_name, error FROM vecside_status()", pgx.QueryExecModeSimpleProtocol)
		if err != nil {
			return err.Error()
		}
		var b strings.Builder
		for rows.Next() {
			v, _ := rows.Values()
			fmt.Fprintln(&b, v...)
		}
		return b.String()
	}
}

// waitIndexReady waits until the sidecar's vecside_status() shows index
// ready on the table of OID oid, at dims dimensions, and returns when it
// did.
func waitIndexReady(t *testing.T, status func() string, index string, oid uint32, dims int, within time.Duration) time.Time {
	t.Helper()
	want := fmt.Sprintf("%s ready %d %d ", index, dims, oid)
	for deadline := time.Now().Add(within); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
		for _, line := range strings.Split(status(), "\n") {
			if strings.HasPrefix(line, want) {
				return time.Now()
			}
		}
	}
	t.Fatalf("index %s not ready on OID %d at %d dimensions within %v:\n%s", index, oid, dims, within, status())
	return time.Time{}
}
