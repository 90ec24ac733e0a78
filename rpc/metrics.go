package rpc

import (
	"maps"
	"slices"
	"sync"
	"sync/atomic"
	"time"
)

// LatencyBuckets are the upper bounds, in seconds, of the latency
// histograms in Stats: from a cached SET to a search at its default
// deadline.
var LatencyBuckets = []float64{0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30}

// Histogram counts durations into LatencyBuckets.
type Histogram struct {
	// Counts holds one count per bucket of LatencyBuckets, not cumulative,
	// and a last one for the longer durations.
	Counts []uint64
	Sum    float64 // seconds
}

// Count is how many durations the histogram holds.
func (h Histogram) Count() uint64 {
	var n uint64
	for _, c := range h.Counts {
		n += c
	}
	return n
}

func (h *Histogram) observe(d time.Duration) {
	if h.Counts == nil {
		h.Counts = make([]uint64, len(LatencyBuckets)+1)
	}
	s := d.Seconds()
	i, _ := slices.BinarySearch(LatencyBuckets, s)
	h.Counts[i]++
	h.Sum += s
}

func (h Histogram) clone() Histogram {
	return Histogram{Counts: slices.Clone(h.Counts), Sum: h.Sum}
}

// RequestKey is what requests are counted by.
type RequestKey struct {
	Kind     string // the statement's kind: select_function, set, show, …
	SQLState string // 00000 for success
}

// Stats is what the server has counted since it started. The server
// exposes no metrics format of its own: the caller turns Stats into
// whatever it serves.
type Stats struct {
	Connections int64 // client connections open now
	// Requests counts the statements answered, by kind and SQLSTATE.
	Requests map[RequestKey]uint64
	// Latency is the time to answer a statement, by kind.
	Latency map[string]Histogram
	// Searches is the time knn calls took, by index, failed ones
	// included. Calls naming an index that does not exist are left out:
	// clients choose those names, and the map must not grow with them.
	Searches map[string]Histogram
	// Faults counts client misbehaviour and refused or ended
	// connections, by kind (each kind is logged at most every 10s).
	Faults map[string]uint64
}

// metrics counts requests and connections for Stats.
type metrics struct {
	connections atomic.Int64

	mu       sync.Mutex
	requests map[RequestKey]uint64
	latency  map[string]*Histogram
	searches map[string]*Histogram
}

func newMetrics() *metrics {
	return &metrics{requests: map[RequestKey]uint64{}, latency: map[string]*Histogram{}, searches: map[string]*Histogram{}}
}

// observe counts one request of kind that ended with err after d.
func (m *metrics) observe(kind string, err error, d time.Duration) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.requests[RequestKey{kind, stateOf(err)}]++
	histogramFor(m.latency, kind).observe(d)
}

// observeSearch counts one knn call of index that ended with err after d.
func (m *metrics) observeSearch(index string, err error, d time.Duration) {
	if stateOf(err) == codeUndefinedObject {
		return
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	histogramFor(m.searches, index).observe(d)
}

// ObserveSearch counts a search made beside the server, in the same
// process (vecside serve --proxy's), with its knn calls: index, its
// error (nil if none), how long it took.
func (s *Server) ObserveSearch(index string, err error, d time.Duration) {
	s.metrics.observeSearch(index, err, d)
}

func histogramFor(hs map[string]*Histogram, key string) *Histogram {
	h := hs[key]
	if h == nil {
		h = &Histogram{}
		hs[key] = h
	}
	return h
}

// Stats returns what the server has counted so far.
func (s *Server) Stats() Stats {
	m := s.metrics
	st := Stats{Connections: m.connections.Load(), Faults: map[string]uint64{}}
	for k, n := range s.faults.snapshot() {
		st.Faults[string(k)] = n
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	st.Requests = maps.Clone(m.requests)
	st.Latency = cloneHistograms(m.latency)
	st.Searches = cloneHistograms(m.searches)
	return st
}

func cloneHistograms(hs map[string]*Histogram) map[string]Histogram {
	out := make(map[string]Histogram, len(hs))
	for k, h := range hs {
		out[k] = h.clone()
	}
	return out
}
