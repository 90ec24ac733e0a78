package hnsw

import (
	"encoding/binary"
	"math"

	"github.com/vecside/vecside/indexer/store"
	"github.com/vecside/vecside/kernels"
)

// codes is the vector side of the rows, by row id: for the coded stores,
// each row's extended RaBitQ code against the centroid nearest to it,
// with its factors, κ and the centroid's number; for store=float the
// float32 vector. A row is written once, before its id is published, and
// never changes until the id is reused (see store.Keys).
//
// Everything an estimate needs sits in one row, so visiting a neighbour
// costs one or two cache lines. The 1-bit code is not kept: it is the
// extended code's top bit, and a graph never scans blocks. With 6-bit
// codes (store=ext6, the default) the walk reads only the code's top
// plane, a 4-bit code with a scale of its own (kernels.ExtInnerTop), and
// refine the whole code: the walk's estimates only choose where to go,
// the refined ones order what a search returns.
//
// The centroids (see train) are kept rotated, in the space searches
// estimate in: a query is rotated once and prepared once, against the
// mean g of the training sample, and a row o encoded against its own
// centroid c (residual r = o − c) is estimated as
//
//	‖q−o‖² = ‖q−c‖² + ‖r‖² − 2(<r, q−g>~ + κ),  κ = <g−c, r>~
//
// where <r, v>~ is the code's estimate s·<y, v> (y its grid point, s its
// scale): <r, q−g>~ from the code and the query prepared against g
// (kernels.ExtInner), κ computed exactly at encoding
// (kernels.ExtInnerExact), ‖q−c‖² once per query per centroid met. The
// estimate is linear in v, so the sum is <r, q−c>~: the estimate a query
// prepared against the row's own centroid would give, as in an IVF list
// scan, whose error grows with ‖r‖·‖q−c‖ (a near centroid makes both
// short), for the price of one preparation per query. With 6-bit codes
// the walk's κ is the top plane's, and a second one, the whole code's,
// serves refine, which estimates the rows a search returns from their
// whole code, with the bound of a residual of norm ‖q−c‖. (The inner
// product metric has no ‖q−c‖ to gain: its query is its own residual.)
type codes struct {
	metric   kernels.Metric
	dims     int
	rq       *kernels.RaBitQ // nil for store=float
	cents    *centroids
	extBytes int
	tail     int                  // tailBytes, or topTailBytes with a top plane
	top      bool                 // 6-bit codes: the walk reads their top plane alone
	ext      *store.Slab[byte]    // code | NormSq Scale Err κ | centroid [| top plane's scale, whole κ]
	floats   *store.Slab[float32] // store=float
}

// Bytes of a coded row past its extended code: three float32 factors
// and κ (the walk's), the centroid's number, then for 6-bit codes the top
// plane's scale and the whole code's κ. The factor of the query's
// quantization error (kernels.Factors.QErr) is not kept: estimates that
// carry a bound (refine's) use a query quantized twice over, whose
// rounding is negligible.
const (
	tailBytes    = 20
	kappaAt      = 12
	centroidAt   = 16
	topScaleAt   = 20
	wholeKappaAt = 24
	topTailBytes = 28
)

func newCodes(cfg store.CodedConfig, rq *kernels.RaBitQ, cents *centroids) *codes {
	c := &codes{metric: cfg.Metric, dims: cfg.Dims}
	if cfg.Store == store.Float {
		c.floats = store.NewSlab[float32](cfg.Dims)
		return c
	}
	c.rq, c.extBytes, c.cents, c.tail = rq, rq.ExtBytes(), cents, tailBytes
	if c.top = rq.Config().ExBits == store.Ext6.ExBits(); c.top {
		c.tail = topTailBytes
	}
	c.ext = store.NewSlab[byte](c.extBytes + c.tail)
	return c
}

// fresh returns empty rows of the same codec and centroids.
func (c *codes) fresh() *codes {
	n := *c
	if c.floats != nil {
		n.floats = store.NewSlab[float32](c.dims)
	} else {
		n.ext = store.NewSlab[byte](c.extBytes + c.tail)
	}
	return &n
}

// grow makes room for ids [0, n).
func (c *codes) grow(n int) {
	if c.floats != nil {
		c.floats.Grow(n)
	} else {
		c.ext.Grow(n)
	}
}

func (c *codes) bytes() int64 {
	if c.floats != nil {
		return c.floats.Bytes()
	}
	return c.ext.Bytes() + c.cents.bytes()
}

// prepared is a row encoded outside the writers' lock: its coded row (or
// vector) and the vector a linker searches the graph with, in the space
// searches estimate in (rotated for the coded stores).
type prepared struct {
	row  []byte
	vec  []float32
	near []uint32 // the centroids nearest vec, nearest first (coded stores)
	zero bool     // a cosine zero vector: held, never returned
}

// prepare encodes vec.
func (c *codes) prepare(vec []float32) *prepared {
	if c.metric == kernels.Cosine && kernels.Dot(vec, vec) == 0 {
		return &prepared{zero: true}
	}
	p := &prepared{vec: make([]float32, c.dims)}
	if c.floats != nil {
		copy(p.vec, vec)
		return p
	}
	c.rq.RotateQuery(p.vec, vec)
	p.row = make([]byte, c.extBytes+c.tail)
	p.near = c.encode(p.row, p.vec)
	return p
}

// encode writes the coded row of v (rotated) to row, against the nearest
// centroid, and returns the repEntries centroids nearest v, nearest
// first: those whose representatives its link enters layer 0 through,
// found here once (at 1,536 dimensions the search for them was 6% of a
// build).
func (c *codes) encode(row []byte, v []float32) []uint32 {
	near := c.cents.near(v, kernels.NewTopK(repEntries))
	k := int(near[0].ID)
	cRot := c.cents.at(k)
	r, gc := make([]float32, c.dims), make([]float32, c.dims)
	for i := range r {
		r[i] = v[i] - cRot[i]
		gc[i] = c.cents.g[i] - cRot[i]
	}
	code, ext := make([]byte, c.rq.CodeBytes()), row[:c.extBytes]
	_, f := c.rq.EncodeRotated(r, code, ext)
	kappa := c.rq.ExtInnerExact(ext, &f, gc)
	t := row[c.extBytes:]
	if c.top {
		scale := c.rq.TopScale(ext, r)
		putF32(t, topScaleAt, scale)
		putF32(t, wholeKappaAt, kappa)
		kappa = c.rq.TopInnerExact(ext, scale, gc)
	}
	for i, v := range [4]float32{f.NormSq, f.Scale, f.Err, kappa} {
		putF32(t, 4*i, v)
	}
	binary.LittleEndian.PutUint32(t[centroidAt:], uint32(k))
	ids := make([]uint32, len(near))
	for i, n := range near {
		ids[i] = n.ID
	}
	return ids
}

func putF32(b []byte, at int, v float32) { binary.LittleEndian.PutUint32(b[at:], math.Float32bits(v)) }

// put writes a prepared row under id.
func (c *codes) put(id uint32, p *prepared) {
	if c.floats != nil {
		copy(c.floats.Row(id), p.vec)
		return
	}
	copy(c.ext.Row(id), p.row)
}

// copyRow writes src's row under dst.
func (c *codes) copyRow(dst, src uint32) {
	if c.floats != nil {
		copy(c.floats.Row(dst), c.floats.Row(src))
		return
	}
	copy(c.ext.Row(dst), c.ext.Row(src))
}

func f32At(b []byte, at int) float32 { return math.Float32frombits(binary.LittleEndian.Uint32(b[at:])) }

// unpack returns a coded row's extended code, factors, κ and centroid.
func (c *codes) unpack(row []byte) (ext []byte, f kernels.Factors, kappa float32, k uint32) {
	t := row[c.extBytes : c.extBytes+c.tail]
	f = kernels.Factors{NormSq: f32At(t, 0), Scale: f32At(t, 4), Err: f32At(t, 8)}
	return row[:c.extBytes], f, f32At(t, kappaAt), binary.LittleEndian.Uint32(t[centroidAt:])
}

// centroidOf is the centroid a coded row was encoded against.
func (c *codes) centroidOf(id uint32) uint32 {
	_, _, _, k := c.unpack(c.ext.Row(id))
	return k
}

// query is a vector prepared for estimating its distance to rows: a
// search's query, or a row being linked. Its per-centroid terms are
// computed as centroids are met, and kept until the next setQuery.
type query struct {
	v    []float32 // raw (float) or rotated (coded)
	pq   kernels.Query
	term []float32 // per centroid: ‖q−c‖² (l2, cosine) or <q, c> (ip)
	seen []uint32  // per centroid: gen when term was computed
	gen  uint32
}

// setQuery prepares q (raw, as a client sends it) for a search.
func (c *codes) setQuery(dst *query, q []float32) {
	dst.v = grow(dst.v, c.dims)
	if c.floats != nil {
		copy(dst.v, q)
		return
	}
	c.rq.RotateQuery(dst.v, q)
	c.reset(dst)
}

// setSpaceQuery prepares v, already in the search space (prepared.vec or
// decode's output), for estimating.
func (c *codes) setSpaceQuery(dst *query, v []float32) {
	dst.v = append(dst.v[:0], v...)
	if c.floats == nil {
		c.reset(dst)
	}
}

func (c *codes) reset(dst *query) {
	c.rq.PrepareExtQuery(&dst.pq, dst.v, c.cents.g)
	if n := c.cents.len(); len(dst.seen) != n {
		dst.seen, dst.term = make([]uint32, n), make([]float32, n)
	}
	if dst.gen++; dst.gen == 0 {
		clear(dst.seen)
		dst.gen = 1
	}
}

// centroidTerm is ‖q−c‖² (or <q, c> for ip) of centroid k.
func (c *codes) centroidTerm(q *query, k uint32) float32 {
	if q.seen[k] != q.gen {
		if c.metric == kernels.IP {
			q.term[k] = kernels.Dot(q.v, c.cents.at(int(k)))
		} else {
			q.term[k] = kernels.L2Sq(q.v, c.cents.at(int(k)))
		}
		q.seen[k] = q.gen
	}
	return q.term[k]
}

// prefetch starts loading id's row into the caches (see estimate).
func (c *codes) prefetch(id uint32) {
	if c.ext != nil {
		c.ext.Prefetch(id)
	}
}

// estimate is id's distance from q in the codec's terms (squared for L2,
// 1−cos for cosine, −ip for ip) and the half-width of its error bound
// (0 for store=float, and for the top plane of 6-bit codes, whose
// estimates only guide the walk).
func (c *codes) estimate(q *query, id uint32) (est, bound float32) {
	if c.floats != nil {
		return store.ExactEstimate(c.metric, q.v, c.floats.Row(id)), 0
	}
	row := c.ext.Row(id)
	ext, f, kappa, k := c.unpack(row)
	var ip, e float32
	if c.top {
		ip = c.rq.ExtInnerTop(&q.pq, ext, f32At(row, c.extBytes+topScaleAt))
	} else {
		ip, e = c.rq.ExtInner(&q.pq, ext, &f)
	}
	term := c.centroidTerm(q, k)
	switch c.metric {
	case kernels.L2:
		return term + f.NormSq - 2*(ip+kappa), 2 * e
	case kernels.Cosine:
		return (term + f.NormSq - 2*(ip+kappa)) / 2, e // half the squared distance on the unit sphere
	}
	return -(ip + term), e
}

// refine estimates id again, from its whole code with the bound of its
// own centroid: the precise estimate a search returns its candidates with.
func (c *codes) refine(q *query, id uint32) (est, bound float32) {
	if c.floats != nil {
		return c.estimate(q, id)
	}
	row := c.ext.Row(id)
	ext, f, kappa, k := c.unpack(row)
	if c.top {
		kappa = f32At(row, c.extBytes+wholeKappaAt)
	}
	term := c.centroidTerm(q, k)
	if c.metric == kernels.IP { // the query is its own residual: −(<r,q> + <c,q>)
		ip, e := c.rq.ExtInnerAt(&q.pq, ext, &f, q.pq.ResidualNorm())
		return -(ip + term), e
	}
	ip, e := c.rq.ExtInnerAt(&q.pq, ext, &f, sqrt32(term))
	est = term + f.NormSq - 2*(ip+kappa)
	if c.metric == kernels.Cosine {
		return est / 2, e // half the squared distance on the unit sphere
	}
	return est, 2 * e
}

// decode writes id's vector in the search space to dst: the float vector,
// or the rotated vector its code stands for (the top plane's, for 6-bit
// codes: decoding is most of a link's cost, and edges chosen from 4-bit
// codes serve as well).
func (c *codes) decode(dst []float32, id uint32) {
	if c.floats != nil {
		copy(dst, c.floats.Row(id))
		return
	}
	ext, f, _, k := c.unpack(c.ext.Row(id))
	if c.top {
		c.rq.DecodeTop(dst, ext, &f, c.cents.at(int(k)))
		return
	}
	c.rq.DecodeExt(dst, ext, &f, c.cents.at(int(k)))
}

// between is the distance of two vectors of the search space (decoded
// rows), in the same terms as estimate.
func (c *codes) between(a, b []float32) float32 {
	if c.floats != nil {
		return store.ExactEstimate(c.metric, a, b)
	}
	switch c.metric {
	case kernels.L2:
		return kernels.L2Sq(a, b)
	case kernels.Cosine:
		return kernels.L2Sq(a, b) / 2 // on the unit sphere
	}
	return -kernels.Dot(a, b)
}

func sqrt32(v float32) float32 { return float32(math.Sqrt(float64(v))) }

func grow[T any](s []T, n int) []T {
	if cap(s) < n {
		return make([]T, n)
	}
	return s[:n]
}
