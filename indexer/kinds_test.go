package indexer

import (
	"context"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/vecside/vecside/indexer/kind"
)

func TestKindOptions(t *testing.T) {
	for _, def := range []string{
		"x=t(v) key=id metric=l2 kind=flat store=ext8",
		"x=t(v) key=id metric=l2 kind=flat bits=4",
		"x=t(v) key=id metric=cosine kind=ivf",
		"x=t(v) key=id metric=cosine kind=ivf lists=100 probes=8 store=ext4 bits=4",
		"x=t(v) key=id metric=cosine kind=hnsw",
		"x=t(v) key=id metric=cosine kind=hnsw m=16 ef_construction=64 ef_search=80 store=ext8",
	} {
		s, err := ParseSpec(def)
		if err != nil {
			t.Errorf("%q: %v", def, err)
			continue
		}
		if again, err := ParseSpec(s.String()); err != nil || again.String() != s.String() {
			t.Errorf("%q does not round-trip: %q, %v", def, s.String(), err)
		}
	}
	for def, wantErr := range map[string]string{
		"x=t(v) key=id metric=l2 kind=ivf lists=0":            "lists=0",
		"x=t(v) key=id metric=l2 kind=ivf lists=many":         "lists=many",
		"x=t(v) key=id metric=l2 kind=ivf probes=-2":          "probes=-2",
		"x=t(v) key=id metric=l2 kind=ivf store=ext5":         "store=ext5",
		"x=t(v) key=id metric=l2 kind=ivf bits=3":             "bits=3",
		"x=t(v) key=id metric=l2 kind=ivf bits=4 store=ext8":  "contradicts",
		"x=t(v) key=id metric=l2 kind=ivf ef_search=40":       "unknown option ef_search=40 for kind=ivf",
		"x=t(v) key=id metric=l2 kind=flat lists=3":           "unknown option lists=3 for kind=flat",
		"x=t(v) key=id metric=l2 kind=hnsw m=1":               "m=1: want an integer from 2 to 64",
		"x=t(v) key=id metric=l2 kind=hnsw m=65":              "m=65",
		"x=t(v) key=id metric=l2 kind=hnsw ef_construction=0": "ef_construction=0",
		"x=t(v) key=id metric=l2 kind=hnsw ef_search=x":       "ef_search=x",
		"x=t(v) key=id metric=l2 kind=hnsw probes=4":          "unknown option probes=4 for kind=hnsw",
	} {
		_, err := ParseSpec(def)
		if !errors.Is(err, ErrInvalidArgument) || !strings.Contains(err.Error(), wantErr) {
			t.Errorf("%q: got %v, want ErrInvalidArgument containing %q", def, err, wantErr)
		}
	}
}

// Every kind's per-query settings, through SET, SHOW and RESET.
func TestKindSettings(t *testing.T) {
	names := kind.SettingNames()
	if !slices.Contains(names, "probes") || !slices.Contains(names, "ef_search") {
		t.Fatalf("settings %v, want probes and ef_search among them", names)
	}
	for _, name := range names {
		s, _ := kind.LookupSetting(name)
		o := DefaultSearchOptions()
		opts, err := ParseOptions(name + "=32 oversample=2")
		if err != nil {
			t.Fatal(err)
		}
		if err := o.Apply(opts); err != nil || o.Settings[name] != 32 || o.Oversample != 2 {
			t.Fatalf("%s: got %+v, %v", name, o, err)
		}
		if v := mustGet(t, o, name); v != "32" {
			t.Errorf("SHOW %s: %q", name, v)
		}
		session := o
		if err := o.Set(name, "5"); err != nil || session.Settings[name] != 32 {
			t.Errorf("%s: setting a copy changed the original: %v, %d", name, err, session.Settings[name])
		}
		for _, bad := range []string{"-1", "x", "1.5", fmt.Sprint(s.Max + 1)} {
			if err := o.Set(name, bad); !errors.Is(err, ErrInvalidArgument) {
				t.Errorf("%s=%s: %v", name, bad, err)
			}
		}
		if err := o.Set(name, mustGet(t, DefaultSearchOptions(), name)); err != nil || o.Settings[name] != 0 {
			t.Errorf("RESET %s: %v, %d", name, err, o.Settings[name])
		}
	}
}

// everyKind is kind=… of every registered kind.
func everyKind() []string {
	var defs []string
	for _, k := range Kinds() {
		defs = append(defs, "kind="+k)
	}
	return defs
}

func mustGet(t *testing.T, o SearchOptions, k string) string {
	v, err := o.Get(k)
	if err != nil {
		t.Fatal(err)
	}
	return v
}

// Through an Entry, with the stream deleting and re-inserting rows in
// single-row transactions while clients search (run it with -race): the
// index's own output, with no heap re-rank, never holds a key deleted at
// an LSN at or below the applied LSN the search started after.
func TestNoDeletedKeyAfterApplied(t *testing.T) {
	for _, opts := range everyKind() {
		const dims, rows = 8, 2000
		rng := rand.New(rand.NewPCG(3, 4))
		vec := func() []float32 {
			v := make([]float32, dims)
			for i := range v {
				v[i] = rng.Float32()
			}
			return v
		}
		data := make([][]float32, rows)
		for i := range data {
			data[i] = vec()
		}
		e := textEntry(t, "e=t(v) key=id metric=l2 "+opts)
		copyInto(t, e, data, 0x100)
		var deletedAt sync.Map // key → LSN of its delete, while it stays deleted
		stop := make(chan struct{})
		var wg sync.WaitGroup
		var bad atomic.Value
		for c := range 3 {
			wg.Go(func() {
				r := rand.New(rand.NewPCG(uint64(c), 5))
				for {
					select {
					case <-stop:
						return
					default:
					}
					applied := e.Applied()
					hits, err := e.Search(context.Background(), data[r.IntN(rows)], 20, DefaultSearchOptions())
					if err != nil {
						bad.CompareAndSwap(nil, err)
						return
					}
					for _, h := range hits {
						if lsn, ok := deletedAt.Load(h.Key); ok && lsn.(LSN) <= applied {
							bad.CompareAndSwap(nil, fmt.Errorf("%s: key %s deleted at %s returned by a search that began at applied %s", opts, h.Key, lsn, applied))
						}
					}
				}
			})
		}
		lsn := LSN(0x200)
		for i := range 3000 {
			k := fmt.Sprint(rng.IntN(rows))
			lsn++
			e.Stream().Begin(lsn)
			if _, gone := deletedAt.Load(k); gone && i%2 == 0 {
				deletedAt.Delete(k) // back before the commit is applied: searches may see it
				e.Stream().Upsert(k, data[rowIndex(k)])
			} else if !gone {
				deletedAt.Store(k, lsn)
				e.Stream().Delete(k)
			}
			e.Stream().SetApplied(lsn)
		}
		close(stop)
		wg.Wait()
		if err := bad.Load(); err != nil {
			t.Fatal(err)
		}
	}
}

func rowIndex(k string) int {
	var i int
	fmt.Sscan(k, &i)
	return i
}

// TestEstimatesAreNotNegative: a quantized kind's estimate of a cosine
// distance, which can fall a little below the true one, is never reported
// below 0, the least distance there is. (L2 estimates are clamped before
// their square root.)
func TestEstimatesAreNotNegative(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	vecs := make([][]float32, 500)
	for i := range vecs {
		vecs[i] = make([]float32, 32)
		for j := range vecs[i] {
			vecs[i][j] = float32(rng.NormFloat64())
		}
	}
	for _, def := range everyKind() {
		def += " store=ext4"
		e := newTestEntry(t, "e=t(v) key=id metric=cosine "+def)
		for i, v := range vecs {
			e.Stream().Upsert(key(t, fmt.Sprint(i+1)), v)
		}
		e.SetReady()
		if x, ok := e.c.serving.Load().index.(interface{ Flush() }); ok {
			x.Flush()
		}
		least := math.Inf(1)
		for _, q := range vecs {
			hits, err := e.Search(context.Background(), q, 1, DefaultSearchOptions())
			if err != nil {
				t.Fatal(err)
			}
			least = min(least, hits[0].Distance)
		}
		if least < 0 {
			t.Errorf("%s: a distance of %g", def, least)
		}
	}
}
