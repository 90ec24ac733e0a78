package rpc

import (
	"cmp"
	"slices"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"
)

// TestClauses: WHERE, ORDER BY, LIMIT and OFFSET over knn() and
// vecside_status(), in every pgx exec mode, and what version() says.
func TestClauses(t *testing.T) {
	ix, data := newTestIndexer(t)
	_, addr := startServer(t, ix)
	q := []float32{0.3, -0.1, 0.2, 0.9, -0.4, 0.1, 0.5, -0.6}
	all := data["items_int4"].bruteForce(q, 30)
	cut := all[20].distance
	var want []hit // the first 20, by id descending, 5 to 15
	for _, h := range all {
		if h.distance < cut {
			want = append(want, h)
		}
	}
	slices.SortFunc(want, func(a, b hit) int { return cmp.Compare(parseFloat(t, b.id), parseFloat(t, a.id)) })
	want = want[5:15]
	for _, mode := range execModes {
		conn := connect(t, addr, mode)
		sql := "SELECT id, distance FROM knn('items_int4', '" + vectorText(q) + "', 30) WHERE distance < " + string(appendFloat8(nil, cut)) + " ORDER BY id DESC LIMIT 10 OFFSET 5"
		checkHits(t, queryHits(t, conn, sql), want)

		rows, err := conn.Query(testContext(t), "SELECT index_name, rows FROM vecside_status() WHERE state = 'ready' AND index_name <> 'items_text' AND rows >= 100 ORDER BY index_name DESC LIMIT 2 OFFSET 1")
		if err != nil {
			t.Fatal(err)
		}
		names, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (string, error) {
			var name string
			var n int64
			err := r.Scan(&name, &n)
			return name, err
		})
		if err != nil || !slices.Equal(names, []string{"items_int8", "items_int4"}) {
			t.Errorf("%v: vecside_status with clauses: %v, %v", mode, names, err)
		}
		var version string
		if err := conn.QueryRow(testContext(t), "SELECT version()").Scan(&version); err != nil ||
			!strings.HasPrefix(version, "PostgreSQL 15.0 (vecside test, a vector-search sidecar") {
			t.Errorf("version(): %q, %v", version, err)
		}
	}
	conn := connect(t, addr, pgx.QueryExecModeSimpleProtocol)
	for sql, code := range map[string]string{
		"SELECT * FROM vecside_status() WHERE nope = 1":                         codeUndefinedColumn,
		"SELECT * FROM vecside_status() WHERE rows = 'many'":                    codeInvalidTextRepresent,
		"SELECT * FROM knn('items_int4', '[0,0,0,0,0,0,0,0]', 3) ORDER BY nope": codeUndefinedColumn,
	} {
		if _, err := conn.Exec(testContext(t), sql); sqlstate(err) != code {
			t.Errorf("%s: %v, want %s", sql, err, code)
		}
	}
}
