package calibrate

import (
	"cmp"
	"encoding/json"
	"fmt"
	"math"
	"math/bits"
	"math/rand/v2"
	"slices"
	"sync"
	"sync/atomic"

	"github.com/vecside/vecside/indexer/store"
	"github.com/vecside/vecside/kernels"
)

const (
	// Bases is how many rows of its table an index takes its calibration
	// queries from, each searched for held out and as itself: enough
	// that the mean recall@10 of new items is within about ±0.005 (one
	// standard error; a search's recall varies from 0.6 to 1 at a mean
	// of 0.95).
	Bases = 192
	// Queries is the most query vectors a Set keeps, few enough that
	// their distances to each row cost about 30 µs of its encoding at
	// 1,536 dimensions (a second core's half a minute for a million
	// rows).
	Queries = 2 * Bases
	// K is the depth recall is calibrated for: recall@10.
	K = 10
	// depth is how many nearest rows a query's list keeps: K, and as
	// many again so that deletes of its neighbours leave it exact.
	depth = 2 * K
	// nnSample bounds the sample rows a base's nearest neighbour is
	// looked for among.
	nnSample = 20_000
)

// offsets are how far the moved queries lie from their base row, in
// multiples of the distance from the base to its nearest row in the
// sample: near-duplicates of a row, between the row itself (offset 0)
// and a new item (the row held out: offset 1, its nearest other row at
// the rows' spacing). Moving a row farther off, by noise, does not make
// a new item: on text-like sets, rows moved by their spacing were harder
// than held-out draws, whose recall@10 they underestimated by 0.05. The
// table's rows lie closer together than the sample's, by a factor that
// depends on the data; each moved query's offset is measured against the
// table once the copy is done.
var offsets = [...]float64{0.2, 0.35, 0.6}

// query is one calibration query: a row of the table, or one moved off
// it, its nearest other rows, and how far that list is known to be
// exact.
type query struct {
	base  int32   // the index of the query of its base row
	shift float32 // how far it was moved off that row (0: the row itself)
	rel   float32 // shift in multiples of the base row's spacing in the sample
	// own is the key of the row the query was taken from while that row
	// is in the table ("" otherwise): left out of the query's list and
	// of its searches' answers, so that the query is a held-out row.
	own  string
	hash uint64 // of the vector's bits, to recognise its row (see Set.own)
	// list holds the nearest rows known, in order. Every row of the
	// table not in it is at least bound away (+Inf while none was ever
	// left out), so the list's rows nearer than bound are the table's
	// nearest: deletes shorten that prefix, inserts may extend it.
	list  []neighbour
	bound float32
}

// exact is how many of the list's rows are known to be the table's
// nearest.
func (q *query) exact() int {
	n := 0
	for n < len(q.list) && q.list[n].dist <= q.bound {
		n++
	}
	return n
}

type neighbour struct {
	key  string
	dist float32
}

// Set is an index's calibration queries and their exact nearest rows,
// kept current by every change the index takes (Add, Remove, Rename,
// Clear). A Set must see every row its index holds from the moment the
// index was empty; one that has not is useless (see Load).
type Set struct {
	metric kernels.Metric
	dims   int

	mu sync.Mutex
	// vecs holds the queries' vectors, one after another (unit length
	// for the cosine metric); only ever appended to, so that Distances
	// reads it without the lock.
	vecs    []float32
	queries []query
	// adopt: the Set was made without a sample, so the first Queries rows
	// it is given become its queries (their lists start from the rows
	// given before them, which are all queries).
	adopt bool
	// holders counts the references to each key (in lists and as a
	// query's own row), so that a change of a key no query knows costs
	// one map lookup.
	holders map[string]int32
	// changes counts the rows added or removed since the last Measure;
	// atomic, so that the index asks it after every change without the
	// lock.
	changes atomic.Int64
	curve   *Curve
}

// New makes the Set of an empty index of dims dimensions under metric,
// with Bases rows of sample (rows its table is about to be copied with,
// usually the sample the index trains on) as bases, chosen with seed.
// With no sample, the first Bases rows added become the queries, with no
// moved ones: the Set cannot tell the spacing of rows it has not seen.
func New(metric kernels.Metric, dims int, sample [][]float32, seed uint64) *Set {
	s := &Set{metric: metric, dims: dims, adopt: len(sample) == 0, holders: map[string]int32{}}
	rng := rand.New(rand.NewPCG(seed, 0x63616c6962))
	var usable [][]float32
	for _, i := range rng.Perm(len(sample)) {
		if v := sample[i]; len(v) == dims && s.usable(v) {
			usable = append(usable, v)
			if len(usable) == nnSample {
				break
			}
		}
	}
	rows := make([][]float32, len(usable))
	for i, v := range usable {
		rows[i] = s.space(v)
	}
	bases := rows[:min(Bases, len(rows))]
	spacing := nearestOther(bases, rows)
	moved := make([]float32, dims)
	dir := make([]float64, dims)
	for i := range bases {
		base := int32(len(s.queries))
		s.append(usable[i], base, 0, 0)
		if spacing[i] == 0 {
			continue
		}
		var norm float64
		for j := range dir {
			dir[j] = rng.NormFloat64()
			norm += dir[j] * dir[j]
		}
		// Every base is moved, each by one of the offsets in turn: the
		// near-duplicates' recall is then a mean over all the bases, as
		// precise as the others' (64 bases moved by every offset read
		// their recall 0.025 below the same kind of searches' on a
		// 1,536-d mixture, by the draw of the bases alone).
		f := offsets[i%len(offsets)]
		shift := f * spacing[i]
		scale := shift / math.Sqrt(norm)
		for j := range moved {
			moved[j] = bases[i][j] + float32(dir[j]*scale)
		}
		s.append(moved, base, float32(shift), float32(f))
	}
	return s
}

// space is v as the distances between rows see it: unit length for
// cosine, as is.
func (s *Set) space(v []float32) []float32 {
	if s.metric != kernels.Cosine {
		return v
	}
	u := slices.Clone(v)
	inv := float32(1 / math.Sqrt(float64(kernels.Dot(u, u))))
	for j := range u {
		u[j] *= inv
	}
	return u
}

// nearestOther is, for each base, the Euclidean distance to its nearest
// row of rows at a distance above 0 (0 if there is none).
func nearestOther(bases, rows [][]float32) []float64 {
	out := make([]float64, len(bases))
	store.Parallel(len(bases), func(lo, hi int) {
		for i := lo; i < hi; i++ {
			best := float32(math.Inf(1))
			for _, r := range rows {
				if d := kernels.L2Sq(bases[i], r); d > 0 && d < best {
					best = d
				}
			}
			if !math.IsInf(float64(best), 1) {
				out[i] = math.Sqrt(float64(best))
			}
		}
	})
	return out
}

// Unknown is the Set of an index whose rows it has not seen (one loaded
// from a checkpoint without a calibration): no queries, none to come.
func Unknown(metric kernels.Metric, dims int) *Set {
	return &Set{metric: metric, dims: dims, holders: map[string]int32{}}
}

// usable reports whether v can be a query: the cosine metric has no
// direction for a zero vector.
func (s *Set) usable(v []float32) bool {
	return s.metric != kernels.Cosine || kernels.Dot(v, v) > 0
}

// append makes v (in the metric's space) a query with an empty list,
// moved shift (rel times the sample's spacing) off the row of the query
// at base; the caller holds mu or owns s.
func (s *Set) append(v []float32, base int32, shift, rel float32) {
	s.vecs = append(s.vecs, s.space(v)...)
	q := query{base: base, shift: shift, rel: rel, bound: inf}
	if shift == 0 {
		q.hash = hash(v)
	}
	s.queries = append(s.queries, q)
}

// hash identifies a vector by its bits, the same in every process (a
// checkpoint keeps the queries' hashes), at about a nanosecond per pair
// of dimensions: a multiply-rotate mix, not meant to resist anyone
// (a forged match only makes a query forget one neighbour).
func hash(v []float32) uint64 {
	h := uint64(len(v)) * 0x9e3779b97f4a7c15
	i := 0
	for ; i+1 < len(v); i += 2 {
		w := uint64(math.Float32bits(v[i])) | uint64(math.Float32bits(v[i+1]))<<32
		h = bits.RotateLeft64(h^w*0xbf58476d1ce4e5b9, 31) * 0x94d049bb133111eb
	}
	if i < len(v) {
		h = bits.RotateLeft64(h^uint64(math.Float32bits(v[i]))*0xbf58476d1ce4e5b9, 31) * 0x94d049bb133111eb
	}
	return h ^ h>>29
}

// Prepared is a row's part of Add that needs no lock, done beside the
// row's encoding: its distance to each query of that moment, and its
// hash.
type Prepared struct {
	dist []float32
	hash uint64
}

// Prepare does the work of Add for v that needs no lock.
func (s *Set) Prepare(v []float32) Prepared {
	s.mu.Lock()
	vecs := s.vecs
	s.mu.Unlock()
	return Prepared{s.distances(v, vecs), hash(v)}
}

// distances returns v's distance to each query of vecs, in an order that
// is the metric's (squared L2; 1 − cosine; the negative inner product);
// nil if v cannot be a neighbour (a zero vector under cosine).
func (s *Set) distances(v, vecs []float32) []float32 {
	if len(v) != s.dims || !s.usable(v) {
		return nil
	}
	out := make([]float32, len(vecs)/s.dims)
	switch s.metric {
	case kernels.L2:
		kernels.L2SqBlock(v, vecs, out)
	case kernels.Cosine:
		kernels.DotBlock(v, vecs, out)
		inv := 1 / float32(math.Sqrt(float64(kernels.Dot(v, v))))
		for i := range out {
			out[i] = 1 - out[i]*inv
		}
	default:
		kernels.DotBlock(v, vecs, out)
		for i := range out {
			out[i] = -out[i]
		}
	}
	return out
}

// Add records that the index now holds v under key (replacing what key
// held); p is what Prepare returned for v.
func (s *Set) Add(key string, v []float32, p Prepared) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.removeLocked(key)
	s.changes.Add(1)
	dist := p.dist
	if dist == nil {
		return
	}
	if s.adopt && len(s.queries) < Bases {
		s.adoptLocked(key, v)
	}
	if n := len(s.vecs) / s.dims; len(dist) < n {
		dist = append(dist[:len(dist):len(dist)], s.distances(v, s.vecs[len(dist)*s.dims:])...)
	}
	for i := range s.queries {
		q := &s.queries[i]
		// The query's own row (a 64-bit collision aside) is left out.
		if q.own == "" && q.shift == 0 && p.hash == q.hash {
			q.own = key
			s.holders[key]++
			continue
		}
		s.insert(q, key, dist[i])
	}
}

// adoptLocked makes the row v (key) a query: its list is built from the
// other queries' rows, which are every row the index held before.
func (s *Set) adoptLocked(key string, v []float32) {
	s.append(v, int32(len(s.queries)), 0, 0)
	n := len(s.queries) - 1
	q := &s.queries[n]
	d := s.distances(v, s.vecs[:n*s.dims])
	for i := range n {
		if other := s.queries[i].own; other != "" {
			s.insert(q, other, d[i])
		}
	}
}

// insert puts the row key at dist into q's list, if it is among the
// nearest depth.
func (s *Set) insert(q *query, key string, dist float32) {
	if len(q.list) == depth && dist >= q.list[depth-1].dist {
		q.bound = min(q.bound, dist)
		return
	}
	at, _ := slices.BinarySearchFunc(q.list, dist, func(n neighbour, d float32) int { return cmp.Compare(n.dist, d) })
	q.list = slices.Insert(q.list, at, neighbour{key, dist})
	s.holders[key]++
	if len(q.list) > depth {
		out := q.list[depth]
		s.release(out.key)
		q.list, q.bound = q.list[:depth], min(q.bound, out.dist)
	}
}

// release forgets one reference to key.
func (s *Set) release(key string) {
	if s.holders[key]--; s.holders[key] <= 0 {
		delete(s.holders, key)
	}
}

// Remove records that the index no longer holds key.
func (s *Set) Remove(key string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.removeLocked(key) {
		s.changes.Add(1)
	}
}

// removeLocked drops key from every list, and reports whether any held
// it or had it as its own row.
func (s *Set) removeLocked(key string) bool {
	if s.holders[key] == 0 {
		return false
	}
	delete(s.holders, key)
	for i := range s.queries {
		q := &s.queries[i]
		if q.own == key {
			q.own = ""
		}
		at := slices.IndexFunc(q.list, func(n neighbour) bool { return n.key == key })
		if at < 0 {
			continue
		}
		q.list = slices.Delete(q.list, at, at+1)
	}
	return true
}

// Rename records that the row under from is now under to.
func (s *Set) Rename(from, to string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.removeLocked(to)
	n := s.holders[from]
	if n == 0 {
		return
	}
	delete(s.holders, from)
	s.holders[to] = n
	for i := range s.queries {
		q := &s.queries[i]
		if q.own == from {
			q.own = to
		}
		for j := range q.list {
			if q.list[j].key == from {
				q.list[j].key = to
			}
		}
	}
}

// Clear records that the index was emptied: every list is exact again.
func (s *Set) Clear() {
	s.mu.Lock()
	defer s.mu.Unlock()
	for i := range s.queries {
		q := &s.queries[i]
		*q = query{base: q.base, shift: q.shift, rel: q.rel, hash: q.hash, bound: inf}
	}
	clear(s.holders)
	s.changes.Add(1)
}

// Changes is how many rows were added or removed since the last Measure.
func (s *Set) Changes() int64 { return s.changes.Load() }

var inf = float32(math.Inf(1))

// probe is one search Measure makes: a query's vector, the key of a row
// the search must treat as absent ("" for none), the keys of the K rows
// it should find, the query's base, and how far it lies off its base row
// in multiples of that row's distance to its nearest other row in the
// table (its offset).
type probe struct {
	vec     []float32
	without string
	truth   []string
	base    int32
	offset  float32
}

// probes returns the queries whose K nearest rows are known, with the
// median over the bases of the distance from a base row to its nearest
// other row (the table's spacing, as Curve.Spacing), and resets the
// count of changes.
func (s *Set) probes() ([]probe, float64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.changes.Store(0)
	var ps []probe
	var spacings []float64
	for i, q := range s.queries {
		if q.exact() < K {
			continue
		}
		p := probe{vec: s.vecs[i*s.dims : (i+1)*s.dims], base: q.base}
		switch b := &s.queries[q.base]; {
		case q.shift == 0:
			if sp, ok := s.spacing(&s.queries[i]); ok {
				spacings = append(spacings, sp)
			}
			// A row of the table is searched for twice: held out, as a new
			// item (its nearest other row at the rows' spacing), and as
			// itself, a search for a stored item, which finds it first.
			p.without, p.offset = q.own, NewItem
			if q.own != "" {
				stored := probe{vec: p.vec, truth: []string{q.own}, base: q.base}
				for _, n := range q.list[:K-1] {
					stored.truth = append(stored.truth, n.key)
				}
				ps = append(ps, stored)
			}
		case s.metric == kernels.IP:
			// The inner product's order has no spacing to measure: the
			// offset stays the multiple of the sample's it was made as.
			p.offset = q.rel
		default:
			// The base row's own list says how far apart the table's rows
			// are around it; without it, the offset is unknown.
			sp, ok := s.spacing(b)
			if !ok {
				continue
			}
			p.offset = q.shift / float32(sp)
		}
		for _, n := range q.list[:K] {
			p.truth = append(p.truth, n.key)
		}
		ps = append(ps, p)
	}
	slices.Sort(spacings)
	median := 0.0
	if len(spacings) > 0 {
		median = spacings[len(spacings)/2]
	}
	return ps, median
}

// spacing is the Euclidean distance, in the metric's space, from the
// base row of q to the nearest other row of the table, if q's list knows
// it and the metric has one (not the inner product).
func (s *Set) spacing(q *query) (float64, bool) {
	if q.exact() == 0 || q.list[0].dist <= 0 {
		return 0, false
	}
	switch d := float64(q.list[0].dist); s.metric {
	case kernels.L2:
		return math.Sqrt(d), true
	case kernels.Cosine:
		return math.Sqrt(2 * d), true
	}
	return 0, false
}

// Snapshot copies the Set as it is now and returns what writes the copy
// into a checkpoint body, for Load.
func (s *Set) Snapshot() func(*store.BodyWriter) {
	s.mu.Lock()
	c := &Set{metric: s.metric, dims: s.dims, vecs: s.vecs, adopt: s.adopt, curve: s.curve}
	c.changes.Store(s.changes.Load())
	c.queries = make([]query, len(s.queries))
	for i, q := range s.queries {
		q.list = slices.Clone(q.list)
		c.queries[i] = q
	}
	s.mu.Unlock()
	return c.write
}

// bodyVersion is the format write writes; WriteNone writes 0.
const bodyVersion = 1

// WriteNone writes, in a Set's place, that there is none.
func WriteNone(b *store.BodyWriter) { b.Uvarint(0) }

func (s *Set) write(b *store.BodyWriter) {
	b.Uvarint(bodyVersion)
	curve, _ := json.Marshal(s.curve)
	b.String(string(curve))
	b.Uvarint(boolBit(s.adopt))
	b.Uvarint(uint64(s.changes.Load()))
	b.Uvarint(uint64(len(s.queries)))
	b.Floats(s.vecs[:len(s.queries)*s.dims])
	for _, q := range s.queries {
		b.String(q.own)
		b.Uvarint(uint64(q.base))
		b.Floats([]float32{q.shift, q.rel})
		b.Uvarint(q.hash)
		b.Floats([]float32{q.bound})
		b.Uvarint(uint64(len(q.list)))
		for _, n := range q.list {
			b.String(n.key)
			b.Floats([]float32{n.dist})
		}
	}
}

func boolBit(b bool) uint64 {
	if b {
		return 1
	}
	return 0
}

// Load reads what Snapshot (or WriteNone: nil) wrote, for an index of
// dims dimensions under metric.
func Load(r *store.BodyReader, metric kernels.Metric, dims int) (*Set, error) {
	s := &Set{metric: metric, dims: dims, holders: map[string]int32{}}
	switch v := r.Uvarint(); {
	case r.Err() != nil:
		return nil, r.Err()
	case v == 0:
		return nil, nil
	case v != bodyVersion:
		return nil, fmt.Errorf("calibration format %d, this build reads %d", v, bodyVersion)
	}
	if curve := r.String(); r.Err() == nil && curve != "null" {
		s.curve = new(Curve)
		if err := json.Unmarshal([]byte(curve), s.curve); err != nil {
			return nil, fmt.Errorf("calibration curve: %w", err)
		}
	}
	s.adopt = r.Uvarint() == 1
	s.changes.Store(int64(r.Uvarint()))
	n := r.Count(uint64(Queries))
	if r.Err() == nil {
		s.vecs = make([]float32, n*dims)
		r.Floats(s.vecs)
		s.queries = make([]query, n)
	}
	for i := range s.queries {
		q := &s.queries[i]
		q.own, q.base = r.String(), int32(r.Count(uint64(i)))
		var shift [2]float32
		r.Floats(shift[:])
		q.shift, q.rel, q.hash = shift[0], shift[1], r.Uvarint()
		var d [1]float32
		r.Floats(d[:])
		q.bound = d[0]
		q.list = make([]neighbour, r.Count(depth))
		for j := range q.list {
			q.list[j].key = r.String()
			r.Floats(d[:])
			q.list[j].dist = d[0]
			s.holders[q.list[j].key]++
		}
		if q.own != "" {
			s.holders[q.own]++
		}
		if !slices.IsSortedFunc(q.list, func(a, b neighbour) int { return cmp.Compare(a.dist, b.dist) }) {
			r.Fail(fmt.Errorf("calibration query %d: neighbours out of order", i))
		}
	}
	if err := r.Err(); err != nil {
		return nil, err
	}
	return s, nil
}

// Curve is the last calibration's, nil before the first.
func (s *Set) Curve() *Curve {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.curve
}
