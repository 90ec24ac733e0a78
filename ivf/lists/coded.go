package lists

import (
	"context"
	"encoding/binary"
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

// Coded holds the rows of a quantized index: a fixed set of centroids, one
// store.List of 1-bit codes per centroid, and per row id its key, where its code
// sits, and its second-pass data (an extended code, or the float32 vector
// with store=float). The ivf kind has many centroids; the coded flat kind
// has one, the mean.
//
// Writers (Put, Delete, Rename) serialise on a mutex, and encode outside
// it, so rows copied in parallel encode in parallel. Searches and
// snapshots take no lock: they pin an epoch (see store.Epochs), and every row
// they can reach stays as it was until they unpin. A search sees every
// change published before it started; a change made while it runs may or
// may not be seen, and a key updated meanwhile is returned at most once.
type Coded struct {
	cfg       store.CodedConfig
	rq        *kernels.RaBitQ
	centroids []float32 // row-major, in the codec's space
	cRot      []float32 // the centroids rotated, for PrepareQuery
	params    []float64 // the owner's, kept in checkpoints (see Params)
	// cur is the rows; Clear replaces them whole, and a search keeps the
	// ones it loaded.
	cur atomic.Pointer[rows]

	mu    sync.Mutex // writers
	prep  sync.Pool  // *prepared
	query sync.Pool  // *query
}

// rows is one generation of a Coded's rows.
type rows struct {
	lists  []*store.List
	spread []listSpread
	ep     *store.Epochs
	keys   *store.Keys
	loc    *store.Slab[uint64]     // id → list<<32 | slot
	ext    *store.Slab[byte]       // id → extended code
	extF   *store.Slab[extFactors] // its factors but NormSq, which the 1-bit code's factors hold
	floats *store.Slab[float32]    // id → vector, store=float
	zeros  *store.Zeros
}

// listSpread is what probing needs to know of a list's spread around its
// centroid (see ivf's probing): kept by writers as rows are appended,
// read by searches.
type listSpread struct {
	sum   float64       // squared distances of the rows appended from the centroid
	n     int           // rows appended
	rms   atomic.Uint32 // √(sum/n), float32 bits
	reach atomic.Uint32 // σ·√(2 ln n) with σ² = sum/(n·dims): ip's expected largest projection
}

// NewCoded returns an empty Coded with the given centroids (row-major, in
// the codec's space: normalised for cosine); nil centroids mean one list
// around the origin.
func NewCoded(cfg store.CodedConfig, centroids []float32) (*Coded, error) {
	rq, err := kernels.NewRaBitQ(kernels.RaBitQConfig{Dim: cfg.Dims, Metric: cfg.Metric, ExBits: exBits(cfg.Store), Seed: cfg.Seed})
	if err != nil {
		return nil, err
	}
	if len(centroids) == 0 {
		centroids = make([]float32, cfg.Dims)
	}
	if len(centroids)%cfg.Dims != 0 {
		return nil, fmt.Errorf("ivf lists: %d centroid values for %d dimensions", len(centroids), cfg.Dims)
	}
	x := &Coded{cfg: cfg, rq: rq, centroids: centroids, cRot: make([]float32, len(centroids))}
	for c := range x.Lists() {
		rq.Rotate(x.cRot[c*cfg.Dims:(c+1)*cfg.Dims], x.Centroid(c))
	}
	x.cur.Store(x.newRows())
	return x, nil
}

// floatExBits is the extended code store=float keeps beside each vector:
// a 1-bit fast scan cannot tell apart the rows of the lists a query
// probes in data of tight clusters, and computing every survivor's exact
// distance read its whole vector (6 KiB at 1,536 dimensions) for rows
// a 4-bit code shows to be too far. With the 4-bit code as a middle pass,
// only the rows whose bound can still beat the k-th are computed exactly.
const floatExBits = 4

// exBits is the width of the extended code a store keeps.
func exBits(k store.Kind) int {
	if k == store.Float {
		return floatExBits
	}
	return k.ExBits()
}

func (x *Coded) newRows() *rows {
	k := x.Lists()
	ep := store.NewEpochs()
	r := &rows{lists: make([]*store.List, k), ep: ep, keys: store.NewKeys(x.cfg.KeyWidth, ep), loc: store.NewSlab[uint64](1), zeros: store.NewZeros()}
	for c := range r.lists {
		r.lists[c] = store.NewList(x.rq.CodeBytes())
	}
	r.spread = make([]listSpread, k)
	r.ext, r.extF = store.NewSlab[byte](x.rq.ExtBytes()), store.NewSlab[extFactors](1)
	if x.cfg.Store == store.Float {
		r.floats = store.NewSlab[float32](x.cfg.Dims)
	}
	r.keys.OnReclaim(func(id uint32) {
		l := *r.loc.At(id)
		r.lists[l>>32].Free(uint32(l))
	})
	return r
}

// Clear removes every row; the centroids stay. Searches under way finish
// on the rows they started with.
func (x *Coded) Clear() {
	x.mu.Lock()
	defer x.mu.Unlock()
	x.cur.Store(x.newRows())
}

// SetParams records numbers the owner learned when it made the rows (a
// spread, the rows trained for), written with every checkpoint and read
// back by LoadCoded. Call it before the rows are shared.
func (x *Coded) SetParams(p []float64) { x.params = p }

// Params returns what SetParams recorded.
func (x *Coded) Params() []float64 { return x.params }

// Config is the configuration the rows were made with.
func (x *Coded) Config() store.CodedConfig { return x.cfg }

// Codec is the RaBitQ codec of the rows.
func (x *Coded) Codec() *kernels.RaBitQ { return x.rq }

// Lists is the number of lists (centroids).
func (x *Coded) Lists() int { return len(x.centroids) / x.cfg.Dims }

// Centroid returns centroid c (do not modify).
func (x *Coded) Centroid(c int) []float32 { return x.centroids[c*x.cfg.Dims : (c+1)*x.cfg.Dims] }

// Centroids returns every centroid, row-major (do not modify).
func (x *Coded) Centroids() []float32 { return x.centroids }

// RotatedCentroids returns the rotated centroids, row-major (do not
// modify), for ranking lists against a rotated query.
func (x *Coded) RotatedCentroids() []float32 { return x.cRot }

// Reach is list c's expected largest projection of a row on a unit query
// direction, relative to its centroid.
func (x *Coded) Reach(c int) float32 {
	return math.Float32frombits(x.cur.Load().spread[c].reach.Load())
}

// Radius is the root mean square distance of list c's rows from its
// centroid.
func (x *Coded) Radius(c int) float32 {
	return math.Float32frombits(x.cur.Load().spread[c].rms.Load())
}

// ListLive is the number of live rows in list c.
func (x *Coded) ListLive(c int) int { return x.cur.Load().lists[c].Live() }

// store.Keys is the current rows' keys, for the xids the owner records
// under them (store.Keys.SetXID).
func (x *Coded) Keys() *store.Keys { return x.cur.Load().keys }

// Len is the number of keys held, zero vectors included.
func (x *Coded) Len() int {
	r := x.cur.Load()
	return r.keys.Len() + r.zeros.Len()
}

// ZeroVectors counts held vectors that have no cosine distance.
func (x *Coded) ZeroVectors() int { return x.cur.Load().zeros.Len() }

// Has reports whether key is held.
func (x *Coded) Has(key string) bool {
	x.mu.Lock()
	defer x.mu.Unlock()
	r := x.cur.Load()
	return r.zeros.Held(r.keys, key)
}

// prepared is a row encoded outside the writers' lock.
type prepared struct {
	list  int
	enc   store.Encoded
	space []float32
	dist  []float32
}

func (x *Coded) prepare(vec []float32) *prepared {
	p, _ := x.prep.Get().(*prepared)
	if p == nil {
		p = &prepared{enc: store.NewEncoded(x.rq), dist: make([]float32, x.Lists())}
	}
	p.list = 0
	if x.Lists() > 1 {
		p.space = store.ToCodecSpace(x.cfg.Metric, p.space, vec)
		p.list = store.Nearest(p.space, x.centroids, p.dist)
	}
	p.enc.Encode(x.rq, vec, x.Centroid(p.list))
	return p
}

// Put inserts key or replaces its vector, encoded against its nearest
// centroid. vec must have Dims elements; it is not kept.
func (x *Coded) Put(key string, vec []float32) { x.Insert(key, x.Prepare(vec)) }

// insertLocked stores a new row: everything under its id first, then its
// slot in the list, which publishes it to searches.
func (x *rows) insert(dims int, key string, list int, e *store.Encoded, vec []float32) {
	id := x.keys.Alloc(key)
	x.loc.Grow(int(id) + 1)
	x.ext.Grow(int(id) + 1)
	x.extF.Grow(int(id) + 1)
	copy(x.ext.Row(id), e.Ext)
	*x.extF.At(id) = extFactors{e.XF.Scale, e.XF.Err, e.XF.QErr}
	if x.floats != nil {
		x.floats.Grow(int(id) + 1)
		copy(x.floats.Row(id), vec)
	}
	sp := &x.spread[list]
	sp.sum += float64(e.F.NormSq)
	sp.n++
	n := float64(sp.n)
	sp.rms.Store(math.Float32bits(float32(math.Sqrt(sp.sum / n))))
	if n >= 2 {
		reach := math.Sqrt(sp.sum/(n*float64(dims))) * math.Sqrt(2*math.Log(n))
		sp.reach.Store(math.Float32bits(float32(reach)))
	}
	slot := x.lists[list].Insert(id, e.Code, e.F)
	*x.loc.At(id) = uint64(list)<<32 | uint64(slot)
	x.keys.Publish(id)
}

// Delete removes key, reporting whether it was present.
func (x *Coded) Delete(key string) bool {
	x.mu.Lock()
	defer x.mu.Unlock()
	return x.cur.Load().delete(key)
}

func (x *rows) delete(key string) bool {
	if x.zeros.Remove(key) {
		return true
	}
	// The id is held until its list slot is dead: released first, a
	// reader pinned between the release and the kill could still find
	// the slot live while the id went to another row.
	id, ok := x.keys.Hold(key)
	if !ok {
		return false
	}
	l := *x.loc.At(id)
	x.lists[l>>32].Kill(uint32(l))
	x.keys.Release(id)
	return true
}

// Rename gives the row of from the key to, replacing any row of to. It
// reports whether from was present.
func (x *Coded) Rename(from, to string) bool {
	x.mu.Lock()
	defer x.mu.Unlock()
	r := x.cur.Load()
	if r.zeros.Remove(from) {
		r.delete(to)
		r.zeros.Add(to)
		return true
	}
	id, ok := r.keys.Lookup(from)
	if !ok {
		return false
	}
	if from == to {
		return true
	}
	r.delete(to)
	e := store.NewEncoded(x.rq)
	list := r.rowCodes(id, &e)
	var vec []float32
	if r.floats != nil {
		vec = slices.Clone(r.floats.Row(id))
	}
	r.delete(from)
	r.insert(x.cfg.Dims, to, list, &e, vec)
	return true
}

// rowCodes reads id's codes back into e (sized by store.NewEncoded) and
// returns its list.
func (x *rows) rowCodes(id uint32, e *store.Encoded) int {
	l := *x.loc.At(id)
	e.F = x.lists[l>>32].Code(uint32(l), e.Code)
	copy(e.Ext, x.ext.Row(id))
	e.XF = x.extF.At(id).factors(e.F.NormSq)
	return int(l >> 32)
}

// Vector returns key's float32 vector (store=float only).
func (x *Coded) Vector(key string) ([]float32, bool) {
	x.mu.Lock()
	defer x.mu.Unlock()
	r := x.cur.Load()
	if r.floats == nil {
		return nil, false
	}
	if r.zeros.Has(key) {
		return make([]float32, x.cfg.Dims), true
	}
	id, ok := r.keys.Lookup(key)
	if !ok {
		return nil, false
	}
	return slices.Clone(r.floats.Row(id)), true
}

// Each calls fn for every key held when it was called.
func (x *Coded) Each(fn func(key string)) {
	x.mu.Lock()
	r := x.cur.Load()
	keys := r.zeros.AllKeys(r.keys)
	x.mu.Unlock()
	for _, k := range keys {
		fn(k)
	}
}

// query is one search's scratch.
type query struct {
	x     *Coded
	r     *rows
	q     []float32
	qRot  []float32
	pq    kernels.Query
	s     *store.Searcher
	order []int
	done  <-chan struct{}
}

func (x *Coded) getQuery(k int) *query {
	qs, _ := x.query.Get().(*query)
	if qs == nil {
		qs = &query{x: x, qRot: make([]float32, x.cfg.Dims), s: store.NewSearcher(x.rq, k)}
	}
	qs.s.Reset(k)
	return qs
}

// second is the precise estimate of a row that survived the fast scan:
// its extended code's, and with store=float its exact distance where that
// estimate's bound can still beat the k-th.
func (qs *query) second(id uint32, f *kernels.Factors) (float32, float32) {
	r := qs.r
	xf := r.extF.At(id).factors(f.NormSq)
	est, bound := qs.x.rq.ExtEstimate(&qs.pq, r.ext.Row(id), &xf)
	if r.floats != nil && est-bound <= qs.s.Threshold() {
		return store.ExactEstimate(qs.x.cfg.Metric, qs.q, r.floats.Row(id)), 0
	}
	return est, bound
}

// extFactors are an extended code's factors without the squared norm of
// the residual, which is the same as the 1-bit code's: 12 bytes a row
// instead of 16.
type extFactors [3]float32 // Scale, Err, QErr

func (e *extFactors) factors(normSq float32) kernels.Factors {
	return kernels.Factors{NormSq: normSq, Scale: e[0], Err: e[1], QErr: e[2]}
}

func (qs *query) stopped() bool { return store.Pause(qs.done) }

// Probe chooses the lists a search scans. Order gets the rotated query and
// returns list numbers nearest first; More is asked before each list after
// the first whether to go on, given how many lists were scanned and the
// searcher's current k-th upper bound.
type Probe struct {
	Order func(qRot []float32, dst []int) []int
	More  func(scanned int, threshold float32) bool
}

// Search returns the smallest set of candidates that, with the codec's
// confidence, holds the k nearest to q among the rows of the lists probe
// picks, at most limit of them, nearest estimate first. A non-nil allow
// restricts the search to its ids (see store.Allow, taken under the same Pin):
// below DirectFraction of the rows it estimates the allowed rows one by
// one instead. It gives up with ctx's error once ctx ends.
func (x *Coded) Search(ctx context.Context, q []float32, k, limit int, probe Probe, allow *store.Allow) ([]store.Hit, error) {
	if len(q) != x.cfg.Dims {
		panic(fmt.Sprintf("ivf lists: %d-d query against %d-d index", len(q), x.cfg.Dims))
	}
	if x.cfg.Metric == kernels.Cosine && kernels.Dot(q, q) == 0 {
		return nil, nil // no row has a cosine distance to the zero vector
	}
	r := x.cur.Load()
	if allow != nil && allow.Rows != nil {
		r = allow.Rows.(*rows)
	}
	g := r.ep.Pin()
	defer g.Unpin()
	qs := x.getQuery(k)
	defer x.query.Put(qs)
	qs.q, qs.r, qs.done = q, r, ctx.Done()
	defer func() { qs.q, qs.r, qs.done = nil, nil, nil }()
	x.rq.RotateQuery(qs.qRot, q)
	if allow != nil && float64(allow.Len()) < DirectFraction*float64(r.keys.Len()) {
		x.scanAllowed(qs, allow)
	} else {
		qs.order = probe.Order(qs.qRot, qs.order[:0])
		d := x.cfg.Dims
		for i, c := range qs.order {
			if qs.stopped() {
				break
			}
			if i > 0 && probe.More != nil && !probe.More(i, qs.s.Threshold()) {
				break
			}
			x.rq.PrepareQuery(&qs.pq, qs.qRot, x.cRot[c*d:(c+1)*d])
			if !r.lists[c].Scan(qs.s, &qs.pq, qs.second, allow, qs.stopped) {
				break
			}
		}
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	return store.Hits(r.keys, x.cfg.Metric, qs.s.Result(limit), q, r.floats), nil
}

// scanAllowed estimates every allowed row directly, list by list.
func (x *Coded) scanAllowed(qs *query, allow *store.Allow) {
	type at struct{ list, slot uint32 }
	var found []at
	allow.Each(func(id uint32) {
		if qs.r.keys.Live(id) {
			l := *qs.r.loc.At(id)
			found = append(found, at{uint32(l >> 32), uint32(l)})
		}
	})
	slices.SortFunc(found, func(a, b at) int { return int(a.list) - int(b.list) })
	d := x.cfg.Dims
	var slots []uint32
	for i := 0; i < len(found) && !qs.stopped(); {
		c := found[i].list
		slots = slots[:0]
		for ; i < len(found) && found[i].list == c; i++ {
			slots = append(slots, found[i].slot)
		}
		x.rq.PrepareQuery(&qs.pq, qs.qRot, x.cRot[int(c)*d:int(c+1)*d])
		qs.r.lists[c].ScanSlots(qs.s, slots, qs.second)
	}
}

// store.Allow turns keys into the set of their ids, for a Search that must
// follow before release is called; unknown keys are ignored. The ids stay
// valid, and the search uses the rows they name, until then.
func (x *Coded) Allow(keys []string) (a *store.Allow, release func()) {
	r := x.cur.Load()
	g := r.ep.Pin()
	a = store.NewAllow()
	a.Rows = r
	for _, k := range keys {
		if id, ok := r.keys.Lookup(k); ok && r.keys.Live(id) {
			a.Add(id)
		}
	}
	return a, g.Unpin
}

// Bytes is the memory the rows hold: codes, factors, second-pass data,
// keys and their index, locations, centroids.
func (x *Coded) Bytes() (codes, floats, keys int64) {
	r := x.cur.Load()
	codes = int64(8 * len(x.centroids))
	for _, l := range r.lists {
		codes += l.Bytes()
	}
	codes += r.ext.Bytes() + r.extF.Bytes()
	if r.floats != nil {
		floats = r.floats.Bytes()
	}
	keys = r.keys.Bytes() + r.loc.Bytes()
	return codes, floats, keys
}

// Lives returns the live rows of each list.
func (x *Coded) Lives() []int {
	r := x.cur.Load()
	out := make([]int, len(r.lists))
	for c, l := range r.lists {
		out[c] = l.Live()
	}
	return out
}

const (
	codedMagic = "VSCD"
	// codedVersion 2: store=float bodies hold each row's extended code
	// too (floatExBits); the bodies of other stores are as in version 1,
	// and are read.
	codedVersion = 2
)

// Snapshot captures the rows as they are now, under the writers' lock for
// as long as copying the live set and the zero vectors takes (a bit per
// row), and returns the function that writes them, which may run while
// writers go on: the rows it writes stay as they were until release,
// which the caller must call once done with write.
//
// Format: "VSCD" version store, codec state, zero-vector keys, centroids,
// the owner's parameters (a count, then float64s), then each live row:
// key, list, 1-bit code and factors, its extended code and factors, and
// with store=float its float32 vector.
func (x *Coded) Snapshot() (write func(io.Writer) error, release func()) {
	x.mu.Lock()
	r := x.cur.Load()
	g := r.ep.Pin()
	live := r.keys.LiveCopy()
	zeros := r.zeros.Sorted()
	x.mu.Unlock()
	write = func(w io.Writer) error {
		b := store.NewBodyWriter(w)
		b.Raw([]byte(codedMagic))
		b.Raw([]byte{codedVersion, byte(x.cfg.Store)})
		state, _ := x.rq.MarshalBinary()
		b.String(string(state))
		b.Uvarint(uint64(len(zeros)))
		for _, k := range zeros {
			b.String(k)
		}
		b.Uvarint(uint64(x.Lists()))
		b.Floats(x.centroids)
		b.Uvarint(uint64(len(x.params)))
		for _, p := range x.params {
			b.Raw(binary.LittleEndian.AppendUint64(nil, math.Float64bits(p)))
		}
		n := 0
		for _, w := range live {
			n += bits.OnesCount64(w)
		}
		b.Uvarint(uint64(n))
		e := store.NewEncoded(x.rq)
		for w, word := range live {
			for ; word != 0; word &= word - 1 {
				id := uint32(w*64 + bits.TrailingZeros64(word))
				list := r.rowCodes(id, &e)
				b.String(r.keys.Key(id))
				b.Uvarint(uint64(list))
				b.Encoded(&e)
				if r.floats != nil {
					b.Floats(r.floats.Row(id))
				}
			}
		}
		return b.Flush()
	}
	return write, g.Unpin
}

// LoadCoded reads a body written by a Coded's Snapshot; cfg's Seed is
// taken from the body.
func LoadCoded(in io.Reader, cfg store.CodedConfig) (*Coded, error) {
	br := store.NewBodyReader(in)
	var head [6]byte
	br.Raw(head[:])
	switch {
	case br.Err() != nil:
	case string(head[:4]) != codedMagic || head[4] != codedVersion && head[4] != 1:
		return nil, fmt.Errorf("ivf lists: not a coded body of version %d", codedVersion)
	case head[4] == 1 && store.Kind(head[5]) == store.Float:
		return nil, fmt.Errorf("ivf lists: a store=float body of version 1, without the extended codes version %d keeps", codedVersion)
	}
	var rq kernels.RaBitQ
	if err := rq.UnmarshalBinary([]byte(br.String())); br.Err() == nil && err != nil {
		return nil, fmt.Errorf("ivf lists: %w", err)
	}
	if br.Err() != nil {
		return nil, fmt.Errorf("ivf lists: %w", br.Err())
	}
	if c := rq.Config(); c.Dim != cfg.Dims || c.Metric != cfg.Metric || store.Kind(head[5]) != cfg.Store || c.ExBits != exBits(cfg.Store) {
		return nil, fmt.Errorf("ivf lists: body holds a %d-d %s store=%s index, want %d-d %s store=%s", c.Dim, c.Metric, store.Kind(head[5]), cfg.Dims, cfg.Metric, cfg.Store)
	}
	cfg.Seed = rq.Config().Seed
	var zeros []string
	for range br.Count(store.MaxRows) {
		zeros = append(zeros, br.String())
	}
	k := br.Count(store.MaxRows / uint64(cfg.Dims))
	centroids := make([]float32, k*cfg.Dims)
	br.Floats(centroids)
	params := make([]float64, br.Count(64))
	for i := range params {
		var p [8]byte
		br.Raw(p[:])
		params[i] = math.Float64frombits(binary.LittleEndian.Uint64(p[:]))
	}
	if br.Err() != nil {
		return nil, fmt.Errorf("ivf lists: %w", br.Err())
	}
	x, err := NewCoded(cfg, centroids)
	if err != nil {
		return nil, err
	}
	x.params = params
	r := x.cur.Load()
	for _, z := range zeros {
		r.zeros.Add(z)
	}
	e := store.NewEncoded(x.rq)
	vec := make([]float32, cfg.Dims)
	for range br.Count(store.MaxRows) {
		key := br.String()
		list := br.Count(uint64(k - 1))
		br.Encoded(&e)
		if r.floats != nil {
			br.Floats(vec)
		}
		if br.Err() != nil {
			break
		}
		if _, dup := r.keys.Lookup(key); dup {
			return nil, fmt.Errorf("ivf lists: key %x stored twice", key)
		}
		r.insert(cfg.Dims, key, list, &e, vec)
	}
	if br.Err() != nil {
		return nil, fmt.Errorf("ivf lists: %w", br.Err())
	}
	return x, nil
}

// Stats reports the rows' size.
func (x *Coded) Stats() kind.Stats {
	codes, floats, keys := x.Bytes()
	return kind.Stats{Rows: x.Len(), CodeBytes: codes, FloatBytes: floats, KeyBytes: keys}
}

// Prepared is a row encoded for Insert, outside the writers' lock.
type Prepared struct {
	p    *prepared
	vec  []float32 // store=float
	zero bool      // a cosine zero vector
}

// Prepare encodes vec against its nearest centroid, for Insert.
func (x *Coded) Prepare(vec []float32) *Prepared {
	if len(vec) != x.cfg.Dims {
		panic(fmt.Sprintf("ivf lists: put of %d-d vector into %d-d index", len(vec), x.cfg.Dims))
	}
	if x.cfg.Metric == kernels.Cosine && kernels.Dot(vec, vec) == 0 {
		return &Prepared{zero: true}
	}
	p := &Prepared{p: x.prepare(vec)}
	if x.cfg.Store == store.Float {
		p.vec = slices.Clone(vec)
	}
	return p
}

// Insert stores a prepared row under key, replacing any row of key.
func (x *Coded) Insert(key string, p *Prepared) {
	x.mu.Lock()
	defer x.mu.Unlock()
	r := x.cur.Load()
	r.delete(key)
	if p.zero {
		r.zeros.Add(key)
		return
	}
	r.insert(x.cfg.Dims, key, p.p.list, &p.p.enc, p.vec)
	x.prep.Put(p.p)
	p.p = nil
}

// DirectFraction is the selectivity below which a filtered search gives up
// the fast scan and estimates the allowed rows one by one: a fast scan
// costs about a twentieth of an extended-code estimate per row, so with
// fewer than that share of rows allowed, visiting them directly is cheaper.
const DirectFraction = 0.05
