// Package kindtest is the conformance suite every index kind passes:
// Run drives an index of a kind through the indexer as the replication
// layer and the RPC do (the copy that builds it, the stream's inserts,
// updates and deletes, a checkpoint and its load, filtered and cancelled
// searches) and checks what a client relies on, whatever the kind.
//
// The indexer's tests run it against every registered kind; a new kind's
// package registers itself and is covered. What a kind does best (recall
// at a given speed, memory) is for its own tests and benchmarks: the
// suite asks only for what every kind must give at its defaults on a
// small, easy set.
package kindtest

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/vecside/vecside/indexer"
	"github.com/vecside/vecside/indexer/kind"
	"github.com/vecside/vecside/internal/pgvalue"
	"github.com/vecside/vecside/kernels"
)

// Size of the set the suite indexes: small enough to build in well
// under a second, large enough that a kind checks its context during a
// search.
const (
	rows = 2000
	dims = 16
	k    = 10
)

// source is the Postgres the suite's checkpoints claim to come from.
var source = indexer.Source{SystemID: 7, Timeline: 1, Slot: "kindtest"}

// Run runs the suite against the index the options def describe
// ("kind=hnsw m=8"), once per metric. It skips under the race detector
// (see raceEnabled).
func Run(t *testing.T, def string) {
	if raceEnabled {
		t.Skip("the conformance suite is sequential; it runs without the race detector")
	}
	for _, metric := range []kernels.Metric{kernels.L2, kernels.Cosine} {
		t.Run(metric.String(), func(t *testing.T) {
			// recall=0.99: the suite's twenty searches per check measure a
			// kind's answers, not the recall calibration (package
			// indexer/calibrate), whose default target of 0.95 leaves
			// 0.88–0.97 at that sample size on these uniform vectors.
			f := &fixture{def: fmt.Sprintf("x=t(v) key=id metric=%s %s recall=0.99", metric, def), metric: metric, data: vectors(1, rows)}
			t.Run("build", f.build)
			t.Run("figures", f.figures)
			t.Run("stream", f.stream)
			t.Run("delete", f.delete)
			t.Run("checkpoint", f.checkpoint)
			t.Run("filter", f.filter)
			t.Run("cancel", f.cancel)
		})
	}
}

type fixture struct {
	def    string
	metric kernels.Metric
	data   [][]float32
	// ix and e are built by the first test that reads without changing
	// (build, filter, cancel) and shared by them.
	ix *indexer.Indexer
	e  *indexer.Entry
}

// shared is the built index the read-only tests share.
func (f *fixture) shared(t *testing.T) (*indexer.Indexer, *indexer.Entry) {
	if f.e == nil {
		f.ix, f.e = f.built(t)
	}
	return f.ix, f.e
}

// vectors are n seeded random vectors.
func vectors(seed uint64, n int) [][]float32 {
	rng := rand.New(rand.NewPCG(seed, 99))
	vs := make([][]float32, n)
	for i := range vs {
		vs[i] = make([]float32, dims)
		for j := range vs[i] {
			vs[i][j] = float32(rng.NormFloat64())
		}
	}
	return vs
}

// entry is an empty index of f's definition in an indexer of its own,
// keyed by text.
func (f *fixture) entry(t *testing.T) (*indexer.Indexer, *indexer.Entry) {
	t.Helper()
	spec, err := indexer.ParseSpec(f.def)
	if err != nil {
		t.Fatal(err)
	}
	ix := indexer.New()
	e, err := ix.Add(spec)
	if err != nil {
		t.Fatal(err)
	}
	if err := e.Configure(pgvalue.KeyText, pgvalue.VectorFloat4Array, 0); err != nil {
		t.Fatal(err)
	}
	return ix, e
}

// built is an index filled with f's rows by a copy, as a table sync
// fills it: trained on a sample, the snapshot point 0/100.
func (f *fixture) built(t *testing.T) (*indexer.Indexer, *indexer.Entry) {
	t.Helper()
	ix, e := f.entry(t)
	if err := e.Copies().BeginSync(f.data[:min(rows, e.Copies().SampleSize(rows, dims))], rows); err != nil {
		t.Fatal(err)
	}
	e.Copies().SetSyncPoint(0x100)
	for i, v := range f.data {
		e.Copies().CopyUpsert(key(i), v, 0)
	}
	e.Copies().EndSync()
	return ix, e
}

func key(i int) string { return fmt.Sprint(i) }

// search returns the keys of the candidates for the k nearest to q, at
// the index's default settings.
func search(t *testing.T, ix *indexer.Indexer, q []float32, opts indexer.SearchOptions) []string {
	t.Helper()
	res, err := ix.Search(context.Background(), "x", q, k, opts)
	if err != nil {
		t.Fatal(err)
	}
	keys := make([]string, len(res.Hits))
	for i, h := range res.Hits {
		keys[i] = h.Key
	}
	return keys
}

// exact is the keys of the k nearest to q among rows (nil rows are gone).
func (f *fixture) exact(rows [][]float32, q []float32, allowed func(i int) bool) []string {
	type scored struct {
		i int
		d float64
	}
	var all []scored
	for i, v := range rows {
		if v != nil && allowed(i) {
			all = append(all, scored{i, kernels.ExactDistance(f.metric, q, v)})
		}
	}
	slices.SortFunc(all, func(a, b scored) int {
		if a.d < b.d {
			return -1
		}
		if a.d > b.d {
			return 1
		}
		return a.i - b.i
	})
	var keys []string
	for _, s := range all[:min(k, len(all))] {
		keys = append(keys, key(s.i))
	}
	return keys
}

// checkRecall asks for the k nearest to queries and checks that the
// candidates hold at least 90% of the true ones over all, and never a
// key the table does not hold.
func (f *fixture) checkRecall(t *testing.T, ix *indexer.Indexer, rows [][]float32, queries [][]float32, opts indexer.SearchOptions, allowed func(i int) bool) {
	t.Helper()
	found, want := 0, 0
	for _, q := range queries {
		got := search(t, ix, q, opts)
		for _, g := range got {
			var i int
			if _, err := fmt.Sscan(g, &i); err != nil || i < 0 || i >= len(rows) || rows[i] == nil || !allowed(i) {
				t.Fatalf("search returned %q, which the table does not hold or the filter does not allow", g)
			}
		}
		for _, w := range f.exact(rows, q, allowed) {
			want++
			if slices.Contains(got, w) {
				found++
			}
		}
	}
	if found < want*9/10 {
		t.Errorf("recall@%d %d of %d, want at least 90%%", k, found, want)
	}
}

func every(int) bool { return true }

// build: the copy fills the index, which becomes ready, holds every row,
// and finds the nearest rows.
func (f *fixture) build(t *testing.T) {
	ix, e := f.shared(t)
	if st, _ := e.State(); st != indexer.StateReady {
		t.Fatalf("state after the copy: %v", st)
	}
	if st := e.Status(); st.Rows != rows || st.IndexStats.Rows != rows {
		t.Fatalf("%d rows (the kind reports %d), want %d", st.Rows, st.IndexStats.Rows, rows)
	}
	f.checkRecall(t, ix, f.data, vectors(2, 20), indexer.DefaultSearchOptions(), every)
}

// figures: the index reports a reading of each figure its kind declares,
// in that order, and of no other, which is what the metrics and
// vecside_status() show of it.
func (f *fixture) figures(t *testing.T) {
	_, e := f.shared(t)
	st := e.Status()
	declared, _ := kind.Lookup(st.Kind)
	got := st.IndexStats.Figures
	if len(got) != len(declared.Figures) {
		t.Fatalf("figures %q, want one of each the kind declares (%d)", st.IndexStats.FigurePairs(), len(declared.Figures))
	}
	for i, r := range got {
		if *r.Figure != *declared.Figures[i] {
			t.Errorf("figure %d is %+v, the kind declares %+v", i, *r.Figure, *declared.Figures[i])
		}
	}
}

// stream: inserts, updates and deletes applied by the stream are seen by
// the searches that start after their commit.
func (f *fixture) stream(t *testing.T) {
	ix, e := f.built(t)
	table := slices.Clone(f.data)
	fresh := vectors(3, 200)
	lsn := indexer.LSN(0x200)
	for i, v := range fresh {
		lsn++
		if !e.Stream().Begin(lsn) {
			t.Fatal("the entry refused a transaction after its copy")
		}
		switch i % 3 {
		case 0: // a new row
			table = append(table, v)
			e.Stream().Upsert(key(len(table)-1), v)
		case 1: // an update of an existing row's vector
			table[i] = v
			e.Stream().Upsert(key(i), v)
		case 2: // a delete
			table[i] = nil
			e.Stream().Delete(key(i))
		}
		e.Stream().SetApplied(lsn)
	}
	if e.Applied() != lsn {
		t.Fatalf("applied %s, want %s", e.Applied(), lsn)
	}
	live := 0
	for i, v := range table {
		if v != nil {
			live++
		}
		if e.Stream().Known(key(i)) != (v != nil) {
			t.Fatalf("Known(%s) = %v, want %v", key(i), !(v != nil), v != nil)
		}
	}
	if st := e.Status(); st.Rows != live {
		t.Fatalf("%d rows, want %d", st.Rows, live)
	}
	// The changed rows themselves, then anywhere.
	f.checkRecall(t, ix, table, fresh[:30], indexer.DefaultSearchOptions(), every)
	f.checkRecall(t, ix, table, vectors(4, 20), indexer.DefaultSearchOptions(), every)
}

// delete: once most rows are deleted, no search returns one of them and
// the rest are still found.
func (f *fixture) delete(t *testing.T) {
	ix, e := f.built(t)
	table := slices.Clone(f.data)
	e.Stream().Begin(0x200)
	for i := range table {
		if i%4 != 0 {
			table[i] = nil
			e.Stream().Delete(key(i))
		}
	}
	e.Stream().SetApplied(0x200)
	if st := e.Status(); st.Rows != rows/4 {
		t.Fatalf("%d rows, want %d", st.Rows, rows/4)
	}
	f.checkRecall(t, ix, table, vectors(5, 20), indexer.DefaultSearchOptions(), every)
	f.checkRecall(t, ix, table, f.data[:40], indexer.DefaultSearchOptions(), every)
}

// checkpoint: a checkpoint loads into an index that covers the same
// position, holds the same keys and answers as well.
func (f *fixture) checkpoint(t *testing.T) {
	_, e := f.built(t)
	table := slices.Clone(f.data)
	e.Stream().Begin(0x300)
	e.Stream().Delete(key(1))
	table[1] = nil
	e.Stream().SetApplied(0x300)
	dir := t.TempDir()
	if _, err := e.Durable().Checkpoint(dir, source); err != nil {
		t.Fatal(err)
	}
	ix, loaded := f.entry(t)
	lsn, err := loaded.Durable().LoadCheckpoint(dir, source, nil)
	if err != nil {
		t.Fatal(err)
	}
	if lsn != 0x300 || loaded.Durable().Covered() != 0x300 {
		t.Fatalf("the load covers %s (Covered %s), want 0/300", lsn, loaded.Durable().Covered())
	}
	loaded.SetReady()
	keys := func(e *indexer.Entry) []string {
		var ks []string
		e.Keys(func(k string) { ks = append(ks, k) })
		slices.Sort(ks)
		return ks
	}
	if before, after := keys(e), keys(loaded); !slices.Equal(before, after) {
		t.Fatalf("the load holds %d keys, the checkpointed index %d", len(after), len(before))
	}
	f.checkRecall(t, ix, table, vectors(6, 20), indexer.DefaultSearchOptions(), every)
}

// filter: a search restricted to some keys returns only those, finds
// their nearest, and an empty restriction returns nothing.
func (f *fixture) filter(t *testing.T) {
	ix, _ := f.shared(t)
	allowed := func(i int) bool { return i%10 == 3 }
	opts := indexer.DefaultSearchOptions()
	opts.Allow = []string{"no such key"}
	for i := range rows {
		if allowed(i) {
			opts.Allow = append(opts.Allow, key(i))
		}
	}
	f.checkRecall(t, ix, f.data, vectors(7, 20), opts, allowed)
	opts.Allow = []string{}
	if got := search(t, ix, f.data[0], opts); len(got) != 0 {
		t.Fatalf("an empty allow-set returned %v", got)
	}
}

// cancel: a search whose context has ended gives up with its error.
func (f *fixture) cancel(t *testing.T) {
	_, e := f.shared(t)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := e.Search(ctx, f.data[0], rows, indexer.DefaultSearchOptions()); !errors.Is(err, context.Canceled) {
		t.Fatalf("a search under a cancelled context: got %v, want context.Canceled", err)
	}
}
