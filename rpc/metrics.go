package rpc

import (
	"crypto/subtle"
	"fmt"
	"io"
	"maps"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/vecside/vecside/indexer"
)

// latencyBuckets are the upper bounds, in seconds, of the request latency
// histogram: from a cached SET to a search at its default deadline.
var latencyBuckets = []float64{0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30}

// metrics counts requests and connections for /metrics.
type metrics struct {
	connections atomic.Int64

	mu       sync.Mutex
	requests map[[2]string]uint64 // by statement kind and SQLSTATE class
	latency  map[string]*histogram
}

type histogram struct {
	counts []uint64 // per bucket, not cumulative; the last is +Inf
	sum    float64
}

func newMetrics() *metrics {
	return &metrics{requests: map[[2]string]uint64{}, latency: map[string]*histogram{}}
}

// observe counts one request of kind that ended with err after d.
func (m *metrics) observe(kind string, err error, d time.Duration) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.requests[[2]string{kind, sqlstateClass(err)}]++
	h := m.latency[kind]
	if h == nil {
		h = &histogram{counts: make([]uint64, len(latencyBuckets)+1)}
		m.latency[kind] = h
	}
	s := d.Seconds()
	i, _ := slices.BinarySearch(latencyBuckets, s)
	h.counts[i]++
	h.sum += s
}

// MetricsHandler serves /metrics, in the Prometheus text exposition
// format, and /healthz: 200 "ready" when every index is ready, else 503
// with how many indexes are in each state. /healthz names no index,
// table or error, since anyone who reaches the listener may ask; /metrics
// names indexes, and asks for Config.MetricsToken as a bearer token if
// one is set (401 otherwise). The listener's address is the caller's
// choice: keep it on loopback or a private network, or set a token.
func (s *Server) MetricsHandler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /metrics", func(w http.ResponseWriter, r *http.Request) {
		if !s.metricsAuthorized(r) {
			w.Header().Set("WWW-Authenticate", `Bearer realm="vecside metrics"`)
			http.Error(w, "a bearer token is required", http.StatusUnauthorized)
			return
		}
		w.Header().Set("Content-Type", "text/plain; version=0.0.4; charset=utf-8")
		var b strings.Builder
		s.metrics.write(&b)
		writeFaults(&b, s.faults.snapshot())
		writeIndexMetrics(&b, s.cfg.Catalog.Status())
		writeSlotMetrics(&b, s.cfg.Catalog.SourceHealth())
		if s.cfg.ExtraMetrics != nil {
			s.cfg.ExtraMetrics(&b)
		}
		io.WriteString(w, b.String())
	})
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) {
		states := map[indexer.State]int{}
		all := s.cfg.Catalog.Status()
		for _, st := range all {
			states[st.State]++
		}
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		if len(all) == states[indexer.StateReady] {
			io.WriteString(w, "ready\n")
			return
		}
		w.WriteHeader(http.StatusServiceUnavailable)
		io.WriteString(w, "not ready:")
		for _, state := range []indexer.State{indexer.StateReady, indexer.StateBuilding, indexer.StateError} {
			fmt.Fprintf(w, " %d %s", states[state], state)
		}
		io.WriteString(w, "\n")
	})
	return mux
}

// metricsAuthorized checks the request's bearer token, in constant time.
func (s *Server) metricsAuthorized(r *http.Request) bool {
	if s.cfg.MetricsToken == "" {
		return true
	}
	token, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
	return ok && subtle.ConstantTimeCompare([]byte(token), []byte(s.cfg.MetricsToken)) == 1
}

// writeFaults writes the counts of client faults and refusals.
func writeFaults(b *strings.Builder, counts map[faultKind]uint64) {
	header(b, "vecside_rpc_faults_total", "counter", "Client misbehaviour and refused or ended connections, by kind (each kind is logged at most every 10s).")
	kinds := slices.Sorted(maps.Keys(counts))
	for _, k := range kinds {
		fmt.Fprintf(b, "vecside_rpc_faults_total{kind=%s} %d\n", label(string(k)), counts[k])
	}
}

func (m *metrics) write(b *strings.Builder) {
	header(b, "vecside_rpc_connections", "gauge", "Client connections open.")
	fmt.Fprintf(b, "vecside_rpc_connections %d\n", m.connections.Load())

	m.mu.Lock()
	defer m.mu.Unlock()
	header(b, "vecside_rpc_requests_total", "counter", "Statements answered, by kind and SQLSTATE class (00 is success).")
	keys := make([][2]string, 0, len(m.requests))
	for k := range m.requests {
		keys = append(keys, k)
	}
	slices.SortFunc(keys, func(a, b [2]string) int { return strings.Compare(a[0]+"\x00"+a[1], b[0]+"\x00"+b[1]) })
	for _, k := range keys {
		fmt.Fprintf(b, "vecside_rpc_requests_total{kind=%s,class=%s} %d\n", label(k[0]), label(k[1]), m.requests[k])
	}

	header(b, "vecside_rpc_request_duration_seconds", "histogram", "Time to answer a statement, by kind.")
	kinds := make([]string, 0, len(m.latency))
	for k := range m.latency {
		kinds = append(kinds, k)
	}
	slices.Sort(kinds)
	for _, kind := range kinds {
		h := m.latency[kind]
		var cum uint64
		for i, n := range h.counts {
			cum += n
			le := "+Inf"
			if i < len(latencyBuckets) {
				le = strconv.FormatFloat(latencyBuckets[i], 'g', -1, 64)
			}
			fmt.Fprintf(b, "vecside_rpc_request_duration_seconds_bucket{kind=%s,le=%q} %d\n", label(kind), le, cum)
		}
		fmt.Fprintf(b, "vecside_rpc_request_duration_seconds_sum{kind=%s} %s\n", label(kind), strconv.FormatFloat(h.sum, 'g', -1, 64))
		fmt.Fprintf(b, "vecside_rpc_request_duration_seconds_count{kind=%s} %d\n", label(kind), cum)
	}
}

func b2f(b bool) float64 {
	if b {
		return 1
	}
	return 0
}

func writeIndexMetrics(b *strings.Builder, statuses []indexer.Status) {
	gauges := []struct {
		name, help string
		value      func(indexer.Status) float64
	}{
		{"vecside_index_rows", "Vectors indexed.", func(s indexer.Status) float64 { return float64(s.Rows) }},
		{"vecside_index_skipped_rows", "Table rows left out: NULL, wrong dimension or not finite.", func(s indexer.Status) float64 { return float64(s.Skipped) }},
		{"vecside_index_zero_vectors", "Indexed vectors without a cosine distance.", func(s indexer.Status) float64 { return float64(s.ZeroVectors) }},
		{"vecside_index_applied_lsn", "WAL position applied (exact below 2^53).", func(s indexer.Status) float64 { return float64(s.Applied) }},
		{"vecside_index_covered_lsn", "WAL position durable state reflects (exact below 2^53).", func(s indexer.Status) float64 { return float64(s.Covered) }},
		{"vecside_index_lag_bytes", "Source WAL position minus the applied position.", func(s indexer.Status) float64 { return float64(s.LagBytes) }},
		{"vecside_index_copied_rows", "Rows read by the last copy of the index's table.", func(s indexer.Status) float64 { return float64(s.CopiedRows) }},
		{"vecside_index_checkpoints_total", "Checkpoints written.", func(s indexer.Status) float64 { return float64(s.Checkpoints) }},
		{"vecside_index_checkpoint_pause_seconds", "How long changes waited for the last checkpoint's copy of the index.", func(s indexer.Status) float64 { return s.CheckpointPause.Seconds() }},
		{"vecside_index_bytes", "Memory the index holds: codes, factors, second-pass codes or vectors, keys and their index, structure.", func(s indexer.Status) float64 { return float64(s.IndexStats.Bytes()) }},
		{"vecside_index_code_bytes", "Memory of the codes and their factors (or the vectors, for the exact index).", func(s indexer.Status) float64 { return float64(s.IndexStats.CodeBytes) }},
		{"vecside_index_key_bytes", "Memory of the keys, their index and the row locations.", func(s indexer.Status) float64 { return float64(s.IndexStats.KeyBytes) }},
		{"vecside_index_graph_bytes", "Memory of a graph index's neighbour lists and the rows waiting to be linked.", func(s indexer.Status) float64 { return float64(s.IndexStats.GraphBytes) }},
		{"vecside_index_deleted_rows_unrepaired", "Rows deleted but still in a graph index, waiting for its repair pass.", func(s indexer.Status) float64 { return float64(s.IndexStats.Tombstones) }},
		{"vecside_index_unreachable_rows", "Live rows of a graph index that a search from its entry point could not reach when last counted (-1: not counted yet).", func(s indexer.Status) float64 { return float64(s.IndexStats.Unreachable) }},
		{"vecside_index_rebuilds_total", "Indexes built again from the table and swapped in since start.", func(s indexer.Status) float64 { return float64(s.Rebuilds) }},
		{"vecside_index_rebuilding", "1 while a rebuild copies the table beside the serving index.", func(s indexer.Status) float64 { return b2f(s.Rebuilding) }},
		{"vecside_index_rebuild_failures_total", "Rebuilds that failed; the serving index went on, and the rebuild is tried again later.", func(s indexer.Status) float64 { return float64(s.RebuildFailures) }},
		{"vecside_index_checkpoint_seconds", "How long the last checkpoint took in all.", func(s indexer.Status) float64 { return s.CheckpointTime.Seconds() }},
		{"vecside_index_checkpoint_failures_total", "Checkpoints that failed (each is retried; meanwhile the slot is not confirmed past the last good one).", func(s indexer.Status) float64 { return float64(s.CheckpointFailures) }},
	}
	for _, g := range gauges {
		header(b, g.name, "gauge", g.help)
		for _, s := range statuses {
			fmt.Fprintf(b, "%s{index=%s} %s\n", g.name, label(s.Name), strconv.FormatFloat(g.value(s), 'f', -1, 64))
		}
	}
	header(b, "vecside_index_state", "gauge", "1 for the index's lifecycle state, 0 for the others.")
	for _, s := range statuses {
		for _, state := range []indexer.State{indexer.StateBuilding, indexer.StateReady, indexer.StateError} {
			v := 0
			if s.State == state {
				v = 1
			}
			fmt.Fprintf(b, "vecside_index_state{index=%s,state=%s} %d\n", label(s.Name), label(string(state)), v)
		}
	}
}

// writeSlotMetrics reports what the last health check found about the
// replication slot.
func writeSlotMetrics(b *strings.Builder, h indexer.SourceHealth) {
	if h.CheckedAt.IsZero() {
		return
	}
	for _, g := range []struct {
		name, help string
		value      int64
	}{
		{"vecside_slot_retained_wal_bytes", "WAL the slot holds back (current WAL − restart_lsn).", h.RetainedBytes},
		{"vecside_slot_safe_wal_bytes", "WAL that may still be written before the slot is invalidated; -1 if unlimited.", h.SafeWALBytes},
		{"vecside_slot_catalog_xmin_age", "Age in transactions of the slot's catalog_xmin (it holds back catalog vacuum).", h.CatalogXminAge},
		{"vecside_slot_confirmed_lsn", "The slot's confirmed_flush_lsn (exact below 2^53).", int64(h.Confirmed)},
	} {
		header(b, g.name, "gauge", g.help)
		fmt.Fprintf(b, "%s{state=%s} %d\n", g.name, label(h.SlotState), g.value)
	}
}

func header(b *strings.Builder, name, typ, help string) {
	fmt.Fprintf(b, "# HELP %s %s\n# TYPE %s %s\n", name, help, name, typ)
}

// label quotes a label value as the exposition format escapes it.
func label(v string) string {
	return `"` + strings.NewReplacer(`\`, `\\`, `"`, `\"`, "\n", `\n`).Replace(v) + `"`
}
