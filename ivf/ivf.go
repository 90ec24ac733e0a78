package ivf

import (
	"fmt"
	"math"
	"sync"
	"sync/atomic"

	"github.com/vecside/vecside/flat"
	"github.com/vecside/vecside/kernels"
)

// Config configures an IVF index. Zero values take the defaults.
type Config struct {
	Metric kernels.Metric
	Dims   int
	Store  flat.Store // second-pass codes: ext4, ext8 or float
	Seed   uint64     // of the rotation and the k-means sample
	// Lists fixes the number of lists; 0 follows ListsFor of the row count
	// at each training.
	Lists int
	// Probes is the default number of lists a query scans; 0 means
	// ProbesFor(lists).
	Probes int
	// Growth: retrain once the rows held exceed Growth times the rows at
	// the last training (default 1.5).
	Growth float64
	// MaxDead: retrain, which compacts, once tombstones exceed this share
	// of the slots (default 0.2).
	MaxDead float64
	// ListCap: no list may hold more than ListCap times the mean list
	// size at training: bigger ones are split at training, and a list
	// that grows past it by inserts triggers a retrain (default 3).
	ListCap float64
	// MinTrain is how many rows an untrained index collects, after
	// Finish, before it trains in the background (default 1000).
	MinTrain int
}

func (c *Config) defaults() {
	if c.Growth == 0 {
		c.Growth = 1.5
	}
	if c.MaxDead == 0 {
		c.MaxDead = 0.2
	}
	if c.ListCap == 0 {
		c.ListCap = 3
	}
	if c.MinTrain == 0 {
		c.MinTrain = 1000
	}
}

// Index is an IVF index on RaBitQ codes; see the package doc. Writers
// (Put, Delete, Rename, Clear) must be serialised against readers
// (Search, Snapshot, Has, Len, Stats) by the owner, as the indexer's Entry
// does with its RWMutex. Training (Finish) and retraining swap their
// result in with no help from the owner, so Finish may run beside
// writers and readers.
type Index struct {
	cfg Config
	rq  *kernels.RaBitQ

	// wmu serialises writers with the retrain goroutine's captures and
	// swap. Readers never take it: they load cur once.
	wmu      sync.Mutex
	cur      atomic.Pointer[state]
	zeros    map[string]struct{} // cosine zero vectors: held, never returned
	finished bool
	w        *adder // writers' scratch

	retraining atomic.Bool
	retrains   atomic.Int64
	scratch    sync.Pool // *searchScratch
}

// New returns an empty index.
func New(cfg Config) (*Index, error) {
	cfg.defaults()
	if cfg.Store != flat.StoreExt4 && cfg.Store != flat.StoreExt8 && cfg.Store != flat.StoreFloat {
		return nil, fmt.Errorf("ivf: store %s", cfg.Store)
	}
	rq, err := kernels.NewRaBitQ(kernels.RaBitQConfig{Dim: cfg.Dims, Metric: cfg.Metric, ExBits: cfg.Store.ExBits(), Seed: cfg.Seed})
	if err != nil {
		return nil, fmt.Errorf("ivf: %w", err)
	}
	x := &Index{cfg: cfg, rq: rq, zeros: map[string]struct{}{}}
	x.w = x.newAdder()
	x.cur.Store(newState(x, nil, 0))
	return x, nil
}

// state is one generation of the index: lists built from one training,
// and every change since. A retrain builds the next state beside it.
type state struct {
	gen       uint64
	centroids []float32 // row-major, in the codec's space (normalised rows for cosine)
	cRot      []float32 // the centroids rotated, for PrepareQuery
	lists     []*flat.List
	table     *flat.Table
	loc       []loc    // id → where its codes are
	live      []uint64 // id bitmap
	floats    *floatStore
	pending   []uint32 // ids in no list: the index is untrained
	trained   int      // rows at training
	listCap   int      // a list over this size asks for a retrain
	dead      int
	overfull  bool
	// spread, for the ip metric only, is per list what probing needs to
	// rank lists by the inner product a query can expect at best in each
	// (see nearestLists).
	spread []listSpread
}

// listSpread sums the squared distances from its centroid of the rows
// appended to a list, and keeps reach, σ·√(2 ln n) for its n rows, up to
// date with it: the expected largest projection of a row, relative to
// the centroid, on a unit query.
type listSpread struct {
	sum   float64
	reach float32
}

type loc struct{ list, slot uint32 }

const noList = math.MaxUint32

func newState(x *Index, centroids []float32, trained int) *state {
	st := &state{centroids: centroids, table: flat.NewTable(), floats: newFloatStore(x.cfg.Dims), trained: trained}
	k := len(centroids) / x.cfg.Dims
	st.cRot = make([]float32, len(centroids))
	st.lists = make([]*flat.List, k)
	for c := range k {
		x.rq.Rotate(st.cRot[c*x.cfg.Dims:(c+1)*x.cfg.Dims], centroids[c*x.cfg.Dims:(c+1)*x.cfg.Dims])
		st.lists[c] = flat.NewList(x.rq)
	}
	if k > 0 {
		st.listCap = int(math.Ceil(x.cfg.ListCap * float64(trained) / float64(k)))
	}
	if x.cfg.Metric == kernels.IP {
		st.spread = make([]listSpread, k)
	}
	return st
}

func (st *state) alive(id uint32) bool { return st.live[id/64]&(1<<(id%64)) != 0 }

// Dims is the dimension of every vector held.
func (x *Index) Dims() int { return x.cfg.Dims }

// Len is the number of keys held, zero vectors included.
func (x *Index) Len() int { return x.cur.Load().table.Live() + len(x.zeros) }

// ZeroVectors counts held vectors that have no cosine distance.
func (x *Index) ZeroVectors() int { return len(x.zeros) }

// Has reports whether key is held.
func (x *Index) Has(key string) bool {
	if _, ok := x.zeros[key]; ok {
		return true
	}
	_, ok := x.cur.Load().table.Lookup(key)
	return ok
}

// Vector returns key's stored vector (aliasing the float store).
func (x *Index) Vector(key string) ([]float32, bool) {
	st := x.cur.Load()
	if id, ok := st.table.Lookup(key); ok {
		return st.floats.get(id), true
	}
	if _, ok := x.zeros[key]; ok {
		return make([]float32, x.cfg.Dims), true
	}
	return nil, false
}

// Each calls fn for every key with its vector (aliasing the float store).
func (x *Index) Each(fn func(key string, vec []float32)) {
	st := x.cur.Load()
	for id := range uint32(st.table.Slots()) {
		if st.alive(id) {
			fn(st.table.Key(id), st.floats.get(id))
		}
	}
	for k := range x.zeros {
		fn(k, make([]float32, x.cfg.Dims))
	}
}

// Put inserts key or replaces its vector: into the list of the nearest
// centroid, or among the pending rows while the index is untrained.
func (x *Index) Put(key string, vec []float32) {
	if len(vec) != x.cfg.Dims {
		panic(fmt.Sprintf("ivf: put of %d-d vector into %d-d index", len(vec), x.cfg.Dims))
	}
	x.wmu.Lock()
	defer x.wmu.Unlock()
	st := x.cur.Load()
	x.deleteLocked(st, key)
	if x.cfg.Metric == kernels.Cosine && kernels.Dot(vec, vec) == 0 {
		x.zeros[key] = struct{}{}
		return
	}
	x.w.add(st, key, vec)
	x.maybeRetrain(st)
}

// adder adds rows to a state, with its own scratch: the writers have one,
// a retrain catching up on their changes another.
type adder struct {
	x    *Index
	enc  flat.Encoded
	vec  []float32
	dist []float32
}

func (x *Index) newAdder() *adder { return &adder{x: x, enc: flat.NewEncoded(x.rq)} }

// add appends key's vector to st, encoded into the list of the nearest
// centroid, or as pending if st is untrained.
func (a *adder) add(st *state, key string, vec []float32) {
	if len(st.lists) == 0 {
		st.append(key, vec, noList, nil)
		return
	}
	a.vec = a.x.toCodecSpace(a.vec, vec)
	if cap(a.dist) < len(st.lists) {
		a.dist = make([]float32, len(st.lists))
	}
	c := nearest(a.vec, st.centroids, a.dist[:len(st.lists)])
	d := a.x.cfg.Dims
	a.enc.Encode(a.x.rq, vec, st.centroids[c*d:(c+1)*d])
	st.append(key, vec, uint32(c), &a.enc)
}

// append gives key a new id with vec in the float store and its codes in
// list c (noList: pending).
func (st *state) append(key string, vec []float32, c uint32, e *flat.Encoded) {
	id := st.table.Add(key)
	st.floats.add(vec)
	if int(id/64) >= len(st.live) {
		st.live = append(st.live, 0)
	}
	st.live[id/64] |= 1 << (id % 64)
	if c == noList {
		st.pending = append(st.pending, id)
		st.loc = append(st.loc, loc{noList, 0})
		return
	}
	slot := st.lists[c].Append(id, e)
	if st.spread != nil {
		d, sp := len(vec), &st.spread[c]
		sp.sum += float64(kernels.L2Sq(vec, st.centroids[int(c)*d:int(c+1)*d]))
		if n := float64(slot + 1); n >= 2 {
			sp.reach = float32(math.Sqrt(sp.sum/(n*float64(d))) * math.Sqrt(2*math.Log(n)))
		}
	}
	st.loc = append(st.loc, loc{c, slot})
	if st.lists[c].Live() > st.listCap {
		st.overfull = true
	}
}

// toCodecSpace copies v into dst, normalised for the cosine metric: the
// space the centroids live in.
func (x *Index) toCodecSpace(dst, v []float32) []float32 {
	dst = append(dst[:0], v...)
	if x.cfg.Metric == kernels.Cosine {
		if n := kernels.Dot(dst, dst); n > 0 {
			s := float32(1 / math.Sqrt(float64(n)))
			for i := range dst {
				dst[i] *= s
			}
		}
	}
	return dst
}

// Delete removes key, reporting whether it was present: its codes become
// a tombstone that the next retrain reclaims.
func (x *Index) Delete(key string) bool {
	x.wmu.Lock()
	defer x.wmu.Unlock()
	st := x.cur.Load()
	ok := x.deleteLocked(st, key)
	x.maybeRetrain(st)
	return ok
}

func (x *Index) deleteLocked(st *state, key string) bool {
	if _, ok := x.zeros[key]; ok {
		delete(x.zeros, key)
		return true
	}
	return st.remove(key)
}

// remove retires key's id in st, its codes becoming a tombstone.
func (st *state) remove(key string) bool {
	id, ok := st.table.Lookup(key)
	if !ok {
		return false
	}
	st.table.Retire(key)
	st.live[id/64] &^= 1 << (id % 64)
	if l := st.loc[id]; l.list != noList {
		st.lists[l.list].Kill(l.slot)
		st.dead++
	}
	return true
}

// Rename gives the entry of from the key to, replacing any entry of to.
func (x *Index) Rename(from, to string) bool {
	if !x.Has(from) {
		return false
	}
	if from == to {
		return true
	}
	vec, _ := x.Vector(from)
	vec = append([]float32(nil), vec...)
	x.Delete(from)
	x.Put(to, vec)
	return true
}

// Clear removes every entry. The lists keep their centroids, and a
// retrain under way is abandoned.
func (x *Index) Clear() {
	x.wmu.Lock()
	defer x.wmu.Unlock()
	old := x.cur.Load()
	st := newState(x, old.centroids, old.trained)
	st.gen = old.gen + 1
	x.cur.Store(st)
	clear(x.zeros)
}

// Finish trains the index on the rows put so far (the initial copy of the
// table), on every core, unless it is trained already. It trains the way
// a retrain does, holding the writer lock only to capture the rows and to
// swap the result in, so writers keep going meanwhile; lock, the owner's
// write lock, is not needed for that. From then on an index that is still
// untrained (an empty table) trains in the background once MinTrain rows
// have come.
func (x *Index) Finish(sync.Locker) {
	x.wmu.Lock()
	st := x.cur.Load()
	x.finished = true
	// Unless a background training is under way already.
	train := len(st.lists) == 0 && st.table.Live() > 0 && x.retraining.CompareAndSwap(false, true)
	x.wmu.Unlock()
	if train {
		x.retrain(st.gen)
	}
}

// maybeRetrain starts a background retrain when the data has drifted from
// the last training: it grew by cfg.Growth, tombstones passed cfg.MaxDead,
// a list outgrew its cap, or an untrained index has enough rows.
func (x *Index) maybeRetrain(st *state) {
	if !x.finished || x.retraining.Load() {
		return
	}
	live := st.table.Live()
	var due bool
	if len(st.lists) == 0 {
		due = live >= x.cfg.MinTrain
	} else {
		due = float64(live) > x.cfg.Growth*float64(max(st.trained, x.cfg.MinTrain)) ||
			(st.dead > 1000 && float64(st.dead) > x.cfg.MaxDead*float64(st.table.Slots())) ||
			st.overfull
	}
	if due {
		x.retraining.Store(true)
		go x.retrain(st.gen)
	}
}

// floatStore keeps every vector as given, by id, in fixed-size chunks
// that are only ever appended to, so that a retrain and a snapshot can
// read a prefix of it without a lock while writers append.
type floatStore struct {
	dims   int
	chunks [][]float32
	n      int
}

const chunkRows = 4096

func newFloatStore(dims int) *floatStore { return &floatStore{dims: dims} }

func (f *floatStore) add(v []float32) {
	if f.n%chunkRows == 0 {
		f.chunks = append(f.chunks, make([]float32, chunkRows*f.dims))
	}
	copy(f.chunks[f.n/chunkRows][(f.n%chunkRows)*f.dims:], v)
	f.n++
}

func (f *floatStore) get(id uint32) []float32 {
	r := int(id) % chunkRows * f.dims
	return f.chunks[id/chunkRows][r : r+f.dims]
}

// view returns the store as it is now; later adds do not change it.
func (f *floatStore) view() *floatStore {
	return &floatStore{dims: f.dims, chunks: append([][]float32(nil), f.chunks...), n: f.n}
}

func (f *floatStore) bytes() int64 { return 4 * int64(len(f.chunks)) * chunkRows * int64(f.dims) }
