package rpc

import (
	"fmt"
	"strconv"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/vecside/vecside/indexer"
	"github.com/vecside/vecside/internal/pgvalue"
)

var execModes = []pgx.QueryExecMode{
	pgx.QueryExecModeCacheStatement,
	pgx.QueryExecModeCacheDescribe,
	pgx.QueryExecModeDescribeExec,
	pgx.QueryExecModeExec,
	pgx.QueryExecModeSimpleProtocol,
}

// idText renders an id as pgx decoded it in its text form.
func idText(v any) string {
	switch v := v.(type) {
	case int64:
		return strconv.FormatInt(v, 10)
	case int32:
		return strconv.FormatInt(int64(v), 10)
	case int16:
		return strconv.FormatInt(int64(v), 10)
	case [16]byte:
		return pgvalue.KeyUUID.FormatKey(string(v[:]))
	case string:
		return v
	}
	return fmt.Sprintf("unexpected %T", v)
}

// queryHits runs a knn query and returns its rows, ids in text form.
func queryHits(t *testing.T, conn *pgx.Conn, sql string, args ...any) []hit {
	t.Helper()
	rows, err := conn.Query(testContext(t), sql, args...)
	if err != nil {
		t.Fatalf("%s: %v", sql, err)
	}
	defer rows.Close()
	var out []hit
	for rows.Next() {
		vals, err := rows.Values()
		if err != nil {
			t.Fatal(err)
		}
		var h hit
		for i, f := range rows.FieldDescriptions() {
			switch f.Name {
			case "id":
				h.id = idText(vals[i])
			case "distance":
				h.distance = vals[i].(float64)
			}
		}
		out = append(out, h)
	}
	if err := rows.Err(); err != nil {
		t.Fatalf("%s: %v", sql, err)
	}
	return out
}

// TestPgxModes checks that every pgx exec mode gets the brute-force
// answer for every key type, with the vector as a parameter, as text and
// as bytea.
func TestPgxModes(t *testing.T) {
	ix, data := newTestIndexer(t)
	_, addr := startServer(t, ix)
	q := []float32{0.1, -0.2, 0.3, 0.4, -0.5, 0.6, 0.7, -0.8}
	half, err := pgvalue.VectorHalfvec.Round(q)
	if err != nil {
		t.Fatal(err)
	}
	const k = 7
	for _, mode := range execModes {
		t.Run(mode.String(), func(t *testing.T) {
			conn := connect(t, addr, mode)
			for _, tk := range testKeyTypes {
				want := data[tk.index].bruteForce(q, k)
				for _, c := range []struct {
					sql  string
					args []any
				}{
					{"SELECT * FROM knn($1, $2, $3)", []any{tk.index, q, k}},
					{fmt.Sprintf("select id, distance from KNN('%s', '%s', %d);", tk.index, vectorText(q), k), nil},
					{fmt.Sprintf("SELECT distance, id FROM knn('%s', $1::real[], $2, 'oversample=1')", tk.index), []any{q, k}},
					// As the SQL helpers send it: array_send's bytes in hex.
					{fmt.Sprintf(`SELECT * FROM knn('%s', E'\\x%x'::bytea, %d)`, tk.index, pgvalue.AppendFloat4Array(nil, q), k), nil},
					{"SELECT * FROM knn($1, $2::bytea, $3)", []any{tk.index, pgvalue.AppendFloat4Array(nil, q), k}},
					{fmt.Sprintf(`SELECT * FROM knn('%s', '\x%x'::bytea, %d)`, tk.index, pgvalue.AppendPgvector(nil, q), k), nil},
					{"SELECT * FROM knn($1, $2::bytea, $3)", []any{tk.index, pgvalue.AppendPgvector(nil, q), k}},
				} {
					got := queryHits(t, conn, c.sql, c.args...)
					checkHits(t, got, want)
				}
				// As halfvec, the query is rounded to half precision, as
				// pgvector's cast rounds it.
				want = data[tk.index].bruteForce(half, k)
				for _, c := range []struct {
					sql  string
					args []any
				}{
					{fmt.Sprintf("SELECT * FROM knn('%s', '%s'::halfvec(8), %d)", tk.index, vectorText(q), k), nil},
					{"SELECT * FROM knn($1, $2::halfvec, $3)", []any{tk.index, vectorText(q), k}},
					{fmt.Sprintf(`SELECT * FROM knn('%s', '\x%x'::bytea, %d)`, tk.index, pgvalue.AppendHalfvec(nil, q), k), nil},
					{"SELECT * FROM knn($1, $2::bytea, $3)", []any{tk.index, pgvalue.AppendHalfvec(nil, q), k}},
				} {
					got := queryHits(t, conn, c.sql, c.args...)
					checkHits(t, got, want)
				}
			}
		})
	}
}

// TestDescribedKeyTypeChanges: a statement described while every index had
// bigint keys is refused, not misdecoded, for an index with uuid keys, and
// pgx recovers by preparing it again.
func TestDescribedKeyTypeChanges(t *testing.T) {
	ix := indexer.New()
	e := addIndex(t, ix, "a", pgvalue.KeyInt8)
	key, _ := pgvalue.KeyInt8.DecodeText("42")
	e.Stream().Upsert(key, []float32{1, 2})
	e.SetReady()
	_, addr := startServer(t, ix)
	conn := connect(t, addr, pgx.QueryExecModeCacheStatement)
	const sql = "SELECT id FROM knn($1, $2, 1)"
	var id any
	if err := conn.QueryRow(testContext(t), sql, "a", []float32{1, 2}).Scan(&id); err != nil || id != int64(42) {
		t.Fatalf("got %v, %v; want 42", id, err)
	}
	u := addIndex(t, ix, "b", pgvalue.KeyUUID)
	ukey, _ := pgvalue.KeyUUID.DecodeText("00000000-0000-0000-0000-000000000001")
	u.Stream().Upsert(ukey, []float32{1, 2})
	u.SetReady()
	err := conn.QueryRow(testContext(t), sql, "b", []float32{1, 2}).Scan(&id)
	if code := sqlstate(err); code != codeFeatureNotSupported {
		t.Fatalf("got %v, want 0A000", err)
	}
	if err := conn.QueryRow(testContext(t), sql, "b", []float32{1, 2}).Scan(&id); err != nil || idText(id) != "00000000-0000-0000-0000-000000000001" {
		t.Fatalf("after preparing again: got %v, %v", id, err)
	}
}
