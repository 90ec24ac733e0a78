package hnsw

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/vecside/vecside/indexer/dataset"
	"github.com/vecside/vecside/indexer/kind"
	"github.com/vecside/vecside/indexer/store"
	"github.com/vecside/vecside/internal/procs"
	"github.com/vecside/vecside/kernels"
)

// figure is st's reading of the graph's figure f.
func figure(t testing.TB, st kind.Stats, f *kind.Figure) int {
	t.Helper()
	v, ok := st.Value(f.Name)
	if !ok {
		t.Fatalf("Stats without the figure %s", f.Name)
	}
	return int(v)
}

func keyOf(i int) string { return string(binary.BigEndian.AppendUint64(nil, uint64(i))) }

func rowOf(key string) int { return int(binary.BigEndian.Uint64([]byte(key))) }

func config(m kernels.Metric, dims int, kind store.Kind) Config {
	return Config{CodedConfig: store.CodedConfig{Metric: m, Dims: dims, Store: kind, Seed: 1, KeyWidth: 8}}
}

// build makes an index trained on data (as much as SampleFor asks), puts
// every row and waits until all are linked.
func build(t testing.TB, cfg Config, data [][]float32) *Index {
	t.Helper()
	x, err := New(cfg, data[:SampleFor(len(data), cfg.Dims)], len(data))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(x.Close)
	put(x, data, 0, len(data))
	x.Flush()
	return x
}

// put inserts rows [lo, hi) of data, preparing them on every core as a
// first copy's readers would.
func put(x *Index, data [][]float32, lo, hi int) {
	store.Parallel(hi-lo, func(a, b int) {
		for i := lo + a; i < lo+b; i++ {
			x.Put(keyOf(i), data[i])
		}
	})
}

// recall is recall@k after an exact re-rank of the candidates (a row is a
// hit when its exact distance is within the true k-th), over the queries.
func recall(t testing.TB, m kernels.Metric, data, queries [][]float32, truth []dataset.Truth, search func(q []float32) []store.Hit) float64 {
	t.Helper()
	hits, want := 0, 0
	for qi, q := range queries {
		k := len(truth[qi].Rows)
		want += k
		var ds []float64
		for _, h := range search(q) {
			ds = append(ds, m.Distance(q, data[rowOf(h.Key)]))
		}
		slices.Sort(ds)
		for _, d := range ds[:min(k, len(ds))] {
			if d <= truth[qi].KthDistance()+1e-9 {
				hits++
			}
		}
	}
	return float64(hits) / float64(want)
}

func searcher(t testing.TB, x *Index, k, limit, ef int) func(q []float32) []store.Hit {
	return func(q []float32) []store.Hit {
		got, err := x.Search(context.Background(), q, k, limit, ef, nil)
		if err != nil {
			t.Fatal(err)
		}
		return got
	}
}

// On seeded clustered data, recall@10 after an exact re-rank of at most
// 3k candidates reaches 0.97 at the default ef_search for every metric
// and store, and the first 10 candidates alone (the codes' own order)
// 0.85 with 4-bit codes and 0.93 with 6-bit ones; raising ef_search
// raises recall.
func TestRecall(t *testing.T) {
	if raceEnabled {
		t.Skip("measures recall; the concurrency tests run under the race detector")
	}
	const k = 10
	for _, c := range []struct {
		m     kernels.Metric
		kind  store.Kind
		first float64
	}{{kernels.Cosine, store.Ext6, 0.93}, {kernels.L2, store.Ext4, 0.85}, {kernels.L2, store.Ext6, 0.93}, {kernels.L2, store.Float, 0.97}, {kernels.IP, store.Ext8, 0.9}} {
		data, queries := dataset.Clustered{Seed: 2, Rows: 10000, Queries: 200, Dims: 64, Normalize: c.m == kernels.Cosine}.Generate()
		truth := dataset.GroundTruth(c.m, data, queries, k)
		x := build(t, config(c.m, 64, c.kind), data)
		var last float64
		for _, ef := range []int{16, DefaultEfSearch, 256} {
			rec := recall(t, c.m, data, queries, truth, searcher(t, x, k, 3*k, ef))
			first := recall(t, c.m, data, queries, truth, searcher(t, x, k, k, ef))
			t.Logf("%s store=%s ef=%d: recall@%d %.4f, of the first %d %.4f", c.m, c.kind, ef, k, rec, k, first)
			if ef == DefaultEfSearch && (rec < 0.97 || first < c.first) {
				t.Errorf("%s store=%s ef=%d: recall %.4f (want ≥ 0.97), of the first %d %.4f (want ≥ %.2f)", c.m, c.kind, ef, rec, k, first, c.first)
			}
			if rec < last-0.005 {
				t.Errorf("%s store=%s: recall fell from %.4f to %.4f as ef_search rose to %d", c.m, c.kind, last, rec, ef)
			}
			last = rec
		}
		x.Repair() // counts the unreachable rows now
		st := x.Stats()
		if unreachable := figure(t, st, unreachableRows); st.Rows != len(data) || unreachable < 0 || unreachable > len(data)/100 && c.m != kernels.IP {
			t.Errorf("%s store=%s: %d rows, %d unreachable", c.m, c.kind, st.Rows, unreachable)
		}
	}
}

// vecOf is key i's vector in the concurrency tests: seeded by i, so that
// a hit's distance can be checked against its key.
func vecOf(dims, i int) []float32 {
	rng := rand.New(rand.NewPCG(uint64(i), 77))
	v := make([]float32, dims)
	for j := range v {
		v[j] = float32(rng.NormFloat64())
	}
	return v
}

// Writers insert, update and delete while readers search and repairs
// run (run it with -race). Each key keeps one vector, so a hit pairing a
// key with another row's distance (an id or graph slot reused while a
// search could still reach it) is caught, and so is a key returned after
// it was deleted before the search began. Afterwards the graph holds no
// edge to a row that is not live, and its entry point is live.
func TestConcurrentChanges(t *testing.T) {
	const dims, keys = 16, 3000
	cfg := config(kernels.L2, dims, store.Float)
	cfg.Pending, cfg.M, cfg.EfConstruction = 8, 6, 24
	x, err := New(cfg, nil, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer x.Close()
	var gone sync.Map // key → deleted for good
	var inserted atomic.Int64
	stop := make(chan struct{})
	var wg sync.WaitGroup
	var bad atomic.Value
	fail := func(err error) { bad.CompareAndSwap(nil, err) }
	for r := range 3 {
		wg.Go(func() {
			rng := rand.New(rand.NewPCG(uint64(r), 9))
			for {
				select {
				case <-stop:
					return
				default:
				}
				i := rng.IntN(max(1, int(inserted.Load())))
				_, deleted := gone.Load(i)
				q := vecOf(dims, i)
				hits, err := x.Search(context.Background(), q, 3, 6, 12, nil)
				if err != nil {
					fail(err)
					return
				}
				for _, h := range hits {
					j := rowOf(h.Key)
					if deleted && j == i {
						fail(fmt.Errorf("key %d returned after its delete", i))
					}
					if want := math.Sqrt(float64(kernels.L2Sq(q, vecOf(dims, j)))); math.Abs(h.Distance-want) > 1e-3 {
						fail(fmt.Errorf("key %d returned at %g, its vector is at %g", j, h.Distance, want))
					}
				}
			}
		})
	}
	wg.Go(func() {
		for {
			select {
			case <-stop:
				return
			case <-time.After(time.Millisecond):
			}
			x.Repair()
		}
	})
	// A status query reads the index's sizes beside the writers.
	wg.Go(func() {
		for {
			select {
			case <-stop:
				return
			case <-time.After(time.Millisecond):
			}
			if st := x.Stats(); st.KeyBytes <= 0 {
				fail(fmt.Errorf("stats with %d bytes of keys", st.KeyBytes))
			}
		}
	})
	rng := rand.New(rand.NewPCG(3, 4))
	for i := range keys {
		x.Put(keyOf(i), vecOf(dims, i))
		inserted.Store(int64(i + 1))
		if i > 100 && rng.IntN(2) == 0 {
			j := rng.IntN(i)
			if _, dup := gone.Load(j); !dup {
				x.Delete(keyOf(j))
				gone.Store(j, true) // searches from now on must not see it
			}
		}
		if rng.IntN(4) == 0 { // an update: a new row for the same vector
			x.Put(keyOf(i), vecOf(dims, i))
		}
	}
	close(stop)
	wg.Wait()
	if err := bad.Load(); err != nil {
		t.Fatal(err)
	}
	x.Flush()
	x.Repair()
	n := 0
	gone.Range(func(any, any) bool { n++; return true })
	if x.Len() != keys-n {
		t.Fatalf("%d rows, want %d", x.Len(), keys-n)
	}
	checkGraph(t, x)
	st := x.Stats()
	t.Logf("%d rows, %s", st.Rows, st.FigurePairs())
	if waiting, unreachable := figure(t, st, unrepairedRows), figure(t, st, unreachableRows); waiting != 0 || unreachable > (keys-n)/50 {
		t.Errorf("after repair: %d deleted rows wait, %d of %d unreachable", waiting, unreachable, keys-n)
	}
}

// checkGraph checks a settled graph (linked, repaired, no writer): every
// list of a live node holds live nodes, at most its capacity, no
// loadSnapshot writes a snapshot taken with Snapshot, releases it and
// loads it back with cfg; the caller closes the index.
func loadSnapshot(t *testing.T, write func(io.Writer) error, release func(), cfg Config) *Index {
	t.Helper()
	var buf bytes.Buffer
	err := write(&buf)
	release()
	if err != nil {
		t.Fatal(err)
	}
	y, err := Load(bytes.NewReader(buf.Bytes()), cfg)
	if err != nil {
		t.Fatal(err)
	}
	return y
}

// repeats and not itself; the entry point is live and of the top level.
func checkGraph(t *testing.T, x *Index) {
	t.Helper()
	r := x.cur.Load()
	g := r.g
	top := -1
	r.keys.Each(func(id uint32) {
		h := g.header(id).Load()
		if h&hdrLinked == 0 {
			t.Errorf("node %d not linked", id)
		}
		top = max(top, level(h))
		for layer := range level(h) + 1 {
			ids := g.readList(nil, id, layer)
			if len(ids) > g.capacity(layer) {
				t.Errorf("node %d layer %d: %d neighbours", id, layer, len(ids))
			}
			seen := map[uint32]bool{}
			for _, v := range ids {
				if v == id || seen[v] || !r.keys.Live(v) {
					t.Errorf("node %d layer %d: neighbour %d (self %v, repeated %v, live %v)", id, layer, v, v == id, seen[v], r.keys.Live(v))
				}
				seen[v] = true
			}
		}
	})
	uppers := map[uint32]int{}
	for _, id := range g.uppers {
		uppers[id]++
	}
	r.keys.Each(func(id uint32) {
		if level(g.header(id).Load()) > 0 && uppers[id] == 0 {
			t.Errorf("node %d of level %d is not listed among the upper nodes", id, level(g.header(id).Load()))
		}
	})
	if len(g.uppers) > 2*len(uppers) {
		t.Errorf("%d entries for %d upper nodes: the list grows with churn", len(g.uppers), len(uppers))
	}
	ep, lvl, ok := g.entryPoint()
	if ok != (r.keys.Len() > 0) || ok && (!r.keys.Live(ep) || lvl != top || level(g.header(ep).Load()) != lvl) {
		t.Errorf("entry point %d at level %d (ok %v, live %v), top level %d", ep, lvl, ok, ok && r.keys.Live(ep), top)
	}
}

// A snapshot written while writers go on (deleting, inserting, repairing,
// reusing ids) holds exactly the rows of the moment it was taken, and
// loads into an index with the same graph: nothing is relinked, and it
// answers as the original did.
func TestSnapshotBesideWriters(t *testing.T) {
	const dims = 32
	data, queries := dataset.Clustered{Seed: 4, Rows: 6000, Queries: 100, Dims: dims}.Generate()
	cfg := config(kernels.L2, dims, store.Ext4)
	x := build(t, cfg, data[:4000])
	want := map[string]bool{}
	x.Each(func(k string) { want[k] = true })
	truth := dataset.GroundTruth(kernels.L2, data[:4000], queries, 10)
	before := recall(t, kernels.L2, data, queries, truth, searcher(t, x, 10, 30, 0))
	write, release := x.Snapshot()
	done := make(chan struct{})
	go func() {
		defer close(done)
		for i := range 2000 {
			x.Delete(keyOf(i))
			x.Put(keyOf(4000+i), data[4000+i])
			if i%500 == 0 {
				x.Repair()
			}
		}
	}()
	var buf bytes.Buffer
	if err := write(&buf); err != nil {
		t.Fatal(err)
	}
	release()
	<-done
	y, err := Load(bytes.NewReader(buf.Bytes()), cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer y.Close()
	got := map[string]bool{}
	y.Each(func(k string) { got[k] = true })
	if len(got) != len(want) {
		t.Fatalf("snapshot holds %d rows, want %d", len(got), len(want))
	}
	for k := range want {
		if !got[k] {
			t.Fatalf("row %d missing from the snapshot", rowOf(k))
		}
	}
	if r := y.cur.Load(); !r.ring.idle() {
		t.Errorf("%d rows linked again on load", r.ring.head.Load())
	}
	checkGraph(t, y)
	after := recall(t, kernels.L2, data, queries, truth, searcher(t, y, 10, 30, 0))
	t.Logf("recall %.4f before the snapshot, %.4f loaded", before, after)
	if after < before-0.01 {
		t.Errorf("recall %.4f loaded, %.4f before", after, before)
	}
	// A damaged body is refused, not half loaded.
	for _, n := range []int{3, 100, buf.Len() / 2, buf.Len() - 1} {
		if _, err := Load(bytes.NewReader(buf.Bytes()[:n]), cfg); err == nil {
			t.Errorf("a body cut to %d of %d bytes loaded", n, buf.Len())
		}
	}
}

// A snapshot whose top nodes are deleted between its capture and its
// writing loads with the entry point on the top of the rows it holds,
// not on the lower node that replaced them.
func TestSnapshotTopDeletedAfterCapture(t *testing.T) {
	const dims = 16
	data, _ := dataset.Clustered{Seed: 7, Rows: 1500, Queries: 1, Dims: dims}.Generate()
	cfg := config(kernels.L2, dims, store.Ext4)
	x := build(t, cfg, data)
	r := x.cur.Load()
	_, top, _ := r.g.entryPoint()
	var tops []string
	x.Each(func(k string) {
		if id, _ := r.keys.Lookup(k); level(r.g.header(id).Load()) == top {
			tops = append(tops, k)
		}
	})
	write, release := x.Snapshot()
	for _, k := range tops {
		x.Delete(k)
	}
	if _, now, _ := r.g.entryPoint(); now >= top {
		t.Fatalf("the entry point is at level %d after deleting the %d nodes of level %d", now, len(tops), top)
	}
	y := loadSnapshot(t, write, release, cfg)
	defer y.Close()
	checkGraph(t, y)
}

// A snapshot reads no list halfway through a rewrite: while a writer
// rewrites every node's layer-0 list in place (the same neighbours in
// the reverse order, as setList stores them), each snapshot loads a
// graph whose lists hold no neighbour twice.
func TestSnapshotReadsWholeLists(t *testing.T) {
	const dims = 16
	data, _ := dataset.Clustered{Seed: 6, Rows: 1500, Queries: 1, Dims: dims}.Generate()
	cfg := config(kernels.L2, dims, store.Ext4)
	x := build(t, cfg, data)
	r := x.cur.Load()
	stop := make(chan struct{})
	done := make(chan struct{})
	go func() {
		defer close(done)
		var ids []uint32
		for {
			for id := range uint32(len(data)) {
				select {
				case <-stop:
					return
				default:
				}
				r.g.lock(id)
				ids = r.g.readList(ids[:0], id, 0)
				slices.Reverse(ids)
				r.g.setList(id, 0, ids)
				r.g.unlock(id)
			}
		}
	}()
	for range 20 {
		write, release := x.Snapshot()
		y := loadSnapshot(t, write, release, cfg)
		checkGraph(t, y)
		y.Close()
		if t.Failed() {
			break
		}
	}
	close(stop)
	<-done
}

// Filtered searches at 50%, 10%, 1% and 0.1% of the rows: exactly k rows
// whenever at least k are allowed, all of them allowed, and recall@10
// against an exact filtered search at least 0.95, both as Search chooses
// (a walk of the graph past disallowed rows, or a scan of the allowed
// rows) and walking the graph first whatever the share.
func TestFilter(t *testing.T) {
	const k = 10
	rows := 20000
	if raceEnabled {
		rows = 4000
	}
	data, queries := dataset.Clustered{Seed: 6, Rows: rows, Queries: 100, Dims: 32, Normalize: true}.Generate()
	x := build(t, config(kernels.Cosine, 32, store.Ext4), data)
	rng := rand.New(rand.NewPCG(8, 9))
	for _, share := range []float64{0.5, 0.1, 0.01, 0.001} {
		var allowed []string
		var sub [][]float32
		for i := range rows {
			if rng.Float64() < share {
				allowed = append(allowed, keyOf(i))
				sub = append(sub, data[i])
			}
		}
		allowedSet := map[string]bool{}
		for _, a := range allowed {
			allowedSet[a] = true
		}
		truth := dataset.GroundTruth(kernels.Cosine, sub, queries, k)
		for _, scan := range []bool{true, false} {
			mode := "graph"
			if scan && x.cur.Load().scanCheaper(len(allowed), DefaultEfSearch) {
				mode = "scan"
			} else if !scan {
				mode = "graph first"
			}
			hits, want := 0, 0
			for qi, q := range queries {
				got, err := x.search(context.Background(), q, k, 3*k, 0, allowed, "", scan)
				if err != nil {
					t.Fatal(err)
				}
				if n := len(got); n < min(k, len(allowed)) || n > 3*k {
					t.Fatalf("%.1f%% %s: %d rows for k=%d with %d allowed", 100*share, mode, n, k, len(allowed))
				}
				var ds []float64
				for _, h := range got {
					if !allowedSet[h.Key] {
						t.Fatalf("%.1f%% %s: row %d is not allowed", 100*share, mode, rowOf(h.Key))
					}
					ds = append(ds, kernels.Cosine.Distance(q, data[rowOf(h.Key)]))
				}
				slices.Sort(ds)
				for _, d := range ds[:min(k, len(ds))] {
					if d <= truth[qi].KthDistance()+1e-9 {
						hits++
					}
				}
				want += len(truth[qi].Rows)
			}
			rec := float64(hits) / float64(want)
			t.Logf("%.1f%% allowed (%d rows, %s): recall@%d %.4f", 100*share, len(allowed), mode, k, rec)
			if rec < 0.95 {
				t.Errorf("%.1f%% allowed, %s: recall %.4f, want ≥ 0.95", 100*share, mode, rec)
			}
		}
	}
}

// Deleting and re-inserting a fifth of the rows (deleted rows repaired
// out of the graph, their ids reused) leaves recall at the same
// ef_search within 0.02 of a fresh build over the same rows; deleted keys
// are never returned, before or after the repair.
func TestChurn(t *testing.T) {
	if raceEnabled {
		t.Skip("measures recall; the concurrency tests run under the race detector")
	}
	const k, rows = 10, 12000
	const dims = 32
	data, queries := dataset.Clustered{Seed: 7, Rows: rows + rows/5, Queries: 200, Dims: dims, Normalize: true}.Generate()
	cfg := config(kernels.Cosine, dims, store.Ext4)
	x := build(t, cfg, data[:rows])
	for i := 0; i < rows/5; i++ { // every fifth row out, as many new ones in
		x.Delete(keyOf(5 * i))
		x.Put(keyOf(rows+i), data[rows+i])
	}
	var live []int
	for i := range rows + rows/5 {
		if i >= rows || i%5 != 0 {
			live = append(live, i)
		}
	}
	vecs := make([][]float32, len(live))
	for i, id := range live {
		vecs[i] = data[id]
	}
	truth := dataset.GroundTruth(kernels.Cosine, vecs, queries, k)
	for i := range truth { // rows of vecs back to rows of data
		for j, row := range truth[i].Rows {
			truth[i].Rows[j] = live[row]
		}
	}
	noDeleted := func(search func([]float32) []store.Hit) func([]float32) []store.Hit {
		return func(q []float32) []store.Hit {
			hits := search(q)
			for _, h := range hits {
				if i := rowOf(h.Key); i < rows && i%5 == 0 {
					t.Fatalf("deleted row %d returned", i)
				}
			}
			return hits
		}
	}
	x.Flush()
	unrepaired := recall(t, kernels.Cosine, data, queries, truth, noDeleted(searcher(t, x, k, 3*k, 0)))
	x.Repair()
	churned := recall(t, kernels.Cosine, data, queries, truth, noDeleted(searcher(t, x, k, 3*k, 0)))
	y, err := New(cfg, vecs[:SampleFor(len(vecs), dims)], len(vecs))
	if err != nil {
		t.Fatal(err)
	}
	defer y.Close()
	for _, id := range live {
		y.Put(keyOf(id), data[id])
	}
	y.Flush()
	rebuilt := recall(t, kernels.Cosine, data, queries, truth, searcher(t, y, k, 3*k, 0))
	st := x.Stats()
	t.Logf("recall %.4f with deleted rows still in the graph, %.4f repaired, %.4f fresh; churned %d rows, %s", unrepaired, churned, rebuilt, st.Rows, st.FigurePairs())
	if churned < rebuilt-0.02 {
		t.Errorf("recall after churn %.4f, fresh build %.4f", churned, rebuilt)
	}
	if waiting, unreachable := figure(t, st, unrepairedRows), figure(t, st, unreachableRows); waiting != 0 || unreachable > len(live)/100 {
		t.Errorf("after repair: %d deleted rows wait, %d unreachable", waiting, unreachable)
	}
	checkGraph(t, x)
}

// A search gives up with its context's error once the context ends.
func TestCancel(t *testing.T) {
	data, queries := dataset.Clustered{Seed: 3, Rows: 3000, Queries: 1, Dims: 16}.Generate()
	x := build(t, config(kernels.L2, 16, store.Ext4), data)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := x.Search(ctx, queries[0], 10, 30, 0, nil); !errors.Is(err, context.Canceled) {
		t.Fatalf("got %v, want context.Canceled", err)
	}
}

// Renames keep a row's vector under its new key; cosine zero vectors are
// held and never returned; Clear empties the index.
func TestRenameZerosClear(t *testing.T) {
	data, _ := dataset.Clustered{Seed: 5, Rows: 2000, Queries: 1, Dims: 16, Normalize: true}.Generate()
	x := build(t, config(kernels.Cosine, 16, store.Ext4), data)
	if !x.Rename(keyOf(7), keyOf(90000)) || x.Has(keyOf(7)) || !x.Has(keyOf(90000)) {
		t.Fatal("rename")
	}
	hits, _ := x.Search(context.Background(), data[7], 1, 3, 0, nil)
	if len(hits) == 0 || hits[0].Key != keyOf(90000) {
		t.Fatalf("renamed row not nearest to its vector: %v", hits)
	}
	x.Put(keyOf(5), make([]float32, 16))
	if !x.Has(keyOf(5)) || x.ZeroVectors() != 1 || x.Len() != 2000 {
		t.Fatalf("zero vector: has %v, %d zeros, %d rows", x.Has(keyOf(5)), x.ZeroVectors(), x.Len())
	}
	if hits, _ := x.Search(context.Background(), data[5], 5, 5, 0, nil); slices.ContainsFunc(hits, func(h store.Hit) bool { return h.Key == keyOf(5) }) {
		t.Fatal("a zero vector was returned")
	}
	x.Clear()
	if x.Len() != 0 || x.Has(keyOf(1)) {
		t.Fatalf("%d rows after Clear", x.Len())
	}
	x.Put(keyOf(1), data[1])
	x.Flush()
	if hits, _ := x.Search(context.Background(), data[1], 1, 1, 0, nil); len(hits) != 1 || hits[0].Key != keyOf(1) {
		t.Fatalf("after Clear and a put: %v", hits)
	}
}

// A link of a stream's row narrows its beam once the index follows the
// stream, as far as rows wait: full width with none waiting, half with an
// eighth of the ring, a quarter with half of it, never below 2·M. A
// copy's row links at full width.
func TestLinkWidth(t *testing.T) {
	data, _ := dataset.Clustered{Seed: 3, Rows: 2000, Queries: 1, Dims: 16}.Generate()
	cfg := config(kernels.L2, 16, store.Ext4)
	cfg.EfConstruction = 128
	x := build(t, cfg, data)
	r := x.cur.Load()
	q := r.ring
	head := q.head.Load()
	widthWith := func(waiting uint64, bulk bool) int {
		q.tail.Store(head - waiting) // every row is linked: no linker moves tail meanwhile
		defer q.tail.Store(head)
		return r.linkWidth(bulk)
	}
	for _, c := range []struct {
		following, bulk bool
		waiting         uint64
		want            int
	}{
		{false, false, q.size / 2, 128},
		{true, true, q.size / 2, 128},
		{true, true, q.size, 128},
		{true, false, 0, 128},
		{true, false, q.size/8 - 1, 128},
		{true, false, q.size / 8, 64},
		{true, false, q.size / 2, 32},
		{true, false, q.size, 32},
	} {
		x.following.Store(c.following)
		if got := widthWith(c.waiting, c.bulk); got != c.want {
			t.Errorf("following %v, copy's row %v, %d of %d rows waiting: width %d, want %d", c.following, c.bulk, c.waiting, q.size, got, c.want)
		}
	}
	x.cfg.EfConstruction = 24 // below 2·M: never narrower than it is
	if got := widthWith(q.size, false); got != 24 {
		t.Errorf("ef_construction 24, ring full: width %d, want 24", got)
	}
}

// A search finds every row put before it, while the linkers work: rows
// linked through an entry point that is itself still being linked (and
// estimated from the ring by the search), rows left when the entry point
// is deleted while the only other rows are being linked (the entry point
// then is one of those, and the edges rows linked through it add to its
// list survive its own linking's end). Each round races the linkers
// anew; each of these used to lose a row in about one round in a
// thousand.
func TestFreshRowsFoundWhileLinking(t *testing.T) {
	ctx := context.Background()
	for round := range 2000 {
		x, err := New(config(kernels.L2, 2, store.Float), nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		x.Put(keyOf(1), []float32{1, 0})
		x.Put(keyOf(2), []float32{0, 1})
		if hits, _ := x.Search(ctx, []float32{0, 0}, 10, 10, 0, nil); len(hits) != 2 {
			t.Fatalf("round %d, two rows put: %d found", round, len(hits))
		}
		x.Put(keyOf(1), []float32{2, 0}) // the entry point's row, replaced
		if hits, _ := x.Search(ctx, []float32{0, 0}, 10, 10, 0, nil); len(hits) != 2 {
			t.Fatalf("round %d, one row replaced: %d found", round, len(hits))
		}
		x.Close()
	}
}

// A table's copy, which admits each row, links the backlog in Admit,
// before it takes its locks: neither its Inserts nor the stream's between
// them link a row themselves. Without Admit, the Inserts link the rows
// the linkers cannot.
func TestAdmit(t *testing.T) {
	const rows = 3000
	data, _ := dataset.Clustered{Seed: 5, Rows: 2 * rows, Queries: 1, Dims: 16}.Generate()
	cfg := config(kernels.L2, 16, store.Float)
	cfg.Pending, cfg.Linkers = 16, 1
	for _, admit := range []bool{false, true} {
		x, err := New(cfg, nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		for i := range rows {
			p := x.Prepare(data[i])
			if admit {
				p = x.Admit(p)
			}
			x.Insert(keyOf(i), p)
			if i%2 == 0 { // a change from the stream
				x.Put(keyOf(rows+i), data[rows+i])
			}
		}
		x.Flush()
		linked := figure(t, x.Stats(), insertLinkedRows)
		x.Close()
		switch {
		case admit && linked != 0:
			t.Errorf("with Admit: Inserts linked %d rows themselves, want none", linked)
		case !admit && linked == 0:
			t.Errorf("without Admit: Inserts linked no row themselves; the linker kept up, and the case shows nothing")
		}
	}
}

// Admit waits for the linkers and links no row itself, and the linkers
// link only in the process's slots (procs.Slot): with every slot taken,
// no row of a ring three quarters full is linked, and Admit waits; once
// the slots are back, the linkers free the ring and Admit returns, as it
// does when the index is closed meanwhile (a rebuild given up).
func TestAdmitLeavesLinkingToSlots(t *testing.T) {
	data, _ := dataset.Clustered{Seed: 6, Rows: 200, Queries: 1, Dims: 16}.Generate()
	cfg := config(kernels.L2, 16, store.Float)
	cfg.Pending = 64
	full := cfg.Pending - cfg.Pending/4
	for _, closed := range []bool{false, true} {
		x, err := New(cfg, nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		var slots []func()
		for range procs.Cores() {
			slots = append(slots, procs.Slot())
		}
		giveBack := sync.OnceFunc(func() {
			for _, done := range slots {
				done()
			}
		})
		defer giveBack() // other tests' linkers wait for them
		defer x.Close()
		for i := range full {
			x.Put(keyOf(i), data[i])
		}
		admitted := make(chan struct{})
		go func() {
			x.Insert(keyOf(full), x.Admit(x.Prepare(data[full])))
			close(admitted)
		}()
		select {
		case <-admitted:
			t.Fatal("Admit returned while every slot was taken: a row was linked outside the slots")
		case <-time.After(100 * time.Millisecond):
		}
		if w := x.cur.Load().ring.waiting(); w != uint64(full) {
			t.Fatalf("%d rows wait for linking while every slot is taken, want %d", w, full)
		}
		if closed {
			x.Close()
		} else {
			giveBack()
		}
		select {
		case <-admitted:
		case <-time.After(10 * time.Second):
			t.Fatalf("Admit still waits with the index closed (%t) or the slots given back", closed)
		}
		giveBack()
		if !closed {
			x.Flush()
		}
		if n := x.Stats().Rows; n != full+1 {
			t.Fatalf("%d rows after Admit and Insert, want %d", n, full+1)
		}
	}
}
