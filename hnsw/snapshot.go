package hnsw

import (
	"encoding/binary"
	"fmt"
	"io"
	"math/bits"

	"github.com/vecside/vecside/indexer/store"
	"github.com/vecside/vecside/kernels"
)

const (
	bodyMagic   = "VSHN"
	bodyVersion = 2
	linkedFlag  = 0x80 // in a node's level byte: its linking was over
)

// Snapshot captures the index as it is now and returns the function that
// writes it, which may run while writers go on, and release, which the
// caller must call once done with write.
//
// Under the writers' mutex it copies only the live set (a bit per row)
// and the zero-vector keys, and pins an epoch: the rows of that set
// cannot be reused until release, so write reads their keys, codes and
// lists as they were. Lists may have changed since the capture (edges
// added to rows inserted later, repairs): write keeps the edges between
// rows of the set and drops the others, so the graph it writes is a
// graph over exactly the captured rows; it reads each node's lists under
// that node's lock, so that no list is written halfway rewritten. Rows
// whose linking was not over are marked, and linked again on load.
//
// Format: "VSHN" version store, codec state, m, ef_construction, the
// sample rows and table rows the centroids were trained on and for, the
// centroids (the sample mean, the top count, top centroids, each top's
// end among the leaves, the leaves), the zero-vector keys,
// then the n captured rows in id order: every key, every level byte
// (level | 0x80 if linked), every row's codes (as codes keeps them: the
// extended code, its factors, κ and centroid, and for 6-bit codes the
// top plane's scale and the whole code's κ; or the float32 vector), every row's lists from layer 0 up
// (a count byte, then that many row numbers as uint32, a row's number
// being its place among the n), and the entry point's number + 1 (0 for
// none).
func (x *Index) Snapshot() (write func(io.Writer) error, release func()) {
	x.mu.Lock()
	r := x.cur.Load()
	guard := r.ep.Pin()
	live := r.keys.LiveCopy()
	zeros := r.zeros.Sorted()
	x.mu.Unlock()
	return func(w io.Writer) error { return r.write(w, live, zeros) }, guard.Unpin
}

// ranks numbers the ids of a live set: before[w] is the count of ids
// below 64·w.
type ranks struct {
	live   []uint64
	before []uint32
	n      int
}

func newRanks(live []uint64) ranks {
	rk := ranks{live: live, before: make([]uint32, len(live))}
	for w, word := range live {
		rk.before[w] = uint32(rk.n)
		rk.n += bits.OnesCount64(word)
	}
	return rk
}

// of is id's number, false if id is not in the set.
func (rk ranks) of(id uint32) (uint32, bool) {
	w := int(id / 64)
	if w >= len(rk.live) || rk.live[w]&(1<<(id%64)) == 0 {
		return 0, false
	}
	return rk.before[w] + uint32(bits.OnesCount64(rk.live[w]&(1<<(id%64)-1))), true
}

// each calls fn for every id of the set, in order.
func (rk ranks) each(fn func(id uint32)) {
	for w, word := range rk.live {
		for ; word != 0; word &= word - 1 {
			fn(uint32(w*64 + bits.TrailingZeros64(word)))
		}
	}
}

func (r *gen) write(w io.Writer, live []uint64, zeros []string) error {
	x := r.x
	b := store.NewBodyWriter(w)
	b.Raw([]byte(bodyMagic))
	b.Raw([]byte{bodyVersion, byte(x.cfg.Store)})
	state, _ := x.rq.MarshalBinary()
	b.String(string(state))
	b.Uvarint(uint64(x.cfg.M))
	b.Uvarint(uint64(x.cfg.EfConstruction))
	b.Uvarint(uint64(x.sampled))
	b.Uvarint(uint64(x.trainedFor))
	if x.cents != nil {
		x.cents.write(b)
	}
	b.Uvarint(uint64(len(zeros)))
	for _, k := range zeros {
		b.String(k)
	}
	rk := newRanks(live)
	b.Uvarint(uint64(rk.n))
	rk.each(func(id uint32) { b.String(r.keys.Key(id)) })
	rk.each(func(id uint32) {
		h := r.g.header(id).Load()
		v := byte(level(h))
		if h&hdrLinked != 0 {
			v |= linkedFlag
		}
		b.Raw([]byte{v})
	})
	rk.each(func(id uint32) {
		if r.codes.floats != nil {
			b.Floats(r.codes.floats.Row(id))
		} else {
			b.Raw(r.codes.ext.Row(id))
		}
	})
	var buf []byte
	rk.each(func(id uint32) {
		// A node's lists are copied under its lock: setList rewrites a
		// list in place, and one read halfway could hold an edge twice.
		buf = buf[:0]
		r.g.lock(id)
		for layer := range level(r.g.header(id).Load()) + 1 {
			at := len(buf)
			buf = append(buf, 0)
			words, n := r.g.list(id, layer)
			for i := range n {
				if nb, ok := rk.of(words[i].Load()); ok {
					buf = binary.LittleEndian.AppendUint32(buf, nb)
					buf[at]++
				}
			}
		}
		r.g.unlock(id)
		b.Raw(buf)
	})
	entry := uint64(0)
	if ep, _, ok := r.g.entryPoint(); ok {
		if n, ok := rk.of(ep); ok {
			entry = uint64(n) + 1
		}
	}
	b.Uvarint(entry)
	return b.Flush()
}

// Load reads a body written by an index's Snapshot, graph included: no
// distance is computed but for rows whose linking was not over, which are
// linked again in the background.
func Load(in io.Reader, cfg Config) (*Index, error) {
	cfg.defaults()
	br := store.NewBodyReader(in)
	var head [6]byte
	br.Raw(head[:])
	if br.Err() == nil && (string(head[:4]) != bodyMagic || head[4] != bodyVersion) {
		return nil, fmt.Errorf("hnsw: not an hnsw body of version %d", bodyVersion)
	}
	var rq kernels.RaBitQ
	if err := rq.UnmarshalBinary([]byte(br.String())); br.Err() == nil && err != nil {
		return nil, fmt.Errorf("hnsw: %w", err)
	}
	m, efc, sampled, trainedFor := int(br.Uvarint()), int(br.Uvarint()), int(br.Uvarint()), int(br.Uvarint())
	if br.Err() != nil {
		return nil, fmt.Errorf("hnsw: %w", br.Err())
	}
	if c := rq.Config(); c.Dim != cfg.Dims || c.Metric != cfg.Metric || store.Kind(head[5]) != cfg.Store || c.ExBits != cfg.Store.ExBits() || m != cfg.M {
		return nil, fmt.Errorf("hnsw: body holds a %d-d %s store=%s m=%d index, want %d-d %s store=%s m=%d",
			c.Dim, c.Metric, store.Kind(head[5]), m, cfg.Dims, cfg.Metric, cfg.Store, cfg.M)
	}
	cfg.Seed, cfg.EfConstruction = rq.Config().Seed, efc
	if err := cfg.check(); err != nil {
		return nil, err
	}
	var cents *centroids
	if cfg.Store != store.Float {
		cents = readCentroids(br, cfg.Dims)
		if br.Err() != nil {
			return nil, fmt.Errorf("hnsw: %w", br.Err())
		}
	}
	var zeros []string
	for range br.Count(store.MaxRows) {
		zeros = append(zeros, br.String())
	}
	if br.Err() != nil {
		return nil, fmt.Errorf("hnsw: %w", br.Err())
	}
	x := newIndex(cfg, &rq, cents)
	x.sampled, x.trainedFor = sampled, trainedFor
	r := x.cur.Load()
	for _, z := range zeros {
		r.zeros.Add(z)
	}
	if err := r.read(br); err != nil {
		return nil, fmt.Errorf("hnsw: %w", err)
	}
	return x, nil
}

// read fills an empty generation with the rows of a body, ids in the
// body's order, and queues the rows not linked yet.
func (r *gen) read(br *store.BodyReader) error {
	n := br.Count(store.MaxRows)
	for i := range n {
		key := br.String()
		if br.Err() != nil {
			return br.Err()
		}
		if w := r.x.cfg.KeyWidth; w > 0 && len(key) != w {
			return fmt.Errorf("a key of %d bytes, want %d", len(key), w)
		}
		if _, dup := r.keys.Lookup(key); dup {
			return fmt.Errorf("key %x stored twice", key)
		}
		if id := r.keys.Alloc(key); int(id) != i {
			panic("hnsw: a fresh key table did not number keys in order")
		}
	}
	r.codes.grow(n)
	r.g.grow(n)
	levels := make([]byte, n)
	br.Raw(levels)
	for id, v := range levels {
		if int(v&^linkedFlag) > maxLevel {
			return fmt.Errorf("row %d has level %d", id, v&^linkedFlag)
		}
		r.g.init(uint32(id), int(v&^linkedFlag), false)
	}
	if r.codes.floats != nil {
		for id := range n {
			br.Floats(r.codes.floats.Row(uint32(id)))
		}
	} else {
		k := uint32(r.codes.cents.len())
		for id := range n {
			row := r.codes.ext.Row(uint32(id))
			br.Raw(row)
			if _, _, _, c := r.codes.unpack(row); c >= k && br.Err() == nil {
				return fmt.Errorf("row %d is encoded against centroid %d of %d", id, c, k)
			}
		}
	}
	ids := make([]uint32, 0, 2*r.x.cfg.M)
	buf := make([]byte, 4*2*r.x.cfg.M)
	for id := range uint32(n) {
		for layer := range int(levels[id]&^linkedFlag) + 1 {
			var c [1]byte
			br.Raw(c[:])
			count := int(c[0])
			if count > r.g.capacity(layer) {
				br.Fail(fmt.Errorf("row %d has %d neighbours on layer %d", id, count, layer))
			}
			if br.Err() != nil {
				return br.Err()
			}
			br.Raw(buf[:4*count])
			ids = ids[:0]
			for i := range count {
				nb := binary.LittleEndian.Uint32(buf[4*i:])
				if nb >= uint32(n) || int(levels[nb]&^linkedFlag) < layer {
					return fmt.Errorf("row %d links to row %d on layer %d", id, nb, layer)
				}
				ids = append(ids, nb)
			}
			r.g.setList(id, layer, ids)
		}
	}
	entry := br.Count(uint64(n))
	if br.Err() != nil {
		return br.Err()
	}
	vec := make([]float32, r.x.cfg.Dims)
	for id := range uint32(n) {
		r.keys.Publish(id)
		if levels[id]&linkedFlag != 0 {
			r.g.setLinked(id)
			if r.reps != nil {
				r.reps[r.codes.centroidOf(id)].CompareAndSwap(none, id)
			}
		}
	}
	// The entry point as written, unless it was replaced after the
	// capture, or a linked row of a higher level was captured (the top
	// node, deleted after the capture, handed the entry to a lower one).
	top := -1
	for _, v := range levels {
		if v&linkedFlag != 0 {
			top = max(top, int(v&^linkedFlag))
		}
	}
	if entry > 0 && int(levels[entry-1]&^linkedFlag) >= top {
		r.g.setEntry(uint32(entry-1), int(levels[entry-1]&^linkedFlag))
	} else {
		r.replaceEntry()
	}
	for id := range uint32(n) {
		if levels[id]&linkedFlag == 0 {
			r.codes.decode(vec, id)
			r.enqueue(id, vec, nil, true) // the checkpoint's rows, at full width as a copy's
		}
	}
	return nil
}
