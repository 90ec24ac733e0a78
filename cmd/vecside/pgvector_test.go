package main

import (
	"context"
	"fmt"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/vecside/vecside/cmd/vecside/sidecar"
	"github.com/vecside/vecside/indexer/dataset"
	"github.com/vecside/vecside/internal/pgtest"
	"github.com/vecside/vecside/internal/pgvalue"
	"github.com/vecside/vecside/kernels"
	"github.com/vecside/vecside/replicate"
)

// pgvectorTable is a table of the database's own with a pgvector index,
// the statement an application sends to search it, and its data.
type pgvectorTable struct {
	name, column, typ, index, create, search string
	metric                                   kernels.Metric
	data, queries                            [][]float32
}

// TestServesPgvectorIndexes: vecside serve --proxy, given no --index,
// serves a database's pgvector indexes — HNSW cosine on vector(768),
// IVFFlat l2 on vector(128), HNSW on a halfvec expression — and
// accelerates what an application sends for each through the proxy,
// at the recall target end to end, as check said it would; an index
// created while it runs is accelerated within 30 s. It needs pgvector installed for the test
// cluster, which CI has not: the CI suite covers the same path with
// stand-in access methods over real[] (TestCheckListsDeclaredIndexes,
// sidecar's TestServesDeclaredIndexes, the proxy's script 21).
func TestServesPgvectorIndexes(t *testing.T) {
	const name, rows, queries, k = "cli_pgvector", 20000, 100, 10
	dsn := pgtest.Shared(t).NewDatabase(t)
	if !pgtest.OffersPGVector(t, dsn) {
		t.Skip("pgvector is not installed for the test cluster (pg_available_extensions has no 'vector')")
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	db := pgtest.Connect(t, dsn)
	exec := func(sql string) {
		t.Helper()
		if _, err := db.Exec(ctx, sql); err != nil {
			t.Fatalf("%s: %v", sql, err)
		}
	}
	exec("CREATE EXTENSION vector")
	textlike := func(seed uint64, dims int) ([][]float32, [][]float32) {
		return dataset.TextLike{Seed: seed, Rows: rows, Queries: queries, Dims: dims}.Generate()
	}
	docs, docQueries := textlike(1, 768)
	images, imageQueries := dataset.Clustered{Seed: 2, Rows: rows, Queries: queries, Dims: 128}.Generate()
	notes, noteQueries := textlike(3, 256)
	tables := []*pgvectorTable{
		{name: "docs", column: "embedding", typ: "vector(768)", index: "docs_embedding_idx", metric: kernels.Cosine,
			create: "CREATE INDEX docs_embedding_idx ON docs USING hnsw (embedding vector_cosine_ops)",
			search: "SELECT id FROM docs ORDER BY embedding <=> $1 LIMIT 10", data: docs, queries: docQueries},
		{name: "images", column: "v", typ: "vector(128)", index: "images_v_idx", metric: kernels.L2,
			create: "CREATE INDEX images_v_idx ON images USING ivfflat (v vector_l2_ops) WITH (lists = 100)",
			search: "SELECT id, v <-> $1 AS distance FROM images ORDER BY distance LIMIT 10", data: images, queries: imageQueries},
		{name: "notes", column: "embedding", typ: "vector(256)", index: "notes_half_idx", metric: kernels.Cosine,
			create: "CREATE INDEX notes_half_idx ON notes USING hnsw ((embedding::halfvec(256)) halfvec_cosine_ops)",
			search: "SELECT id FROM notes ORDER BY embedding::halfvec(256) <=> $1::halfvec(256) LIMIT 10", data: notes, queries: noteQueries},
	}
	for _, tb := range tables {
		load(t, db, tb)
		exec(tb.create)
	}
	out, err := run(t, "check", "--source", dsn, "--name", name)
	for _, want := range []string{
		`serves docs_embedding_idx="public"."docs"("embedding") key="id" metric=cosine kind=hnsw`,
		`serves images_v_idx="public"."images"("v") key="id" metric=l2 kind=hnsw`,
		`serves notes_half_idx="public"."notes"("embedding") key="id" metric=cosine kind=hnsw`,
	} {
		if !strings.Contains(out, want) {
			t.Errorf("check with no --index does not say %q: %v\n%s", want, err, out)
		}
	}
	t.Cleanup(func() {
		if _, err := replicate.Teardown(context.Background(), dsn, name, sidecar.TeardownWait); err != nil {
			t.Error(err)
		}
	})
	listen, metrics, sidecarMetrics, dataDir := freeAddr(t), freeAddr(t), freeAddr(t), t.TempDir()
	done := make(chan error, 1)
	started := time.Now()
	go func() {
		done <- newApp().RunContext(ctx, []string{"vecside", "--log-level", "error", "serve", "--source", dsn, "--name", name,
			"--listen", "127.0.0.1:0", "--metrics-listen", sidecarMetrics, "--data-dir", dataDir, "--auth", "trust",
			"--proxy", "--proxy-listen", listen, "--proxy-metrics-listen", metrics})
	}()
	t.Cleanup(func() { cancel(); <-done })
	c := dialProxy(t, ctx, dsn, listen, done)
	for _, tb := range tables {
		waitAccelerated(t, ctx, c, tb, 10*time.Minute)
	}
	t.Logf("three pgvector indexes accelerated %v after the start", time.Since(started).Round(time.Second))
	for _, tb := range tables {
		truth := dataset.GroundTruth(tb.metric, tb.data, tb.queries, k)
		found := 0
		for i, q := range tb.queries {
			ids := searchThrough(t, ctx, c, tb, q)
			found += hits(ids, truth[i], tb.data, q, tb.metric)
		}
		recall := float64(found) / float64(k*len(tb.queries))
		t.Logf("%s (%s): recall@10 %.4f through the proxy over %d queries", tb.index, tb.typ, recall, len(tb.queries))
		if recall < 0.95 {
			t.Errorf("%s: recall@10 %.4f through the proxy, want at least 0.95", tb.index, recall)
		}
	}
	// The query vector in binary, as pgvector's Go and Python clients
	// send a halfvec.
	var halfvecOID uint32
	if err := db.QueryRow(ctx, "SELECT 'halfvec'::regtype::oid").Scan(&halfvecOID); err != nil {
		t.Fatal(err)
	}
	res := c.PgConn().ExecParams(ctx, tables[2].search, [][]byte{pgvalue.AppendHalfvec(nil, noteQueries[1])}, []uint32{halfvecOID}, []int16{1}, nil).Read()
	var plan string
	if err := c.QueryRow(ctx, "SHOW vecside.last_plan", pgx.QueryExecModeSimpleProtocol).Scan(&plan); res.Err != nil || len(res.Rows) != 10 || !strings.HasPrefix(plan, "accelerated: index notes_half_idx;") {
		t.Errorf("a binary halfvec query: %d rows, %v; plan %q (%v)", len(res.Rows), res.Err, plan, err)
	}
	body := scrape(t, sidecarMetrics)
	for _, tb := range tables {
		if !regexp.MustCompile(fmt.Sprintf(`\nvecside_index_search_duration_seconds_count\{index="%s",kind="hnsw"\} [1-9][0-9]{2}`, tb.index)).MatchString(body) {
			t.Errorf("the sidecar's /metrics count fewer than 100 searches of %s", tb.index)
		}
		if !strings.Contains(body, fmt.Sprintf(`vecside_index_rows{index="%s"} %d`, tb.index, rows)) {
			t.Errorf("the sidecar's /metrics do not show %d rows in %s", rows, tb.index)
		}
	}

	extra, extraQueries := dataset.Clustered{Seed: 4, Rows: 5000, Queries: 1, Dims: 64}.Generate()
	fourth := &pgvectorTable{name: "extra", column: "v", typ: "vector(64)", index: "extra_v_idx", metric: kernels.IP,
		create: "CREATE INDEX extra_v_idx ON extra USING hnsw (v vector_ip_ops) WITH (m = 24)",
		search: "SELECT id FROM extra ORDER BY v <#> $1 LIMIT 10", data: extra, queries: extraQueries}
	load(t, db, fourth)
	created := time.Now()
	exec(fourth.create)
	waitAccelerated(t, ctx, c, fourth, 30*time.Second)
	t.Logf("%s accelerated %v after its CREATE INDEX", fourth.index, time.Since(created).Round(time.Millisecond))
}

// load creates tb's table and copies its rows in, ids from 0.
func load(t *testing.T, db *pgx.Conn, tb *pgvectorTable) {
	t.Helper()
	ctx := context.Background()
	if _, err := db.Exec(ctx, fmt.Sprintf("CREATE TABLE %s (id int PRIMARY KEY, %s %s)", tb.name, tb.column, tb.typ)); err != nil {
		t.Fatal(err)
	}
	var text []byte
	for i, v := range tb.data {
		text = fmt.Appendf(text, "%d\t", i)
		text = append(pgvalue.AppendVectorText(text, v), '\n')
	}
	if _, err := db.PgConn().CopyFrom(ctx, strings.NewReader(string(text)), fmt.Sprintf("COPY %s FROM STDIN", tb.name)); err != nil {
		t.Fatal(err)
	}
}

// searchThrough runs tb's search for q on c and returns the ids, with
// the vector as pgvector's text, as its clients send it.
func searchThrough(t *testing.T, ctx context.Context, c *pgx.Conn, tb *pgvectorTable, q []float32) []int32 {
	t.Helper()
	rows, err := c.Query(ctx, tb.search, string(pgvalue.AppendVectorText(nil, q)))
	if err != nil {
		t.Fatalf("%s: %v", tb.search, err)
	}
	ids, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (int32, error) {
		var id int32
		err := r.Scan(append([]any{&id}, make([]any, len(r.FieldDescriptions())-1)...)...)
		return id, err
	})
	if err != nil {
		t.Fatalf("%s: %v", tb.search, err)
	}
	return ids
}

// waitAccelerated waits until tb's search through c is answered by its
// index, as SHOW vecside.last_plan says.
func waitAccelerated(t *testing.T, ctx context.Context, c *pgx.Conn, tb *pgvectorTable, within time.Duration) {
	t.Helper()
	var plan string
	for deadline := time.Now().Add(within); time.Now().Before(deadline); time.Sleep(200 * time.Millisecond) {
		searchThrough(t, ctx, c, tb, tb.queries[0])
		if err := c.QueryRow(ctx, "SHOW vecside.last_plan", pgx.QueryExecModeSimpleProtocol).Scan(&plan); err != nil {
			t.Fatal(err)
		}
		if strings.HasPrefix(plan, "accelerated: index "+tb.index+";") {
			return
		}
	}
	t.Fatalf("%s: not accelerated within %v; last plan %q", tb.search, within, plan)
}

// hits counts the ids among the k nearest of truth (ties with the k-th
// count).
func hits(ids []int32, truth dataset.Truth, data [][]float32, q []float32, m kernels.Metric) int {
	n := 0
	for _, id := range ids {
		if kernels.ExactDistance(m, q, data[id]) <= truth.KthDistance()+1e-9 {
			n++
		}
	}
	return n
}
