package indexer

import (
	"context"
	"errors"
	"io"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/vecside/vecside/internal/pgvalue"
)

func newTestEntry(t testing.TB, def string) *Entry {
	t.Helper()
	spec, err := ParseSpec(def)
	if err != nil {
		t.Fatal(err)
	}
	e := newEntry(spec)
	if err := e.Configure(pgvalue.KeyInt8, pgvalue.VectorFloat4Array, 0); err != nil {
		t.Fatal(err)
	}
	return e
}

func key(t *testing.T, s string) string {
	k, err := pgvalue.KeyInt8.DecodeText(s)
	if err != nil {
		t.Fatal(err)
	}
	return k
}

func TestEntryChanges(t *testing.T) {
	e := newTestEntry(t, "e=t(v) key=id metric=l2")
	e.Stream().Upsert(key(t, "1"), []float32{1, 0})
	e.Stream().Upsert(key(t, "2"), []float32{0, 1})
	e.Stream().Upsert(key(t, "3"), nil)                 // NULL
	e.Stream().Upsert(key(t, "4"), []float32{1, 2, 3})  // wrong dimension
	e.Stream().Upsert(key(t, "5"), []float32{1, nan32}) // not finite
	if st := e.Status(); st.Rows != 2 || st.Skipped != 3 || st.Dims != 2 {
		t.Fatalf("rows=%d skipped=%d dims=%d, want 2, 3, 2", st.Rows, st.Skipped, st.Dims)
	}
	e.Stream().Upsert(key(t, "3"), []float32{5, 5}) // fixed later
	e.Stream().Upsert(key(t, "1"), nil)             // and broken
	if !e.Stream().Move(key(t, "2"), key(t, "20")) || e.Stream().Known(key(t, "2")) || !e.Stream().Known(key(t, "20")) {
		t.Fatal("Move of an indexed key")
	}
	if !e.Stream().Move(key(t, "4"), key(t, "40")) || e.Status().Skipped != 3 {
		t.Fatal("Move of a skipped key must keep it skipped")
	}
	if e.Stream().Move(key(t, "99"), key(t, "100")) {
		t.Fatal("Move of an unknown key reported success")
	}
	e.Stream().Delete(key(t, "5"))
	if st := e.Status(); st.Rows != 2 || st.Skipped != 2 {
		t.Fatalf("rows=%d skipped=%d, want 2 and 2", st.Rows, st.Skipped)
	}
	e.Stream().Truncate()
	if st := e.Status(); st.Rows != 0 || st.Skipped != 0 {
		t.Fatalf("after truncate rows=%d skipped=%d", st.Rows, st.Skipped)
	}
}

func TestSearchStates(t *testing.T) {
	e := newTestEntry(t, "e=t(v) key=id metric=l2")
	e.Stream().Upsert(key(t, "1"), []float32{1, 0})
	opts := DefaultSearchOptions()
	if _, err := e.Search(context.Background(), []float32{1, 0}, 1, opts); !errors.Is(err, ErrNotReady) {
		t.Fatalf("building: got %v, want ErrNotReady", err)
	}
	e.SetReady()
	if _, err := e.Search(context.Background(), []float32{1, 0, 0}, 1, opts); !errors.Is(err, ErrInvalidVector) {
		t.Fatalf("wrong dimension: got %v", err)
	}
	if _, err := e.Search(context.Background(), []float32{nan32, 0}, 1, opts); !errors.Is(err, ErrInvalidVector) {
		t.Fatalf("NaN query: got %v", err)
	}
	hits, err := e.Search(context.Background(), []float32{0.9, 0}, 1, opts)
	if err != nil || len(hits) != 1 || hits[0].Key != key(t, "1") {
		t.Fatalf("got %v, %v", hits, err)
	}
	e.Fail(errors.New("column dropped"))
	if _, err := e.Search(context.Background(), []float32{1, 0}, 1, opts); !errors.Is(err, ErrNotReady) {
		t.Fatalf("error state: got %v", err)
	}
}

func TestWaitApplied(t *testing.T) {
	e := newTestEntry(t, "e=t(v) key=id metric=l2")
	done := make(chan error, 1)
	go func() { done <- e.WaitApplied(context.Background(), 100) }()
	e.Stream().SetApplied(50)
	select {
	case err := <-done:
		t.Fatalf("released at 50 waiting for 100: %v", err)
	case <-time.After(20 * time.Millisecond):
	}
	e.Stream().SetApplied(100)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Millisecond)
	defer cancel()
	if err := e.WaitApplied(ctx, 200); !errors.Is(err, ErrTimeout) {
		t.Fatalf("got %v, want ErrTimeout", err)
	}
	e.Stream().SetApplied(10) // never backwards
	if e.Applied() != 100 {
		t.Fatalf("applied moved back to %s", e.Applied())
	}
}

var testSource = Source{SystemID: 7, Timeline: 1, Slot: "vecside"}

func filledEntry(t *testing.T) *Entry {
	e := newTestEntry(t, "e=t(v) key=id metric=cosine")
	for i, v := range [][]float32{{1, 0}, {0, 1}, {1, 1}, {0, 0}} {
		e.Stream().Upsert(key(t, string(rune('1'+i))), v)
	}
	e.Stream().Upsert(key(t, "9"), nil)
	e.SetReady()
	e.Stream().SetApplied(0x1000)
	return e
}

func contents(e *Entry) map[string][]float32 {
	out := map[string][]float32{}
	e.Keys(func(k string) { out[k], _ = e.Vector(k) })
	return out
}

func TestCheckpointRoundTrip(t *testing.T) {
	dir := t.TempDir()
	e := filledEntry(t)
	if _, err := e.Durable().Checkpoint(dir, testSource); err != nil {
		t.Fatal(err)
	}
	if e.Durable().Covered() != 0x1000 || e.Durable().Dirty() != 0 {
		t.Fatalf("covered %s dirty %d after checkpoint", e.Durable().Covered(), e.Durable().Dirty())
	}
	if st := e.Status(); st.Covered != 0x1000 {
		t.Fatalf("status covered_lsn %s after checkpoint, want 0/1000", st.Covered)
	}
	loaded := newTestEntry(t, "e=t(v) key=id metric=cosine")
	lsn, err := loaded.Durable().LoadCheckpoint(dir, testSource, nil)
	if err != nil || lsn != 0x1000 {
		t.Fatalf("load: %s, %v", lsn, err)
	}
	want, got := contents(e), contents(loaded)
	if len(got) != len(want) {
		t.Fatalf("loaded %d keys, want %d", len(got), len(want))
	}
	for k, v := range want {
		if !slices.Equal(got[k], v) {
			t.Fatalf("key %x: %v, want %v", k, got[k], v)
		}
	}
	ls, es := loaded.Status(), e.Status()
	if ls.Skipped != es.Skipped || ls.ZeroVectors != es.ZeroVectors || ls.State != StateReady || ls.Applied != 0x1000 {
		t.Fatalf("loaded status %+v, want like %+v", ls, es)
	}
	q := []float32{0.8, 0.2}
	a, _ := e.Search(context.Background(), q, 3, DefaultSearchOptions())
	b, _ := loaded.Search(context.Background(), q, 3, DefaultSearchOptions())
	if !slices.Equal(a, b) {
		t.Fatalf("search after load %v, before %v", b, a)
	}
}

func TestCheckpointRefusals(t *testing.T) {
	dir := t.TempDir()
	e := filledEntry(t)
	if _, err := e.Durable().Checkpoint(dir, testSource); err != nil {
		t.Fatal(err)
	}
	path := e.Durable().CheckpointPath(dir)
	good, _ := os.ReadFile(path)
	try := func(name string, data []byte, src Source, def string) {
		t.Helper()
		os.WriteFile(path, data, 0o600)
		fresh := newTestEntry(t, def)
		if _, err := fresh.Durable().LoadCheckpoint(dir, src, nil); err == nil {
			t.Errorf("%s: loaded", name)
		}
		if st := fresh.Status(); st.Rows != 0 || st.State != StateBuilding {
			t.Errorf("%s: a refused checkpoint changed the entry: %+v", name, st)
		}
	}
	flipped := slices.Clone(good)
	flipped[len(flipped)/2] ^= 0x40
	try("flipped byte", flipped, testSource, "e=t(v) key=id metric=cosine")
	try("truncated", good[:len(good)-5], testSource, "e=t(v) key=id metric=cosine")
	try("empty", nil, testSource, "e=t(v) key=id metric=cosine")
	try("other system", good, Source{SystemID: 8, Timeline: 1, Slot: "vecside"}, "e=t(v) key=id metric=cosine")
	try("other slot", good, Source{SystemID: 7, Timeline: 1, Slot: "other"}, "e=t(v) key=id metric=cosine")
	try("other definition", good, testSource, "e=t(v) key=id metric=l2")
	os.WriteFile(path, flipped, 0o600)
	drain := func(_ CheckpointHeader, r io.Reader) error { _, err := io.Copy(io.Discard, r); return err }
	if _, err := ReadCheckpoint(path, drain); !errors.Is(err, ErrCorruptCheckpoint) {
		t.Errorf("flipped byte: got %v, want ErrCorruptCheckpoint", err)
	}
	// A corrupt body never reaches the loader: a count read from it could
	// make the loader allocate without bound before the checksum refused
	// the file.
	for _, at := range []int{len(good) / 3, len(good) / 2, len(good) - 20} {
		bad := slices.Clone(good)
		bad[at] ^= 0xff
		os.WriteFile(path, bad, 0o600)
		loaded := false
		_, err := ReadCheckpoint(path, func(CheckpointHeader, io.Reader) error { loaded = true; return nil })
		if loaded || !errors.Is(err, ErrCorruptCheckpoint) {
			t.Errorf("byte %d of %d flipped: loader called %v, err %v", at, len(good), loaded, err)
		}
	}
	if entries, _ := filepath.Glob(filepath.Join(dir, "*.tmp-*")); len(entries) != 0 {
		t.Errorf("temporary files left behind: %v", entries)
	}
}

// TestCheckpointOfAnotherTable: a checkpoint records the OID of the table
// its entry follows and the source's database; an entry that follows a
// table of another OID (the table was dropped and created again under
// its name) refuses it and is left untouched, one of the same OID loads
// it, and one that knows no table takes the checkpoint's word.
func TestCheckpointOfAnotherTable(t *testing.T) {
	dir := t.TempDir()
	e := filledEntry(t)
	e.Durable().SetTable(Table{OID: 16400, Schema: "public", Name: "t"})
	src := testSource
	src.Database = "app"
	if _, err := e.Durable().Checkpoint(dir, src); err != nil {
		t.Fatal(err)
	}
	h, err := ReadCheckpoint(e.Durable().CheckpointPath(dir), func(_ CheckpointHeader, r io.Reader) error { _, err := io.Copy(io.Discard, r); return err })
	if err != nil || h.TableOID != 16400 || h.Database != "app" || h.SystemID != 7 {
		t.Fatalf("header %+v (%v), want table OID 16400, database app, system 7", h, err)
	}
	recreated := newTestEntry(t, "e=t(v) key=id metric=cosine")
	recreated.Durable().SetTable(Table{OID: 16411, Schema: "public", Name: "t"})
	_, err = recreated.Durable().LoadCheckpoint(dir, src, nil)
	if err == nil {
		t.Fatal("a checkpoint of table OID 16400 loaded into an index of table OID 16411")
	}
	for _, want := range []string{"table OID 16400", "now OID 16411", "dropped and re-created"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("refusal %q does not say %q", err, want)
		}
	}
	if errors.Is(err, ErrCorruptCheckpoint) {
		t.Errorf("refusal %q is reported as corruption", err)
	}
	if st := recreated.Status(); st.Rows != 0 || st.State != StateBuilding || st.TableOID != 16411 {
		t.Errorf("a refused checkpoint changed the entry: %+v", st)
	}
	same := newTestEntry(t, "e=t(v) key=id metric=cosine")
	same.Durable().SetTable(Table{OID: 16400, Schema: "public", Name: "t"})
	if _, err := same.Durable().LoadCheckpoint(dir, src, nil); err != nil {
		t.Fatalf("same table OID: %v", err)
	}
	if st := same.Status(); st.Rows != 4 || st.TableOID != 16400 {
		t.Errorf("same table OID: loaded %+v", st)
	}
	// A database renamed keeps its slot and its tables: not a reason to
	// copy again.
	renamed := newTestEntry(t, "e=t(v) key=id metric=cosine")
	renamed.Durable().SetTable(Table{OID: 16400, Schema: "public", Name: "t"})
	if _, err := renamed.Durable().LoadCheckpoint(dir, testSource, nil); err != nil {
		t.Fatalf("another database name: %v", err)
	}
	if _, err := newTestEntry(t, "e=t(v) key=id metric=cosine").Durable().LoadCheckpoint(dir, src, nil); err != nil {
		t.Fatalf("no table known: %v", err)
	}
}

// TestStatusReportsTable: Status shows the table's OID and its current
// name once the replication layer has set them, and the source's
// database; the definition's name and zeros before.
func TestStatusReportsTable(t *testing.T) {
	ix := New()
	spec, _ := ParseSpec("e=docs(v) key=id metric=l2")
	e, _ := ix.Add(spec)
	if st := ix.Status()[0]; st.Table != "public.docs" || st.TableOID != 0 || st.Database != "" {
		t.Fatalf("before: table %q OID %d database %q, want public.docs, 0, empty", st.Table, st.TableOID, st.Database)
	}
	ix.SetSource(Source{SystemID: 7, Timeline: 1, Slot: "vecside", Database: "app"})
	e.Durable().SetTable(Table{OID: 16400, Schema: "public", Name: "docs"})
	if st := ix.Status()[0]; st.Table != "public.docs" || st.TableOID != 16400 {
		t.Fatalf("bound: table %q OID %d, want public.docs, 16400", st.Table, st.TableOID)
	}
	e.Durable().SetTable(Table{OID: 16400, Schema: "archive", Name: "old_docs"}) // renamed
	if st := ix.Status()[0]; st.Table != "archive.old_docs" || st.TableOID != 16400 || st.Database != "app" {
		t.Fatalf("after: table %q OID %d database %q, want archive.old_docs, 16400, app", st.Table, st.TableOID, st.Database)
	}
}

var nan32 = float32(math.NaN())

// TestIdlePositionCovers: with no change since the checkpoint, a newer
// applied position is recorded in the idle state file and becomes covered;
// after a change it no longer may.
func TestIdlePositionCovers(t *testing.T) {
	dir := t.TempDir()
	ix := New()
	spec, _ := ParseSpec("e=t(v) key=id metric=l2")
	e, _ := ix.Add(spec)
	e.Configure(pgvalue.KeyInt8, pgvalue.VectorFloat4Array, 0)
	e.Stream().Upsert(key(t, "1"), []float32{1, 2})
	e.SetReady()
	e.Stream().SetApplied(0x100)
	if ix.Covered() != 0 {
		t.Fatalf("covered %s before any checkpoint", ix.Covered())
	}
	if _, err := e.Durable().Checkpoint(dir, testSource); err != nil {
		t.Fatal(err)
	}
	e.Stream().SetApplied(0x200) // keepalives, other tables
	state := IdleState{}
	if err := ix.recordIdle(dir, state); err != nil {
		t.Fatal(err)
	}
	if ix.Covered() != 0x200 {
		t.Fatalf("covered %s, want 0/200 from the idle position", ix.Covered())
	}
	loaded := newTestEntry(t, "e=t(v) key=id metric=l2")
	if lsn, err := loaded.Durable().LoadCheckpoint(dir, testSource, ReadIdleState(dir)); err != nil || lsn != 0x200 {
		t.Fatalf("load with idle state: %s, %v; want 0/200", lsn, err)
	}
	e.Stream().Upsert(key(t, "2"), []float32{3, 4})
	e.Stream().SetApplied(0x300)
	if err := ix.recordIdle(dir, state); err != nil {
		t.Fatal(err)
	}
	if ix.Covered() != 0x200 {
		t.Fatalf("covered moved to %s past an unsaved change", ix.Covered())
	}
	other, _ := ix.Add(Spec{Name: "f", Schema: "public", Table: "u", Column: "v", Key: "id", Metric: spec.Metric, Kind: "flat"})
	if ix.Covered() != 0 {
		t.Fatal("an index with nothing durable must hold the covered LSN at 0")
	}
	other.Fail(errors.New("gone"))
	if ix.Covered() != 0x200 {
		t.Fatalf("an index in error still holds the covered LSN: %s", ix.Covered())
	}
}

func TestStatusReportsDurability(t *testing.T) {
	e := filledEntry(t)
	if _, err := e.Durable().Checkpoint(t.TempDir(), testSource); err != nil {
		t.Fatal(err)
	}
	st := e.Status()
	if st.Covered != 0x1000 || st.Checkpoints != 0 {
		// recordCheckpoint is the checkpointer's; Checkpoint alone covers.
		t.Fatalf("covered %s checkpoints %d, want 0/1000 and 0", st.Covered, st.Checkpoints)
	}
	e.Durable().recordCheckpoint(3*time.Millisecond, 9*time.Millisecond)
	if st := e.Status(); st.Checkpoints != 1 || st.CheckpointPause != 3*time.Millisecond || st.CheckpointTime != 9*time.Millisecond {
		t.Fatalf("status after a recorded checkpoint: %+v", st)
	}
	e.Copies().BeginSync(nil, 0)
	e.Copies().SetSyncPoint(0x2000)
	e.Copies().CopyUpsert(key(t, "7"), []float32{1, 1}, 0)
	e.Stream().Begin(0x2100)
	e.Stream().Delete(key(t, "8"))
	e.Copies().CopyUpsert(key(t, "8"), []float32{2, 2}, 0) // older than the delete: ignored
	e.Copies().EndSync()
	if st := e.Status(); st.CopiedRows != 2 || st.Rows != 1 || st.Applied != 0x2000 || st.Covered != 0 {
		t.Fatalf("after a sync: %+v", st)
	}
}
