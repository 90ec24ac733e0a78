package flat

import (
	"context"
	"fmt"
	"io"
	"math"
	"slices"

	"github.com/vecside/vecside/kernels"
)

// Index is an exact float32 index over vectors of one dimension.
type Index struct {
	metric kernels.Metric
	dims   int
	vecs   slab      // slot-major, dims per slot
	norms  []float32 // per slot, cosine only
	keys   []string  // slot → key
	slots  map[string]uint32
	zeros  int // vectors with norm 0 under cosine
}

// Hit is a search result: a key and its distance under the index's metric.
type Hit struct {
	Key      string
	Distance float64
}

// New returns an empty index.
func New(metric kernels.Metric, dims int) *Index {
	return &Index{metric: metric, dims: dims, vecs: slab{width: dims}, slots: map[string]uint32{}}
}

// Dims is the dimension of every vector held.
func (x *Index) Dims() int { return x.dims }

// Len is the number of vectors held.
func (x *Index) Len() int { return len(x.keys) }

// ZeroVectors counts held vectors that have no cosine distance.
func (x *Index) ZeroVectors() int { return x.zeros }

// Bytes is the memory held by vectors and norms (not the key map).
func (x *Index) Bytes() int { return x.vecs.bytes() + 4*cap(x.norms) }

// Put inserts key or replaces its vector. vec must have Dims elements; it
// is copied.
func (x *Index) Put(key string, vec []float32) {
	if len(vec) != x.dims {
		panic(fmt.Sprintf("flat: put of %d-d vector into %d-d index", len(vec), x.dims))
	}
	slot, ok := x.slots[key]
	if !ok {
		slot = uint32(len(x.keys))
		x.slots[key] = slot
		x.keys = append(x.keys, key)
		x.vecs.appendRow(vec)
		if x.metric == kernels.Cosine {
			x.norms = append(x.norms, 0)
		}
	} else {
		copy(x.vecs.mutableRow(int(slot)), vec)
		x.countZero(slot, -1)
	}
	if x.metric == kernels.Cosine {
		x.norms[slot] = float32(math.Sqrt(float64(kernels.Dot(vec, vec))))
		x.countZero(slot, +1)
	}
}

func (x *Index) countZero(slot uint32, delta int) {
	if x.metric == kernels.Cosine && x.norms[slot] == 0 {
		x.zeros += delta
	}
}

func (x *Index) row(slot uint32) []float32 { return x.vecs.row(int(slot)) }

// Vector returns the stored vector of key (aliasing the index's storage:
// read it under the owner's lock, copy it to keep it).
func (x *Index) Vector(key string) ([]float32, bool) {
	slot, ok := x.slots[key]
	if !ok {
		return nil, false
	}
	return x.row(slot), true
}

// Delete removes key, reporting whether it was present.
func (x *Index) Delete(key string) bool {
	slot, ok := x.slots[key]
	if !ok {
		return false
	}
	x.countZero(slot, -1)
	last := uint32(len(x.keys) - 1)
	if slot != last {
		moved := x.keys[last]
		copy(x.vecs.mutableRow(int(slot)), x.row(last))
		x.keys[slot] = moved
		x.slots[moved] = slot
		if x.metric == kernels.Cosine {
			x.norms[slot] = x.norms[last]
		}
	}
	delete(x.slots, key)
	x.keys = x.keys[:last]
	x.vecs.dropLast()
	if x.metric == kernels.Cosine {
		x.norms = x.norms[:last]
	}
	return true
}

// Rename gives the entry of from the key to, replacing any entry of to.
// It reports whether from was present.
func (x *Index) Rename(from, to string) bool {
	if _, ok := x.slots[from]; !ok {
		return false
	}
	if from == to {
		return true
	}
	x.Delete(to)
	slot := x.slots[from] // after Delete, which may have moved it
	delete(x.slots, from)
	x.slots[to] = slot
	x.keys[slot] = to
	return true
}

// Clear removes every entry.
func (x *Index) Clear() {
	*x = *New(x.metric, x.dims)
}

// scanBlock is how many rows one kernel call covers: a few hundred
// microseconds at most, even at high dimensions.
const scanBlock = 256

// Search returns the k nearest entries to q, nearest first, with exact
// distances. Ties are broken by slot order, which is deterministic for a
// given history. It checks ctx between blocks and gives up with its error.
func (x *Index) Search(ctx context.Context, q []float32, k int) ([]Hit, error) {
	if len(q) != x.dims {
		panic(fmt.Sprintf("flat: %d-d query against %d-d index", len(q), x.dims))
	}
	top := kernels.NewTopK(k)
	dist := make([]float32, scanBlock)
	var qnorm float32
	if x.metric == kernels.Cosine {
		qnorm = float32(math.Sqrt(float64(kernels.Dot(q, q))))
		if qnorm == 0 {
			return nil, nil // no row has a cosine distance to the zero vector
		}
	}
	var err error
	blocks := 0
	x.vecs.blocks(func(start int, block []float32) bool {
		if blocks++; blocks%64 == 0 && ctx.Err() != nil {
			err = ctx.Err()
			return false
		}
		n := len(block) / x.dims
		if x.metric == kernels.L2 {
			kernels.L2SqBlock(q, block, dist[:n])
		} else {
			kernels.DotBlock(q, block, dist[:n])
		}
		for i, d := range dist[:n] {
			slot := start + i
			switch x.metric {
			case kernels.IP:
				d = -d
			case kernels.Cosine:
				norm := x.norms[slot]
				if norm == 0 {
					continue
				}
				d = 1 - d/(qnorm*norm)
			}
			if d < top.Worst() || !top.Full() {
				top.Push(uint32(slot), d)
			}
		}
		return true
	})
	if err != nil {
		return nil, err
	}
	found := top.Sorted()
	hits := make([]Hit, len(found))
	for i, n := range found {
		hits[i] = Hit{Key: x.keys[n.ID], Distance: x.metric.Distance(q, x.row(n.ID))}
	}
	return hits, nil
}

// Snapshot returns a function that writes the index as it is now (see the
// package doc for the format). Taking it copies the key list and freezes
// the vectors (see slab); the returned function may run without the
// owner's lock while the index changes.
func (x *Index) Snapshot() func(io.Writer) error {
	keys := slices.Clone(x.keys)
	vecs := x.vecs.freeze()
	return func(w io.Writer) error {
		b := NewBodyWriter(w)
		b.Uvarint(uint64(len(keys)))
		for _, k := range keys {
			b.String(k)
		}
		vecs.blocks(func(_ int, rows []float32) bool {
			b.Floats(rows)
			return true
		})
		return b.Flush()
	}
}

// Load reads a body written by a Snapshot into a new index. The vectors
// are read in one pass into the slab: loading costs little more than
// reading the file.
func Load(r io.Reader, metric kernels.Metric, dims int) (*Index, error) {
	b := NewBodyReader(r)
	n := b.Count(MaxRows)
	x := &Index{metric: metric, dims: dims, vecs: slab{width: dims}, keys: make([]string, 0, n), slots: make(map[string]uint32, n)}
	for i := 0; i < n && b.Err() == nil; i++ {
		key := b.String()
		if _, dup := x.slots[key]; dup {
			b.Fail(fmt.Errorf("key %x appears twice", key))
		}
		x.slots[key] = uint32(i)
		x.keys = append(x.keys, key)
	}
	row := make([]float32, dims)
	for i := 0; i < n && b.Err() == nil; i++ { // the keys were there: n is no corrupt count
		b.Floats(row)
		x.vecs.appendRow(row)
	}
	if err := b.Err(); err != nil {
		return nil, fmt.Errorf("flat: %w", err)
	}
	if metric == kernels.Cosine {
		x.norms = make([]float32, n)
		for slot := range x.norms {
			v := x.row(uint32(slot))
			x.norms[slot] = float32(math.Sqrt(float64(kernels.Dot(v, v))))
			x.countZero(uint32(slot), +1)
		}
	}
	return x, nil
}

// Each calls fn for every entry, in slot order. vec aliases the index's
// storage.
func (x *Index) Each(fn func(key string, vec []float32)) {
	for slot, key := range x.keys {
		fn(key, x.row(uint32(slot)))
	}
}

// Has reports whether key is held.
func (x *Index) Has(key string) bool {
	_, ok := x.slots[key]
	return ok
}

// Stats reports the index's size; its vectors count as codes.
func (x *Index) Stats() Stats {
	var keyBytes int64
	for _, k := range x.keys {
		keyBytes += int64(len(k))
	}
	return Stats{
		Rows:      x.Len(),
		CodeBytes: int64(x.Bytes()),
		KeyBytes:  keyBytes + 16*int64(cap(x.keys)) + 48*int64(len(x.slots)),
		Lists:     []int{x.Len()},
	}
}
