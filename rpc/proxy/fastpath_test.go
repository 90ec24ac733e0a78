//go:build cgo

package proxy

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/vecside/vecside/deploy"
	"github.com/vecside/vecside/heapfetch"
	"github.com/vecside/vecside/internal/pgtest"
)

// TestFastPath: on an index whose distances are exact (store=float), a
// statement whose targets do not show the vector is ordered by the
// sidecar's distances where each row is the version it measured, so
// that PostgreSQL reads no vector; its rows are the exact statement's,
// in its order, prepared or not, with a filter or not. A statement that
// shows the vector computes every distance, as before.
func TestFastPath(t *testing.T) { eachWay(t, testFastPath) }

func testFastPath(t *testing.T, ask func(*fixture, *testing.T)) {
	const queries, k = 20, 10
	f := newFixtureOf(t, 3000, "items_l2=public.items(embedding) key=id metric=l2 kind=hnsw store=float recall=0.99",
		"items_cosine=public.items(embedding) key=id metric=cosine kind=hnsw store=float recall=0.99")
	ask(f, t)
	ctx := context.Background()
	proxied := connect(t, f.via)
	for _, c := range []struct{ op, filter string }{{"<->", ""}, {"<=>", "WHERE tenant IN (1, 2)"}} {
		var found, total int
		for i := range queries {
			v := f.vector()
			sql := fmt.Sprintf("SELECT id, tenant FROM items %s ORDER BY embedding %s $1::real[] LIMIT %d", c.filter, c.op, k)
			mode := pgx.QueryExecModeCacheStatement
			if i%2 == 1 {
				mode = pgx.QueryExecModeSimpleProtocol
			}
			got := ids(t, proxied, sql, mode, v)
			if plan := lastPlan(t, proxied); !strings.Contains(plan, "ordered by the sidecar's distances") {
				t.Fatalf("%s: last plan %q", sql, plan)
			}
			// The exact distances of the rows returned, and the exact top k.
			exact := map[int64]float64{}
			rows, err := f.db.Query(ctx, fmt.Sprintf("SELECT id, embedding %s $1::real[] FROM items %s ORDER BY 2 LIMIT %d", c.op, c.filter, k), v)
			if err != nil {
				t.Fatal(err)
			}
			var id int64
			var d float64
			if _, err := pgx.ForEachRow(rows, []any{&id, &d}, func() error { exact[id] = d; return nil }); err != nil {
				t.Fatal(err)
			}
			last := -1e300
			for _, id := range got {
				var d float64
				if err := f.db.QueryRow(ctx, fmt.Sprintf("SELECT embedding %s $1::real[] FROM items WHERE id = $2", c.op), v, id).Scan(&d); err != nil {
					t.Fatal(err)
				}
				if d < last {
					t.Errorf("%s: id %d at %v after %v: not in order", sql, id, d, last)
				}
				last = d
				if _, ok := exact[id]; ok {
					found++
				}
			}
			if len(got) != k {
				t.Errorf("%s: %d rows", sql, len(got))
			}
			total += len(exact)
		}
		if recall := float64(found) / float64(total); recall < 0.95 {
			t.Errorf("%s %s: recall@%d %.3f, want ≥ 0.95", c.op, c.filter, k, recall)
		}
	}

	// PostgreSQL computed no distance: every candidate was the version
	// the sidecar measured. Showing the distance computes them.
	// xmin takes SELECT on the table: a role with SELECT on its columns
	// alone gets its rows, without the fast path.
	for _, sql := range []string{
		"DO $$ BEGIN CREATE ROLE proxy_columns LOGIN; EXCEPTION WHEN duplicate_object THEN NULL; END $$",
		"GRANT SELECT (id, tenant, embedding) ON items TO proxy_columns",
	} {
		mustExec(t, f.db, sql)
	}
	columns := connect(t, strings.Replace(f.via, "postgres@", "proxy_columns@", 1))
	sql := "SELECT id FROM items ORDER BY embedding <-> '" + f.vector() + "' LIMIT 10"
	got := run(t, columns, sql)
	if plan := lastPlan(t, columns); len(got.Rows) != 10 || !strings.HasPrefix(plan, "accelerated") || strings.Contains(plan, "ordered by the sidecar's distances") {
		t.Errorf("SELECT on the columns only: %d rows, last plan %q", len(got.Rows), plan)
	}

	v := f.vector()
	if n := distancesComputed(t, proxied, "SELECT id FROM items ORDER BY embedding <-> '"+v+"' LIMIT 10"); n != 0 {
		t.Errorf("the fast path computed %d distances, want 0", n)
	}
	if n := distancesComputed(t, proxied, "SELECT id, embedding <-> '"+v+"' FROM items ORDER BY embedding <-> '"+v+"' LIMIT 10"); n < 10 {
		t.Errorf("a statement showing the distance computed %d distances, want at least 10", n)
	}
}

// distancesComputed runs sql, a statement the proxy accelerates, through
// c in a transaction block and returns how many l2 distances PostgreSQL
// computed for it (the operator's function is SQL, so track_functions =
// all counts its calls).
func distancesComputed(t *testing.T, c *pgx.Conn, sql string) int64 {
	t.Helper()
	ctx := context.Background()
	tx, err := c.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(ctx)
	if _, err := tx.Exec(ctx, "SET LOCAL track_functions = 'all'"); err != nil {
		t.Fatal(err)
	}
	// The backend's counts add up over transactions until flushed (at
	// most once a second, between them): a statement's are the
	// difference within one.
	count := func() (n int64) {
		if err := tx.QueryRow(ctx, "SELECT coalesce(pg_stat_get_xact_function_calls('vecside.l2_distance(real[], real[])'::regprocedure), 0)").Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}
	before := count()
	if _, err := tx.Exec(ctx, sql, pgx.QueryExecModeSimpleProtocol); err != nil {
		t.Fatal(err)
	}
	if plan := lastPlan(t, tx.Conn()); !strings.HasPrefix(plan, "accelerated") {
		t.Fatalf("%s: last plan %q", sql, plan)
	}
	return count() - before
}

// ids runs sql with the vector v as $1 and returns the first column.
func ids(t *testing.T, c *pgx.Conn, sql string, mode pgx.QueryExecMode, v string) []int64 {
	t.Helper()
	rows, err := c.Query(context.Background(), sql, mode, v)
	if err != nil {
		t.Fatal(err)
	}
	var out []int64
	for rows.Next() {
		vals, err := rows.Values()
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, vals[0].(int64))
	}
	if err := rows.Err(); err != nil {
		t.Fatalf("%s: %v", sql, err)
	}
	return out
}

func lastPlan(t *testing.T, c *pgx.Conn) string {
	t.Helper()
	var plan string
	if err := c.QueryRow(context.Background(), "SHOW vecside.last_plan", pgx.QueryExecModeSimpleProtocol).Scan(&plan); err != nil {
		t.Fatal(err)
	}
	return plan
}

// TestFastRestricted: the fast statement orders a row by the distance
// bound for it only where its xmin is the xid bound for it, the server's
// timeline the one bound and its table the one followed; any other row
// (an inheriting table's row with the same key, written by the same
// transaction, among them) by the distance it computes.
func TestFastRestricted(t *testing.T) {
	ctx := context.Background()
	db := connect(t, pgtest.Shared(t).NewDatabase(t))
	mustExec(t, db, deploy.DistanceSQL)
	mustExec(t, db, deploy.RealOperatorsSQL)
	mustExec(t, db, `BEGIN; CREATE TABLE items (id bigint PRIMARY KEY, embedding real[]);
		INSERT INTO items VALUES (1, '{1,0}'), (2, '{2,0}'), (3, '{3,0}');
		CREATE TABLE items_child () INHERITS (items); INSERT INTO items_child VALUES (1, '{0.5,0}'); COMMIT`)
	var xmin, timeline int64
	var oid uint32
	if err := db.QueryRow(ctx, `SELECT xmin::text::int8, ('x' || substr(pg_walfile_name(pg_current_wal_lsn()), 1, 8))::bit(32)::int8, 'items'::regclass::oid
		FROM ONLY items WHERE id = 1`).Scan(&xmin, &timeline, &oid); err != nil {
		t.Fatal(err)
	}
	for _, literal := range []bool{false, true} {
		stmt := "SELECT id FROM items WHERE id > 0 ORDER BY embedding <-> $1 LIMIT 4"
		if literal {
			stmt = "SELECT id FROM items WHERE id > 0 ORDER BY embedding <-> '{0,0}' LIMIT 4"
		}
		q, reason := recognize(stmt)
		if q == nil {
			t.Fatalf("%s: not recognised: %s", stmt, reason)
		}
		sql, err := q.fastRestricted("id", oid)
		if err != nil {
			t.Fatal(err)
		}
		order := func(xids string, tli int64) string {
			// The sidecar's distances say 3.5, 2, 1; the vectors 1, 2, 3,
			// and the child's row with key 1, 0.5.
			args := []any{"{0,0}", "{1,2,3}", xids, "{3.5,2,1}", tli}
			if literal {
				args = append([]any{"{1,2,3}", "{0,0}"}, args[2:]...)
			}
			rows, err := db.Query(ctx, sql, append([]any{pgx.QueryExecModeDescribeExec}, args...)...)
			if err != nil {
				t.Fatalf("%s: %v", sql, err)
			}
			got, err := pgx.CollectRows(rows, pgx.RowTo[int64])
			if err != nil {
				t.Fatalf("%s: %v", sql, err)
			}
			return fmt.Sprint(got)
		}
		same := fmt.Sprintf("{%d,%d,%d}", xmin, xmin, xmin)
		for _, c := range []struct {
			name, xids string
			tli        int64
			want       string
		}{
			{"the versions measured", same, timeline, "[1 3 2 1]"},
			{"other versions", fmt.Sprintf("{%d,%d,%d}", xmin+1, xmin+1, xmin+1), timeline, "[1 1 2 3]"},
			{"no xids", "{NULL,NULL,NULL}", timeline, "[1 1 2 3]"},
			{"one row measured", fmt.Sprintf("{%d,NULL,NULL}", xmin), timeline, "[1 2 3 1]"},
			{"another timeline", same, timeline + 1, "[1 1 2 3]"},
		} {
			if got := order(c.xids, c.tli); got != c.want {
				t.Errorf("%s (literal %v): %s, want %s\n%s", c.name, literal, got, c.want, sql)
			}
		}
	}
}

// TestFastPathStandby: through a hot standby the fast path holds as on
// the primary (the timeline is the standby's last restartpoint's): rows
// the standby replayed come back, in exact order, no vector read.
func TestFastPathStandby(t *testing.T) {
	f := newFixtureOf(t, 1000, "items_l2=public.items(embedding) key=id metric=l2 kind=flat store=float",
		"items_cosine=public.items(embedding) key=id metric=cosine kind=flat store=float")
	p, via, standby := f.throughStandby(t)
	waitIndexed(t, p, "items", "l2")
	replica := connect(t, via)
	direct := connect(t, standby)
	for range 10 {
		v := f.vector()
		sql := "SELECT id FROM items ORDER BY embedding <-> '" + v + "' LIMIT 10"
		got := fmt.Sprint(run(t, replica, sql).Rows)
		if plan := lastPlan(t, replica); !strings.Contains(plan, "ordered by the sidecar's distances") {
			t.Fatalf("through the standby: %s", plan)
		}
		if want := fmt.Sprint(run(t, direct, sql).Rows); got != want {
			t.Errorf("%s: through the standby's proxy %s, the standby itself %s", sql, got, want)
		}
	}
	if n := distancesComputed(t, replica, "SELECT id FROM items ORDER BY embedding <-> '"+f.vector()+"' LIMIT 10"); n != 0 {
		t.Errorf("through the standby, the fast path computed %d distances, want 0", n)
	}
	if n := p.Stats().FastPath; n != 11 {
		t.Errorf("%d statements took the fast path, want 11", n)
	}
}

// TestCatalogOlderSidecar: a sidecar older than vecside_status()'s
// exact_distances still has its indexes found, none of them exact (no
// fast path); a current one's float index is exact, asked over pgwire or
// in process.
func TestCatalogOlderSidecar(t *testing.T) {
	ctx := context.Background()
	f := newFixtureOf(t, 100, "items_l2=public.items(embedding) key=id metric=l2 kind=flat store=float",
		"items_cosine=public.items(embedding) key=id metric=cosine kind=flat store=float")
	pool, err := pgxpool.New(ctx, f.side)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	for _, c := range []struct {
		name  string
		side  Sidecar
		exact bool
	}{{"current", Remote(nil, pool), true}, {"older", Remote(nil, withoutExact{pool}), false}, {"in-process", InProcess(f.sc.Indexer, nil), true}} {
		cat := &catalog{sidecar: c.side}
		if err := cat.refresh(ctx); err != nil {
			t.Fatalf("%s sidecar: %v", c.name, err)
		}
		if ix, ok := cat.lookup("public", "items", "embedding", "l2", nil); !ok || ix.Exact != c.exact {
			t.Errorf("%s sidecar: found %v, %+v; want exact %v", c.name, ok, ix, c.exact)
		}
	}
}

// withoutExact answers as a sidecar older than exact_distances does.
type withoutExact struct{ heapfetch.Querier }

func (w withoutExact) Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error) {
	if strings.Contains(sql, "exact_distances") {
		return nil, &pgconn.PgError{Severity: "ERROR", Code: "42703", Message: `column "exact_distances" does not exist`}
	}
	return w.Querier.Query(ctx, sql, args...)
}
