package rpc

import (
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/vecside/vecside/indexer"
	"github.com/vecside/vecside/internal/pgvalue"
)

// TestKNNWithXID: knn's xid column holds each row's xid with
// with_xid=true, in every query mode, whether SELECT * or by name; NULL
// without it, or when xid_source names another system or timeline; and
// vecside_status() reports the source.
func TestKNNWithXID(t *testing.T) {
	ix := indexer.New()
	e := addIndex(t, ix, "items", pgvalue.KeyInt8)
	e.Stream().BeginTx(0x100, 4242)
	for i, v := range [][]float32{{1, 0}, {0, 1}, {1, 1}} {
		key, _ := pgvalue.KeyInt8.DecodeText(string(rune('1' + i)))
		e.Stream().Upsert(key, v)
	}
	e.Stream().Commit(0x101)
	e.SetReady()
	ix.SetSource(indexer.Source{SystemID: 7, Timeline: 3})
	_, addr := startServer(t, ix)
	ctx := testContext(t)
	for _, mode := range execModes {
		conn := connect(t, addr, mode)
		for _, c := range []struct {
			sql  string
			args []any
			want any // the xid of every row
		}{
			{"SELECT * FROM knn('items', '[0,0]', 3, 'with_xid=true')", nil, int64(4242)},
			{"SELECT id, distance, xid FROM knn($1, $2, $3, $4)", []any{"items", []float32{0, 0}, 3, "with_xid=true"}, int64(4242)},
			{"SELECT id, distance, xid FROM knn('items', '[0,0]', 3)", nil, nil},
			{"SELECT id, distance, xid FROM knn('items', '[0,0]', 3, 'with_xid=true xid_source=7/3')", nil, int64(4242)},
			{"SELECT id, distance, xid FROM knn('items', '[0,0]', 3, 'with_xid=true xid_source=7/4')", nil, nil},
			{"SELECT id, distance, xid FROM knn('items', '[0,0]', 3, 'with_xid=true xid_source=8/3')", nil, nil},
		} {
			rows, err := conn.Query(ctx, c.sql, c.args...)
			if err != nil {
				t.Fatalf("%v, %s: %v", mode, c.sql, err)
			}
			got, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (any, error) {
				vals, err := r.Values()
				if err != nil || len(vals) != 3 {
					return nil, err
				}
				return vals[2], nil
			})
			if err != nil || len(got) != 3 {
				t.Fatalf("%v, %s: %v, %v", mode, c.sql, got, err)
			}
			for _, x := range got {
				if x != c.want {
					t.Fatalf("%v, %s: xid %v, want %v", mode, c.sql, x, c.want)
				}
			}
		}
		var n int
		var sys, tli int64
		if err := conn.QueryRow(ctx, "SELECT system_identifier, timeline FROM vecside_status()").Scan(&sys, &tli); err != nil || sys != 7 || tli != 3 {
			t.Fatalf("%v: vecside_status() source %d, %d (%v), want 7, 3", mode, sys, tli, err)
		}
		rows, _ := conn.Query(ctx, "SELECT * FROM knn('items', '[0,0]', 3)")
		for rows.Next() {
			n = len(rows.RawValues())
		}
		if rows.Err() != nil || n != 2 {
			t.Fatalf("%v: SELECT * without with_xid has %d columns (%v), want 2", mode, n, rows.Err())
		}
		conn.Close(ctx)
	}
}
