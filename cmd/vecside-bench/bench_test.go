package main

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"encoding/xml"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/vecside/vecside/cmd/vecside-bench/internal/benchreport"
	"github.com/vecside/vecside/indexer/dataset"
	"github.com/vecside/vecside/internal/pgtest"
	"github.com/vecside/vecside/kernels"
)

var benchModes = []string{benchreport.SidecarOnly, benchreport.EndToEnd, benchreport.SQLSearch, benchreport.SQLSearchRows, benchreport.Proxy, benchreport.ServeProxy}

// readReport reads a bench's JSON and checks what every point must hold.
func readReport(t *testing.T, path string) benchreport.Report {
	t.Helper()
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var r benchreport.Report
	if err := json.Unmarshal(raw, &r); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	for _, p := range r.Points {
		if p.Recall < 0 || p.Recall > 1 || p.QPS <= 0 || p.P50 <= 0 || p.P50 > p.P95 || p.P95 > p.P99 || p.K != 10 ||
			!slices.Contains(benchModes, p.Mode) || (p.System == "vecside") != (p.CandidatesMean != nil) {
			t.Errorf("malformed point %+v", p)
		}
	}
	return r
}

// TestBenchOnFvecsFiles runs the bench on a small .fvecs file set and
// checks the three outputs and that the recall is what the indexes can
// do (pgvector's too, where the test database has it).
func TestBenchOnFvecsFiles(t *testing.T) {
	dir := t.TempDir()
	data, queries := dataset.Clustered{Seed: 3, Rows: 3000, Queries: 40, Dims: 16}.Generate()
	base, query := filepath.Join(dir, "base.fvecs"), filepath.Join(dir, "query.fvecs")
	if err := dataset.WriteFvecs(base, data); err != nil {
		t.Fatal(err)
	}
	if err := dataset.WriteFvecs(query, queries); err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(dir, "out")
	md, err := run(t, "--source", pgtest.Shared(t).NewDatabase(t), "--fvecs-base", base, "--fvecs-query", query, "--metric", "l2",
		"--index", "kind=flat store=float", "--index", "kind=hnsw", "--ef-search", "16,64", "--oversample", "1", "--pgvector-ef-search", "10,80",
		"--paths", "sidecar,heapfetch,sql,pgvector",
		"--clients", "2", "--measure", "40", "--json", out+".json", "--markdown", out+".md", "--svg", out+".svg")
	if err != nil {
		t.Fatalf("%v\n%s", err, md)
	}
	r := readReport(t, out+".json")
	if d := r.Header.Dataset; d.Name != "fvecs:base.fvecs" || d.Rows != 3000 || d.Dims != 16 || d.Queries != 40 || d.Truth != "computed by brute force" {
		t.Errorf("dataset %+v", d)
	}
	vecside, pgvector := 0, 0
	for _, p := range r.Points {
		switch {
		case p.System == "vecside" && strings.Contains(p.Index, "flat") && p.Recall != 1:
			t.Errorf("flat store=float: recall %v, want 1 (exact)", p.Recall)
		case p.System == "vecside" && p.Params["ef_search"] == 64 && p.Recall < 0.9:
			t.Errorf("%s %s %s %v: recall %v, want ≥ 0.9", p.System, p.Index, p.Mode, p.Params, p.Recall)
		case p.System == "pgvector" && p.Params["hnsw.ef_search"] == 80 && p.Recall < 0.9:
			t.Errorf("%s %s %v: recall %v, want ≥ 0.9", p.System, p.Index, p.Params, p.Recall)
		}
		if p.PostgresCPU != nil {
			t.Errorf("with --source, %s %s %s: Postgres CPU %v, want none", p.System, p.Index, p.Mode, *p.PostgresCPU)
		}
		if p.System == "vecside" {
			vecside++
		} else {
			pgvector++
		}
	}
	// 3 settings × 4 modes (sidecar-only, end-to-end, the two SQL
	// helpers) × 2 concurrencies; pgvector: 2 × 2.
	if vecside != 24 || (pgvector != 0 && pgvector != 4) {
		t.Errorf("%d vecside points, %d pgvector: want 24 and 4 (or 0 without pgvector)", vecside, pgvector)
	}
	if len(r.Header.Builds) != 2+pgvector/4 || r.Header.Machine.Postgres == "" || r.Header.Machine.RoundTripMicros <= 0 {
		t.Errorf("header %+v", r.Header)
	}
	// By default the scratch column is pgvector's type where it exists.
	if want := map[bool]string{false: "real[]", true: "vector(16)"}[pgvector > 0]; r.Header.Dataset.Column != want {
		t.Errorf("scratch column %q, want %q", r.Header.Dataset.Column, want)
	}
	raw, _ := os.ReadFile(out + ".md")
	if !strings.Contains(string(raw), "| system | index | params | mode | clients | recall |") || !strings.Contains(string(raw), "`SELECT 1` round trip p50 ") || string(raw) != md {
		t.Errorf("Markdown file:\n%s\nstdout:\n%s", raw, md)
	}
	svg, _ := os.ReadFile(out + ".svg")
	if err := xml.Unmarshal(svg, new(struct{})); err != nil || !strings.Contains(string(svg), "vecside kind=hnsw") {
		t.Errorf("SVG: %v", err)
	}

	// A ground-truth file is read, not computed again: the exact one
	// gives an exact index full recall; one too short for k is refused.
	writeIvecs := func(name string, n int) string {
		var raw []byte
		for _, truth := range dataset.GroundTruth(kernels.L2, data, queries, n) {
			raw = binary.LittleEndian.AppendUint32(raw, uint32(n))
			for _, row := range truth.Rows {
				raw = binary.LittleEndian.AppendUint32(raw, uint32(row))
			}
		}
		path := filepath.Join(dir, name)
		os.WriteFile(path, raw, 0o644)
		return path
	}
	args := []string{"--source", pgtest.Shared(t).NewDatabase(t), "--fvecs-base", base, "--fvecs-query", query, "--metric", "l2",
		"--index", "kind=flat store=float", "--oversample", "1", "--pgvector=false", "--e2e=false", "--clients", "1", "--json", out + ".json", "--fvecs-truth"}
	if md, err := run(t, append(args, writeIvecs("gt.ivecs", 10))...); err != nil {
		t.Fatalf("%v\n%s", err, md)
	}
	if r := readReport(t, out+".json"); r.Header.Dataset.Truth != "from gt.ivecs" || len(r.Points) != 1 || r.Points[0].Recall != 1 {
		t.Errorf("with the truth from a file: %+v, %+v", r.Header.Dataset, r.Points)
	}
	if md, err := run(t, append(args[:len(args)-1], "--column-type", "real[]")...); err != nil {
		t.Fatalf("%v\n%s", err, md)
	}
	if r := readReport(t, out+".json"); r.Header.Dataset.Column != "real[]" {
		t.Errorf("--column-type real[]: scratch column %q", r.Header.Dataset.Column)
	}
	if _, err := run(t, append(args[:len(args)-1], "--column-type", "text")...); err == nil || !strings.Contains(err.Error(), "--column-type") {
		t.Errorf("--column-type text: %v", err)
	}
	if _, err := run(t, append(args, writeIvecs("gt5.ivecs", 5))...); err == nil || !strings.Contains(err.Error(), "fewer than k=10") {
		t.Errorf("a truth file of 5 neighbours for k=10: %v", err)
	}
}

// TestBenchPaths: in a throwaway server, the SQL helpers and the proxy
// are measured beside the sidecar and heapfetch, for two indexes in turn
// (each path pointed at one sidecar, then the other), with the recall the
// indexes give, and every point has the server's CPU per query, which
// end to end (the heap statement runs there) is more than nothing.
func TestBenchPaths(t *testing.T) {
	// real[], where the bench gives pgvector's statement operators from
	// vecside's distance functions; then pgvector's vector, if the test
	// server has it.
	for _, column := range []string{"real[]", "auto"} {
		t.Run(column, func(t *testing.T) { testBenchPaths(t, column) })
	}
	if _, err := run(t, "--paths", "sql,heap"); err == nil || !strings.Contains(err.Error(), `"heap"`) {
		t.Errorf("--paths sql,heap: %v", err)
	}
}

func testBenchPaths(t *testing.T, column string) {
	out := filepath.Join(t.TempDir(), "r.json")
	if md, err := run(t, "--shared-buffers", "128MB", "--rows", "3000", "--dims", "16", "--queries", "50", "--metric", "l2",
		"--index", "kind=flat", "--index", "kind=hnsw", "--ef-search", "64", "--oversample", "2", "--column-type", column,
		"--pgvector=false", "--clients", "2", "--measure", "50", "--json", out); err != nil {
		t.Fatalf("%v\n%s", err, md)
	}
	r := readReport(t, out)
	if column == "auto" && r.Header.Dataset.Column == "real[]" {
		t.Skip("the test server has no pgvector: real[] again")
	}
	modes := benchModes
	if !proxyBuilt {
		modes = modes[:4]
	}
	got := map[string]int{}
	for _, p := range r.Points {
		got[p.Index+" "+p.Mode]++
		if p.Recall < 0.9 {
			t.Errorf("%s %s %v c=%d: recall %v, want ≥ 0.9", p.Index, p.Mode, p.Params, p.Concurrency, p.Recall)
		}
		if p.PostgresCPU == nil || *p.PostgresCPU < 0 || (p.Mode != benchreport.SidecarOnly && *p.PostgresCPU == 0) {
			t.Errorf("%s %s c=%d: Postgres CPU %v", p.Index, p.Mode, p.Concurrency, p.PostgresCPU)
		}
		if p.SidecarCPU != nil {
			t.Errorf("%s %s c=%d: sidecar CPU %v from a sidecar in the bench's own process", p.Index, p.Mode, p.Concurrency, *p.SidecarCPU)
		}
	}
	for _, index := range []string{"kind=flat", "kind=hnsw"} {
		for _, mode := range modes {
			if got[index+" "+mode] != 2 {
				t.Errorf("%s %s: %d points, want 2 (1 and 2 clients)", index, mode, got[index+" "+mode])
			}
		}
	}
	if len(r.Points) != 2*2*len(modes) {
		t.Errorf("%d points, want %d: %v", len(r.Points), 2*2*len(modes), got)
	}
}

// TestBenchOnATable: the bench reads a table without writing to it, holds
// out sampled rows as queries, measures under writes and leaves nothing
// behind in the database.
func TestBenchOnATable(t *testing.T) {
	ctx := context.Background()
	dsn := pgtest.Shared(t).NewDatabase(t)
	db, err := pgx.Connect(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close(ctx)
	data, _ := dataset.Clustered{Seed: 5, Rows: 2000, Dims: 8}.Generate()
	if _, err := db.Exec(ctx, "CREATE TABLE docs (id int PRIMARY KEY, emb real[]); INSERT INTO docs VALUES (-1, NULL)"); err != nil {
		t.Fatal(err)
	}
	if _, err := db.CopyFrom(ctx, pgx.Identifier{"docs"}, []string{"id", "emb"}, pgx.CopyFromSlice(len(data), func(i int) ([]any, error) {
		return []any{i, data[i]}, nil
	})); err != nil {
		t.Fatal(err)
	}
	checksum := func() (s string) {
		if err := db.QueryRow(ctx, "SELECT md5(string_agg(id || ':' || coalesce(emb::text, ''), ',' ORDER BY id)) || count(*) FROM docs").Scan(&s); err != nil {
			t.Fatal(err)
		}
		return s
	}
	before := checksum()
	out := filepath.Join(t.TempDir(), "r.json")
	if md, err := run(t, "--source", dsn, "--table", "docs", "--column", "emb", "--metric", "l2", "--queries", "20",
		"--index", "kind=flat", "--oversample", "2", "--pgvector=false", "--clients", "2", "--measure", "20",
		"--write-rate", "100", "--write-duration", "2s", "--json", out); err != nil {
		t.Fatalf("%v\n%s", err, md)
	}
	r := readReport(t, out)
	if d := r.Header.Dataset; d.Rows != 1980 || d.Queries != 20 || d.Name != "table:docs(emb)" {
		t.Errorf("dataset %+v: want 2,000 rows less 20 held out", d)
	}
	// 2 concurrencies of the sidecar alone, heapfetch and the two SQL
	// helpers; and of the two ways to run the proxy where the scratch
	// column is pgvector's (its operators exist).
	if want := map[bool]int{false: 8, true: 12}[proxyBuilt && strings.HasPrefix(r.Header.Dataset.Column, "vector")]; len(r.Points) != want || r.Points[0].Recall < 0.9 {
		t.Errorf("%d points, want %d: %+v", len(r.Points), want, r.Points)
	}
	if len(r.Writes) != 1 || r.Writes[0].LagP50 <= 0 || r.Writes[0].LagP99 < r.Writes[0].LagP50 || r.Writes[0].ApplyRate <= 0 || r.Writes[0].Written <= 0 {
		t.Errorf("write load %+v", r.Writes)
	}
	if checksum() != before {
		t.Error("the bench changed the table it read")
	}
	var left int
	if err := db.QueryRow(ctx, `SELECT (SELECT count(*) FROM pg_replication_slots) + (SELECT count(*) FROM pg_publication)
		+ (SELECT count(*) FROM pg_class WHERE relname LIKE 'vecside%') + (SELECT count(*) FROM pg_namespace WHERE nspname = 'vecside')
		+ (SELECT count(*) FROM pg_foreign_server)`).Scan(&left); err != nil || left != 0 {
		t.Errorf("%d slots, publications, scratch relations and SQL helpers left behind (%v)", left, err)
	}
	if _, err := run(t, "--source", dsn, "--table", "docs"); err == nil || !strings.Contains(err.Error(), "--column") {
		t.Errorf("--table without --column: %v", err)
	}
}

// TestMixture1536Preset: --dataset mixture1536 is the per-tier pages' set
// (1,536 dimensions, cosine), at the rows asked for, and refuses another
// dimension or metric.
func TestMixture1536Preset(t *testing.T) {
	out := filepath.Join(t.TempDir(), "r.json")
	md, err := run(t, "--source", pgtest.Shared(t).NewDatabase(t), "--dataset", "mixture1536", "--rows", "1500", "--queries", "10",
		"--index", "kind=flat", "--oversample", "1", "--pgvector=false", "--paths", "sidecar", "--clients", "1", "--measure", "10", "--json", out)
	if err != nil {
		t.Fatalf("%v\n%s", err, md)
	}
	r := readReport(t, out)
	if d := r.Header.Dataset; d.Dims != 1536 || d.Metric != "cosine" || d.Rows != 1500 || d.Queries != 10 {
		t.Errorf("data set %+v: want 1500 rows × 1536, cosine, 10 queries", d)
	}
	if len(r.Points) == 0 || r.Points[0].Recall < 0.9 {
		t.Errorf("points %+v: want kind=flat's recall ≥ 0.9", r.Points)
	}
	for _, bad := range [][]string{{"--dims", "64"}, {"--metric", "l2"}} {
		if _, err := run(t, append([]string{"--dataset", "mixture1536"}, bad...)...); err == nil || !strings.Contains(err.Error(), "mixture1536") {
			t.Errorf("mixture1536 with %v: %v, want an error naming the preset", bad, err)
		}
	}
}

// TestPGVectorBuildStopped: pgvector's build stopped at
// --pgvector-build-timeout is reported as such, and the bench goes on
// without pgvector. It needs pgvector in the test server.
func TestPGVectorBuildStopped(t *testing.T) {
	dsn := pgtest.Shared(t).NewDatabase(t)
	if !pgtest.OffersPGVector(t, dsn) {
		t.Skip("the test server has no pgvector")
	}
	out := filepath.Join(t.TempDir(), "r.json")
	md, err := run(t, "--source", dsn, "--rows", "20000", "--dims", "64", "--queries", "10", "--index", "kind=flat",
		"--oversample", "1", "--paths", "sidecar,pgvector", "--pgvector-build-timeout", "1ms", "--clients", "1", "--measure", "10", "--json", out)
	if err != nil {
		t.Fatalf("%v\n%s", err, md)
	}
	r := readReport(t, out)
	var stopped bool
	for _, b := range r.Header.Builds {
		stopped = stopped || b.System == "pgvector" && strings.HasPrefix(b.Outcome, "stopped at the time limit")
	}
	if !stopped {
		t.Errorf("builds %+v: want pgvector's stopped at the time limit", r.Header.Builds)
	}
	for _, p := range r.Points {
		if p.System == "pgvector" {
			t.Errorf("a pgvector point %+v after its build was stopped", p)
		}
	}
}
