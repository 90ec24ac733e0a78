package flat

import (
	"context"
	"fmt"
	"io"
	"runtime"
	"slices"
	"sync"

	"github.com/vecside/vecside/kernels"
)

// Coded is the flat index on RaBitQ codes: one List of 1-bit codes with
// extended codes for the second pass, relative to the mean of the data.
// Rows put before Finish are kept as float32 and searched exactly; Finish
// computes the mean, encodes them and drops the floats. After that every
// Put is encoded as it comes. Internal ids equal list slots.
type Coded struct {
	metric   kernels.Metric
	dims     int
	store    Store
	rq       *kernels.RaBitQ
	copied   bool      // Finish has come: encode once there are minMeanRows rows
	finished bool      // rows are encoded
	centroid []float32 // mean of the data at Finish (normalised rows for cosine)
	cRot     []float32 // its rotation, for PrepareQuery
	table    *Table
	list     *List
	pending  []float32           // before Finish: id → vector
	zeros    map[string]struct{} // cosine zero vectors: held, never returned
	enc      Encoded             // scratch for writers
	scratch  sync.Pool           // *codedScratch for searches
}

type codedScratch struct {
	qRot []float32
	pq   kernels.Query
	s    *Searcher
}

// CodedConfig configures a coded flat index.
type CodedConfig struct {
	Metric kernels.Metric
	Dims   int
	Store  Store  // StoreExt4 or StoreExt8
	Seed   uint64 // of the random rotation
}

// NewCoded returns an empty coded index.
func NewCoded(cfg CodedConfig) (*Coded, error) {
	if cfg.Store != StoreExt4 && cfg.Store != StoreExt8 {
		return nil, fmt.Errorf("flat: coded index with store=%s (float is the float index)", cfg.Store)
	}
	rq, err := kernels.NewRaBitQ(kernels.RaBitQConfig{Dim: cfg.Dims, Metric: cfg.Metric, ExBits: cfg.Store.ExBits(), Seed: cfg.Seed})
	if err != nil {
		return nil, fmt.Errorf("flat: %w", err)
	}
	return newCoded(rq, cfg.Store), nil
}

func newCoded(rq *kernels.RaBitQ, store Store) *Coded {
	c := rq.Config()
	return &Coded{
		metric: c.Metric, dims: c.Dim, store: store, rq: rq,
		table: NewTable(), list: NewList(rq), zeros: map[string]struct{}{}, enc: NewEncoded(rq),
	}
}

// Dims is the dimension of every vector held.
func (x *Coded) Dims() int { return x.dims }

// Len is the number of keys held, zero vectors included.
func (x *Coded) Len() int { return x.table.Live() + len(x.zeros) }

// ZeroVectors counts held vectors that have no cosine distance.
func (x *Coded) ZeroVectors() int { return len(x.zeros) }

// Has reports whether key is held.
func (x *Coded) Has(key string) bool {
	if _, ok := x.zeros[key]; ok {
		return true
	}
	_, ok := x.table.Lookup(key)
	return ok
}

// Each calls fn for every key held, with a nil vector: the index keeps
// codes only.
func (x *Coded) Each(fn func(key string, vec []float32)) {
	for _, id := range x.liveIDs(0) {
		fn(x.table.Key(id), nil)
	}
	for k := range x.zeros {
		fn(k, nil)
	}
}

// Put inserts key or replaces its vector.
func (x *Coded) Put(key string, vec []float32) {
	if len(vec) != x.dims {
		panic(fmt.Sprintf("flat: put of %d-d vector into %d-d index", len(vec), x.dims))
	}
	x.Delete(key)
	if x.metric == kernels.Cosine && kernels.Dot(vec, vec) == 0 {
		x.zeros[key] = struct{}{}
		return
	}
	id := x.table.Add(key)
	if !x.finished {
		x.pending = append(x.pending, vec...)
		x.maybeEncodePending()
		return
	}
	x.enc.Encode(x.rq, vec, x.centroid)
	x.list.Append(id, &x.enc)
}

// Delete removes key, reporting whether it was present.
func (x *Coded) Delete(key string) bool {
	if _, ok := x.zeros[key]; ok {
		delete(x.zeros, key)
		return true
	}
	id, ok := x.table.Lookup(key)
	if !ok {
		return false
	}
	x.table.Retire(key)
	if x.finished {
		x.list.Kill(id)
		if d := x.list.Dead(); d > 1024 && d > x.list.Live()/4 {
			x.compact()
		}
	}
	return true
}

// compact rebuilds the table and list without tombstones: a copy of the
// codes, about 100 ms per million vectors, under the owner's write lock.
func (x *Coded) compact() {
	table, list := NewTable(), NewList(x.rq)
	for slot := range uint32(x.list.Len()) {
		if x.list.Alive(slot) {
			x.list.Get(slot, &x.enc)
			list.Append(table.Add(x.table.Key(slot)), &x.enc)
		}
	}
	x.table, x.list = table, list
}

// Rename gives the entry of from the key to, replacing any entry of to.
// It reports whether from was present.
func (x *Coded) Rename(from, to string) bool {
	if !x.Has(from) {
		return false
	}
	if from == to {
		return true
	}
	x.Delete(to)
	if _, ok := x.zeros[from]; ok {
		delete(x.zeros, from)
		x.zeros[to] = struct{}{}
		return true
	}
	id, _ := x.table.Lookup(from)
	x.table.Retire(from)
	if !x.finished {
		vec := x.pending[int(id)*x.dims : int(id+1)*x.dims]
		x.table.Add(to)
		x.pending = append(x.pending, vec...)
		return true
	}
	x.list.Get(id, &x.enc)
	x.list.Kill(id)
	x.list.Append(x.table.Add(to), &x.enc)
	return true
}

// Clear removes every entry; the mean found by Finish stays.
func (x *Coded) Clear() {
	x.table, x.list, x.pending = NewTable(), NewList(x.rq), nil
	clear(x.zeros)
}

// minMeanRows is the fewest rows the mean is taken over: an index whose
// table was (nearly) empty when Finish came keeps its rows as floats
// until this many have been put, then encodes them within that Put.
const minMeanRows = 1024

// Finish encodes the rows put so far against their mean, using every
// core, and makes later puts encode as they come; with fewer than
// minMeanRows rows it waits for more first. Called again, it does
// nothing.
//
// lock is the owner's write lock. Finish holds it only to list rows and
// to switch to the codes, so writers keep going meanwhile: it encodes the
// rows listed, then lists and encodes the rows put since, in a few
// rounds, and lays out the new table and list. Under the lock it then
// drops the rows deleted since and encodes the few put since. Puts append
// to pending and the table's keys and never rewrite them, so the rows
// listed read safely without the lock.
func (x *Coded) Finish(lock sync.Locker) {
	lock.Lock()
	if x.finished || x.table.Live() < minMeanRows {
		x.copied = true
		lock.Unlock()
		return
	}
	old, pending, keys, ids, slots := x.table, x.pending, x.table.Keys(), x.liveIDs(0), x.table.Slots()
	lock.Unlock()
	centroid := Mean(x.metric, x.dims, len(ids), func(i int) []float32 { return pendingRow(pending, x.dims, ids[i]) })
	codes := x.encodeRows(pending, ids, centroid)
	const rounds, few = 3, 1000
	for round := 0; round < rounds; round++ {
		lock.Lock()
		if x.table != old || x.table.Slots()-slots <= few {
			lock.Unlock()
			break
		}
		more := x.liveIDs(slots)
		pending, keys, slots = x.pending, x.table.Keys(), x.table.Slots()
		lock.Unlock()
		codes = append(codes, x.encodeRows(pending, more, centroid)...)
		ids = append(ids, more...)
	}
	table, list := NewTable(), NewList(x.rq)
	for i, id := range ids {
		list.Append(table.Add(keys[id]), &codes[i])
	}
	lock.Lock()
	defer lock.Unlock()
	x.copied = true
	if x.table != old { // cleared meanwhile: what is there came since
		x.maybeEncodePending()
		return
	}
	// The new ids are the positions in ids. A key put again after it was
	// listed is listed twice, and only its last listing can be live.
	for i, id := range ids {
		if cur, ok := x.table.Lookup(keys[id]); !ok || cur != id {
			if now, _ := table.Lookup(keys[id]); now == uint32(i) {
				table.Retire(keys[id])
			}
			list.Kill(uint32(i))
		}
	}
	x.install(centroid, table, list, x.liveIDs(slots))
}

// maybeEncodePending encodes the pending rows in place once Finish has
// come and there are enough of them for a mean.
func (x *Coded) maybeEncodePending() {
	if x.finished || !x.copied || x.table.Live() < minMeanRows {
		return
	}
	ids := x.liveIDs(0)
	centroid := Mean(x.metric, x.dims, len(ids), func(i int) []float32 { return x.pendingVec(ids[i]) })
	x.install(centroid, NewTable(), NewList(x.rq), ids)
}

// liveIDs lists the ids from from on whose key still maps to them.
func (x *Coded) liveIDs(from int) []uint32 {
	var ids []uint32
	for id := uint32(from); id < uint32(x.table.Slots()); id++ {
		if live, ok := x.table.Lookup(x.table.Key(id)); ok && live == id {
			ids = append(ids, id)
		}
	}
	return ids
}

// encodeRows encodes the pending rows ids against centroid, on every core.
func (x *Coded) encodeRows(pending []float32, ids []uint32, centroid []float32) []Encoded {
	return EncodeAll(x.rq, len(ids), func(i int) ([]float32, []float32) {
		return pendingRow(pending, x.dims, ids[i]), centroid
	})
}

// install switches to the codes in table and list, relative to centroid,
// after encoding into them the pending rows more.
func (x *Coded) install(centroid []float32, table *Table, list *List, more []uint32) {
	codes := x.encodeRows(x.pending, more, centroid)
	for i, id := range more {
		list.Append(table.Add(x.table.Key(id)), &codes[i])
	}
	x.centroid = centroid
	x.cRot = make([]float32, x.dims)
	x.rq.Rotate(x.cRot, centroid)
	x.table, x.list, x.pending, x.finished = table, list, nil, true
}

func pendingRow(pending []float32, dims int, id uint32) []float32 {
	return pending[int(id)*dims : int(id+1)*dims]
}

func (x *Coded) pendingVec(id uint32) []float32 { return pendingRow(x.pending, x.dims, id) }

// Mean returns the mean of n vectors (normalised first for the cosine
// metric, as the codec sees them); the zero vector for n = 0.
func Mean(m kernels.Metric, dims, n int, vec func(i int) []float32) []float32 {
	sum := make([]float64, dims)
	for i := range n {
		v := vec(i)
		scale := 1.0
		if m == kernels.Cosine {
			if nn := kernels.Dot(v, v); nn > 0 {
				scale = 1 / sqrt64(float64(nn))
			}
		}
		for j, f := range v {
			sum[j] += float64(f) * scale
		}
	}
	out := make([]float32, dims)
	if n > 0 {
		for j, s := range sum {
			out[j] = float32(s / float64(n))
		}
	}
	return out
}

// EncodeAll encodes n vectors, each against its centroid, on every core.
func EncodeAll(rq *kernels.RaBitQ, n int, vec func(i int) (v, centroid []float32)) []Encoded {
	out := make([]Encoded, n)
	code := make([]byte, n*rq.CodeBytes())
	ext := make([]byte, n*rq.ExtBytes())
	Parallel(n, func(lo, hi int) {
		for i := lo; i < hi; i++ {
			e := &out[i]
			e.Code = code[i*rq.CodeBytes() : (i+1)*rq.CodeBytes()]
			e.Ext = ext[i*rq.ExtBytes() : (i+1)*rq.ExtBytes()]
			v, c := vec(i)
			e.Encode(rq, v, c)
		}
	})
	return out
}

// Parallel runs fn over [0, n) cut into one contiguous range per core
// and waits for all of them.
func Parallel(n int, fn func(lo, hi int)) {
	workers := min(runtime.GOMAXPROCS(0), max(1, n/64))
	var wg sync.WaitGroup
	for w := range workers {
		lo, hi := n*w/workers, n*(w+1)/workers
		wg.Add(1)
		go func() {
			defer wg.Done()
			fn(lo, hi)
		}()
	}
	wg.Wait()
}

// Search returns the smallest set of candidates that, with the codec's
// confidence, holds the k nearest to q (at most limit of them), nearest
// estimate first, with estimated distances. A non-nil allow restricts the
// search to those ids (see AllowKeys).
func (x *Coded) Search(ctx context.Context, q []float32, k, limit int, allow *Allow) ([]Hit, error) {
	if len(q) != x.dims {
		panic(fmt.Sprintf("flat: %d-d query against %d-d index", len(q), x.dims))
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if x.metric == kernels.Cosine && kernels.Dot(q, q) == 0 {
		return nil, nil // no row has a cosine distance to the zero vector
	}
	sc, _ := x.scratch.Get().(*codedScratch)
	if sc == nil {
		sc = &codedScratch{qRot: make([]float32, x.dims), s: NewSearcher(x.rq, k)}
	}
	defer x.scratch.Put(sc)
	s := sc.s
	s.Reset(k)
	if !x.finished {
		for id := range uint32(x.table.Slots()) {
			if live, ok := x.table.Lookup(x.table.Key(id)); ok && live == id && (allow == nil || allow.Has(id)) {
				s.Offer(id, ExactEstimate(x.metric, q, x.pendingVec(id)), 0)
			}
		}
	} else {
		x.rq.RotateQuery(sc.qRot, q)
		x.rq.PrepareQuery(&sc.pq, sc.qRot, x.cRot)
		if allow != nil && float64(allow.Len()) < DirectFraction*float64(x.list.Live()) {
			slots := make([]uint32, 0, allow.Len())
			allow.Each(func(id uint32) {
				if int(id) < x.list.Len() {
					slots = append(slots, id)
				}
			})
			x.list.ScanSlots(s, &sc.pq, slots, nil)
		} else {
			x.list.Scan(s, &sc.pq, nil, allow)
		}
	}
	found := s.Result(limit)
	hits := make([]Hit, len(found))
	for i, c := range found {
		hits[i] = Hit{Key: x.table.Key(c.ID), Distance: Distance(x.metric, c.Est)}
	}
	return hits, nil
}

// AllowKeys turns keys into the set of their internal ids, for Search.
// Unknown keys are ignored.
func (x *Coded) AllowKeys(keys []string) *Allow {
	a := NewAllow()
	for _, k := range keys {
		if id, ok := x.table.Lookup(k); ok {
			a.Add(id)
		}
	}
	return a
}

// ExactEstimate is the exact distance in the codec's terms: squared for
// L2, 1-cos for cosine, the negative inner product for ip.
func ExactEstimate(m kernels.Metric, q, v []float32) float32 {
	switch m {
	case kernels.L2:
		return kernels.L2Sq(q, v)
	case kernels.Cosine:
		return kernels.CosineDistance(q, v)
	}
	return -kernels.Dot(q, v)
}

// Stats reports the index's size and shape.
func (x *Coded) Stats() Stats {
	return Stats{
		Rows:       x.Len(),
		Tombstones: x.list.Dead(),
		CodeBytes:  x.list.Bytes(),
		FloatBytes: 4 * int64(cap(x.pending)),
		KeyBytes:   x.table.Bytes(),
		Lists:      []int{x.list.Live()},
	}
}

const (
	codedMagic   = "VSFC"
	codedVersion = 1
)

// Snapshot returns a function that writes the index as it is now (see the
// package doc for the format). Taking it shares the codes (see
// List.Freeze) and copies the tombstones; the returned function may run
// without the owner's lock while the index changes.
func (x *Coded) Snapshot() func(io.Writer) error {
	keys, list, finished := x.table.Keys(), x.list.Freeze(), x.finished
	centroid := x.centroid
	zeros := make([]string, 0, len(x.zeros))
	for k := range x.zeros {
		zeros = append(zeros, k)
	}
	slices.Sort(zeros)
	state, _ := x.rq.MarshalBinary()
	var pendingIDs []uint32
	var pending []float32
	if !finished {
		pendingIDs = x.liveIDs(0)
		pending = x.pending[:len(x.pending):len(x.pending)]
	}
	dims, store := x.dims, x.store
	return func(w io.Writer) error {
		b := NewBodyWriter(w)
		b.Raw([]byte(codedMagic))
		b.Raw([]byte{codedVersion, byte(store)})
		b.String(string(state))
		b.Uvarint(uint64(len(zeros)))
		for _, k := range zeros {
			b.String(k)
		}
		if !finished {
			b.Raw([]byte{0})
			b.Uvarint(uint64(len(pendingIDs)))
			for _, id := range pendingIDs {
				b.String(keys[id])
				b.Floats(pending[int(id)*dims : int(id+1)*dims])
			}
			return b.Flush()
		}
		b.Raw([]byte{1})
		b.Floats(centroid)
		b.Uvarint(uint64(list.Live()))
		enc := Encoded{Code: make([]byte, list.codeBytes), Ext: make([]byte, list.extBytes)}
		for slot := range uint32(list.Len()) {
			if list.Alive(slot) {
				list.Get(slot, &enc)
				b.String(keys[list.ID(slot)])
				b.Encoded(&enc, true)
			}
		}
		return b.Flush()
	}
}

// LoadCoded reads a body written by a Coded's Snapshot.
func LoadCoded(r io.Reader, metric kernels.Metric, dims int) (*Coded, error) {
	br := NewBodyReader(r)
	var head [6]byte
	br.Raw(head[:])
	if br.Err() == nil && (string(head[:4]) != codedMagic || head[4] != codedVersion) {
		return nil, fmt.Errorf("flat: not a coded flat body of version %d", codedVersion)
	}
	store := Store(head[5])
	var rq kernels.RaBitQ
	if err := rq.UnmarshalBinary([]byte(br.String())); br.Err() == nil && err != nil {
		return nil, fmt.Errorf("flat: %w", err)
	}
	if br.Err() != nil {
		return nil, fmt.Errorf("flat: %w", br.Err())
	}
	if c := rq.Config(); c.Dim != dims || c.Metric != metric || c.ExBits != store.ExBits() || (store != StoreExt4 && store != StoreExt8) {
		return nil, fmt.Errorf("flat: body holds a %d-d %s %s index, want %d-d %s", c.Dim, c.Metric, store, dims, metric)
	}
	x := newCoded(&rq, store)
	for range br.Count(MaxRows) {
		x.zeros[br.String()] = struct{}{}
	}
	var finished [1]byte
	br.Raw(finished[:])
	if finished[0] == 0 {
		vec := make([]float32, dims)
		for range br.Count(MaxRows) {
			key := br.String()
			br.Floats(vec)
			if br.Err() != nil {
				break
			}
			x.Put(key, vec)
		}
	} else {
		x.finished = true
		x.centroid = make([]float32, dims)
		br.Floats(x.centroid)
		x.cRot = make([]float32, dims)
		rq.Rotate(x.cRot, x.centroid)
		for range br.Count(MaxRows) {
			key := br.String()
			br.Encoded(&x.enc, true)
			if br.Err() != nil {
				break
			}
			if x.Has(key) {
				return nil, fmt.Errorf("flat: key %q stored twice", key)
			}
			x.list.Append(x.table.Add(key), &x.enc)
		}
	}
	if br.Err() != nil {
		return nil, fmt.Errorf("flat: %w", br.Err())
	}
	return x, nil
}
