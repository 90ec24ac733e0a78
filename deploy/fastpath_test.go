package deploy

import (
	"cmp"
	"context"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
)

// TestSQLFastPath: where the sidecar's distances are exact (the flat
// index holds float32 vectors), vecside.search takes a candidate's
// distance from the sidecar when the row's xmin is the version it
// measured, and reads the vector otherwise; either way it returns what
// reading every vector returns, and every distance is the heap row's,
// even for rows rewritten since the sidecar last saw them.
func TestSQLFastPath(t *testing.T) {
	ctx := context.Background()
	e := newHelperEnv(t)
	reader := e.role("reader", "GRANT vecside_user TO %s", "GRANT SELECT ON items TO %s")
	rng := rand.New(rand.NewPCG(9, 10))
	var matching int
	if err := reader.QueryRow(ctx, `SELECT count(*) FROM vecside.candidates('items_v', $1, 10, NULL::bigint) c
		JOIN items i ON i.id = c.id WHERE c.xid = i.xmin::text::bigint`, randomQuery(rng)).Scan(&matching); err != nil || matching != 10 {
		t.Fatalf("candidates whose xid is their row's xmin: %d of 10, %v", matching, err)
	}
	const slowSQL = "SELECT id, distance FROM vecside.search('items_v', $1, 10, NULL::bigint, 'with_xid=false')"
	for range 5 {
		q := randomQuery(rng)
		fast := checkExact(t, reader, q)
		slow, err := collect(t, reader, slowSQL, q)
		if err != nil || !slices.Equal(fast, slow) {
			t.Fatalf("reading every vector: %v, %v; the fast path gave %v", slow, err, fast)
		}
	}

	// xmin takes SELECT on the table: a role granted only the indexed
	// columns searches without the fast path.
	columns := e.role("columns", "GRANT vecside_user TO %s", "GRANT SELECT (id, v) ON items TO %s")
	checkExact(t, columns, randomQuery(rng))

	// The session keeps its server's identity in a setting it could set
	// itself: what is not a number there is read again, not sent.
	if _, err := reader.Exec(ctx, "SET vecside.system_identifier = '1/1 timeout=1h'"); err != nil {
		t.Fatal(err)
	}
	checkExact(t, reader, randomQuery(rng))
	var sysid string
	if err := reader.QueryRow(ctx, "SHOW vecside.system_identifier").Scan(&sysid); err != nil || strings.Trim(sysid, "-0123456789") != "" {
		t.Errorf("vecside.system_identifier is %q after a search (%v), want the server's", sysid, err)
	}

	// Rewrite the nearest rows' vectors and search at once, before the
	// sidecar has (necessarily) applied it: their xmins differ from its
	// xids, so their distances come from the heap.
	q := randomQuery(rng)
	before := checkExact(t, reader, q)
	ids := make([]int64, 5)
	for i := range ids {
		ids[i] = before[i].id
	}
	e.exec("UPDATE items SET v = ARRAY(SELECT (x + 0.5)::real FROM unnest(v) x) WHERE id = ANY($1)", ids)
	got, err := collect(t, reader, searchSQL, q)
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range got {
		var heap float64
		if err := reader.QueryRow(ctx, "SELECT vecside.l2_distance(v, $1) FROM items WHERE id = $2", q, s.id).Scan(&heap); err != nil {
			t.Fatal(err)
		}
		if heap != s.distance {
			t.Errorf("row %d: distance %v, the heap's row is at %v", s.id, s.distance, heap)
		}
	}
	if !slices.IsSortedFunc(got, func(a, b scored) int {
		return cmp.Or(cmp.Compare(a.distance, b.distance), cmp.Compare(a.id, b.id))
	}) {
		t.Errorf("not nearest first: %v", got)
	}
}

// TestSQLFastPathComputesNoDistance: with xids, vecside.search computes no
// distance in SQL for a row the sidecar measured at its current version;
// without them (with_xid=false) it computes one for every candidate; and
// so does search_rows.
// Counted by the backend's own function statistics (track_functions).
func TestSQLFastPathComputesNoDistance(t *testing.T) {
	ctx := context.Background()
	e := newHelperEnv(t)
	reader := e.role("counted", "GRANT vecside_user TO %s", "GRANT SELECT ON items TO %s", "ALTER ROLE %s SET track_functions = 'all'")
	distances := func(sql string, q []float32) int64 {
		t.Helper()
		tx, err := reader.Begin(ctx)
		if err != nil {
			t.Fatal(err)
		}
		defer tx.Rollback(ctx)
		// The backend's counts are flushed at most once a second, between
		// transactions: until then they add up over transactions, so a
		// statement's are the difference within one.
		calls := func() (n int64) {
			if err := tx.QueryRow(ctx, "SELECT coalesce(pg_stat_get_xact_function_calls('vecside.l2_distance(real[], real[])'::regprocedure), 0)").
				Scan(&n); err != nil {
				t.Fatal(err)
			}
			return n
		}
		before := calls()
		var rows int64
		if err := tx.QueryRow(ctx, "SELECT count(*) FROM ("+sql+") s", q).Scan(&rows); err != nil || rows != 10 {
			t.Fatalf("%s: %d rows, %v", sql, rows, err)
		}
		return calls() - before
	}
	q := randomQuery(rand.New(rand.NewPCG(11, 12)))
	if n := distances(searchSQL, q); n != 0 {
		t.Errorf("with xids: %d distances computed in SQL, want none", n)
	}
	if n := distances("SELECT id, distance FROM vecside.search('items_v', $1, 10, NULL::bigint, 'with_xid=false')", q); n < 10 {
		t.Errorf("without xids: %d distances computed in SQL, want one a candidate", n)
	}
	if n := distances("SELECT (item).id, distance FROM vecside.search_rows('items_v', $1, 10, NULL::items)", q); n != 0 {
		t.Errorf("search_rows with xids: %d distances computed in SQL, want none", n)
	}
	if n := distances("SELECT (item).id, distance FROM vecside.search_rows('items_v', $1, 10, NULL::items, 'with_xid=false')", q); n < 10 {
		t.Errorf("search_rows without xids: %d distances computed in SQL, want one a candidate", n)
	}
}

// TestSearchRowsAreTheRows: search_rows returns the table's rows as they
// are, each with its exact distance, also right after rows were rewritten
// (whether or not the sidecar has seen it), when its first pass computes
// their distances from the heap.
func TestSearchRowsAreTheRows(t *testing.T) {
	ctx := context.Background()
	e := newHelperEnv(t)
	reader := e.role("rows", "GRANT vecside_user TO %s", "GRANT SELECT ON items TO %s")
	q := randomQuery(rand.New(rand.NewPCG(13, 14)))
	ids := make([]int64, 0, 5)
	for _, s := range checkExact(t, reader, q)[:5] {
		ids = append(ids, s.id)
	}
	e.exec("UPDATE items SET v = ARRAY(SELECT (x + 0.25)::real FROM unnest(v) x) WHERE id = ANY($1)", ids)
	var rows, same, rewritten int
	if err := reader.QueryRow(ctx, `SELECT count(*), count(*) FILTER (WHERE (r.item).v = i.v AND r.distance = vecside.l2_distance(i.v, $1)),
		count(*) FILTER (WHERE i.id = ANY ($2))
		FROM vecside.search_rows('items_v', $1, 10, NULL::items) r JOIN items i ON i.id = (r.item).id`, q, ids).Scan(&rows, &same, &rewritten); err != nil {
		t.Fatal(err)
	}
	if rows != 10 || same != rows {
		t.Errorf("search_rows: %d rows, %d of them the table's with their exact distance", rows, same)
	}
	t.Logf("%d of the rows returned were rewritten just before", rewritten)
}
