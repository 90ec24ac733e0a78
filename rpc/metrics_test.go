package rpc

import (
	"testing"

	"github.com/jackc/pgx/v5"
)

func TestStats(t *testing.T) {
	ix, _ := newTestIndexer(t)
	srv, addr := startServer(t, ix)
	conn := connect(t, addr, pgx.QueryExecModeCacheStatement)
	ctx := testContext(t)
	conn.Exec(ctx, "SELECT * FROM knn('items_int8', '[0,0,0,0,0,0,0,0]', 2)")
	conn.Exec(ctx, "SELECT * FROM knn('items_int8', '[0,0]', 2)")
	conn.Exec(ctx, "SELECT * FROM knn('nope', '[0]', 2)")
	conn.Exec(ctx, "SELEC")

	st := srv.Stats()
	for key, want := range map[RequestKey]uint64{
		{"select_function", "00000"}:                   1,
		{"select_function", codeInvalidParameterValue}: 1,
		{"select_function", codeUndefinedObject}:       1,
		{"invalid", codeSyntaxError}:                   1,
	} {
		if got := st.Requests[key]; got != want {
			t.Errorf("requests %v: %d, want %d (all: %v)", key, got, want, st.Requests)
		}
	}
	if got := st.Latency["select_function"].Count(); got != 3 {
		t.Errorf("select_function latency count %d, want 3", got)
	}
	if h := st.Searches["items_int8"]; h.Count() != 2 || h.Sum <= 0 || len(h.Counts) != len(LatencyBuckets)+1 {
		t.Errorf("searches of items_int8: %+v, want 2 with a positive sum", h)
	}
	if _, ok := st.Searches["nope"]; ok {
		t.Error("a search of an unknown index was counted under its name")
	}
	if st.Connections != 1 {
		t.Errorf("connections %d, want 1", st.Connections)
	}
}
