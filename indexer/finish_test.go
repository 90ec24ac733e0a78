package indexer

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/vecside/vecside/internal/dataset"
)

// The kinds that build from the whole copy, with what "built" means for
// each: IVF has trained lists and no pending rows; coded flat has
// encoded its rows and dropped their floats.
var buildingKinds = []struct {
	opts  string
	built func(Stats) bool
}{
	{"kind=ivf", func(s Stats) bool { return len(s.Lists) > 0 && s.Pending == 0 }},
	{"kind=flat store=ext8", func(s Stats) bool { return s.FloatBytes == 0 }},
}

func waitBuilt(t *testing.T, e *Entry, built func(Stats) bool, what string) {
	t.Helper()
	for deadline := time.Now().Add(30 * time.Second); !built(e.Status().IndexStats); {
		if time.Now().After(deadline) {
			t.Fatalf("%s: never built: %+v", what, e.Status().IndexStats)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// A table that is empty when its copy ends (or so small that a checkpoint
// holds it unbuilt) gets a built index once rows come: the index made or
// loaded after the copy is finished.
func TestIndexMadeAfterCopyIsBuilt(t *testing.T) {
	data, _ := dataset.Clustered{Seed: 5, Rows: 3000, Dims: 16}.Generate()
	for _, k := range buildingKinds {
		def := "e=t(v) key=id metric=l2 " + k.opts
		e := newTestEntry(t, def)
		e.SetReady()
		for i, v := range data[:500] {
			e.Upsert(key(t, fmt.Sprint(i+1)), v)
		}
		dir := t.TempDir()
		if _, err := e.Checkpoint(dir, testSource); err != nil {
			t.Fatal(err)
		}
		loaded := newTestEntry(t, def)
		if _, err := loaded.LoadCheckpoint(dir, testSource, nil); err != nil {
			t.Fatal(err)
		}
		for _, x := range []*Entry{e, loaded} {
			for i, v := range data[500:] {
				x.Upsert(key(t, fmt.Sprint(i+501)), v)
			}
			waitBuilt(t, x, k.built, k.opts)
			if n := x.Status().Rows; n != len(data) {
				t.Fatalf("%s: %d rows, want %d", k.opts, n, len(data))
			}
		}
	}
}

// The stream keeps applying changes to an index while it builds from its
// copy, and the built index holds them all.
func TestEndSyncLetsChangesThrough(t *testing.T) {
	const copied, dims = 40000, 32
	data, _ := dataset.Clustered{Seed: 9, Rows: copied + 20000, Dims: dims}.Generate()
	for _, k := range buildingKinds {
		e := newTestEntry(t, "e=t(v) key=id metric=l2 "+k.opts)
		e.BeginSync(0x100)
		want := map[string][]float32{}
		for i, v := range data[:copied] {
			e.CopyUpsert(key(t, fmt.Sprint(i)), v)
			want[key(t, fmt.Sprint(i))] = v
		}
		done, took := endSyncInBackground(e)
		// Write until the build is over (and through all of extra), timing
		// the slowest change made during the build.
		extra, slowest := data[copied:], time.Duration(0)
		for i := 0; i < len(extra) || !isClosed(done); i++ {
			began := time.Now()
			j := i % len(extra)
			added, gone := key(t, fmt.Sprint(copied+j)), key(t, fmt.Sprint(j*2))
			e.Upsert(added, extra[j])
			e.Delete(gone)
			if !isClosed(done) {
				slowest = max(slowest, time.Since(began))
			}
			want[added] = extra[j]
			delete(want, gone)
		}
		// Writers held for the build would have waited about as long as it took.
		t.Logf("%s: the slowest change took %v; the build %v", k.opts, slowest, *took)
		if slowest > *took/2 {
			t.Fatalf("%s: a change waited %v while the build took %v", k.opts, slowest, *took)
		}
		if !k.built(e.Status().IndexStats) {
			t.Fatalf("%s: not built after EndSync: %+v", k.opts, e.Status().IndexStats)
		}
		if n := e.Status().Rows; n != len(want) {
			t.Fatalf("%s: %d rows, want %d", k.opts, n, len(want))
		}
		checked := 0
		for k2, v := range want {
			if checked++; checked > 300 {
				break
			}
			if !e.Known(k2) {
				t.Fatalf("%s: key %q lost", k.opts, k2)
			}
			so := DefaultSearchOptions()
			so.Probes = 1
			hits, err := e.Search(context.Background(), v, 10, so)
			if err != nil {
				t.Fatal(err)
			}
			if !slices.ContainsFunc(hits, func(h Hit) bool { return h.Key == k2 }) {
				t.Fatalf("%s: key %q is not found by its own vector: %v", k.opts, k2, hits)
			}
		}
		for i := range 100 {
			if gone := key(t, fmt.Sprint(i*2)); e.Known(gone) {
				t.Fatalf("%s: deleted key %q is still there", k.opts, gone)
			}
		}
	}
}

// endSyncInBackground runs e.EndSync on its own goroutine: done closes
// when it returns, and took then holds how long it took.
func endSyncInBackground(e *Entry) (done chan struct{}, took *time.Duration) {
	done, took = make(chan struct{}), new(time.Duration)
	go func() {
		began := time.Now()
		e.EndSync()
		*took = time.Since(began)
		close(done)
	}()
	return done, took
}

func isClosed(c <-chan struct{}) bool {
	select {
	case <-c:
		return true
	default:
		return false
	}
}
