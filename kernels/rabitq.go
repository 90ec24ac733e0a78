package kernels

import (
	"encoding/binary"
	"fmt"
	"math"
)

// DefaultEpsilon is the default confidence multiplier of the RaBitQ error
// bounds, in standard deviations of the estimator (see doc.go).
const DefaultEpsilon = 3

// RaBitQConfig configures a RaBitQ codec.
type RaBitQConfig struct {
	Dim     int
	Metric  Metric
	ExBits  int     // bits per dimension of the extended code: 0, 4, 6 or 8
	Seed    uint64  // seed of the random rotation
	Epsilon float32 // width of the error bounds; 0 means DefaultEpsilon
}

// RaBitQ is the RaBitQ codec: a random rotation, a 1-bit code per vector for
// the fast scan, and optionally an extended 4-, 6- or 8-bit code for re-ranking,
// each with Factors that turn integer dot products into distance estimates
// with error bounds. It is immutable and safe for concurrent use.
type RaBitQ struct {
	cfg    RaBitQConfig
	padded int // dimension rounded up to a multiple of 64
	rot    *Rotation
}

// NewRaBitQ returns the codec for cfg.
func NewRaBitQ(cfg RaBitQConfig) (*RaBitQ, error) {
	if err := checkConfig(cfg.Dim, cfg.Metric); err != nil {
		return nil, err
	}
	if cfg.ExBits != 0 && cfg.ExBits != 4 && cfg.ExBits != 6 && cfg.ExBits != 8 {
		return nil, fmt.Errorf("kernels: extended code bits %d, want 0, 4, 6 or 8", cfg.ExBits)
	}
	if cfg.Epsilon == 0 {
		cfg.Epsilon = DefaultEpsilon
	}
	if !(cfg.Epsilon > 0) || math.IsInf(float64(cfg.Epsilon), 0) {
		return nil, fmt.Errorf("kernels: epsilon %g must be positive", cfg.Epsilon)
	}
	return &RaBitQ{
		cfg:    cfg,
		padded: (cfg.Dim + 63) &^ 63,
		rot:    NewRotation(cfg.Dim, DefaultRotationRounds, cfg.Seed),
	}, nil
}

// Config returns the codec's configuration (with the default epsilon filled in).
func (rq *RaBitQ) Config() RaBitQConfig { return rq.cfg }

// CodeBytes returns the length of a 1-bit code: one bit per dimension,
// rounded up to whole 64-bit words (8 bytes).
func (rq *RaBitQ) CodeBytes() int { return rq.padded / 8 }

// ExtBytes returns the length of an extended code (0 without one).
func (rq *RaBitQ) ExtBytes() int { return rq.extDims() * rq.cfg.ExBits / 8 }

// extDims returns the number of codes in an extended code: Dim, rounded up
// to even for 4-bit codes, which are packed two to a byte, and to a
// multiple of four for 6-bit codes, whose low two bits are packed four to
// a byte.
//
// A 6-bit code is kept as two planes: its top four bits packed as a 4-bit
// code (the first topBytes bytes), then its low two bits. The top plane
// is itself a 4-bit extended code, of the residual scaled by a quarter, so
// a walk over many rows may read only it (ExtInnerTop) and a final
// ordering of few rows the whole code.
func (rq *RaBitQ) extDims() int {
	switch rq.cfg.ExBits {
	case 4:
		return (rq.cfg.Dim + 1) &^ 1
	case 6:
		return (rq.cfg.Dim + 3) &^ 3
	}
	return rq.cfg.Dim * rq.cfg.ExBits / 8
}

// topBytes is the length of a 6-bit code's top plane.
func (rq *RaBitQ) topBytes() int { return rq.extDims() / 2 }

// Factors are the per-vector corrections stored beside a RaBitQ code. With r
// the rotated residual of the vector, y the code's reconstruction grid point
// (the +-1 vector for 1-bit codes) and a = <y,r>/(|y||r|):
type Factors struct {
	NormSq float32 // |r|^2
	Scale  float32 // |r|^2/<y,r>: estimate <r,t> as Scale*<y,t>
	Err    float32 // |r| sqrt(1-a^2)/(a sqrt(D-1)): the bound per unit |t| and epsilon
	QErr   float32 // Scale*|y|/sqrt(12): the bound per unit query quantization step
}

func newFactors(normSq, yr, yy float64, dim int) Factors {
	if normSq == 0 || yr <= 0 {
		return Factors{NormSq: float32(normSq)}
	}
	norm := math.Sqrt(normSq)
	a := min(1, yr/(math.Sqrt(yy)*norm))
	scale := normSq / yr
	return Factors{
		NormSq: float32(normSq),
		Scale:  float32(scale),
		Err:    float32(norm * math.Sqrt(1-a*a) / (a * math.Sqrt(float64(max(dim-1, 1))))),
		QErr:   float32(scale * math.Sqrt(yy/12)),
	}
}

// Encode quantizes vec relative to centroid (nil means the origin; for the
// cosine metric vec is normalised first and centroid lives on that sphere).
// It writes the 1-bit code to code[:CodeBytes()] and, with extended bits, the
// extended code to ext[:ExtBytes()], and returns the factors of each.
func (rq *RaBitQ) Encode(vec, centroid []float32, code, ext []byte) (f, extF Factors) {
	dim := rq.cfg.Dim
	checkLen(len(vec), dim)
	r := make([]float32, dim)
	prepareVector(r, vec, rq.cfg.Metric)
	if centroid != nil {
		checkLen(len(centroid), dim)
		for i := range r {
			r[i] -= centroid[i]
		}
	}
	rq.rot.Apply(r)
	return rq.EncodeRotated(r, code, ext)
}

// EncodeRotated is Encode for a residual already rotated (Dim elements,
// not modified): the rotated vector less the rotated centroid, for an
// index that keeps its centroids rotated.
func (rq *RaBitQ) EncodeRotated(r []float32, code, ext []byte) (f, extF Factors) {
	dim := rq.cfg.Dim
	checkLen(len(r), dim)
	var normSq, sumAbs float64
	code = code[:rq.CodeBytes()]
	clear(code)
	for i, v := range r {
		if v > 0 {
			code[i/8] |= 1 << (i % 8)
		}
		normSq += float64(v) * float64(v)
		sumAbs += math.Abs(float64(v))
	}
	f = newFactors(normSq, sumAbs, float64(dim), dim)
	if rq.cfg.ExBits > 0 {
		extF = rq.encodeExt(r, normSq, ext[:rq.ExtBytes()])
	}
	return f, extF
}

// encodeExt writes the extended code of the rotated residual r. Code u_i in
// [0, 2^B) stands for the grid point y_i = u_i - (2^B-1)/2 = sign(r_i)*(k_i+1/2)
// with k_i = min(floor(lambda*|r_i|), 2^(B-1)-1); lambda is chosen to
// maximise the cosine between y and r (Extended RaBitQ), so its top bit is
// the 1-bit code.
func (rq *RaBitQ) encodeExt(r []float32, normSq float64, ext []byte) Factors {
	half := 1 << (rq.cfg.ExBits - 1)
	lambda := bestScale(r, half)
	u := make([]uint8, rq.extDims()) // a code of a dimension not a whole number of bytes ends in zero pads
	var yr, yy float64
	for i, v := range r {
		k := min(int(lambda*abs32(v)), half-1)
		y := float64(k) + 0.5
		if v > 0 {
			u[i] = uint8(half + k)
		} else {
			u[i] = uint8(half - 1 - k)
			y = -y
		}
		yr += y * float64(v)
		yy += y * y
	}
	switch rq.cfg.ExBits {
	case 8:
		copy(ext, u)
	case 6:
		top, low := make([]uint8, len(u)), make([]uint8, len(u))
		for i, c := range u {
			top[i], low[i] = c>>2, c&3
		}
		packU4(ext[:rq.topBytes()], top)
		packU2(ext[rq.topBytes():], low)
	default:
		packU4(ext, u)
	}
	return newFactors(normSq, yr, yy, len(r))
}

// bestScale returns the lambda that maximises cos(y(lambda), r) for
// k_i = min(floor(lambda*|r_i|), half-1): a coarse geometric grid around
// lambda = half/max|r_i| (where the largest coordinate reaches the top code),
// then a finer grid around the best point.
func bestScale(r []float32, half int) float32 {
	m := maxAbs(r)
	if m == 0 {
		return 0
	}
	a := make([]float32, len(r))
	for i, v := range r {
		a[i] = abs32(v)
	}
	const steps = 12
	lo, hi := 0.4*float64(half)/float64(m), 2.0*float64(half)/float64(m)
	best, bestCos := lo, -1.0
	for range 2 {
		ratio := math.Pow(hi/lo, 1.0/steps)
		for l := lo; l <= hi*1.0001; l *= ratio {
			yr, yy := gridSums(a, float32(l), int32(half-1))
			if c := yr / math.Sqrt(yy); c > bestCos {
				best, bestCos = l, c
			}
		}
		lo, hi = best/ratio, best*ratio
	}
	return float32(best)
}

// gridSumsGo returns the sums of y_i·a_i and of y_i² for y_i =
// min(trunc(lambda·a_i), top) + 1/2, a_i >= 0: <y, a> and ‖y‖² for the
// code of a at scale lambda (see gridSums).
func gridSumsGo(a []float32, lambda float32, top int32) (yr, yy float64) {
	for _, v := range a {
		y := float64(min(int32(lambda*v), top)) + 0.5
		yr += y * float64(v)
		yy += y * y
	}
	return yr, yy
}

// Rotate writes the rotation of v to dst (len Dim each): what PrepareQuery
// expects for centroids, which an index can rotate once and keep.
func (rq *RaBitQ) Rotate(dst, v []float32) {
	checkLen(len(v), rq.cfg.Dim)
	copy(dst[:rq.cfg.Dim], v)
	rq.rot.Apply(dst[:rq.cfg.Dim])
}

// RotateQuery writes the rotated query to dst, normalising it first for the
// cosine metric. Rotate a query once, then prepare it for each centroid.
func (rq *RaBitQ) RotateQuery(dst, q []float32) {
	checkLen(len(q), rq.cfg.Dim)
	prepareVector(dst[:rq.cfg.Dim], q, rq.cfg.Metric)
	rq.rot.Apply(dst[:rq.cfg.Dim])
}

// Query is a query prepared against one centroid. Its buffers are reused by
// the next PrepareQuery into the same Query; it is not safe for concurrent
// use, but any number of goroutines may each have their own.
type Query struct {
	metric         Metric
	eps            float32
	tNorm, tNormSq float32
	add            float32 // <centroid, query> for inner product
	step           float32 // fast-scan quantization step
	absSum         int32   // sum |t'_i| of the fast-scan query
	scan           scanQuery
	extBits        int
	ext            []int8 // 8-bit query for the extended codes
	extStep        float32
	extSum         int32
	// fine is t − extStep·ext quantized again (ExtInnerAt), made on first
	// use: with it, <y, t> loses nothing to the query's quantization.
	fine     []int8
	rest     []float32 // what fine quantizes
	fineStep float32
	fineSum  int32
	fineOK   bool
	t        []float32
	tq       []int8
}

// ResidualNorm is ‖t‖, the length of the query's residual: for the inner
// product, of the query itself.
func (q *Query) ResidualNorm() float32 { return q.tNorm }

// PrepareQuery prepares dst for scanning codes encoded against a centroid.
// qRot is RotateQuery's output, cRot the rotated centroid (nil for the
// origin). For L2 the query residual is t = qRot - cRot; so it is for
// cosine, whose distance on the unit sphere is half the squared L2
// distance: the estimate's error grows with ‖t‖, and a query near a list's
// centroid has a small residual but a unit norm. For inner product t is
// qRot itself and <cRot, qRot> is added back, since
// <o,q> = <o-c,q> + <c,q>.
func (rq *RaBitQ) PrepareQuery(dst *Query, qRot, cRot []float32) {
	rq.prepareResidual(dst, qRot, cRot)
	dst.tq = grow(dst.tq, rq.padded)
	dst.step, _ = quantizeSym(dst.tq, dst.t, scanMax)
	dst.absSum = 0
	for _, v := range dst.tq {
		dst.absSum += max(int32(v), -int32(v))
	}
	dst.scan.init(dst.tq)
	rq.prepareExt(dst)
}

// PrepareExtQuery is PrepareQuery for ExtEstimate alone: it leaves out the
// fast scan's tables, which cost more than the rest when a query meets
// many centroids and few codes of each (a graph's walk).
func (rq *RaBitQ) PrepareExtQuery(dst *Query, qRot, cRot []float32) {
	rq.prepareResidual(dst, qRot, cRot)
	rq.prepareExt(dst)
}

func (rq *RaBitQ) prepareResidual(dst *Query, qRot, cRot []float32) {
	dim := rq.cfg.Dim
	checkLen(len(qRot), dim)
	dst.metric, dst.eps, dst.extBits = rq.cfg.Metric, rq.cfg.Epsilon, rq.cfg.ExBits
	dst.t = grow(dst.t, rq.padded)
	clear(dst.t[dim:])
	copy(dst.t, qRot)
	dst.add = 0
	if cRot != nil {
		checkLen(len(cRot), dim)
		if rq.cfg.Metric != IP {
			for i, c := range cRot {
				dst.t[i] -= c
			}
		} else {
			dst.add = Dot(cRot, qRot)
		}
	}
	dst.tNormSq = Dot(dst.t, dst.t)
	dst.tNorm = sqrt32(dst.tNormSq)
}

func (rq *RaBitQ) prepareExt(dst *Query) {
	if n := rq.extDims(); n > 0 {
		dst.ext = grow(dst.ext, n)
		dst.extStep, dst.extSum = quantizeSym(dst.ext, dst.t[:n], 127)
		dst.fineOK = false
	}
}

// finish turns y·t (an estimate of <y, t>) into the distance estimate and
// the half-width of its error bound: the RaBitQ bound
// eps*|t|*Err in quadrature with the query quantization error
// eps*step*QErr.
func (q *Query) finish(f *Factors, yt, step float32) (est, bound float32) {
	ip, e := q.inner(f, yt, step)
	switch q.metric {
	case L2:
		return f.NormSq + q.tNormSq - 2*ip, 2 * e
	case IP:
		return -(ip + q.add), e
	}
	return (f.NormSq + q.tNormSq - 2*ip) / 2, e
}

// inner turns y·t into the estimate of <r, t> and its bound's half-width.
func (q *Query) inner(f *Factors, yt, step float32) (ip, e float32) {
	a, b := q.tNorm*f.Err, step*f.QErr
	return f.Scale * yt, q.eps * sqrt32(a*a+b*b)
}

// FastScan estimates the distances from the query to the 32 vectors of a
// fast-scan block (built with SetBlockCode) whose factors are f. For each
// vector v the true distance lies in [est[v]-bound[v], est[v]+bound[v]] with
// the confidence set by Epsilon. Codes of empty slots give meaningless values.
func (rq *RaBitQ) FastScan(q *Query, block []byte, f *[BlockVectors]Factors, est, bound *[BlockVectors]float32) {
	var acc [BlockVectors]uint32
	scanBlock(&q.scan, block[:BlockBytes(rq.CodeBytes())], &acc)
	for v, a := range acc {
		// Sum of +-t'_i over the code's signs: 2*(bits·t') - sum|t'| in terms
		// of the table sums (see doc.go).
		s := float32(2*int32(a) - q.absSum)
		est[v], bound[v] = q.finish(&f[v], q.step*s, q.step)
	}
}

// ExtEstimate estimates the distance from the query to the vector whose
// extended code is ext, with the half-width of its error bound.
func (rq *RaBitQ) ExtEstimate(q *Query, ext []byte, f *Factors) (est, bound float32) {
	return q.finish(f, rq.extDot(q, ext), q.extStep)
}

// extDot estimates <y, t> from an extended code.
func (rq *RaBitQ) extDot(q *Query, ext []byte) float32 {
	return rq.codeDot(ext, q.ext, q.extStep, q.extSum)
}

// codeDot is <y, t'>·step for an extended code and a quantized query t'
// whose integers sum to sum.
func (rq *RaBitQ) codeDot(ext []byte, t []int8, step float32, sum int32) float32 {
	var dot int32
	switch rq.cfg.ExBits {
	case 8:
		dot = DotU8I8(ext[:rq.ExtBytes()], t)
	case 6:
		n := rq.topBytes()
		dot = 4*dotU4I8(ext[:n], t) + dotU2I8(ext[n:rq.ExtBytes()], t)
	default:
		dot = dotU4I8(ext[:rq.ExtBytes()], t)
	}
	// <y, t'> = <u, t'> - (2^B-1)/2 * sum t', kept in integers until the end.
	twice := 2*int64(dot) - int64(1<<rq.cfg.ExBits-1)*int64(sum)
	return step * float32(twice) / 2
}

// ExtInner estimates <r, t> from an extended code, r the vector's rotated
// residual and t the query's (see PrepareQuery), with the half-width of
// its error bound: the part of ExtEstimate that does not depend on the
// centroid the vector was encoded against. An index whose rows have
// centroids other than the one the query was prepared against composes
// the distance itself: for L2, ‖q−o‖² = ‖q−c‖² + ‖r‖² − 2(<r,t> + <g−c,r>)
// with t = q−g, g the query's centroid and c the row's.
func (rq *RaBitQ) ExtInner(q *Query, ext []byte, f *Factors) (ip, bound float32) {
	return q.inner(f, rq.extDot(q, ext), q.extStep)
}

// TopScale returns the Scale factor of the top plane of r's 6-bit code
// ext (see extDims): the 4-bit code of r/4 that ExtInnerTop reads. Its
// other factors are those of the whole code: the same ‖r‖, and a looser
// error no caller of ExtInnerTop asks for.
func (rq *RaBitQ) TopScale(ext []byte, r []float32) float32 {
	rq.checkSixBits()
	checkLen(len(r), rq.cfg.Dim)
	y := rq.gridPoints(ext, true)
	var yr, rr float64
	for i, v := range r {
		yr += float64(y[i]) * float64(v)
		rr += float64(v) * float64(v)
	}
	if yr <= 0 {
		return 0
	}
	return float32(rr / yr)
}

// ExtInnerTop estimates <r, t> from the top plane of a 6-bit code alone,
// with scale its TopScale: as precise as a 4-bit code, reading two thirds
// of the bytes. A graph's walk, which estimates hundreds of rows to keep
// the few nearest, uses it; the rows it keeps are then estimated again by
// ExtInner or ExtEstimate from the whole code.
func (rq *RaBitQ) ExtInnerTop(q *Query, ext []byte, scale float32) float32 {
	rq.checkSixBits()
	dot := dotU4I8(ext[:rq.topBytes()], q.ext)
	return scale * q.extStep * float32(2*int64(dot)-15*int64(q.extSum)) / 2
}

// ExtInnerExact is the estimate of <r, v> that the extended code of r
// gives for a vector v known exactly, unquantized: Scale·<y, v>. With it
// an index corrects, once at encoding, an estimate made against one point
// to the estimate against another: ExtInner against g plus
// ExtInnerExact(g−c) estimates <r, q−c> with the error of a query
// prepared against c (see ExtInnerAt).
func (rq *RaBitQ) ExtInnerExact(ext []byte, f *Factors, v []float32) float32 {
	return f.Scale * Dot(rq.gridPoints(ext, false), v)
}

// TopInnerExact is ExtInnerExact for the top plane of a 6-bit code, with
// its TopScale.
func (rq *RaBitQ) TopInnerExact(ext []byte, scale float32, v []float32) float32 {
	return scale * Dot(rq.gridPoints(ext, true), v)
}

// gridPoints returns the Dim grid points of an extended code, or of the
// top plane of a 6-bit one, for the encoding-time methods above.
func (rq *RaBitQ) gridPoints(ext []byte, top bool) []float32 {
	y := make([]float32, rq.extDims())
	if top {
		rq.checkSixBits()
		decodeCodes(y, ext[:rq.topBytes()], 4)
	} else {
		decodeCodes(y, ext, rq.cfg.ExBits)
	}
	return y[:rq.cfg.Dim]
}

// ExtInnerAt is ExtInner for a caller that corrects the estimate to
// another point (see ExtInnerExact), whose residual is shorter than the
// query's: its bound is that of a residual of norm tNorm, and the query is
// quantized twice over (the second time on first use), so that its
// quantization, whose error grows with this query's residual, adds
// nothing to the bound.
func (rq *RaBitQ) ExtInnerAt(q *Query, ext []byte, f *Factors, tNorm float32) (ip, bound float32) {
	if !q.fineOK {
		n := len(q.ext)
		q.fine, q.rest = grow(q.fine, n), grow(q.rest, n)
		for i, v := range q.t[:n] {
			q.rest[i] = v - q.extStep*float32(q.ext[i])
		}
		q.fineStep, q.fineSum = quantizeSym(q.fine, q.rest, 127)
		q.fineOK = true
	}
	dot := rq.codeDot(ext, q.ext, q.extStep, q.extSum) + rq.codeDot(ext, q.fine, q.fineStep, q.fineSum)
	a, b := tNorm*f.Err, q.fineStep*f.QErr
	return f.Scale * dot, q.eps * sqrt32(a*a+b*b)
}

func (rq *RaBitQ) checkSixBits() {
	if rq.cfg.ExBits != 6 {
		panic(fmt.Sprintf("kernels: the top plane of a %d-bit extended code", rq.cfg.ExBits))
	}
}

// DecodeExt writes to dst (Dim elements) the rotated residual an extended
// code stands for, as well as the code knows it: its grid point y scaled to
// the residual's norm, y·‖r‖/‖y‖, plus add (the rotated centroid, for the
// rotated vector; nil for none). It is for comparing two stored vectors
// with each other (a graph choosing its edges), where neither exact
// vector is at hand; a query is compared with codes by ExtEstimate. The
// codec must have extended bits.
func (rq *RaBitQ) DecodeExt(dst []float32, ext []byte, f *Factors, add []float32) {
	rq.decode(dst, ext, rq.cfg.ExBits, f.NormSq, add)
}

// DecodeTop is DecodeExt from the top plane of a 6-bit code alone: the
// residual as a 4-bit code knows it, at a 4-bit code's cost. A graph
// choosing edges compares hundreds of decoded rows per row it links, and
// its choices need no finer codes than its walk does.
func (rq *RaBitQ) DecodeTop(dst []float32, ext []byte, f *Factors, add []float32) {
	rq.checkSixBits()
	rq.decode(dst, ext[:rq.topBytes()], 4, f.NormSq, add)
}

// decode is DecodeExt for a code of the given width (the codec's, or 4 for
// the top plane of a 6-bit code).
func (rq *RaBitQ) decode(dst []float32, ext []byte, bits int, normSq float32, add []float32) {
	dim := rq.cfg.Dim
	checkLen(len(dst), dim)
	var yy float32
	switch n := rq.extDims(); {
	case n == dim && bits == 4:
		yy = gridU4(dst, ext)
	case n == dim:
		decodeCodes(dst, ext, bits)
		yy = Dot(dst, dst)
	default: // the last codes are padding
		y := make([]float32, n)
		decodeCodes(y, ext, bits)
		copy(dst, y)
		yy = Dot(dst, dst)
	}
	s := float32(0)
	if yy > 0 {
		s = sqrt32(normSq / yy)
	}
	if add == nil {
		scaleInto(dst, s)
		return
	}
	checkLen(len(add), dim)
	scaleAddInto(dst, add, s)
}

// decodeCodes writes the grid points of an extended code to dst
// (as many as it holds). A graph decodes a thousand rows per row it links,
// so this is by table, not by code.
func decodeCodes(dst []float32, ext []byte, bits int) {
	switch bits {
	case 8:
		for i := range dst {
			dst[i] = float32(ext[i]) - 127.5
		}
		return
	case 4:
		unpackU4(dst, ext, &u4Points)
		return
	}
	top := len(dst) / 2
	unpackU4(dst, ext[:top], &u6TopPoints)
	addU2(dst, ext[top:])
}

// gridU4Go is gridU4 in Go.
func gridU4Go(dst []float32, ext []byte) float32 {
	if len(dst) == 0 {
		return 0
	}
	unpackU4(dst, ext, &u4Points)
	return Dot(dst, dst)
}

// scaleAddGo is scaleAddInto in Go.
func scaleAddGo(x, y []float32, s float32) {
	for i, v := range y {
		x[i] = x[i]*s + v
	}
}

// u4Points holds, for each byte of a 4-bit code, its two grid points;
// u6TopPoints, for each byte of a 6-bit code's top plane, the two grid
// points of its codes with low bits zero.
var u4Points, u6TopPoints = pointTable(1, 7.5), pointTable(4, 31.5)

func pointTable(scale, sub float32) (t [256][2]float32) {
	for b := range t {
		t[b] = [2]float32{scale*float32(b&15) - sub, scale*float32(b>>4) - sub}
	}
	return t
}

// unpackU4 writes to dst (len 2·len(ext)) the points of the codes packed
// by packU4, by table.
func unpackU4(dst []float32, ext []byte, table *[256][2]float32) {
	for base := 0; base < len(dst); base += 2 * u4Chunk {
		m := min(u4Chunk, (len(dst)-base)/2)
		lo, hi := dst[base:base+m], dst[base+m:base+2*m]
		for j, b := range ext[base/2 : base/2+m] {
			pair := &table[b]
			lo[j], hi[j] = pair[0], pair[1]
		}
	}
}

// addU2 adds to dst (len 4·len(ext)) the codes packed by packU2.
func addU2(dst []float32, ext []byte) {
	for base := 0; base < len(dst); base += 4 * u2Chunk {
		m := min(u2Chunk, (len(dst)-base)/4)
		codes := ext[base/4 : base/4+m]
		for i := range 4 {
			quarter := dst[base+i*m : base+(i+1)*m]
			for j, b := range codes {
				quarter[j] += float32(b >> (2 * i) & 3)
			}
		}
	}
}

const (
	rabitqMagic   = "VSRQ"
	rabitqVersion = 1
	rabitqRest    = 1 + 4 // extended bits, epsilon
)

// MarshalBinary encodes the codec's state (dimension, metric, extended bits,
// epsilon, rotation rounds and seed) in a versioned format. Centroids are
// not part of it: they belong to the index.
func (rq *RaBitQ) MarshalBinary() ([]byte, error) {
	b := stateHeader{
		magic: rabitqMagic, version: rabitqVersion, metric: rq.cfg.Metric,
		rounds: uint8(rq.rot.rounds), dim: uint32(rq.cfg.Dim), seed: rq.cfg.Seed,
	}.append(nil)
	b = append(b, uint8(rq.cfg.ExBits))
	return binary.LittleEndian.AppendUint32(b, math.Float32bits(rq.cfg.Epsilon)), nil
}

// UnmarshalBinary restores a codec saved by MarshalBinary.
func (rq *RaBitQ) UnmarshalBinary(data []byte) error {
	h, rest, err := decodeHeader(data, rabitqMagic, rabitqVersion, rabitqRest)
	if err != nil {
		return err
	}
	n, err := NewRaBitQ(RaBitQConfig{
		Dim: int(h.dim), Metric: h.metric, ExBits: int(rest[0]), Seed: h.seed,
		Epsilon: math.Float32frombits(binary.LittleEndian.Uint32(rest[1:])),
	})
	if err != nil {
		return fmt.Errorf("%w: %v", ErrState, err)
	}
	*rq = *n
	return nil
}
