package rpc

import (
	"fmt"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgtype"
)

// TestArrayAgg checks that array_agg over knn gives, in every pgx exec
// mode (text and binary results) and for every key type, one row holding
// knn's rows in their order; NULL arrays for no rows; and no row past
// LIMIT 0 or OFFSET 1, as PostgreSQL's aggregate without GROUP BY.
func TestArrayAgg(t *testing.T) {
	ix, data := newTestIndexer(t)
	_, addr := startServer(t, ix)
	q := []float32{0.1, -0.2, 0.3, 0.4, -0.5, 0.6, 0.7, -0.8}
	const k = 7
	for _, mode := range execModes {
		t.Run(mode.String(), func(t *testing.T) {
			conn := connect(t, addr, mode)
			ctx := testContext(t)
			for _, tk := range testKeyTypes {
				want := data[tk.index].bruteForce(q, k)
				var ids []any
				var dists []float64
				var xids []*int64
				err := conn.QueryRow(ctx, "SELECT array_agg(id), array_agg(distance), array_agg(xid) FROM knn($1, $2, $3, 'with_xid=true')",
					tk.index, q, k).Scan(&ids, &dists, &xids)
				if err != nil {
					t.Fatalf("%s: %v", tk.index, err)
				}
				got := make([]hit, len(ids))
				for i := range ids {
					got[i] = hit{id: idText(ids[i]), distance: dists[i]}
				}
				checkHits(t, got, want)
				if len(xids) != len(ids) || xids[0] != nil { // rows upserted here have no xid
					t.Errorf("%s: xids %v, want %d NULLs", tk.index, xids, len(ids))
				}

				var none []any
				if err := conn.QueryRow(ctx, fmt.Sprintf("SELECT array_agg(id) FROM knn('%s', $1::real[], 3) WHERE distance < 0", tk.index), q).
					Scan(&none); err != nil || none != nil {
					t.Errorf("%s: array_agg of no rows is %v, %v; want NULL", tk.index, none, err)
				}
				for _, cut := range []string{"LIMIT 0", "OFFSET 1"} {
					rows, err := conn.Query(ctx, fmt.Sprintf("SELECT array_agg(id) FROM knn('%s', $1::real[], 3) %s", tk.index, cut), q)
					if err != nil {
						t.Fatal(err)
					}
					gotRow := rows.Next()
					rows.Close()
					if gotRow || rows.Err() != nil {
						t.Errorf("%s: %s gave a row (%v), want none", tk.index, cut, rows.Err())
					}
				}
			}
		})
	}
}

// TestArrayAggDescribe: the columns are named and typed as PostgreSQL's
// array_agg would have them.
func TestArrayAggDescribe(t *testing.T) {
	ix, _ := newTestIndexer(t)
	_, addr := startServer(t, ix)
	conn := connect(t, addr, pgx.QueryExecModeCacheStatement)
	for _, c := range []struct {
		sql  string
		oids []uint32
	}{
		{"SELECT array_agg(id), array_agg(distance) FROM knn('items_uuid', $1::real[], 3)", []uint32{pgtype.UUIDArrayOID, pgtype.Float8ArrayOID}},
		{"SELECT array_agg(id) FROM knn('items_int2', $1::real[], 3)", []uint32{pgtype.Int2ArrayOID}},
		{"SELECT array_agg(index_name), array_agg(applied_lsn), array_agg(rebuilding) FROM vecside_status()",
			[]uint32{pgtype.TextArrayOID, oidPgLSNArray, pgtype.BoolArrayOID}},
	} {
		sd, err := conn.Prepare(testContext(t), "", c.sql)
		if err != nil {
			t.Fatalf("%s: %v", c.sql, err)
		}
		for i, f := range sd.Fields {
			if f.Name != aggArray || f.DataTypeOID != c.oids[i] {
				t.Errorf("%s: column %d is %s of type %d, want array_agg of type %d", c.sql, i, f.Name, f.DataTypeOID, c.oids[i])
			}
		}
	}
}

// TestArrayText checks array_out's quoting, which array_in reads back.
func TestArrayText(t *testing.T) {
	elem := textColumn("t")
	for _, c := range []struct {
		in   []any
		want string
	}{
		{[]any{"a", nil, "b c"}, `{a,NULL,"b c"}`},
		{[]any{"", "null", "NULL x"}, `{"","null","NULL x"}`},
		{[]any{`q"uote`, `back\slash`, "{brace}", "com,ma"}, `{"q\"uote","back\\slash","{brace}","com,ma"}`},
		{[]any{"ü", "tab\there"}, "{ü,\"tab\there\"}"},
		{[]any{}, "{}"},
	} {
		if got := string(appendArrayText(nil, elem, c.in)); got != c.want {
			t.Errorf("%q: got %s, want %s", c.in, got, c.want)
		}
	}
}
