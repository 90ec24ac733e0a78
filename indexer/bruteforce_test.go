package indexer_test

import (
	"cmp"
	"context"
	"encoding/gob"
	"io"
	"slices"
	"sync"

	"github.com/vecside/vecside/indexer/kind"
	"github.com/vecside/vecside/indexer/store"
	"github.com/vecside/vecside/kernels"
)

// kind=bruteforce exists only in this package's tests, to show that a kind
// is one package and one registration: with nothing else changed, every
// test that means "every kind" (TestKindConformance, and the package's
// own tests ranging over Kinds) runs against it. It keeps float32 rows in
// a map under one lock and scans them all.
func init() {
	kind.Register(kind.Kind{
		Name:  "bruteforce",
		Store: store.Float,
		New: func(_ map[string]string, cfg store.CodedConfig, _ [][]float32, _ int) (kind.Index, error) {
			return newBruteForce(cfg), nil
		},
		Load: func(_ map[string]string, cfg store.CodedConfig, r io.Reader) (kind.Index, error) {
			var rows map[string][]float32
			if err := gob.NewDecoder(r).Decode(&rows); err != nil {
				return nil, err
			}
			x := newBruteForce(cfg)
			for k, v := range rows {
				x.Insert(k, v)
			}
			return x, nil
		},
	})
}

type bruteForce struct {
	metric kernels.Metric
	mu     sync.RWMutex
	keys   *store.Keys
	rows   map[uint32][]float32
}

func newBruteForce(cfg store.CodedConfig) *bruteForce {
	return &bruteForce{metric: cfg.Metric, keys: store.NewKeys(0, store.NewEpochs()), rows: map[uint32][]float32{}}
}

func (x *bruteForce) Len() int           { return x.keys.Len() }
func (x *bruteForce) NeedsRebuild() bool { return false }
func (x *bruteForce) Keys() *store.Keys  { return x.keys }

func (x *bruteForce) Has(key string) bool {
	x.mu.RLock()
	defer x.mu.RUnlock()
	_, ok := x.keys.Lookup(key)
	return ok
}

func (x *bruteForce) ZeroVectors() int {
	x.mu.RLock()
	defer x.mu.RUnlock()
	n := 0
	for _, v := range x.rows {
		if !slices.ContainsFunc(v, func(f float32) bool { return f != 0 }) {
			n++
		}
	}
	return n
}

func (x *bruteForce) Prepare(vec []float32) kind.Row { return slices.Clone(vec) }

func (x *bruteForce) Insert(key string, row kind.Row) {
	x.mu.Lock()
	defer x.mu.Unlock()
	x.remove(key)
	id := x.keys.Alloc(key)
	x.rows[id] = row.([]float32)
	x.keys.Publish(id)
}

func (x *bruteForce) remove(key string) bool {
	id, ok := x.keys.Remove(key)
	if ok {
		delete(x.rows, id)
	}
	return ok
}

func (x *bruteForce) Delete(key string) bool {
	x.mu.Lock()
	defer x.mu.Unlock()
	return x.remove(key)
}

func (x *bruteForce) Rename(from, to string) bool {
	x.mu.Lock()
	defer x.mu.Unlock()
	id, ok := x.keys.Lookup(from)
	if !ok {
		return false
	}
	v := x.rows[id]
	x.remove(from)
	x.remove(to)
	id = x.keys.Alloc(to)
	x.rows[id] = v
	x.keys.Publish(id)
	return true
}

func (x *bruteForce) Vector(key string) ([]float32, bool) {
	x.mu.RLock()
	defer x.mu.RUnlock()
	id, ok := x.keys.Lookup(key)
	return slices.Clone(x.rows[id]), ok
}

func (x *bruteForce) Each(fn func(key string)) {
	for _, k := range x.all() {
		fn(k)
	}
}

func (x *bruteForce) all() []string {
	x.mu.RLock()
	defer x.mu.RUnlock()
	var keys []string
	x.keys.Each(func(id uint32) { keys = append(keys, x.keys.Key(id)) })
	return keys
}

func (x *bruteForce) Clear() {
	x.mu.Lock()
	defer x.mu.Unlock()
	x.keys.Each(func(id uint32) { x.remove(x.keys.Key(id)) })
}

func (x *bruteForce) Search(ctx context.Context, vec []float32, q kind.Query) ([]kind.Hit, error) {
	x.mu.RLock()
	defer x.mu.RUnlock()
	var hits []kind.Hit
	score := func(id uint32) {
		v, ok := x.rows[id]
		if d := kernels.ExactDistance(x.metric, vec, v); ok && d == d { // a zero vector has no cosine distance
			hits = append(hits, kind.Hit{Key: x.keys.Key(id), Distance: d, XID: x.keys.XID(id), Exact: true})
		}
	}
	if q.Allow == nil {
		for id := range x.rows {
			score(id)
		}
	}
	for _, k := range q.Allow {
		if id, ok := x.keys.Lookup(k); ok {
			score(id)
		}
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	slices.SortFunc(hits, func(a, b kind.Hit) int { return cmp.Compare(a.Distance, b.Distance) })
	return hits[:min(q.N, len(hits))], nil
}

func (x *bruteForce) Snapshot() (write func(io.Writer) error, release func()) {
	x.mu.RLock()
	rows := map[string][]float32{}
	for id, v := range x.rows {
		rows[x.keys.Key(id)] = v
	}
	x.mu.RUnlock()
	return func(w io.Writer) error { return gob.NewEncoder(w).Encode(rows) }, func() {}
}

func (x *bruteForce) Stats() kind.Stats {
	x.mu.RLock()
	defer x.mu.RUnlock()
	return kind.Stats{Rows: len(x.rows), FloatBytes: int64(len(x.rows)) * 4 * int64(len(vecOf(x.rows))), KeyBytes: x.keys.Bytes()}
}

// vecOf is any one of rows.
func vecOf(rows map[uint32][]float32) []float32 {
	for _, v := range rows {
		return v
	}
	return nil
}
