package flat

import (
	"bytes"
	"context"
	"slices"
	"strconv"
	"testing"

	"github.com/vecside/vecside/indexer/dataset"
	"github.com/vecside/vecside/indexer/store"
	"github.com/vecside/vecside/kernels"
)

func buildCoded(t testing.TB, m kernels.Metric, dims int, kind store.Kind, data [][]float32) *Coded {
	t.Helper()
	x, err := NewCoded(store.CodedConfig{Metric: m, Dims: dims, Store: kind, Seed: 11}, data)
	if err != nil {
		t.Fatal(err)
	}
	for i, v := range data {
		x.Put(keyOf(i), v)
	}
	return x
}

// missRate is the share of queries whose candidates lack a row strictly
// nearer than the true k-th (a tie at the k-th distance is no miss).
func missRate(t testing.TB, truth []dataset.Truth, search func(qi int) []Hit) (miss, meanCands float64) {
	t.Helper()
	var misses, cands int
	for qi, tr := range truth {
		got := search(qi)
		cands += len(got)
		for i, row := range tr.Rows {
			if tr.Distances[i] < tr.KthDistance() && !slices.ContainsFunc(got, func(h Hit) bool { return h.Key == keyOf(row) }) {
				misses++
				break
			}
		}
	}
	return float64(misses) / float64(len(truth)), float64(cands) / float64(len(truth))
}

// At the default cap of 2k, the ext8 candidates hold the true top k in at
// least 99% of queries on clustered data, for every metric.
func TestCodedHoldsTopK(t *testing.T) {
	const k = 10
	for _, m := range metrics {
		data, queries := dataset.Clustered{Seed: 5, Rows: 20000, Queries: 200, Dims: 64, Normalize: m == kernels.Cosine}.Generate()
		truth := dataset.GroundTruth(m, data, queries, k)
		x := buildCoded(t, m, 64, store.Ext8, data)
		miss, cands := missRate(t, truth, func(qi int) []Hit {
			got, err := x.Search(context.Background(), queries[qi], k, 2*k, nil)
			if err != nil {
				t.Fatal(err)
			}
			return got
		})
		t.Logf("%s ext8: candidate set misses a true top-%d row in %.1f%% of queries, %.1f candidates on average", m, k, 100*miss, cands)
		if miss > 0.01 || cands > 2*k {
			t.Errorf("%s: miss rate %.3f (want ≤ 0.01), %.1f candidates (want ≤ %d)", m, miss, cands, 2*k)
		}
	}
}

func TestCodedChanges(t *testing.T) {
	data, queries := dataset.Clustered{Seed: 6, Rows: 3000, Queries: 10, Dims: 32}.Generate()
	x := buildCoded(t, kernels.L2, 32, store.Ext8, data)
	// Delete most rows, rename some, replace some.
	for i := range 2500 {
		if !x.Delete(keyOf(i)) {
			t.Fatalf("delete %d", i)
		}
	}
	for i := 2500; i < 2600; i++ {
		x.Rename(keyOf(i), "r"+keyOf(i))
	}
	x.Put(keyOf(2999), data[0])
	x.Put("zero", make([]float32, 32)) // not a zero vector under L2
	live := map[string][]float32{"zero": make([]float32, 32)}
	for i := 2500; i < 3000; i++ {
		k := keyOf(i)
		if i < 2600 {
			k = "r" + k
		}
		live[k] = data[i]
	}
	live[keyOf(2999)] = data[0]
	if x.Len() != len(live) {
		t.Fatalf("len %d, want %d", x.Len(), len(live))
	}
	var keys []string
	var vecs [][]float32
	for k, v := range live {
		keys, vecs = append(keys, k), append(vecs, v)
	}
	truth := dataset.GroundTruth(kernels.L2, vecs, queries, 5)
	for qi, q := range queries {
		got, _ := x.Search(context.Background(), q, 5, 10, nil)
		if !slices.ContainsFunc(got, func(h Hit) bool { return h.Key == keys[truth[qi].Rows[0]] }) {
			t.Fatalf("query %d: nearest %s missing from %v", qi, keys[truth[qi].Rows[0]], got)
		}
	}
	x.Clear()
	if x.Len() != 0 {
		t.Fatal("clear left rows")
	}
	x.Put("a", data[0])
	if got, _ := x.Search(context.Background(), data[0], 1, 1, nil); len(got) != 1 || got[0].Key != "a" {
		t.Fatalf("after clear: %v", got)
	}
}

func TestCodedCosineZeroVectors(t *testing.T) {
	x := buildCoded(t, kernels.Cosine, 4, store.Ext4, [][]float32{{1, 0, 0, 0}, {0, 0, 0, 0}})
	x.Put("z", make([]float32, 4))
	if x.ZeroVectors() != 2 || x.Len() != 3 || !x.Has("z") {
		t.Fatalf("zeros %d len %d", x.ZeroVectors(), x.Len())
	}
	got, _ := x.Search(context.Background(), []float32{1, 1, 0, 0}, 5, 5, nil)
	if len(got) != 1 || got[0].Key != "0" {
		t.Fatalf("got %v", got)
	}
	if got, _ := x.Search(context.Background(), make([]float32, 4), 5, 5, nil); got != nil {
		t.Fatalf("zero query: %v", got)
	}
}

func TestCodedSnapshotLoad(t *testing.T) {
	data, queries := dataset.Clustered{Seed: 7, Rows: 2000, Queries: 20, Dims: 40, Normalize: true}.Generate()
	cfg := store.CodedConfig{Metric: kernels.Cosine, Dims: 40, Store: store.Ext4, Seed: 3}
	x, _ := NewCoded(cfg, data)
	for i, v := range data {
		x.Put(keyOf(i), v)
	}
	x.Put("zero", make([]float32, 40))
	x.Delete(keyOf(7))
	write, release := x.Snapshot()
	x.Put("later", data[1])
	var buf bytes.Buffer
	if err := write(&buf); err != nil {
		t.Fatal(err)
	}
	release()
	y, err := LoadCoded(bytes.NewReader(buf.Bytes()), cfg)
	if err != nil {
		t.Fatal(err)
	}
	x.Delete("later")
	if y.Len() != x.Len() || y.ZeroVectors() != 1 || y.Has(keyOf(7)) {
		t.Fatalf("loaded %d rows (want %d)", y.Len(), x.Len())
	}
	for _, q := range queries {
		a, _ := x.Search(context.Background(), q, 10, 20, nil)
		b, _ := y.Search(context.Background(), q, 10, 20, nil)
		if !slices.Equal(a, b) {
			t.Fatalf("loaded index answers %v, original %v", b, a)
		}
	}
	for _, cut := range []int{3, len(buf.Bytes()) / 2, len(buf.Bytes()) - 1} {
		if _, err := LoadCoded(bytes.NewReader(buf.Bytes()[:cut]), cfg); err == nil {
			t.Errorf("body cut at %d accepted", cut)
		}
	}
	l2 := cfg
	l2.Metric = kernels.L2
	if _, err := LoadCoded(bytes.NewReader(buf.Bytes()), l2); err == nil {
		t.Error("body loaded under another metric")
	}
}

// A filtered search returns allowed rows only, and the nearest of them,
// both through the fast scan (a broad filter) and row by row (a narrow
// one).
func TestCodedFilter(t *testing.T) {
	data, queries := dataset.Clustered{Seed: 8, Rows: 10000, Queries: 20, Dims: 32}.Generate()
	x := buildCoded(t, kernels.L2, 32, store.Ext8, data)
	for _, every := range []int{3, 97} { // a third of the rows; about 1%
		var keys []string
		var vecs [][]float32
		for i := 0; i < len(data); i += every {
			keys, vecs = append(keys, keyOf(i)), append(vecs, data[i])
		}
		allow, release := x.Allow(keys)
		defer release()
		truth := dataset.GroundTruth(kernels.L2, vecs, queries, 1)
		for qi, q := range queries {
			got, _ := x.Search(context.Background(), q, 5, 10, allow)
			for _, h := range got {
				if i, _ := strconv.Atoi(h.Key); i%every != 0 {
					t.Fatalf("every=%d: disallowed row %s returned", every, h.Key)
				}
			}
			if len(got) == 0 || got[0].Key != keys[truth[qi].Rows[0]] && !slices.ContainsFunc(got, func(h Hit) bool { return h.Key == keys[truth[qi].Rows[0]] }) {
				t.Fatalf("every=%d query %d: nearest allowed row %s missing from %v", every, qi, keys[truth[qi].Rows[0]], got)
			}
		}
	}
}

func BenchmarkCodedSearch(b *testing.B) {
	data, queries := dataset.Clustered{Seed: 1, Rows: 100000, Queries: 100, Dims: 128, Normalize: true}.Generate()
	for _, kind := range []store.Kind{store.Ext4, store.Ext8} {
		x := buildCoded(b, kernels.Cosine, 128, kind, data)
		b.Run(kind.String(), func(b *testing.B) {
			b.ReportAllocs()
			for i := 0; b.Loop(); i++ {
				x.Search(context.Background(), queries[i%len(queries)], 10, 20, nil)
			}
		})
	}
	f := New(kernels.Cosine, 128, 0)
	for i, v := range data {
		f.Put(keyOf(i), v)
	}
	b.Run("float", func(b *testing.B) {
		for i := 0; b.Loop(); i++ {
			f.Search(context.Background(), queries[i%len(queries)], 10, nil)
		}
	})
}
