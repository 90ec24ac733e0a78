package rpc

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/vecside/vecside/indexer"
	"github.com/vecside/vecside/internal/pgvalue"
)

// byteaHex is b as a bytea literal's hex text.
func byteaHex(b []byte) string { return fmt.Sprintf(`\x%x`, b) }

func sqlstate(err error) string {
	var pe *pgconn.PgError
	if errors.As(err, &pe) {
		return pe.Code
	}
	return ""
}

// failingCatalog fails the searches of the indexes named in errs, for
// errors only the indexer's state can cause.
type failingCatalog struct {
	*indexer.Indexer
	errs map[string]error
}

func (f failingCatalog) Search(ctx context.Context, name string, q []float32, k int, opts indexer.SearchOptions) (indexer.Result, error) {
	if err := f.errs[name]; err != nil {
		return indexer.Result{}, err
	}
	return f.Indexer.Search(ctx, name, q, k, opts)
}

// TestErrorSQLSTATEs checks every error a client can cause, in the
// extended and the simple protocol, and that the connection then still
// answers.
func TestErrorSQLSTATEs(t *testing.T) {
	ix, _ := newTestIndexer(t)
	addIndex(t, ix, "building", pgvalue.KeyInt8) // never ready
	addIndex(t, ix, "busy", pgvalue.KeyInt8).SetReady()
	_, addr := startServer(t, failingCatalog{ix, map[string]error{
		"busy": fmt.Errorf("%w: 64 running, 256 queued", indexer.ErrOverloaded),
	}})
	v := "'[1,2,3,4,5,6,7,8]'"
	cases := []struct {
		sql  string
		code string
	}{
		{"SELECT * FROM knn('items_int8', '[1,2]', 5)", "22023"},
		{"SELECT * FROM knn('items_int8', '[1,x,3]', 5)", "22023"},
		{"SELECT * FROM knn('items_int8', '1,2,3', 5)", "22023"},
		{"SELECT * FROM knn('items_int8', '[1,2,3,4,5,6,7,NaN]', 5)", "22023"},
		{"SELECT * FROM knn('items_int8', '\\x'::bytea, 5)", "22023"},
		{"SELECT * FROM knn('items_int8', '\\x000000010000'::bytea, 5)", "22023"},
		{"SELECT * FROM knn('items_int8', '" + byteaHex(pgvalue.AppendFloat4Array(nil, make([]float32, 8))[:60]) + "'::bytea, 5)", "22023"},
		{"SELECT * FROM knn('items_int8', '" + byteaHex(pgvalue.AppendFloat4Array(nil, make([]float32, 2))) + "'::bytea, 5)", "22023"},
		{"SELECT * FROM knn('items_int8', '" + byteaHex(pgvalue.AppendPgvector(nil, make([]float32, 8))[:33]) + "'::bytea, 5)", "22023"},
		{"SELECT * FROM knn('items_int8', '" + byteaHex(pgvalue.AppendPgvector(nil, make([]float32, 3))) + "'::bytea, 5)", "22023"},
		{"SELECT * FROM knn('items_int8', '\\x000800'::bytea, 5)", "22023"},
		{"SELECT * FROM knn('items_int8', '\\xzz'::bytea, 5)", "22023"},
		{"SELECT * FROM knn('items_int8', '\\x0'::bytea, 5)", "22023"},
		{"SELECT * FROM knn('items_int8', '[1,2,3,4,5,6,7,8]'::bytea, 5)", "22023"},
		{"SELECT * FROM knn('nope', " + v + ", 5)", "42704"},
		{"SELECT * FROM knn('items_int8', " + v + ", 0)", "22023"},
		{"SELECT * FROM knn('items_int8', " + v + ", -3)", "22023"},
		{"SELECT * FROM knn('items_int8', " + v + ", 10001)", "22023"},
		{"SELECT * FROM knn('items_int8', " + v + ", 5000, 'oversample=3')", "22023"},
		{"SELECT * FROM knn('items_int8', " + v + ", 5, 'bogus=1')", "22023"},
		{"SELECT * FROM knn('items_int8', " + v + ", 5, 'timeout')", "22023"},
		{"SELECT * FROM knn('items_int8', " + v + ", 'ten')", "22P02"},
		{"SELECT * FROM knn('building', " + v + ", 5)", "55000"},
		{"SELECT * FROM knn('busy', " + v + ", 5)", "53000"},
		{"SELECT * FROM knn('items_int8')", "42883"},
		{"SELECT * FROM knn('items_int8', " + v + ", 5,", "42601"},
		{"SELEC 1", "42601"},
		{"SELECT * FROM knn('items_int8', " + v + ", 5) ORDER BY 1", "42601"},
		{"SELECT 'unterminated", "42601"},
		{"SELECT nope FROM knn('items_int8', " + v + ", 5)", "42703"},
		{"INSERT INTO items VALUES (1)", "0A000"},
		{"SELECT * FROM items", "0A000"},
		{"SET vecside.bogus = 1", "22023"},
		{"SET vecside.timeout = 'soon'", "22023"},
		{"SET vecside.oversample TO 0.5", "22023"},
		{"SET client_encoding TO 'LATIN1'", "22023"},
		{"SET no_such_setting = 1", "42704"},
		{"SET server_version = '16'", "55P02"},
		{"SHOW vecside.bogus", "22023"},
		{"SHOW no_such_setting", "42704"},
		{"DEALLOCATE nope", "26000"},
	}
	// What the HINT must say, by SQLSTATE.
	hints := map[string]string{"53000": "retrying after a pause is safe"}
	for _, mode := range []pgx.QueryExecMode{pgx.QueryExecModeCacheStatement, pgx.QueryExecModeSimpleProtocol} {
		conn := connect(t, addr, mode)
		for _, c := range cases {
			// Query, not Exec: pgx's Exec without arguments always uses
			// the simple protocol.
			rows, _ := conn.Query(testContext(t), c.sql)
			rows.Close()
			err := rows.Err()
			if got := sqlstate(err); got != c.code {
				t.Errorf("%s: %s: got %v (SQLSTATE %q), want SQLSTATE %s", mode, c.sql, err, got, c.code)
			}
			var pe *pgconn.PgError
			if errors.As(err, &pe) && !strings.Contains(pe.Hint, hints[c.code]) {
				t.Errorf("%s: %s: got hint %q, want one saying %q", mode, c.sql, pe.Hint, hints[c.code])
			}
			var one int
			if err := conn.QueryRow(testContext(t), "SELECT 1").Scan(&one); err != nil || one != 1 {
				t.Fatalf("%s: after %s: SELECT 1 gave %d, %v", mode, c.sql, one, err)
			}
		}
	}
}

// TestErrorParameters covers errors only parameters can cause.
func TestErrorParameters(t *testing.T) {
	ix, _ := newTestIndexer(t)
	_, addr := startServer(t, ix)
	conn := connect(t, addr, pgx.QueryExecModeCacheStatement)
	cases := []struct {
		sql  string
		args []any
		code string
	}{
		{"SELECT * FROM knn($1, $2, $3)", []any{nil, []float32{1}, 1}, "22004"},
		{"SELECT * FROM knn($1, $2, $3)", []any{"items_int8", []float32{1, 2}, 1}, "22023"},
		{"SELECT * FROM knn($1, $2::integer, $3)", []any{"items_int8", 1, 1}, "42804"},
		{"SELECT * FROM knn($1, $2::bytea, $3)", []any{"items_int8", pgvalue.AppendFloat4Array(nil, make([]float32, 8))[:40], 1}, "22023"},
		{"SELECT * FROM knn($1, $2::bytea, $3)", []any{"items_int8", []byte{0, 0, 0, 1}, 1}, "22023"},
		{"SELECT * FROM knn($1, $1, $2)", []any{"items_int8", 1}, "0A000"},
	}
	for _, c := range cases {
		_, err := conn.Exec(testContext(t), c.sql, c.args...)
		if got := sqlstate(err); got != c.code {
			t.Errorf("%s %v: got %v, want SQLSTATE %s", c.sql, c.args, err, c.code)
		}
	}
}
