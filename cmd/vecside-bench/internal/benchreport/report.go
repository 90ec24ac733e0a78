package benchreport

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
)

// Modes of a point: the way in that was measured. Every mode but
// SidecarOnly is end to end, what an application sees.
const (
	SidecarOnly = "sidecar-only" // the knn call alone, over pgwire
	EndToEnd    = "end-to-end"   // vecside through heapfetch; pgvector's own SQL
	// SQLSearch and SQLSearchRows are vecside's SQL helpers,
	// vecside.search and vecside.search_rows, called inside Postgres.
	SQLSearch     = "sql-search"
	SQLSearchRows = "sql-search-rows"
	// Proxy is pgvector's statement, unchanged, through vecside proxy;
	// ServeProxy through vecside serve --proxy, the proxy in the
	// sidecar's process.
	Proxy      = "proxy"
	ServeProxy = "serve-proxy"
)

// Series names the line a point belongs to in the plot: the system and
// index, and the way in unless it is EndToEnd.
func (p Point) Series() string {
	s := p.System + " " + p.Index
	if p.Mode != EndToEnd {
		s += " via " + p.Mode
	}
	return s
}

// Report is a whole run.
type Report struct {
	Header Header      `json:"header"`
	Points []Point     `json:"points"`
	Writes []WriteLoad `json:"write_load,omitempty"`
}

// Header describes the run: where, on what, and what building cost.
type Header struct {
	Started  string   `json:"started"` // RFC 3339, UTC
	Command  string   `json:"command"`
	Machine  Machine  `json:"machine"`
	Dataset  Dataset  `json:"dataset"`
	Builds   []Build  `json:"builds"`
	Settings Settings `json:"settings"`
	// Deployment is where the bench placed the processes; nil when it
	// placed none.
	Deployment *Deployment `json:"deployment,omitempty"`
}

// Deployment says which CPUs the database server, the bench (its
// clients, the sidecars, the proxy) and any sidecar processes were
// confined to, and the server's memory limit, as vecside-bench's
// --pg-cpus, --bench-cpus, --sidecar-cpus and --pg-memory set them; empty
// or 0 where not set.
type Deployment struct {
	PostgresCPUs string `json:"postgres_cpus,omitempty"`
	BenchCPUs    string `json:"bench_cpus,omitempty"`
	// SidecarCPUs: the vecside serve children of --process, when apart
	// from the bench.
	SidecarCPUs string `json:"sidecar_cpus,omitempty"`
	// PostgresMemoryLimit is the limit of the server's memory cgroup,
	// PostgresCgroup which cgroup that was ("v1 /sys/fs/cgroup/memory/..."
	// or "v2 ..."), and PostgresMemoryPeak the most the server's
	// processes used in it (memory.max_usage_in_bytes or memory.peak:
	// page cache included).
	PostgresMemoryLimit int64  `json:"postgres_memory_limit_bytes,omitempty"`
	PostgresMemoryPeak  int64  `json:"postgres_memory_peak_bytes,omitempty"`
	PostgresCgroup      string `json:"postgres_cgroup,omitempty"`
}

// Machine is what the figures were measured on.
type Machine struct {
	CPU         string `json:"cpu"`
	Cores       int    `json:"cores"`
	MemoryBytes int64  `json:"memory_bytes"`
	Kernel      string `json:"kernel"`
	Go          string `json:"go"`
	Postgres    string `json:"postgres"`
	PGVector    string `json:"pgvector,omitempty"` // its version, when compared
	// SharedBuffers and the other server settings that decide how fast
	// the heap (and pgvector's index) answers.
	SharedBuffers string `json:"shared_buffers"`
	// RoundTripMicros is the median of the bench's own SELECT 1 to
	// Postgres at its start, one at a time: on a virtual machine whose
	// idle cores take long to wake, one-client latencies of different
	// days compare only beside it.
	RoundTripMicros float64 `json:"select1_p50_us,omitempty"`
}

// Dataset is what was searched.
type Dataset struct {
	Name    string `json:"name"`
	Rows    int    `json:"rows"`
	Dims    int    `json:"dims"`
	Metric  string `json:"metric"`
	Queries int    `json:"queries"`
	K       int    `json:"k"`
	// Truth says where the ground truth came from: computed by brute
	// force, or read from a file.
	Truth string `json:"truth"`
	// Column is the type of the column the end-to-end path reads vectors
	// from (vector(n) or real[]): Postgres sends a real[] an element at
	// a time, so it decides what a fetched vector costs.
	Column string `json:"column,omitempty"`
}

// Build is one index's build.
type Build struct {
	System      string  `json:"system"`
	Index       string  `json:"index"`
	Seconds     float64 `json:"seconds"`
	IndexBytes  int64   `json:"index_bytes"`
	BytesPerRow float64 `json:"bytes_per_row"`
	// RSSBytes and PeakRSSBytes are a sidecar process's resident memory
	// once ready and at most during the build (bench --process only).
	RSSBytes     int64 `json:"rss_bytes,omitempty"`
	PeakRSSBytes int64 `json:"peak_rss_bytes,omitempty"`
	// TableBytes is the size of the table the index was built on, where
	// the system has one of its own (pgvector).
	TableBytes int64 `json:"table_bytes,omitempty"`
	// Settings are the server settings the build ran with (pgvector's
	// maintenance_work_mem, max_parallel_maintenance_workers) and how the
	// table was prepared.
	Settings map[string]string `json:"settings,omitempty"`
	// Outcome is empty for a finished build, else what became of it:
	// stopped at the time limit, or failed (pgvector's, say, out of
	// memory); the system is then not compared.
	Outcome string `json:"outcome,omitempty"`
}

// Settings are the run's knobs that apply to every point.
type Settings struct {
	Clients   int `json:"clients"`
	Measured  int `json:"measured_queries"` // per timed run
	WriteRate int `json:"write_rate,omitempty"`
}

// Point is one measured setting of one index in one mode at one
// concurrency.
type Point struct {
	System string `json:"system"` // vecside or pgvector
	// Mode is the way in (SidecarOnly, EndToEnd, SQLSearch, SQLSearchRows
	// or Proxy).
	Index  string             `json:"index"`
	Mode   string             `json:"mode"`
	Params map[string]float64 `json:"params"`
	K      int                `json:"k"`
	// Recall is recall@k: a returned row is a hit when its exact distance
	// is at most the true k-th distance.
	Recall      float64 `json:"recall"`
	P50         float64 `json:"p50_ms"`
	P95         float64 `json:"p95_ms"`
	P99         float64 `json:"p99_ms"`
	QPS         float64 `json:"qps"`
	Concurrency int     `json:"concurrency"`
	// CandidatesMean is the mean number of candidates the sidecar
	// returned per query, as its knn call answers at the point's setting
	// (every vecside mode asks it the same); nil for pgvector, which
	// returns k rows.
	CandidatesMean *float64 `json:"candidates_mean"`
	// PostgresCPU is the CPU time, in ms, the database server spent per
	// query: its processes' user and system time over the timed run,
	// divided by the queries. nil where it is not measured (--source).
	PostgresCPU *float64 `json:"postgres_cpu_ms"`
	// SidecarCPU is the CPU time, in ms, the sidecar spent per query: the
	// vecside serve process's user and system time over the timed run,
	// divided by the queries. Only with the sidecar in a process of its
	// own (the bench's --process) and only for vecside's points; nil
	// otherwise.
	SidecarCPU *float64 `json:"sidecar_cpu_ms,omitempty"`
	// Tuned and RecallEstimate are, for a vecside point that left the
	// index's tuning setting to its recall calibration, the setting its
	// searches got (such as "ef_search=27") and the recall@10 the
	// calibration estimated there, from vecside_status() after the recall
	// pass.
	Tuned          string   `json:"tuned,omitempty"`
	RecallEstimate *float64 `json:"recall_estimate,omitempty"`
}

// WriteLoad is one index under steady writes while clients search.
type WriteLoad struct {
	Index       string  `json:"index"`
	Rate        int     `json:"write_rate"` // rows per second asked for
	Seconds     float64 `json:"seconds"`
	Written     float64 `json:"written_per_s"` // rows per second committed
	ApplyRate   float64 `json:"apply_rate"`    // rows per second the index applied
	LagP50      float64 `json:"lag_p50_ms"`
	LagP99      float64 `json:"lag_p99_ms"`
	Concurrency int     `json:"concurrency"`
	SearchQPS   float64 `json:"search_qps"`
	SearchP99   float64 `json:"search_p99_ms"`
}

// WriteJSON writes r to path, indented.
func (r *Report) WriteJSON(path string) error {
	return writeFile(path, func(w io.Writer) error {
		e := json.NewEncoder(w)
		e.SetIndent("", "  ")
		return e.Encode(r)
	})
}

func writeFile(path string, write func(io.Writer) error) error {
	f, err := os.Create(path)
	if err != nil {
		return fmt.Errorf("benchreport: %w", err)
	}
	if err := write(f); err != nil {
		f.Close()
		return fmt.Errorf("benchreport: %s: %w", path, err)
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("benchreport: %w", err)
	}
	return nil
}
