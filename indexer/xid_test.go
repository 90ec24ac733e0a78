package indexer

import (
	"context"
	"encoding/binary"
	"hash/crc32"
	"os"
	"slices"
	"strings"
	"testing"
)

// xids returns each hit's xid by key, for every kind of index.
func xids(t *testing.T, e *Entry) map[string]uint32 {
	t.Helper()
	hits, err := e.Search(context.Background(), []float32{0, 0}, 100, DefaultSearchOptions())
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]uint32{}
	for _, h := range hits {
		out[h.Key] = h.XID
	}
	return out
}

// xidKinds are index definitions of every kind that keeps float32 rows,
// and one that keeps codes only.
var xidKinds = []string{
	"e=t(v) key=id metric=l2",
	"e=t(v) key=id metric=l2 kind=ivf store=float lists=1",
	"e=t(v) key=id metric=l2 kind=hnsw store=float",
	"e=t(v) key=id metric=l2 kind=flat store=ext8",
}

func TestXIDsPublishedAtCommit(t *testing.T) {
	for _, def := range xidKinds {
		t.Run(def, func(t *testing.T) {
			e := newTestEntry(t, def)
			a, b, c := key(t, "1"), key(t, "2"), key(t, "3")
			e.Stream().BeginTx(0x100, 70)
			e.Stream().Upsert(a, []float32{1, 0})
			e.Stream().Upsert(b, []float32{0, 1})
			e.Stream().Commit(0x101)
			e.SetReady()
			if got := xids(t, e); got[a] != 70 || got[b] != 70 {
				t.Fatalf("after the commit: %v, want 70 for both", got)
			}

			e.Stream().BeginTx(0x200, 71)
			e.Stream().Upsert(a, []float32{2, 0})
			if got := xids(t, e); got[a] != 0 || got[b] != 70 {
				t.Fatalf("a written by an open transaction: %v, want 0 and 70", got)
			}
			e.Stream().Upsert(a, []float32{3, 0})
			e.Stream().Unchanged(b)
			e.Stream().Move(b, c)
			if got := xids(t, e); got[a] != 0 || got[c] != 0 {
				t.Fatalf("before the commit: %v, want none", got)
			}
			e.Stream().Commit(0x201)
			if got := xids(t, e); got[a] != 71 || got[c] != 71 {
				t.Fatalf("after the commit: %v, want 71 for both", got)
			}

			// A row whose xid is unknown does not get one from an update
			// that leaves its vector alone.
			e.Stream().BeginTx(0x300, 72)
			e.Stream().Upsert(b, []float32{5, 5})
			e.Stream().Commit(0x301)
			e.Stream().BeginTx(0x400, 0) // no xid known: the row's is dropped
			e.Stream().Upsert(b, []float32{6, 6})
			e.Stream().Commit(0x401)
			e.Stream().BeginTx(0x500, 73)
			e.Stream().Unchanged(b)
			e.Stream().Commit(0x501)
			if got := xids(t, e); got[b] != 0 {
				t.Fatalf("unchanged row of unknown xid: %v, want none", got)
			}
		})
	}
}

func TestReadXIDWaitsForTheStream(t *testing.T) {
	e := newTestEntry(t, "e=t(v) key=id metric=l2")
	a, b := key(t, "1"), key(t, "2")
	e.SetReady()
	e.Stream().SetApplied(0x100)
	e.Stream().UpsertRead(a, []float32{1, 0}, 50, 0x300)
	e.Stream().UpsertRead(b, []float32{0, 1}, 51, 0x300)
	e.Stream().SetApplied(0x2ff)
	if got := xids(t, e); got[a] != 0 || got[b] != 0 {
		t.Fatalf("before the stream reached the reads: %v, want none", got)
	}
	// An older transaction changes b meanwhile: the read's xmin must not
	// land on its row.
	e.Stream().BeginTx(0x2ff, 40)
	e.Stream().Upsert(b, []float32{0, 2})
	e.Stream().Commit(0x300)
	if got := xids(t, e); got[a] != 50 || got[b] != 40 {
		t.Fatalf("once the stream reached the reads: %v, want 50 and 40", got)
	}
}

func TestCheckpointKeepsXIDs(t *testing.T) {
	dir := t.TempDir()
	e := newTestEntry(t, "e=t(v) key=id metric=l2")
	a, b := key(t, "1"), key(t, "2")
	e.Stream().BeginTx(0x100, 70)
	e.Stream().Upsert(a, []float32{1, 0})
	e.Stream().Commit(0x101)
	e.Stream().BeginTx(0x200, 71)
	e.Stream().Upsert(b, []float32{0, 1})
	e.SetReady()
	if _, err := e.Durable().Checkpoint(dir, testSource); err != nil {
		t.Fatal(err)
	}
	e.Stream().Commit(0x201)
	loaded := newTestEntry(t, "e=t(v) key=id metric=l2")
	if _, err := loaded.Durable().LoadCheckpoint(dir, testSource, nil); err != nil {
		t.Fatal(err)
	}
	if got := xids(t, loaded); got[a] != 70 || got[b] != 0 || len(got) != 2 {
		t.Fatalf("loaded %v, want 70 for a and none for b (its transaction was open)", got)
	}
}

// TestXIDSource: a search expecting another source than the indexer's
// returns no xids, and forgetting them clears every row's.
func TestXIDSource(t *testing.T) {
	ix := New()
	spec, err := ParseSpec("e=t(v) key=id metric=l2")
	if err != nil {
		t.Fatal(err)
	}
	e, err := ix.Add(spec)
	if err != nil {
		t.Fatal(err)
	}
	e.Stream().BeginTx(0x100, 70)
	e.Stream().Upsert(key(t, "1"), []float32{1, 0})
	e.Stream().Commit(0x101)
	e.SetReady()
	ix.SetSource(Source{SystemID: 7, Timeline: 2})
	search := func(want Source) uint32 {
		opts := DefaultSearchOptions()
		opts.XIDSource = &want
		res, err := ix.Search(context.Background(), "e", []float32{0, 0}, 1, opts)
		if err != nil || len(res.Hits) != 1 {
			t.Fatalf("%v, %v", res, err)
		}
		return res.Hits[0].XID
	}
	if got := search(Source{SystemID: 7, Timeline: 2}); got != 70 {
		t.Fatalf("same source: xid %d, want 70", got)
	}
	if got := search(Source{SystemID: 7, Timeline: 3}); got != 0 {
		t.Fatalf("another timeline: xid %d, want none", got)
	}
	e.Stream().ForgetAllXIDs()
	if got := search(Source{SystemID: 7, Timeline: 2}); got != 0 {
		t.Fatalf("forgotten: xid %d, want none", got)
	}
}

// TestOlderCheckpointsRefused: checkpoints of the formats before the
// table's OID was recorded (2: before xids, 3: before the recall
// calibration, 4: before the OID) are refused, whole, with a message that
// says why, so that the table is copied again: such a file cannot show
// that it is of the table now under its name. A format from the future is
// refused too.
func TestOlderCheckpointsRefused(t *testing.T) {
	dir := t.TempDir()
	e := newTestEntry(t, "e=t(v) key=id metric=l2")
	e.Durable().SetTable(Table{OID: 16400, Schema: "public", Name: "t"})
	e.Stream().Upsert(key(t, "1"), []float32{1, 0})
	e.SetReady()
	if _, err := e.Durable().Checkpoint(dir, testSource); err != nil {
		t.Fatal(err)
	}
	path := e.Durable().CheckpointPath(dir)
	current, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if v := binary.LittleEndian.Uint16(current[8:]); v != checkpointVersion {
		t.Fatalf("checkpoint written in format %d, want %d", v, checkpointVersion)
	}
	// The version only, and the checksum again: older loaders read the
	// header's JSON without the new fields, and refusal comes before the
	// body is parsed.
	withVersion := func(v uint16) []byte {
		b := slices.Clone(current)
		binary.LittleEndian.PutUint16(b[8:], v)
		binary.LittleEndian.PutUint32(b[len(b)-4:], crc32.Checksum(b[:len(b)-4], castagnoli))
		return b
	}
	for _, format := range []uint16{4, 3, 2, 9} {
		if err := os.WriteFile(path, withVersion(format), 0o600); err != nil {
			t.Fatal(err)
		}
		loaded := newTestEntry(t, "e=t(v) key=id metric=l2")
		loaded.Durable().SetTable(Table{OID: 16400, Schema: "public", Name: "t"})
		_, err := loaded.Durable().LoadCheckpoint(dir, testSource, nil)
		if err == nil {
			t.Fatalf("format %d loaded", format)
		}
		if format < tableOIDCheckpoint && !strings.Contains(err.Error(), "does not record the table's OID") {
			t.Errorf("format %d refused with %q, want it to say the OID is missing", format, err)
		}
		if st := loaded.Status(); st.Rows != 0 || st.State != StateBuilding {
			t.Errorf("format %d: a refused checkpoint changed the entry: %+v", format, st)
		}
	}
}
