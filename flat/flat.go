package flat

import (
	"context"
	"fmt"
	"io"
	"math"
	"math/bits"
	"slices"
	"sync"
	"sync/atomic"

	"github.com/vecside/vecside/indexer/kind"
	"github.com/vecside/vecside/indexer/store"
	"github.com/vecside/vecside/kernels"
)

// Index is an exact float32 index over vectors of one dimension.
type Index struct {
	metric   kernels.Metric
	dims     int
	keyWidth int
	cur      atomic.Pointer[floatRows]
	mu       sync.Mutex // writers
}

// floatRows is one generation of the index's rows; Clear replaces it.
type floatRows struct {
	ep    *store.Epochs
	keys  *store.Keys
	vecs  *store.Slab[float32] // id → vector
	norms *store.Slab[float32] // id → norm, cosine only
	zeros atomic.Int64         // vectors with norm 0 under cosine
}

// Hit is a search result: a key and its distance under the index's metric.
type Hit = store.Hit

// New returns an empty index for keys of keyWidth bytes (0: any length).
func New(metric kernels.Metric, dims, keyWidth int) *Index {
	x := &Index{metric: metric, dims: dims, keyWidth: keyWidth}
	x.cur.Store(x.newRows())
	return x
}

func (x *Index) newRows() *floatRows {
	ep := store.NewEpochs()
	r := &floatRows{ep: ep, keys: store.NewKeys(x.keyWidth, ep), vecs: store.NewSlab[float32](x.dims)}
	if x.metric == kernels.Cosine {
		r.norms = store.NewSlab[float32](1)
	}
	return r
}

// Dims is the dimension of every vector held.
func (x *Index) Dims() int { return x.dims }

// Keys is the current rows' keys, for the xids the owner records
// under them (Keys.SetXID).
func (x *Index) Keys() *store.Keys { return x.cur.Load().keys }

// Len is the number of vectors held.
func (x *Index) Len() int { return x.cur.Load().keys.Len() }

// ZeroVectors counts held vectors that have no cosine distance.
func (x *Index) ZeroVectors() int { return int(x.cur.Load().zeros.Load()) }

// Put inserts key or replaces its vector. vec must have Dims elements; it
// is copied. A replaced row is not overwritten: the new vector gets a row
// of its own, so a search under way reads either whole.
func (x *Index) Put(key string, vec []float32) {
	if len(vec) != x.dims {
		panic(fmt.Sprintf("flat: put of %d-d vector into %d-d index", len(vec), x.dims))
	}
	x.mu.Lock()
	defer x.mu.Unlock()
	r := x.cur.Load()
	r.delete(key)
	r.insert(key, vec)
}

func (r *floatRows) insert(key string, vec []float32) {
	id := r.keys.Alloc(key)
	r.vecs.Grow(int(id) + 1)
	copy(r.vecs.Row(id), vec)
	if r.norms != nil {
		r.norms.Grow(int(id) + 1)
		norm := float32(math.Sqrt(float64(kernels.Dot(vec, vec))))
		*r.norms.At(id) = norm
		if norm == 0 {
			r.zeros.Add(1)
		}
	}
	r.keys.Publish(id)
}

func (r *floatRows) delete(key string) bool {
	id, ok := r.keys.Remove(key)
	if ok && r.norms != nil && *r.norms.At(id) == 0 {
		r.zeros.Add(-1)
	}
	return ok
}

// Vector returns a copy of key's vector.
func (x *Index) Vector(key string) ([]float32, bool) {
	x.mu.Lock()
	defer x.mu.Unlock()
	r := x.cur.Load()
	id, ok := r.keys.Lookup(key)
	if !ok {
		return nil, false
	}
	return slices.Clone(r.vecs.Row(id)), true
}

// Delete removes key, reporting whether it was present.
func (x *Index) Delete(key string) bool {
	x.mu.Lock()
	defer x.mu.Unlock()
	return x.cur.Load().delete(key)
}

// Rename gives the entry of from the key to, replacing any entry of to.
// It reports whether from was present.
func (x *Index) Rename(from, to string) bool {
	x.mu.Lock()
	defer x.mu.Unlock()
	r := x.cur.Load()
	id, ok := r.keys.Lookup(from)
	if !ok || from == to {
		return ok
	}
	vec := slices.Clone(r.vecs.Row(id))
	r.delete(to)
	r.delete(from)
	r.insert(to, vec)
	return true
}

// Clear removes every entry. Searches under way finish on the rows they
// started with.
func (x *Index) Clear() {
	x.mu.Lock()
	defer x.mu.Unlock()
	x.cur.Store(x.newRows())
}

// Has reports whether key is held.
func (x *Index) Has(key string) bool {
	x.mu.Lock()
	defer x.mu.Unlock()
	_, ok := x.cur.Load().keys.Lookup(key)
	return ok
}

// Each calls fn for every entry held when it was called, with a copy of
// its vector.
func (x *Index) Each(fn func(key string, vec []float32)) {
	x.mu.Lock()
	r := x.cur.Load()
	g := r.ep.Pin()
	defer g.Unpin()
	var ids []uint32
	r.keys.Each(func(id uint32) { ids = append(ids, id) })
	x.mu.Unlock()
	for _, id := range ids {
		fn(r.keys.Key(id), slices.Clone(r.vecs.Row(id)))
	}
}

// Search returns the k nearest entries to q, nearest first, with exact
// distances; a non-nil allow (from Allow) restricts it to those rows. It
// takes no lock: it pins the rows it reads (see store.Epochs), and checks
// ctx every few thousand rows, giving up with its error.
func (x *Index) Search(ctx context.Context, q []float32, k int, allow *Allow) ([]Hit, error) {
	if len(q) != x.dims {
		panic(fmt.Sprintf("flat: %d-d query against %d-d index", len(q), x.dims))
	}
	var qnorm float32
	if x.metric == kernels.Cosine {
		qnorm = float32(math.Sqrt(float64(kernels.Dot(q, q))))
		if qnorm == 0 {
			return nil, nil // no row has a cosine distance to the zero vector
		}
	}
	r := x.cur.Load()
	if allow != nil {
		r = allow.r
	}
	g := r.ep.Pin()
	defer g.Unpin()
	s := scan{x: x, r: r, q: q, qnorm: qnorm, top: kernels.NewTopK(k), done: ctx.Done()}
	if allow != nil {
		s.allowed(allow.ids)
	} else {
		s.all()
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	found := s.top.Sorted()
	hits := make([]Hit, len(found))
	for i, n := range found {
		hits[i] = Hit{Key: r.keys.Key(n.ID), Distance: x.metric.Distance(q, r.vecs.Row(n.ID)), XID: r.keys.XID(n.ID), Exact: true}
	}
	return hits, nil
}

// scan is one search's pass over the rows.
type scan struct {
	x     *Index
	r     *floatRows
	q     []float32
	qnorm float32
	top   *kernels.TopK
	done  <-chan struct{}
	dist  [64]float32
}

// all scans every live row, 64 ids at a time: a run whose ids are all
// live goes through the block kernel in one call, others row by row, so
// that a row being written under a reclaimed id is never read.
func (s *scan) all() {
	high := s.r.keys.High()
	chunks := s.r.vecs.Chunks()
	d := s.x.dims
	for w := uint32(0); 64*w < high; w++ {
		if w%16 == 15 && s.stopped() {
			return
		}
		word := s.r.keys.LiveWord(w)
		if word == 0 {
			continue
		}
		base := 64 * w
		if word == math.MaxUint64 {
			if int(base>>10) >= len(chunks) { // grown since the scan began
				chunks = s.r.vecs.Chunks()
			}
			chunk := chunks[base>>10]
			off := int(base&1023) * d
			s.block(chunk[off:off+64*d], base)
			continue
		}
		for ; word != 0; word &= word - 1 {
			id := base + uint32(bits.TrailingZeros64(word))
			s.offer(id, s.finish(id, s.one(s.r.vecs.Row(id))))
		}
	}
}

// allowed scans the listed rows.
func (s *scan) allowed(ids []uint32) {
	for i, id := range ids {
		if i%1024 == 1023 && s.stopped() {
			return
		}
		if s.r.keys.Live(id) {
			s.offer(id, s.finish(id, s.one(s.r.vecs.Row(id))))
		}
	}
}

func (s *scan) stopped() bool { return store.Pause(s.done) }

func (s *scan) block(rows []float32, base uint32) {
	if s.x.metric == kernels.L2 {
		kernels.L2SqBlock(s.q, rows, s.dist[:])
	} else {
		kernels.DotBlock(s.q, rows, s.dist[:])
	}
	for i, v := range s.dist {
		s.offer(base+uint32(i), s.finish(base+uint32(i), v))
	}
}

func (s *scan) one(v []float32) float32 {
	if s.x.metric == kernels.L2 {
		return kernels.L2Sq(s.q, v)
	}
	return kernels.Dot(s.q, v)
}

// finish turns a kernel's output for id into the metric's order: squared
// L2 as is, the negative inner product, or 1 − cosine (NaN for a zero
// vector, which is never returned).
func (s *scan) finish(id uint32, v float32) float32 {
	switch s.x.metric {
	case kernels.IP:
		return -v
	case kernels.Cosine:
		norm := *s.r.norms.At(id)
		if norm == 0 {
			return float32(math.NaN())
		}
		return 1 - v/(s.qnorm*norm)
	}
	return v
}

func (s *scan) offer(id uint32, d float32) {
	if d != d {
		return
	}
	if !s.top.Full() || d < s.top.Worst() {
		s.top.Push(id, d)
	}
}

// Allow is a set of rows for a filtered search, tied to the rows it was
// made from.
type Allow struct {
	r   *floatRows
	ids []uint32
}

// Allow turns keys into the set of their rows, for a Search that must
// follow before release is called; unknown keys are ignored.
func (x *Index) Allow(keys []string) (a *Allow, release func()) {
	r := x.cur.Load()
	g := r.ep.Pin()
	a = &Allow{r: r}
	for _, k := range keys {
		if id, ok := r.keys.Lookup(k); ok && r.keys.Live(id) {
			a.ids = append(a.ids, id)
		}
	}
	slices.Sort(a.ids)
	a.ids = slices.Compact(a.ids)
	return a, g.Unpin
}

// Snapshot captures the index as it is now, under the writers' lock for
// as long as copying its live set takes, and returns the function that
// writes it (a count, each key, then each vector), which may run while
// writers go on; release must be called once done with it.
func (x *Index) Snapshot() (write func(io.Writer) error, release func()) {
	x.mu.Lock()
	r := x.cur.Load()
	g := r.ep.Pin()
	live := r.keys.LiveCopy()
	x.mu.Unlock()
	write = func(w io.Writer) error {
		b := store.NewBodyWriter(w)
		n := 0
		for _, word := range live {
			n += bits.OnesCount64(word)
		}
		b.Uvarint(uint64(n))
		eachSet(live, func(id uint32) { b.String(r.keys.Key(id)) })
		eachSet(live, func(id uint32) { b.Floats(r.vecs.Row(id)) })
		return b.Flush()
	}
	return write, g.Unpin
}

func eachSet(words []uint64, fn func(id uint32)) {
	for w, word := range words {
		for ; word != 0; word &= word - 1 {
			fn(uint32(64*w + bits.TrailingZeros64(word)))
		}
	}
}

// Load reads a body written by a Snapshot into a new index.
func Load(in io.Reader, metric kernels.Metric, dims, keyWidth int) (*Index, error) {
	b := store.NewBodyReader(in)
	x := New(metric, dims, keyWidth)
	r := x.cur.Load()
	n := b.Count(store.MaxRows)
	keys := make([]string, 0, min(n, 1<<20))
	for i := 0; i < n && b.Err() == nil; i++ {
		keys = append(keys, b.String())
	}
	vec := make([]float32, dims)
	for _, key := range keys {
		if b.Floats(vec); b.Err() != nil {
			break
		}
		if _, dup := r.keys.Lookup(key); dup {
			return nil, fmt.Errorf("flat: key %x appears twice", key)
		}
		r.insert(key, vec)
	}
	if err := b.Err(); err != nil {
		return nil, fmt.Errorf("flat: %w", err)
	}
	return x, nil
}

// Stats reports the index's size; its vectors count as codes.
func (x *Index) Stats() kind.Stats {
	r := x.cur.Load()
	codes := r.vecs.Bytes()
	if r.norms != nil {
		codes += r.norms.Bytes()
	}
	return kind.Stats{Rows: x.Len(), CodeBytes: codes, KeyBytes: r.keys.Bytes()}
}
