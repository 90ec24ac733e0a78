package ivf

import (
	"bytes"
	"context"
	"fmt"
	"math"
	"slices"
	"sync"
	"testing"

	"github.com/vecside/vecside/flat"
	"github.com/vecside/vecside/internal/dataset"
	"github.com/vecside/vecside/kernels"
)

func keyOf(i int) string { return fmt.Sprint(i) }

func build(t testing.TB, cfg Config, data [][]float32) *Index {
	t.Helper()
	x, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	for i, v := range data {
		x.Put(keyOf(i), v)
	}
	x.Finish(new(sync.Mutex))
	return x
}

// recall is recall@k after an exact re-rank of the candidates (a row is a
// hit when its distance is within the true k-th), and the share of
// queries whose candidates lack a row strictly nearer than the true k-th.
func recall(t testing.TB, m kernels.Metric, data, queries [][]float32, truth []dataset.Truth, search func(q []float32) []flat.Hit) (rec, miss float64) {
	t.Helper()
	var hits, misses int
	k := len(truth[0].Rows)
	for qi, q := range queries {
		got := search(q)
		var ds []float64
		found := map[string]bool{}
		for _, h := range got {
			var i int
			fmt.Sscan(h.Key, &i)
			ds = append(ds, m.Distance(q, data[i]))
			found[h.Key] = true
		}
		slices.Sort(ds)
		for _, d := range ds[:min(k, len(ds))] {
			if d <= truth[qi].KthDistance()+1e-9 {
				hits++
			}
		}
		for i, row := range truth[qi].Rows {
			if truth[qi].Distances[i] < truth[qi].KthDistance() && !found[keyOf(row)] {
				misses++
				break
			}
		}
	}
	return float64(hits) / float64(k*len(queries)), float64(misses) / float64(len(queries))
}

// At default settings (store=float, default probes, a cap of k) the
// candidates hold the true top k in at least 99% of queries on clustered
// data; with ext8 codes a cap of 2k does the same.
func TestHoldsTopK(t *testing.T) {
	const k = 10
	for _, m := range []kernels.Metric{kernels.L2, kernels.Cosine, kernels.IP} {
		data, queries := dataset.Clustered{Seed: 2, Rows: 30000, Queries: 200, Dims: 64, Normalize: m == kernels.Cosine}.Generate()
		truth := dataset.GroundTruth(m, data, queries, k)
		for _, c := range []struct {
			store flat.Store
			limit int
		}{{flat.StoreFloat, k}, {flat.StoreExt8, 2 * k}} {
			x := build(t, Config{Metric: m, Dims: 64, Store: c.store, Seed: 1}, data)
			rec, miss := recall(t, m, data, queries, truth, func(q []float32) []flat.Hit {
				got, err := x.Search(context.Background(), q, k, c.limit, 0, nil)
				if err != nil {
					t.Fatal(err)
				}
				return got
			})
			t.Logf("%s store=%s lists=%d probes=%d: recall@%d %.4f, candidate set misses a true top-%d row in %.1f%% of queries",
				m, c.store, len(x.cur.Load().lists), x.defaultProbes(len(x.cur.Load().lists)), k, rec, k, 100*miss)
			if miss > 0.01 {
				t.Errorf("%s store=%s: miss rate %.3f, want ≤ 0.01", m, c.store, miss)
			}
		}
	}
}

// With many lists, the rows with the largest inner product sit at the
// edges of lists whose centroids are not the nearest to the query: probing
// must rank lists by what they can hold, not by their centroids.
func TestInnerProductProbing(t *testing.T) {
	const k = 10
	data, queries := dataset.Clustered{Seed: 5, Rows: 60000, Queries: 300, Dims: 96}.Generate()
	truth := dataset.GroundTruth(kernels.IP, data, queries, k)
	x := build(t, Config{Metric: kernels.IP, Dims: 96, Store: flat.StoreFloat, Seed: 1, Lists: 150}, data)
	rec, miss := recall(t, kernels.IP, data, queries, truth, func(q []float32) []flat.Hit {
		got, err := x.Search(context.Background(), q, k, k, 0, nil)
		if err != nil {
			t.Fatal(err)
		}
		return got
	})
	t.Logf("ip, 150 lists, probes %d: recall@%d %.4f, misses a true top-%d row in %.1f%% of queries", x.defaultProbes(150), k, rec, k, 100*miss)
	if miss > 0.02 {
		t.Errorf("miss rate %.3f, want ≤ 0.02", miss)
	}
}

func TestListsFor(t *testing.T) {
	prev := 0
	for n := 0; n <= 1<<27; n = n*2 + 1000 {
		l := ListsFor(n)
		if l < prev || l < 1 {
			t.Fatalf("ListsFor(%d) = %d after %d: not monotone", n, l, prev)
		}
		prev = l
	}
	for _, c := range []struct{ n, lo, hi int }{{60000, 55, 65}, {1000000, 900, 1050}, {100000000, 35000, 40000}} {
		if l := ListsFor(c.n); l < c.lo || l > c.hi {
			t.Errorf("ListsFor(%d) = %d, want %d..%d", c.n, l, c.lo, c.hi)
		}
	}
}

// Lists are capped: an index trained on one huge cluster and a few small
// ones splits the big one.
func TestSplitsOversizedLists(t *testing.T) {
	big, _ := dataset.Clustered{Seed: 9, Rows: 6000, Dims: 16, Clusters: 1}.Generate()
	small, _ := dataset.Clustered{Seed: 10, Rows: 600, Dims: 16, Clusters: 6}.Generate()
	x := build(t, Config{Metric: kernels.L2, Dims: 16, Store: flat.StoreFloat, Lists: 8, ListCap: 2}, append(big, small...))
	s := x.Stats()
	limit := int(math.Ceil(2 * 6600.0 / 8))
	if slices.Max(s.Lists) > limit {
		t.Fatalf("largest list %d, cap %d (%s)", slices.Max(s.Lists), limit, s.ListHistogram())
	}
}

func TestSnapshotLoad(t *testing.T) {
	data, queries := dataset.Clustered{Seed: 3, Rows: 5000, Queries: 20, Dims: 32, Normalize: true}.Generate()
	for _, store := range []flat.Store{flat.StoreFloat, flat.StoreExt4} {
		cfg := Config{Metric: kernels.Cosine, Dims: 32, Store: store, Seed: 5}
		x := build(t, cfg, data[:4000])
		for i := 4000; i < 5000; i++ {
			x.Put(keyOf(i), data[i])
		}
		x.Delete(keyOf(3))
		x.Put("zero", make([]float32, 32))
		write := x.Snapshot()
		x.Put("later", data[0])
		var buf bytes.Buffer
		if err := write(&buf); err != nil {
			t.Fatal(err)
		}
		y, err := Load(bytes.NewReader(buf.Bytes()), cfg)
		if err != nil {
			t.Fatal(err)
		}
		x.Delete("later")
		if y.Len() != x.Len() || y.Has(keyOf(3)) || !y.Has("zero") || y.Has("later") {
			t.Fatalf("loaded %d rows, want %d", y.Len(), x.Len())
		}
		for _, q := range queries {
			a, _ := x.Search(context.Background(), q, 10, 20, 3, nil)
			b, _ := y.Search(context.Background(), q, 10, 20, 3, nil)
			if !slices.Equal(a, b) {
				t.Fatalf("store=%s: loaded index answers %v, original %v", store, b, a)
			}
		}
		for _, cut := range []int{5, buf.Len() / 2, buf.Len() - 1} {
			if _, err := Load(bytes.NewReader(buf.Bytes()[:cut]), cfg); err == nil {
				t.Errorf("body cut at %d accepted", cut)
			}
		}
	}
}

// Before Finish, and while an empty index waits for MinTrain rows, rows
// are pending and searched exactly.
func TestPendingThenBackgroundTraining(t *testing.T) {
	data, _ := dataset.Clustered{Seed: 4, Rows: 3000, Dims: 8}.Generate()
	x, _ := New(Config{Metric: kernels.L2, Dims: 8, Store: flat.StoreExt8, MinTrain: 1000})
	x.Finish(new(sync.Mutex)) // an empty table: nothing to train on
	for i, v := range data {
		x.Put(keyOf(i), v)
		if i == 10 {
			got, _ := x.Search(context.Background(), data[5], 1, 1, 0, nil)
			if len(got) != 1 || got[0].Key != keyOf(5) || got[0].Distance != 0 {
				t.Fatalf("pending search: %v", got)
			}
		}
	}
	waitRetrains(t, x, 1)
	if s := x.Stats(); s.Pending != 0 || len(s.Lists) == 0 || s.Rows != 3000 {
		t.Fatalf("after background training: %+v", s)
	}
}

func waitRetrains(t *testing.T, x *Index, n int64) {
	t.Helper()
	for i := 0; x.retrains.Load() < n || x.retraining.Load(); i++ {
		if i > 3000 {
			t.Fatalf("%d retrains, want %d", x.retrains.Load(), n)
		}
		sleep()
	}
}

// Streamed changes trigger retrains, which swap in while searches and
// writes go on (run with -race): no search fails or sees a broken index,
// nothing is lost, and recall stays near a fresh build's.
func TestRetrainUnderLoad(t *testing.T) {
	const k = 10
	data, queries := dataset.Clustered{Seed: 5, Rows: 24000, Queries: 100, Dims: 32}.Generate()
	cfg := Config{Metric: kernels.L2, Dims: 32, Store: flat.StoreFloat, Growth: 1.3, MaxDead: 0.1}
	x := build(t, cfg, data[:10000])
	var mu sync.RWMutex // the Entry's lock
	stop := make(chan struct{})
	var wg sync.WaitGroup
	errs := make(chan error, 4)
	for range 2 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				mu.RLock()
				got, err := x.Search(context.Background(), queries[i%len(queries)], k, k, 0, nil)
				mu.RUnlock()
				if err != nil || len(got) == 0 {
					errs <- fmt.Errorf("search: %v, %d hits", err, len(got))
					return
				}
			}
		}()
	}
	// 14,000 inserts and 5,000 deletes, as replication would apply them.
	for i := 10000; i < 24000; i++ {
		mu.Lock()
		x.Put(keyOf(i), data[i])
		if i%3 == 0 {
			x.Delete(keyOf(i - 10000))
		}
		mu.Unlock()
	}
	waitRetrains(t, x, 1)
	close(stop)
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	var live [][]float32
	var liveKeys []int
	for i := range data {
		if !(i < 14000 && (i+10000)%3 == 0) {
			live, liveKeys = append(live, data[i]), append(liveKeys, i)
		}
	}
	if x.Len() != len(live) {
		t.Fatalf("len %d, want %d", x.Len(), len(live))
	}
	truth := dataset.GroundTruth(kernels.L2, live, queries, k)
	for i := range truth {
		for j, r := range truth[i].Rows {
			truth[i].Rows[j] = liveKeys[r]
		}
	}
	search := func(x *Index) func(q []float32) []flat.Hit {
		return func(q []float32) []flat.Hit {
			got, _ := x.Search(context.Background(), q, k, k, 0, nil)
			return got
		}
	}
	got, _ := recall(t, kernels.L2, data, queries, truth, search(x))
	fresh := build(t, cfg, nil)
	for i, r := range liveKeys {
		fresh.Put(keyOf(r), live[i])
	}
	fresh.Finish(new(sync.Mutex))
	want, _ := recall(t, kernels.L2, data, queries, truth, search(fresh))
	t.Logf("after %d retrains: recall@%d %.4f, fresh build %.4f (%s)", x.retrains.Load(), k, got, want, x.Stats().ListHistogram())
	if got < want-0.01 {
		t.Errorf("recall %.4f after changes, fresh build %.4f", got, want)
	}
}

func TestFilter(t *testing.T) {
	data, queries := dataset.Clustered{Seed: 6, Rows: 20000, Queries: 20, Dims: 16}.Generate()
	x := build(t, Config{Metric: kernels.L2, Dims: 16, Store: flat.StoreExt8}, data)
	for _, every := range []int{2, 101} {
		var keys []string
		var vecs [][]float32
		for i := 0; i < len(data); i += every {
			keys, vecs = append(keys, keyOf(i)), append(vecs, data[i])
		}
		f := x.Filter(keys)
		truth := dataset.GroundTruth(kernels.L2, vecs, queries, 1)
		for qi, q := range queries {
			got, _ := x.Search(context.Background(), q, 5, 10, 0, f)
			for _, h := range got {
				var i int
				fmt.Sscan(h.Key, &i)
				if i%every != 0 {
					t.Fatalf("every=%d: disallowed row %s returned", every, h.Key)
				}
			}
			if !slices.ContainsFunc(got, func(h flat.Hit) bool { return h.Key == keys[truth[qi].Rows[0]] }) {
				t.Errorf("every=%d query %d: nearest allowed row missing", every, qi)
			}
		}
	}
}
