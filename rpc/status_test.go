package rpc

import (
	"slices"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/vecside/vecside/indexer"
	"github.com/vecside/vecside/indexer/kind"
	"github.com/vecside/vecside/internal/pgvalue"
)

// TestStatusFigures: vecside_status() shows a kind's figures as
// name=value pairs, counts its Memory figures in index_bytes, and fills
// lists and list_max from the figures of those names; a kind without
// figures has NULL and zeros there.
func TestStatusFigures(t *testing.T) {
	col := func(row []any, name string) any {
		return row[slices.IndexFunc(statusColumns, func(c column) bool { return c.name == name })]
	}
	lists := &kind.Figure{Name: "lists", Help: "Lists.", Type: kind.Gauge}
	listMax := &kind.Figure{Name: "list_max", Help: "Rows in the largest list.", Type: kind.Gauge}
	links := &kind.Figure{Name: "link_bytes", Help: "Memory of the links.", Type: kind.Memory}
	st := indexer.Status{IndexStats: indexer.Stats{Rows: 10, CodeBytes: 100, KeyBytes: 20, Figures: []kind.Reading{
		{Figure: lists, Value: 4}, {Figure: links, Value: 30}, {Figure: listMax, Value: 1e6},
	}}}
	row := statusRow(st)
	for name, want := range map[string]any{"figures": "lists=4 link_bytes=30 list_max=1000000", "index_bytes": int64(150), "lists": int64(4), "list_max": int64(1e6)} {
		if got := col(row, name); got != want {
			t.Errorf("%s = %#v, want %#v", name, got, want)
		}
	}
	st.IndexStats.Figures = nil
	row = statusRow(st)
	for name, want := range map[string]any{"figures": nil, "index_bytes": int64(120), "lists": int64(0), "list_max": int64(0)} {
		if got := col(row, name); got != want {
			t.Errorf("without figures: %s = %#v, want %#v", name, got, want)
		}
	}
}

// TestStatusTableIdentity: vecside_status() ends with table_oid (oid, the
// followed table's pg_class OID) and database_name (text, the source
// database's), NULL until the replicator has resolved them; in every
// query mode, in text and binary, and in WHERE clauses.
func TestStatusTableIdentity(t *testing.T) {
	if n := len(statusColumns); statusColumns[n-2].name != "table_oid" || statusColumns[n-1].name != "database_name" {
		t.Fatalf("the last columns are %s, %s; want table_oid, database_name", statusColumns[n-2].name, statusColumns[n-1].name)
	}
	ix := indexer.New()
	e := addIndex(t, ix, "items", pgvalue.KeyInt8)
	e.SetReady()
	_, addr := startServer(t, ix)
	ctx := testContext(t)
	conn := connect(t, addr, execModes[0])
	var oid *uint32
	var db *string
	if err := conn.QueryRow(ctx, "SELECT table_oid, database_name FROM vecside_status()").Scan(&oid, &db); err != nil || oid != nil || db != nil {
		t.Fatalf("before the table is resolved: %v, %v (%v), want NULL, NULL", oid, db, err)
	}
	conn.Close(ctx)
	// Above 2^31: an oid is unsigned.
	e.Durable().SetTable(indexer.Table{OID: 3000000000, Schema: "public", Name: "items"})
	ix.SetSource(indexer.Source{SystemID: 7, Timeline: 3, Slot: "vecside", Database: "app"})
	for _, mode := range execModes {
		conn := connect(t, addr, mode)
		var oid uint32
		var db string
		if err := conn.QueryRow(ctx, "SELECT table_oid, database_name FROM vecside_status()").Scan(&oid, &db); err != nil || oid != 3000000000 || db != "app" {
			t.Errorf("%v: table_oid %d, database_name %q (%v), want 3000000000, app", mode, oid, db, err)
		}
		var text string
		if err := conn.QueryRow(ctx, "SELECT table_oid FROM vecside_status()", pgx.QueryResultFormats{pgx.TextFormatCode}).Scan(&text); err != nil || text != "3000000000" {
			t.Errorf("%v: table_oid in text %q (%v), want 3000000000", mode, text, err)
		}
		rows, err := conn.Query(ctx, "SELECT index_name FROM vecside_status() WHERE table_oid = 3000000000 AND database_name = 'app'")
		if err != nil {
			t.Fatalf("%v: %v", mode, err)
		}
		names, err := pgx.CollectRows(rows, pgx.RowTo[string])
		if err != nil || len(names) != 1 {
			t.Errorf("%v: WHERE on table_oid and database_name: %v (%v), want [items]", mode, names, err)
		}
		conn.Close(ctx)
	}
}
