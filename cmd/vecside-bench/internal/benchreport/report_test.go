package benchreport

import (
	"bytes"
	"encoding/json"
	"encoding/xml"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func sample() *Report {
	cands := 14.5
	r := &Report{Header: Header{Started: "2026-12-01T10:00:00Z", Command: "vecside-bench",
		Dataset:  Dataset{Name: "fvecs:base", Rows: 1000, Dims: 8, Metric: "l2", Queries: 10, K: 10, Truth: "computed"},
		Builds:   []Build{{System: "pgvector", Index: "hnsw m=16", Seconds: 1.5, IndexBytes: 4096, Settings: map[string]string{"maintenance_work_mem": "2GB"}}},
		Settings: Settings{Clients: 4, Measured: 100}}}
	for i, recall := range []float64{0.5, 0.9, 0.8, 0.99} {
		for _, c := range []int{1, 4} {
			r.Points = append(r.Points,
				Point{System: "vecside", Index: "kind=ivf", Mode: EndToEnd, Params: map[string]float64{"probes": float64(i)}, K: 10, Recall: recall, QPS: float64(1000*c - 100*i), P50: 1, Concurrency: c, CandidatesMean: &cands},
				Point{System: "pgvector", Index: "hnsw m=16", Mode: EndToEnd, Params: map[string]float64{"hnsw.ef_search": float64(40 * (i + 1))}, K: 10, Recall: recall, QPS: float64(500*c - 50*i), P50: 2, Concurrency: c},
				Point{System: "vecside", Index: "kind=ivf", Mode: SQLSearch, Params: map[string]float64{"probes": float64(i)}, K: 10, Recall: recall, QPS: float64(400*c - 10*i), P50: 3, Concurrency: c, CandidatesMean: &cands})
		}
	}
	return r
}

func TestJSONHasOneObjectPerPoint(t *testing.T) {
	path := filepath.Join(t.TempDir(), "r.json")
	if err := sample().WriteJSON(path); err != nil {
		t.Fatal(err)
	}
	raw, _ := os.ReadFile(path)
	var got struct {
		Header map[string]any   `json:"header"`
		Points []map[string]any `json:"points"`
	}
	if err := json.Unmarshal(raw, &got); err != nil {
		t.Fatal(err)
	}
	if len(got.Points) != 24 || got.Header["dataset"] == nil || got.Header["machine"] == nil || got.Header["builds"] == nil {
		t.Fatalf("got %d points, header %v", len(got.Points), got.Header)
	}
	for _, f := range []string{"system", "index", "mode", "params", "k", "recall", "p50_ms", "p95_ms", "p99_ms", "qps", "concurrency", "candidates_mean"} {
		if _, ok := got.Points[1][f]; !ok {
			t.Errorf("point has no %s: %v", f, got.Points[1])
		}
	}
	if got.Points[1]["candidates_mean"] != nil || got.Points[0]["candidates_mean"] != 14.5 {
		t.Errorf("candidates_mean: pgvector %v, vecside %v", got.Points[1]["candidates_mean"], got.Points[0]["candidates_mean"])
	}
}

func TestMarkdown(t *testing.T) {
	var b bytes.Buffer
	if err := sample().WriteMarkdown(&b); err != nil {
		t.Fatal(err)
	}
	out := b.String()
	for _, want := range []string{
		"| pgvector | hnsw m=16 | 1.5 | 4096 | 0 | - | maintenance_work_mem=2GB |",
		"| vecside | kind=ivf | probes=3 | end-to-end | 4 | 0.9900 | 14.5 | 3700 | 1.000 |",
		"| pgvector | hnsw m=16 | hnsw.ef_search=40 | end-to-end | 1 | 0.5000 | - | 500 |",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("no %q in\n%s", want, out)
		}
	}
}

func TestSVGPlotsTheFrontierPerConcurrency(t *testing.T) {
	var b bytes.Buffer
	if err := sample().WriteSVG(&b); err != nil {
		t.Fatal(err)
	}
	if err := xml.Unmarshal(b.Bytes(), new(struct{})); err != nil {
		t.Fatalf("not XML: %v", err)
	}
	for _, want := range []string{"<svg", "1 client", "4 clients", "vecside kind=ivf", "vecside kind=ivf via sql-search", "pgvector hnsw m=16", "recall@10"} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("no %q in the SVG", want)
		}
	}
	// Recall 0.8 at probes=2 is slower than 0.9 at probes=1: off the
	// frontier.
	got := frontier(sample().Points, func(p Point) bool { return p.System == "vecside" && p.Mode == EndToEnd && p.Concurrency == 1 })
	if len(got) != 3 || got[0].X != 0.5 || got[1].X != 0.9 || got[2].X != 0.99 {
		t.Errorf("frontier %v, want recall 0.5, 0.9, 0.99", got)
	}
	if err := (&Report{}).WriteSVG(&b); err == nil {
		t.Error("a report with no end-to-end points plotted")
	}
}
