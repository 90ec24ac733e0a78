package lists

import (
	"bytes"
	"cmp"
	"context"
	"encoding/binary"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/vecside/vecside/indexer/store"
	"github.com/vecside/vecside/kernels"
)

func intKey(i int) string { return string(binary.BigEndian.AppendUint64(nil, uint64(i))) }

// oneHot is a vector that no other row shares, so a search for it has one
// right answer at distance 0.
func oneHot(dims, i int) []float32 {
	v := make([]float32, dims)
	v[i%dims] = 1 + float32(i/dims)
	return v
}

// Writers insert, update and delete while readers search (run it with
// -race). Each row's key never changes its vector, so a hit pairing a key
// with another row's distance (an id reused too early) is caught, and so
// is a key returned after it was deleted before the search began.
func TestCodedRowsUnderConcurrentChanges(t *testing.T) {
	const dims, keys = 16, 2000
	for _, kind := range []store.Kind{store.Float, store.Ext8} {
		x, err := NewCoded(store.CodedConfig{Metric: kernels.L2, Dims: dims, Store: kind, Seed: 1, KeyWidth: 8}, nil)
		if err != nil {
			t.Fatal(err)
		}
		vec := func(i int) []float32 { return oneHot(dims, i) }
		var gone sync.Map // key index → deleted for good
		var inserted atomic.Int64
		stop := make(chan struct{})
		var readers sync.WaitGroup
		var bad atomic.Value
		for r := range 3 {
			readers.Go(func() {
				rng := rand.New(rand.NewPCG(uint64(r), 9))
				for {
					select {
					case <-stop:
						return
					default:
					}
					i := rng.IntN(max(1, int(inserted.Load())))
					_, deleted := gone.Load(i)
					hits, err := x.Search(context.Background(), vec(i), 1, 4, Probe{Order: func(_ []float32, d []int) []int { return append(d, 0) }}, nil)
					if err != nil {
						bad.Store(err)
						return
					}
					for _, h := range hits {
						j := int(binary.BigEndian.Uint64([]byte(h.Key)))
						if deleted && j == i {
							bad.Store(fmt.Errorf("key %d returned after its delete", i))
						}
						if want := math.Sqrt(float64(kernels.L2Sq(vec(i), vec(j)))); kind == store.Float && math.Abs(h.Distance-want) > 1e-4 {
							bad.Store(fmt.Errorf("key %d returned at %g, its vector is at %g", j, h.Distance, want))
						}
					}
				}
			})
		}
		rng := rand.New(rand.NewPCG(3, 4))
		for i := range keys {
			x.Put(intKey(i), vec(i))
			inserted.Store(int64(i + 1))
			if i > 100 && rng.IntN(2) == 0 {
				j := rng.IntN(i)
				if _, dup := gone.Load(j); !dup {
					x.Delete(intKey(j))
					gone.Store(j, true) // searches from now on must not see it
				}
			}
			if rng.IntN(4) == 0 { // an update: a new row for the same vector
				x.Put(intKey(i), vec(i))
			}
		}
		close(stop)
		readers.Wait()
		if err := bad.Load(); err != nil {
			t.Fatalf("store=%s: %v", kind, err)
		}
		n := 0
		gone.Range(func(any, any) bool { n++; return true })
		if x.Len() != keys-n {
			t.Fatalf("store=%s: %d rows, want %d", kind, x.Len(), keys-n)
		}
	}
}

// A snapshot written while writers go on (deleting, updating, inserting,
// reusing the ids of removed rows) holds exactly the rows of the moment it
// was taken.
func TestCodedSnapshotBesideWriters(t *testing.T) {
	const dims = 8
	cfg := store.CodedConfig{Metric: kernels.L2, Dims: dims, Store: store.Float, Seed: 2, KeyWidth: 8}
	x, _ := NewCoded(cfg, nil)
	for i := range 2000 {
		x.Put(intKey(i), oneHot(dims, i))
	}
	want := map[string]bool{}
	x.Each(func(k string) { want[k] = true })
	write, release := x.Snapshot()
	done := make(chan struct{})
	go func() {
		defer close(done)
		for i := range 2000 {
			x.Delete(intKey(i))
			x.Put(intKey(10000+i), oneHot(dims, 10000+i))
		}
	}()
	var buf bytes.Buffer
	if err := write(&buf); err != nil {
		t.Fatal(err)
	}
	release()
	<-done
	y, err := LoadCoded(&buf, cfg)
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]bool{}
	y.Each(func(k string) { got[k] = true })
	if len(got) != len(want) {
		t.Fatalf("snapshot holds %d rows, want %d", len(got), len(want))
	}
	for k := range want {
		if !got[k] {
			t.Fatalf("row %x missing from the snapshot", k)
		}
	}
	for i := 0; i < 2000; i += 37 {
		hits, _ := y.Search(context.Background(), oneHot(dims, i), 1, 2, Probe{Order: func(_ []float32, d []int) []int { return append(d, 0) }}, nil)
		if len(hits) == 0 || hits[0].Key != intKey(i) {
			t.Fatalf("row %d of the snapshot is not nearest to its own vector: %v", i, hits)
		}
	}
}

// store=float answers from exact distances, after a middle pass over the
// 4-bit codes (floatExBits) that only skips rows too far to matter: every
// distance returned is the exact one, and the exact top 10 come back.
func TestCodedFloatExactAfterMiddlePass(t *testing.T) {
	const dims, rows, queries, k = 64, 3000, 50, 10
	rng := rand.New(rand.NewPCG(3, 4))
	vec := func() []float32 {
		v := make([]float32, dims)
		for j := range v {
			v[j] = float32(rng.NormFloat64())
		}
		return v
	}
	x, err := NewCoded(store.CodedConfig{Metric: kernels.L2, Dims: dims, Store: store.Float, Seed: 1, KeyWidth: 8}, nil)
	if err != nil {
		t.Fatal(err)
	}
	data := make([][]float32, rows)
	for i := range data {
		data[i] = vec()
		x.Put(intKey(i), data[i])
	}
	one := Probe{Order: func(_ []float32, d []int) []int { return append(d, 0) }}
	found, total := 0, 0
	for range queries {
		q := vec()
		exact := make([]float64, rows)
		order := make([]int, rows)
		for i, v := range data {
			exact[i], order[i] = kernels.ExactDistance(kernels.L2, q, v), i
		}
		slices.SortFunc(order, func(a, b int) int { return cmp.Compare(exact[a], exact[b]) })
		hits, err := x.Search(context.Background(), q, k, k, one, nil)
		if err != nil {
			t.Fatal(err)
		}
		want := map[string]bool{}
		for _, i := range order[:k] {
			want[intKey(i)] = true
		}
		for _, h := range hits {
			i := int(binary.BigEndian.Uint64([]byte(h.Key)))
			if !h.Exact || h.Distance != exact[i] {
				t.Fatalf("row %d at distance %v (exact %v), want its exact distance %v", i, h.Distance, h.Exact, exact[i])
			}
			if want[h.Key] {
				found++
			}
		}
		total += k
	}
	if recall := float64(found) / float64(total); recall < 0.99 {
		t.Fatalf("recall@%d %.3f, want at least 0.99: the middle pass skipped rows it should have computed", k, recall)
	}
}

// Checkpoint bodies of version 1 load where their layout is today's
// (stores with extended codes), and a store=float one, which lacks the
// extended codes, is refused so that the table is copied again.
func TestCodedBodyVersions(t *testing.T) {
	const dims = 16
	for _, kind := range []store.Kind{store.Ext4, store.Float} {
		cfg := store.CodedConfig{Metric: kernels.L2, Dims: dims, Store: kind, Seed: 2, KeyWidth: 8}
		x, _ := NewCoded(cfg, nil)
		for i := range 300 {
			x.Put(intKey(i), oneHot(dims, i))
		}
		write, release := x.Snapshot()
		var buf bytes.Buffer
		if err := write(&buf); err != nil {
			t.Fatal(err)
		}
		release()
		body := buf.Bytes()
		if body[4] != codedVersion {
			t.Fatalf("store=%s: body of version %d, want %d", kind, body[4], codedVersion)
		}
		body[4] = 1
		y, err := LoadCoded(bytes.NewReader(body), cfg)
		switch {
		case kind == store.Float && (err == nil || !strings.Contains(err.Error(), "version 1")):
			t.Fatalf("store=float body of version 1: err %v, want it refused", err)
		case kind != store.Float && err != nil:
			t.Fatalf("store=%s body of version 1: %v", kind, err)
		case kind != store.Float && y.Len() != 300:
			t.Fatalf("store=%s body of version 1: %d rows, want 300", kind, y.Len())
		}
	}
}
