package indexer

import (
	"fmt"
	"runtime"
	"strconv"
	"testing"
)

// TestOversizedFirstRow: with the dimension still unknown (no dims=, the
// table empty at copy time), a first row longer than any index can hold
// is skipped, like any bad row; it neither fixes the dimension nor stops
// the apply path, and the next valid row does fix it.
func TestOversizedFirstRow(t *testing.T) {
	for _, kind := range Kinds() {
		t.Run(kind, func(t *testing.T) {
			e := newTestEntry(t, "e=t(v) key=id metric=l2 kind="+kind)
			if err := e.Copies().BeginSync(nil, 0); err != nil {
				t.Fatal(err)
			}
			e.Copies().SetSyncPoint(1)
			e.Copies().EndSync()
			e.Stream().Upsert(key(t, "1"), make([]float32, 70000))
			e.Stream().Upsert(key(t, "2"), make([]float32, MaxDims+1))
			st := e.Status()
			if st.State != StateReady || st.Dims != 0 || st.Skipped != 2 || st.Rows != 0 {
				t.Fatalf("after two oversized rows: state %s (%s), dims %d, skipped %d, rows %d; want ready, 0, 2, 0",
					st.State, st.Error, st.Dims, st.Skipped, st.Rows)
			}
			e.Stream().Upsert(key(t, "3"), []float32{1, 2, 3})
			e.Stream().Upsert(key(t, "1"), []float32{3, 2, 1})
			if st := e.Status(); st.State != StateReady || st.Dims != 3 || st.Rows != 2 || st.Skipped != 1 {
				t.Fatalf("after valid rows: state %s, dims %d, rows %d, skipped %d; want ready, 3, 2, 1", st.State, st.Dims, st.Rows, st.Skipped)
			}
		})
	}
}

// TestOversizedSample: a copy whose sample starts with rows no index can
// hold takes its dimension from the first row that fits.
func TestOversizedSample(t *testing.T) {
	e := newTestEntry(t, "e=t(v) key=id metric=l2 kind=ivf")
	sample := [][]float32{make([]float32, 70000), {1, 0}, {0, 1}, {1, 1}}
	if err := e.Copies().BeginSync(sample, 4); err != nil {
		t.Fatalf("BeginSync: %v", err)
	}
	e.Copies().SetSyncPoint(1)
	e.Copies().CopyUpsert(key(t, "1"), sample[0], 0)
	e.Copies().CopyUpsert(key(t, "2"), sample[1], 0)
	e.Copies().EndSync()
	if st := e.Status(); st.State != StateReady || st.Dims != 2 || st.Rows != 1 || st.Skipped != 1 {
		t.Fatalf("state %s (%s), dims %d, rows %d, skipped %d; want ready, 2, 1, 1", st.State, st.Error, st.Dims, st.Rows, st.Skipped)
	}
}

// TestBulkTransactionReleasesMemory: the rows a transaction wrote are
// remembered until its commit (to give them its xid), and no longer: a
// bulk UPDATE does not pin memory in proportion to its rows after it.
func TestBulkTransactionReleasesMemory(t *testing.T) {
	const rows = 200000
	e := newTestEntry(t, "e=t(v) key=id metric=l2 kind=flat")
	keys := make([]string, rows)
	e.Stream().BeginTx(10, 0) // a transaction of unknown xid remembers no rows
	for i := range keys {
		keys[i] = key(t, strconv.Itoa(i))
		e.Stream().Upsert(keys[i], []float32{float32(i), 1})
		setXID(e.c.index, keys[i], 1)
	}
	e.Stream().Commit(11)
	before := liveHeap()
	// An UPDATE of every row that leaves the vector as it was: the index
	// does not change, only the xids.
	e.Stream().BeginTx(20, 2)
	for _, k := range keys {
		e.Stream().Unchanged(k)
	}
	e.Stream().Commit(21)
	after := liveHeap()
	if xid := xidOf(e.c.index, keys[rows-1]); xid != 2 {
		t.Fatalf("the UPDATE's xid is %d, want 2", xid)
	}
	t.Logf("live heap %s MiB before the UPDATE of %d rows, %s MiB after", mib(before), rows, mib(after))
	if after > before+before/10 {
		t.Fatalf("live heap grew from %s to %s MiB across a committed UPDATE of %d rows", mib(before), mib(after), rows)
	}
	runtime.KeepAlive(keys)
}

func liveHeap() uint64 {
	runtime.GC()
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return m.HeapAlloc
}

func mib(b uint64) string { return fmt.Sprintf("%.1f", float64(b)/(1<<20)) }
