package indexer

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/vecside/vecside/indexer/dataset"
	"github.com/vecside/vecside/internal/pgvalue"
)

// textEntry is an entry keyed by text, so that tests may name keys freely.
func textEntry(t testing.TB, def string) *Entry {
	t.Helper()
	e := newTestEntry(t, def)
	if err := e.Configure(pgvalue.KeyText, pgvalue.VectorFloat4Array, 0); err != nil {
		t.Fatal(err)
	}
	return e
}

// copyInto runs a whole sync of rows into e, as the replication layer
// does: train on them, take the snapshot point, copy, end.
func copyInto(t testing.TB, e *Entry, rows [][]float32, point LSN) {
	t.Helper()
	if err := e.Copies().BeginSync(rows, len(rows)); err != nil {
		t.Fatal(err)
	}
	e.Copies().SetSyncPoint(point)
	for i, v := range rows {
		e.Copies().CopyUpsert(fmt.Sprint(i), v, 0)
	}
	e.Copies().EndSync()
}

// search returns the keys of e's candidates for q.
func searchKeys(t testing.TB, e *Entry, q []float32, n int) []string {
	t.Helper()
	hits, err := e.Search(context.Background(), q, n, DefaultSearchOptions())
	if err != nil {
		t.Fatal(err)
	}
	var keys []string
	for _, h := range hits {
		keys = append(keys, h.Key)
	}
	return keys
}

// TestRebuildRoutesChanges walks a rebuild through each kind of change:
// before the snapshot point is known, after it but older than it (the
// stream lagging), newer than it, and the copy's rows for keys changed
// since; the serving index keeps answering throughout, and the rebuilt one
// holds exactly the table's state.
func TestRebuildRoutesChanges(t *testing.T) {
	for _, def := range append(everyKind(), "kind=flat store=ext8") {
		e := textEntry(t, "e=t(v) key=id metric=l2 "+def)
		v := func(x float32) []float32 { return []float32{x, 1} }
		e.Stream().Upsert("a", v(1))
		e.Stream().Upsert("b", v(2))
		e.Stream().Upsert("c", v(3))
		e.SetReady()
		e.Stream().SetApplied(0x50)
		if err := e.Copies().BeginRebuild([][]float32{v(1), v(2), v(3)}, 3); err != nil {
			t.Fatal(err)
		}
		// Before the point is known: into both, sorted out later.
		if !e.Stream().Begin(0x60) {
			t.Fatal("the stream's next transaction skipped during a rebuild")
		}
		e.Stream().Upsert("a", v(10)) // 0x60: older than the snapshot, which has it
		e.Stream().SetApplied(0x61)
		e.Copies().SetSyncPoint(0x100)
		e.Stream().Begin(0x80) // still older: serving index only
		e.Stream().Delete("b")
		e.Stream().SetApplied(0x81)
		e.Stream().Begin(0x120) // newer: both, and the copy's row loses
		e.Stream().Upsert("c", v(30))
		e.Stream().Upsert("d", v(40))
		e.Stream().SetApplied(0x121)
		// The table as of 0x100: a=10, c=3, no b (deleted at 0x80), e=5.
		e.Copies().CopyUpsert("a", v(10), 0)
		e.Copies().CopyUpsert("c", v(3), 0)
		e.Copies().CopyUpsert("e", v(5), 0)
		if got := searchKeys(t, e, v(5), 10); slices.Contains(got, "e") || slices.Contains(got, "b") {
			t.Fatalf("%s: the serving index answered from the copy, or kept a deleted key: %v", def, got)
		}
		e.Copies().EndSync()
		want := map[string][]float32{"a": v(10), "c": v(30), "d": v(40), "e": v(5)}
		if st := e.Status(); st.Rows != len(want) || st.Rebuilds != 1 || st.State != StateReady {
			t.Fatalf("%s: after the rebuild: %+v", def, st)
		}
		for k, vec := range want {
			if got := searchKeys(t, e, vec, 1); len(got) != 1 || got[0] != k {
				t.Fatalf("%s: %s is not nearest to its own vector %v: %v", def, k, vec, got)
			}
		}
		if e.Stream().Known("b") {
			t.Fatalf("%s: deleted key b is back", def)
		}
	}
}

// A first copy with the stream behind its snapshot point: the entry
// applies nothing older than the point once the copy is in.
func TestSyncSkipsOlderTransactions(t *testing.T) {
	e := textEntry(t, "e=t(v) key=id metric=l2")
	copyInto(t, e, [][]float32{{1, 1}, {2, 2}}, 0x200)
	if e.Applied() != 0x200 || e.Stream().Begin(0x150) || !e.Stream().Begin(0x200) {
		t.Fatalf("applied %s; a transaction committed before the snapshot point is not skipped", e.Applied())
	}
}

// A failure met while a copy runs is kept when the copy ends: an index in
// error must not be put back to ready (and serve stale data that is never
// updated again).
func TestEndSyncKeepsAFailure(t *testing.T) {
	e := textEntry(t, "e=t(v) key=id metric=l2 kind=ivf")
	if err := e.Copies().BeginSync([][]float32{{1, 1}}, 1); err != nil {
		t.Fatal(err)
	}
	e.Copies().SetSyncPoint(0x10)
	e.Copies().CopyUpsert("a", []float32{1, 1}, 0)
	e.Fail(errors.New("column v changed type"))
	e.Copies().EndSync()
	if state, why := e.State(); state != StateError || why != "column v changed type" {
		t.Fatalf("state %s (%s) after a copy that ended in error", state, why)
	}
	if _, err := e.Search(context.Background(), []float32{1, 1}, 1, DefaultSearchOptions()); !errors.Is(err, ErrNotReady) {
		t.Fatalf("search of an index in error: %v", err)
	}
}

// An index made from no sample (its table was empty at the copy) asks to
// be rebuilt once enough rows have come.
func TestIndexMadeAfterCopyAsksForRebuild(t *testing.T) {
	data, _ := dataset.Clustered{Seed: 5, Rows: 3000, Dims: 16}.Generate()
	for _, kind := range []string{"kind=ivf", "kind=flat store=ext4"} {
		e := textEntry(t, "e=t(v) key=id metric=l2 "+kind)
		copyInto(t, e, nil, 0x10)
		for i, v := range data {
			if i == 500 && e.Copies().WantsRebuild() {
				t.Fatalf("%s: a rebuild asked for at 500 rows", kind)
			}
			e.Stream().Upsert(fmt.Sprint(i), v)
		}
		if !e.Copies().WantsRebuild() {
			t.Fatalf("%s: %d rows in an index made from nothing, no rebuild asked for", kind, e.Status().Rows)
		}
		copyInto(t, e, data, 0x20)
		if e.Copies().WantsRebuild() {
			t.Fatalf("%s: still asks for a rebuild after one", kind)
		}
	}
}

// The copy's readers and the stream write at once while searches run
// (run it with -race): every change lands, none waits for a search, and
// the result is the table's state.
func TestSyncBesideChangesAndSearches(t *testing.T) {
	const rows, dims = 20000, 16
	data, queries := dataset.Clustered{Seed: 9, Rows: rows + 5000, Queries: 50, Dims: dims}.Generate()
	for _, kind := range []string{"kind=flat", "kind=ivf", "kind=flat store=ext4"} {
		e := textEntry(t, "e=t(v) key=id metric=l2 "+kind)
		copyInto(t, e, data[:5000], 0x10)
		stop := make(chan struct{})
		var wg sync.WaitGroup
		for range 2 {
			wg.Go(func() {
				for i := 0; ; i++ {
					select {
					case <-stop:
						return
					default:
					}
					if _, err := e.Search(context.Background(), queries[i%len(queries)], 10, DefaultSearchOptions()); err != nil {
						t.Error(err)
						return
					}
				}
			})
		}
		if err := e.Copies().BeginRebuild(data[:rows], rows); err != nil {
			t.Fatal(err)
		}
		e.Copies().SetSyncPoint(0x100)
		want := map[string][]float32{}
		for i, v := range data[:rows] {
			want[fmt.Sprint(i)] = v
		}
		var copiers sync.WaitGroup
		for part := range 2 {
			copiers.Go(func() {
				for i := part; i < rows; i += 2 {
					e.Copies().CopyUpsert(fmt.Sprint(i), data[i], 0)
				}
			})
		}
		rng := rand.New(rand.NewPCG(1, 2))
		for n := range 3000 {
			e.Stream().Begin(LSN(0x200 + n))
			k := fmt.Sprint(rng.IntN(rows + 5000))
			if rng.IntN(3) == 0 {
				e.Stream().Delete(k)
				delete(want, k)
			} else {
				v := data[rows+rng.IntN(5000)]
				e.Stream().Upsert(k, v)
				want[k] = v
			}
			e.Stream().SetApplied(LSN(0x200 + n + 1))
		}
		copiers.Wait()
		e.Copies().EndSync()
		close(stop)
		wg.Wait()
		if n := e.Status().Rows; n != len(want) {
			t.Fatalf("%s: %d rows, want %d", kind, n, len(want))
		}
		got := map[string]bool{}
		e.Keys(func(k string) { got[k] = true })
		for k := range want {
			if !got[k] {
				t.Fatalf("%s: key %s lost", kind, k)
			}
		}
		if v, ok := e.Vector("7"); ok && !slices.Equal(v, want["7"]) {
			t.Fatalf("%s: key 7 holds %v, want %v", kind, v, want["7"])
		}
	}
}

// An entry whose table has no valid row yet still writes a checkpoint, so
// that its position is covered by construction, not only by the idle
// record's timing; it loads back as an entry with no index.
func TestCheckpointWithoutIndex(t *testing.T) {
	dir := t.TempDir()
	e := textEntry(t, "e=t(v) key=id metric=l2")
	copyInto(t, e, nil, 0x30)
	e.Stream().Upsert("n", nil) // a row whose vector is NULL
	e.Stream().SetApplied(0x40)
	if _, err := e.Durable().Checkpoint(dir, testSource); err != nil {
		t.Fatal(err)
	}
	if e.Durable().Covered() != 0x40 {
		t.Fatalf("covered %s after a checkpoint at 0/40 of an entry with no index", e.Durable().Covered())
	}
	loaded := textEntry(t, "e=t(v) key=id metric=l2")
	if lsn, err := loaded.Durable().LoadCheckpoint(dir, testSource, nil); err != nil || lsn != 0x40 {
		t.Fatalf("load: %s, %v", lsn, err)
	}
	if st := loaded.Status(); st.Skipped != 1 || st.Rows != 0 || st.State != StateReady {
		t.Fatalf("loaded: %+v", st)
	}
	loaded.Stream().Upsert("a", []float32{1, 2})
	if got := searchKeys(t, loaded, []float32{1, 2}, 1); len(got) != 1 || got[0] != "a" {
		t.Fatalf("after the first row: %v", got)
	}
}

// The number of searches running at once is bounded: beyond the running
// and queued limits a search is turned away at once with ErrOverloaded,
// and a queued one runs when a turn comes.
func TestAdmission(t *testing.T) {
	a := newAdmission(Limits{Running: 1, Queued: 1})
	leave, err := a.enter(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	queued := make(chan error, 1)
	go func() {
		done, err := a.enter(context.Background())
		if err == nil {
			done()
		}
		queued <- err
	}()
	for a.waiting.Load() == 0 {
		time.Sleep(time.Millisecond)
	}
	if _, err := a.enter(context.Background()); !errors.Is(err, ErrOverloaded) {
		t.Fatalf("a third search: %v, want ErrOverloaded", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Millisecond)
	defer cancel()
	leave()
	if err := <-queued; err != nil {
		t.Fatalf("the queued search: %v", err)
	}
	leave2, err := a.enter(ctx)
	if err != nil {
		t.Fatal(err)
	}
	leave2()
	if a.rejected.Load() != 1 || a.admitted.Load() != 3 {
		t.Fatalf("rejected %d admitted %d", a.rejected.Load(), a.admitted.Load())
	}
}

// Rows of another dimension copied in parallel while the dimension is
// still unknown are skipped, not put into an index of the first row's
// dimension (which a check made before the apply lock let through).
func TestCopyOfMixedDimensions(t *testing.T) {
	e := textEntry(t, "e=t(v) key=id metric=l2")
	if err := e.Copies().BeginSync(nil, 0); err != nil {
		t.Fatal(err)
	}
	e.Copies().SetSyncPoint(0x10)
	var wg sync.WaitGroup
	for part, dims := range []int{3, 2} {
		wg.Go(func() {
			for i := range 2000 {
				e.Copies().CopyUpsert(fmt.Sprint(part, "-", i), make([]float32, dims), 0)
			}
		})
	}
	wg.Wait()
	e.Copies().EndSync()
	if st := e.Status(); st.Rows+st.Skipped != 4000 || st.Rows != 2000 {
		t.Fatalf("%d rows and %d skipped of 2000 of each dimension", st.Rows, st.Skipped)
	}
}

// An HNSW rebuild's copy waits for the new graph's backlog before it
// takes the apply lock (see admitter): neither its rows nor the stream's
// changes between them are linked by an insert under the lock, which the
// stream would wait for.
func TestCopyAdmitsRows(t *testing.T) {
	const rows = 1500 // three times the rows an HNSW index lets wait
	data, _ := dataset.Clustered{Seed: 8, Rows: 2 * rows, Queries: 1, Dims: 32}.Generate()
	e := textEntry(t, "e=t(v) key=id metric=l2 kind=hnsw")
	e.Stream().Upsert("first", data[0])
	e.SetReady()
	e.Stream().SetApplied(0x50)
	if err := e.Copies().BeginRebuild(data[:rows], rows); err != nil {
		t.Fatal(err)
	}
	e.Copies().SetSyncPoint(0x100)
	e.Stream().Begin(0x200)
	for i := range rows {
		e.Copies().CopyUpsert(fmt.Sprint(i), data[i], 0)
		if i%2 == 0 {
			e.Stream().Upsert(fmt.Sprint(rows+i), data[rows+i])
		}
	}
	e.Stream().SetApplied(0x201)
	e.c.wmu.Lock()
	linked, _ := e.c.sync.index.Stats().Value("insert_linked_rows_total")
	e.c.wmu.Unlock()
	e.Copies().EndSync()
	if linked != 0 {
		t.Errorf("the rebuild's inserts linked %g rows themselves under the apply lock, want none", linked)
	}
	if st := e.Status(); st.Rows != rows+rows/2 { // "first" is not in the copy: the table has lost it
		t.Errorf("%d rows after the rebuild, want %d", st.Rows, rows+rows/2)
	}
}

// TestWaitForgetsTheDimension: an entry that waits (its table dropped,
// its column altered) copies the next table at that table's dimension,
// not the one it held, unless its definition fixes one.
func TestWaitForgetsTheDimension(t *testing.T) {
	for _, c := range []struct {
		def                 string
		waiting, dims, rows int
	}{
		{"t=t(v) key=id metric=l2 kind=flat", 0, 3, 3},
		{"t=t(v) key=id metric=l2 kind=flat dims=2", 2, 2, 0}, // the 3-d rows are skipped
	} {
		e := textEntry(t, c.def)
		copyInto(t, e, [][]float32{{1, 0}, {0, 1}}, 10)
		e.Wait("the table was dropped")
		if st := e.Status(); st.State != StateWaiting || st.Rows != 0 || e.Dims() != c.waiting {
			t.Errorf("%s: waiting, the entry is %s with %d rows and %d dimensions", c.def, st.State, st.Rows, e.Dims())
		}
		copyInto(t, e, [][]float32{{1, 0, 0}, {0, 1, 0}, {0, 0, 1}}, 20)
		if st := e.Status(); st.State != StateReady || st.Rows != c.rows || e.Dims() != c.dims {
			t.Errorf("%s: copied again, the entry is %s with %d rows of %d dimensions, want %d of %d", c.def, st.State, st.Rows, e.Dims(), c.rows, c.dims)
		}
	}
}
