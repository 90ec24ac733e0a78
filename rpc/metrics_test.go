package rpc

import (
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/vecside/vecside/internal/pgvalue"
)

func TestMetricsAndHealth(t *testing.T) {
	ix, _ := newTestIndexer(t)
	srv, addr := startServer(t, ix)
	conn := connect(t, addr, pgx.QueryExecModeCacheStatement)
	ctx := testContext(t)
	conn.Exec(ctx, "SELECT * FROM knn('items_int8', '[0,0,0,0,0,0,0,0]', 2)")
	conn.Exec(ctx, "SELECT * FROM knn('nope', '[0]', 2)")
	conn.Exec(ctx, "SELEC")
	h := srv.MetricsHandler()

	get := func(path string) (int, string) {
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, path, nil))
		body, _ := io.ReadAll(rec.Body)
		return rec.Code, string(body)
	}
	code, body := get("/metrics")
	for _, want := range []string{
		"# TYPE vecside_rpc_requests_total counter\n",
		`vecside_rpc_requests_total{kind="select_function",class="00"} 1` + "\n",
		`vecside_rpc_requests_total{kind="select_function",class="42"} 1` + "\n",
		`vecside_rpc_requests_total{kind="invalid",class="42"} 1` + "\n",
		`vecside_rpc_request_duration_seconds_bucket{kind="select_function",le="+Inf"} 2` + "\n",
		`vecside_rpc_request_duration_seconds_count{kind="select_function"} 2` + "\n",
		"vecside_rpc_connections 1\n",
		`vecside_index_rows{index="items_uuid"} 100` + "\n",
		`vecside_index_skipped_rows{index="items_uuid"} 0` + "\n",
		`vecside_index_zero_vectors{index="items_uuid"} 0` + "\n",
		`vecside_index_applied_lsn{index="items_int2"} 97500059720` + "\n",
		`vecside_index_state{index="items_text",state="ready"} 1` + "\n",
		`vecside_index_state{index="items_text",state="building"} 0` + "\n",
	} {
		if !strings.Contains(body, want) {
			t.Errorf("/metrics lacks %q", want)
		}
	}
	if code != http.StatusOK {
		t.Errorf("/metrics: %d", code)
	}
	if code, body := get("/healthz"); code != http.StatusOK || body != "ready\n" {
		t.Errorf("/healthz all ready: %d %q", code, body)
	}
	e := addIndex(t, ix, "late", pgvalue.KeyInt8)
	if code, body := get("/healthz"); code != http.StatusServiceUnavailable || body != "not ready: 5 ready 1 building 0 error\n" {
		t.Errorf("/healthz with a building index: %d %q", code, body)
	}
	e.Fail(io.ErrUnexpectedEOF)
	if _, body := get("/healthz"); body != "not ready: 5 ready 0 building 1 error\n" {
		t.Errorf("/healthz with a failed index: %q", body)
	}
}
