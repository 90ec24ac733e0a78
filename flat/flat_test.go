package flat

import (
	"bytes"
	"context"
	"fmt"
	"math"
	"slices"
	"testing"

	"github.com/vecside/vecside/indexer/dataset"
	"github.com/vecside/vecside/kernels"
)

var metrics = []kernels.Metric{kernels.L2, kernels.Cosine, kernels.IP}

// keyOf names row i of a data set.
func keyOf(i int) string { return fmt.Sprint(i) }

func TestFloatExactAgainstBruteForce(t *testing.T) {
	data, queries := dataset.Clustered{Seed: 3, Rows: 3000, Queries: 20, Dims: 24}.Generate()
	for _, m := range metrics {
		x := New(m, 24, 0)
		for i, v := range data {
			x.Put(keyOf(i), v)
		}
		truth := dataset.GroundTruth(m, data, queries, 10)
		for qi, q := range queries {
			got, err := x.Search(context.Background(), q, 10, nil)
			if err != nil {
				t.Fatal(err)
			}
			for i, h := range got {
				if h.Key != keyOf(truth[qi].Rows[i]) && math.Abs(h.Distance-truth[qi].Distances[i]) > 1e-9 {
					t.Fatalf("%s query %d rank %d: got %s at %g, want %d at %g", m, qi, i, h.Key, h.Distance, truth[qi].Rows[i], truth[qi].Distances[i])
				}
				if want := m.Distance(q, data[truth[qi].Rows[i]]); math.Abs(h.Distance-want) > 1e-9 {
					t.Fatalf("%s: distance %g, want %g", m, h.Distance, want)
				}
			}
		}
	}
}

func TestFloatDeleteRenameClear(t *testing.T) {
	x := New(kernels.L2, 2, 0)
	x.Put("a", []float32{0, 0})
	x.Put("b", []float32{1, 0})
	x.Put("c", []float32{2, 0})
	x.Put("b", []float32{5, 0}) // replace
	if !x.Delete("a") || x.Delete("a") || x.Len() != 2 {
		t.Fatalf("delete: len %d", x.Len())
	}
	if !x.Rename("c", "b") || x.Has("c") || x.Len() != 1 {
		t.Fatalf("rename over an existing key: len %d", x.Len())
	}
	if v, ok := x.Vector("b"); !ok || !slices.Equal(v, []float32{2, 0}) {
		t.Fatalf("b after rename: %v %v", v, ok)
	}
	if x.Rename("zz", "y") {
		t.Error("renamed a missing key")
	}
	got, _ := x.Search(context.Background(), []float32{0, 0}, 5, nil)
	if len(got) != 1 || got[0].Key != "b" || got[0].Distance != 2 {
		t.Fatalf("search after changes: %+v", got)
	}
	x.Clear()
	if x.Len() != 0 || x.Has("b") {
		t.Fatal("clear left entries")
	}
}

func TestFloatCosineZeroVectors(t *testing.T) {
	x := New(kernels.Cosine, 2, 0)
	x.Put("zero", []float32{0, 0})
	x.Put("one", []float32{1, 0})
	if x.ZeroVectors() != 1 || x.Len() != 2 {
		t.Fatalf("zeros %d len %d", x.ZeroVectors(), x.Len())
	}
	got, _ := x.Search(context.Background(), []float32{1, 1}, 5, nil)
	if len(got) != 1 || got[0].Key != "one" {
		t.Fatalf("zero vector returned: %+v", got)
	}
	if got, _ := x.Search(context.Background(), []float32{0, 0}, 5, nil); len(got) != 0 {
		t.Fatalf("zero query returned %+v", got)
	}
	x.Put("zero", []float32{0, 1})
	if x.ZeroVectors() != 0 {
		t.Fatal("replacing a zero vector kept it counted")
	}
}

func TestFloatSnapshotLoad(t *testing.T) {
	data, queries := dataset.Clustered{Seed: 4, Rows: 500, Queries: 5, Dims: 8}.Generate()
	x := New(kernels.Cosine, 8, 0)
	for i, v := range data {
		x.Put(keyOf(i), v)
	}
	write, release := x.Snapshot()
	x.Put("later", data[0]) // after the snapshot: not in it
	var buf bytes.Buffer
	if err := write(&buf); err != nil {
		t.Fatal(err)
	}
	release()
	y, err := Load(&buf, kernels.Cosine, 8, 0)
	if err != nil {
		t.Fatal(err)
	}
	if y.Len() != len(data) || y.Has("later") {
		t.Fatalf("loaded %d rows", y.Len())
	}
	x.Delete("later")
	for _, q := range queries {
		a, _ := x.Search(context.Background(), q, 10, nil)
		b, _ := y.Search(context.Background(), q, 10, nil)
		if !slices.Equal(a, b) {
			t.Fatalf("loaded index answers %v, original %v", b, a)
		}
	}
	if _, err := Load(bytes.NewReader([]byte{5, 1}), kernels.Cosine, 8, 0); err == nil {
		t.Error("truncated body accepted")
	}
}

// TestSnapshotIsolatedFromLaterChanges: a snapshot taken before updates,
// deletes and inserts (which reuse the ids of removed rows once no reader
// needs them, and fill and start chunks) still writes the index as it
// was.
func TestSnapshotIsolatedFromLaterChanges(t *testing.T) {
	const dims = 4
	data, _ := dataset.Clustered{Seed: 9, Rows: 3*1024 + 17, Dims: dims}.Generate()
	x := New(kernels.L2, dims, 0)
	for i, v := range data {
		x.Put(keyOf(i), v)
	}
	want := map[string][]float32{}
	x.Each(func(k string, v []float32) { want[k] = slices.Clone(v) })
	write, release := x.Snapshot()
	defer release()
	for i := 0; i < len(data); i += 3 {
		x.Put(keyOf(i), []float32{-1, -1, -1, -1})
	}
	for i := 1; i < len(data); i += 5 {
		x.Delete(keyOf(i))
	}
	for i := 0; i < 2*1024; i++ {
		x.Put(fmt.Sprint("new", i), data[i])
	}
	var buf bytes.Buffer
	if err := write(&buf); err != nil {
		t.Fatal(err)
	}
	y, err := Load(&buf, kernels.L2, dims, 0)
	if err != nil {
		t.Fatal(err)
	}
	got := map[string][]float32{}
	y.Each(func(k string, v []float32) { got[k] = slices.Clone(v) })
	if len(got) != len(want) {
		t.Fatalf("snapshot holds %d rows, want %d", len(got), len(want))
	}
	for k, v := range want {
		if !slices.Equal(got[k], v) {
			t.Fatalf("row %s: snapshot has %v, want %v", k, got[k], v)
		}
	}
}
