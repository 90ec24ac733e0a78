package sidecar

import (
	"math"
	"sort"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"

	"github.com/vecside/vecside/indexer"
	"github.com/vecside/vecside/indexer/kind"
	"github.com/vecside/vecside/rpc"
)

// newRegistry returns the registry /metrics serves: the process and Go
// runtime collectors, and vecside's own series, read from the stats of
// each part at every scrape.
func newRegistry(sc *Sidecar) *prometheus.Registry {
	reg := prometheus.NewRegistry()
	reg.MustRegister(
		collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}),
		collectors.NewGoCollector(),
		newCollector(sc),
	)
	return reg
}

// desc is one of vecside's series: its Prometheus description and the
// type its values are sent as.
type desc struct {
	*prometheus.Desc
	typ prometheus.ValueType
}

func newDesc(name, help string, typ prometheus.ValueType, labels ...string) desc {
	return desc{prometheus.NewDesc(name, help, labels, nil), typ}
}

func (d desc) send(ch chan<- prometheus.Metric, v float64, labels ...string) {
	ch <- prometheus.MustNewConstMetric(d.Desc, d.typ, v, labels...)
}

const (
	counter = prometheus.CounterValue
	gauge   = prometheus.GaugeValue
)

// Replication, from replicate.Stats.
var (
	mTransactions = newDesc("vecside_replication_transactions_total", "Transactions applied from the stream.", counter)
	mChanges      = newDesc("vecside_replication_changes_total", "Row changes applied from the stream.", counter)
	mApplyRate    = newDesc("vecside_replication_changes_per_second", "Row changes applied per second over about the last 10 s.", gauge)
	mBadKeys      = newDesc("vecside_replication_bad_keys_total", "Changes dropped because their key could not be read.", counter)
	mUnknown      = newDesc("vecside_replication_unknown_messages_total", "pgoutput messages that did not parse and were skipped.", counter)
	mRepairs      = newDesc("vecside_replication_repairs_total", "Rows read from the table for a change without its vector.", counter)
	mReconnects   = newDesc("vecside_replication_reconnects_total", "Times the stream was lost and reconnected.", counter)
	mCopiedTotal  = newDesc("vecside_replication_copied_rows_total", "Rows read by table copies.", counter)
	mConfirmed    = newDesc("vecside_replication_confirmed_lsn", "Flush position last confirmed to Postgres (exact below 2^53).", gauge)
)

// The slot, from the last health check (indexer.SourceHealth).
var (
	mSourceWAL     = newDesc("vecside_source_wal_lsn", "The source's WAL insert position at the last health check.", gauge)
	mSlotStatus    = newDesc("vecside_slot_wal_status", "1 for the slot's wal_status at the last health check (reserved, extended, unreserved, lost, missing).", gauge, "status")
	mSlotRetained  = newDesc("vecside_slot_retained_wal_bytes", "WAL the slot holds back (current WAL − restart_lsn).", gauge)
	mSlotSafe      = newDesc("vecside_slot_safe_wal_bytes", "WAL that may still be written before the slot is invalidated; -1 if unlimited.", gauge)
	mSlotXminAge   = newDesc("vecside_slot_catalog_xmin_age", "Age in transactions of the slot's catalog_xmin (it holds back catalog vacuum).", gauge)
	mSlotConfirmed = newDesc("vecside_slot_confirmed_lsn", "The slot's confirmed_flush_lsn (exact below 2^53).", gauge)
)

// Searches: admission (indexer.SearchLoad) and, per index, their latency
// as the pgwire server measured it.
var (
	mRunning        = newDesc("vecside_searches_running", "Searches running now.", gauge)
	mWaiting        = newDesc("vecside_searches_waiting", "Searches waiting for a turn to run.", gauge)
	mAdmitted       = newDesc("vecside_searches_admitted_total", "Searches admitted to run.", counter)
	mRejected       = newDesc("vecside_searches_rejected_total", "Searches turned away because too many were running and waiting (SQLSTATE 53000).", counter)
	mSearchDuration = prometheus.NewDesc("vecside_index_search_duration_seconds", "Time to answer a search (a knn call, or a statement of serve --proxy), failed ones included, by index and index kind; _count is the number of searches.", []string{"index", "kind"}, nil)
)

// The pgwire server, from rpc.Stats.
var (
	mConnections     = newDesc("vecside_rpc_connections", "Client connections open.", gauge)
	mRequests        = newDesc("vecside_rpc_requests_total", "Statements answered, by kind and SQLSTATE (00000 is success).", counter, "kind", "sqlstate")
	mErrors          = newDesc("vecside_rpc_errors_total", "Statements that failed, by SQLSTATE.", counter, "sqlstate")
	mFaults          = newDesc("vecside_rpc_faults_total", "Client misbehaviour and refused or ended connections, by kind (each kind is logged at most every 10s).", counter, "kind")
	mRequestDuration = prometheus.NewDesc("vecside_rpc_request_duration_seconds", "Time to answer a statement, by kind.", []string{"kind"}, nil)
)

// Readiness, as /readyz answers it.
var mReady = newDesc("vecside_ready", "1 when /readyz answers 200: every index has finished its first copy (and, with --ready-requires-all, none is in error or waiting).", gauge)

// indexGauges are the per-index series read from indexer.Status.
var indexGauges = []struct {
	desc
	value func(indexer.Status) float64
}{
	{newDesc("vecside_index_rows", "Vectors indexed.", gauge, "index"), func(s indexer.Status) float64 { return float64(s.Rows) }},
	{newDesc("vecside_index_skipped_rows", "Table rows left out: NULL, wrong dimension or not finite.", gauge, "index"), func(s indexer.Status) float64 { return float64(s.Skipped) }},
	{newDesc("vecside_index_zero_vectors", "Indexed vectors without a cosine distance.", gauge, "index"), func(s indexer.Status) float64 { return float64(s.ZeroVectors) }},
	{newDesc("vecside_index_applied_lsn", "WAL position applied (exact below 2^53).", gauge, "index"), func(s indexer.Status) float64 { return float64(s.Applied) }},
	{newDesc("vecside_index_covered_lsn", "WAL position durable state reflects (exact below 2^53).", gauge, "index"), func(s indexer.Status) float64 { return float64(s.Covered) }},
	{newDesc("vecside_index_lag_bytes", "Source WAL position at the last health check minus the applied position.", gauge, "index"), func(s indexer.Status) float64 { return float64(s.LagBytes) }},
	{newDesc("vecside_index_lag_seconds", "How long ago the source's WAL was first seen past the applied position (0 when caught up; health checks set its resolution).", gauge, "index"), func(s indexer.Status) float64 { return s.LagSeconds }},
	{newDesc("vecside_index_copied_rows", "Rows read by the copy under way, or by the last one.", gauge, "index"), func(s indexer.Status) float64 { return float64(s.CopiedRows) }},
	{newDesc("vecside_index_checkpoints_total", "Checkpoints written.", counter, "index"), func(s indexer.Status) float64 { return float64(s.Checkpoints) }},
	{newDesc("vecside_index_checkpoint_pause_seconds", "How long changes waited for the last checkpoint's copy of the index.", gauge, "index"), func(s indexer.Status) float64 { return s.CheckpointPause.Seconds() }},
	{newDesc("vecside_index_checkpoint_duration_seconds", "How long the last checkpoint took in all.", gauge, "index"), func(s indexer.Status) float64 { return s.CheckpointTime.Seconds() }},
	{newDesc("vecside_index_checkpoint_failures_total", "Checkpoints that failed (each is retried; meanwhile the slot is not confirmed past the last good one).", counter, "index"), func(s indexer.Status) float64 { return float64(s.CheckpointFailures) }},
	{newDesc("vecside_index_bytes", "Memory the index holds: codes, factors, second-pass codes or vectors, keys and their index, structure.", gauge, "index"), func(s indexer.Status) float64 { return float64(s.IndexStats.Bytes()) }},
	{newDesc("vecside_index_code_bytes", "Memory of the codes and their factors (or the vectors, for the exact index).", gauge, "index"), func(s indexer.Status) float64 { return float64(s.IndexStats.CodeBytes) }},
	{newDesc("vecside_index_key_bytes", "Memory of the keys, their index and the row locations.", gauge, "index"), func(s indexer.Status) float64 { return float64(s.IndexStats.KeyBytes) }},
	{newDesc("vecside_index_rebuilds_total", "Indexes built again from the table and swapped in since start.", counter, "index"), func(s indexer.Status) float64 { return float64(s.Rebuilds) }},
	{newDesc("vecside_index_rebuilding", "1 while a rebuild copies the table beside the serving index.", gauge, "index"), func(s indexer.Status) float64 { return b2f(s.Rebuilding) }},
	{newDesc("vecside_index_recall_target", "The recall@10 the index's searches aim for (its recall= option, else 0.95).", gauge, "index"), func(s indexer.Status) float64 { return s.Recall.Target }},
	{newDesc("vecside_index_recall_estimate", "The recall@10 the last calibration measured at the setting searches get, for the latest searches' offset; 0 before the first.", gauge, "index"), func(s indexer.Status) float64 { return s.Recall.Estimate }},
	{newDesc("vecside_index_query_offset", "Median distance of the latest searches to their nearest row, in multiples of the rows' spacing: 0 for rows of the table, about 1 for new items.", gauge, "index"), func(s indexer.Status) float64 { return s.Recall.Offset }},
	{newDesc("vecside_index_rebuild_failures_total", "Rebuilds that failed; the serving index went on, and the rebuild is tried again later.", counter, "index"), func(s indexer.Status) float64 { return float64(s.RebuildFailures) }},
}

var (
	mIndexState    = newDesc("vecside_index_state", "1 for the index's lifecycle state (building, ready, error, waiting), 0 for the others.", gauge, "index", "state")
	mCheckpointAge = newDesc("vecside_index_checkpoint_age_seconds", "Time since the index's last checkpoint; absent before the first.", gauge, "index")
	allIndexStates = []indexer.State{indexer.StateBuilding, indexer.StateReady, indexer.StateError, indexer.StateWaiting}
	plainDescs     = []desc{mTransactions, mChanges, mApplyRate, mBadKeys, mUnknown, mRepairs, mReconnects, mCopiedTotal, mConfirmed,
		mSourceWAL, mSlotStatus, mSlotRetained, mSlotSafe, mSlotXminAge, mSlotConfirmed,
		mRunning, mWaiting, mAdmitted, mRejected, mConnections, mRequests, mErrors, mFaults, mReady, mIndexState, mCheckpointAge}
)

// collector turns the stats of the sidecar's parts into series at each
// scrape; nothing is counted twice.
type collector struct {
	sc   *Sidecar
	rate *rateWindow
	// figures are the series of the index kinds' own figures, by name:
	// vecside_index_<name>, by index.
	figures map[string]desc
}

// newCollector is a collector of sc's series and of the figures every
// registered kind declares.
func newCollector(sc *Sidecar) *collector {
	c := &collector{sc: sc, rate: &rateWindow{}, figures: map[string]desc{}}
	for _, f := range kind.Figures() {
		typ := gauge
		if f.Type == kind.Counter {
			typ = counter
		}
		c.figures[f.Name] = newDesc("vecside_index_"+f.Name, f.Help, typ, "index")
	}
	return c
}

func (c *collector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range plainDescs {
		ch <- d.Desc
	}
	for _, g := range indexGauges {
		ch <- g.Desc
	}
	for _, d := range c.figures {
		ch <- d.Desc
	}
	ch <- mSearchDuration
	ch <- mRequestDuration
}

func (c *collector) Collect(ch chan<- prometheus.Metric) {
	now := time.Now()
	rs := c.sc.Replicator.Stats()
	changes := rs.Changes.Load()
	mTransactions.send(ch, float64(rs.Transactions.Load()))
	mChanges.send(ch, float64(changes))
	mApplyRate.send(ch, c.rate.perSecond(changes, now))
	mBadKeys.send(ch, float64(rs.BadKeys.Load()))
	mUnknown.send(ch, float64(rs.UnknownMessages.Load()))
	mRepairs.send(ch, float64(rs.Repairs.Load()))
	mReconnects.send(ch, float64(rs.Reconnects.Load()))
	mCopiedTotal.send(ch, float64(rs.CopiedRows.Load()))
	mConfirmed.send(ch, float64(rs.Confirmed()))

	ix := c.sc.Indexer
	if h := ix.SourceHealth(); !h.CheckedAt.IsZero() {
		mSourceWAL.send(ch, float64(h.WAL))
		mSlotStatus.send(ch, 1, h.SlotState)
		mSlotRetained.send(ch, float64(h.RetainedBytes))
		mSlotSafe.send(ch, float64(h.SafeWALBytes))
		mSlotXminAge.send(ch, float64(h.CatalogXminAge))
		mSlotConfirmed.send(ch, float64(h.Confirmed))
	}
	load := ix.SearchLoad()
	mRunning.send(ch, float64(load.Running))
	mWaiting.send(ch, float64(load.Waiting))
	mAdmitted.send(ch, float64(load.Admitted))
	mRejected.send(ch, float64(load.Rejected))

	statuses := ix.Status()
	ready, _ := readiness(statuses, c.sc.cfg.ReadyRequiresAll)
	mReady.send(ch, b2f(ready))
	kinds := make(map[string]string, len(statuses))
	for _, s := range statuses {
		kinds[s.Name] = s.Kind
		for _, g := range indexGauges {
			g.send(ch, g.value(s), s.Name)
		}
		for _, r := range s.IndexStats.Figures {
			if d, ok := c.figures[r.Name]; ok { // else its kind came after the collector
				d.send(ch, r.Value, s.Name)
			}
		}
		for _, state := range allIndexStates {
			mIndexState.send(ch, b2f(s.State == state), s.Name, string(state))
		}
		if !s.LastCheckpoint.IsZero() {
			mCheckpointAge.send(ch, now.Sub(s.LastCheckpoint).Seconds(), s.Name)
		}
	}

	st := c.sc.Server.Stats()
	mConnections.send(ch, float64(st.Connections))
	errs := map[string]uint64{}
	for k, n := range st.Requests {
		mRequests.send(ch, float64(n), k.Kind, k.SQLState)
		if k.SQLState != "00000" {
			errs[k.SQLState] += n
		}
	}
	for code, n := range errs {
		mErrors.send(ch, float64(n), code)
	}
	for kind, n := range st.Faults {
		mFaults.send(ch, float64(n), kind)
	}
	for kind, h := range st.Latency {
		ch <- constHistogram(mRequestDuration, h, kind)
	}
	for name, h := range st.Searches {
		if kind, ok := kinds[name]; ok { // an index since removed has no kind
			ch <- constHistogram(mSearchDuration, h, name, kind)
		}
	}
}

// constHistogram turns an rpc.Histogram (counts per bucket) into
// Prometheus's cumulative form.
func constHistogram(d *prometheus.Desc, h rpc.Histogram, labels ...string) prometheus.Metric {
	buckets := make(map[float64]uint64, len(rpc.LatencyBuckets))
	var cum uint64
	for i, le := range rpc.LatencyBuckets {
		cum += h.Counts[i]
		buckets[le] = cum
	}
	return prometheus.MustNewConstHistogram(d, h.Count(), h.Sum, buckets, labels...)
}

func b2f(b bool) float64 {
	if b {
		return 1
	}
	return 0
}

// rateWindow turns a counter into a rate over about the last
// rateSpan, whoever scrapes and however often: it keeps the samples the
// scrapes take, and measures from the oldest one within the span.
type rateWindow struct {
	mu      sync.Mutex
	samples []rateSample
}

type rateSample struct {
	n  int64
	at time.Time
}

const rateSpan = 10 * time.Second

func (w *rateWindow) perSecond(n int64, now time.Time) float64 {
	w.mu.Lock()
	defer w.mu.Unlock()
	if len(w.samples) == 0 || now.Sub(w.samples[len(w.samples)-1].at) >= rateSpan/100 {
		w.samples = append(w.samples, rateSample{n, now}) // at most 100 in a span, however often scraped
	}
	// Keep one sample at or before the span's start, to measure from.
	cut := sort.Search(len(w.samples), func(i int) bool { return now.Sub(w.samples[i].at) < rateSpan })
	w.samples = w.samples[max(0, cut-1):]
	first := w.samples[0]
	if len(w.samples) == 1 {
		first = rateSample{n, now}
	}
	secs := now.Sub(first.at).Seconds()
	if secs <= 0 {
		return 0
	}
	return math.Max(0, float64(n-first.n)/secs)
}
