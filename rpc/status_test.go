package rpc

import (
	"slices"
	"testing"

	"github.com/vecside/vecside/indexer"
	"github.com/vecside/vecside/indexer/kind"
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
