package kernels

import (
	"bytes"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"testing"
)

// clustered returns n vectors around k Gaussian centres (seeded): centres
// drawn from N(0, 1) per coordinate, points at spread 0.5 around them, with
// a common offset so that the data does not sit around the origin.
func clustered(r *rand.Rand, n, dim, k int) [][]float32 {
	centres := make([][]float32, k)
	for c := range centres {
		centres[c] = make([]float32, dim)
		for i := range centres[c] {
			centres[c][i] = float32(r.NormFloat64() + 0.5)
		}
	}
	out := make([][]float32, n)
	for j := range out {
		c := centres[r.IntN(k)]
		out[j] = make([]float32, dim)
		for i := range out[j] {
			out[j][i] = c[i] + float32(0.5*r.NormFloat64())
		}
	}
	return out
}

func mean(vs [][]float32) []float32 {
	m := make([]float32, len(vs[0]))
	for _, v := range vs {
		for i, x := range v {
			m[i] += x / float32(len(vs))
		}
	}
	return m
}

// trueDist is the exact distance the codecs estimate (squared for L2).
func trueDist(m Metric, a, b []float32) float64 {
	if m == L2 {
		d := m.Distance(a, b)
		return d * d
	}
	return m.Distance(a, b)
}

// estStats accumulates estimate errors e = est - true with their bounds.
type estStats struct {
	n, inside   int
	sumZ, sumE2 float64 // z = e/(bound/eps): the error in estimated standard deviations
}

func (s *estStats) add(est, bound float32, truth float64, eps float32) {
	e := float64(est) - truth
	s.n++
	if math.Abs(e) <= float64(bound) {
		s.inside++
	}
	if bound > 0 {
		s.sumZ += e / float64(bound/eps)
	}
	s.sumE2 += e * e
}

func (s *estStats) coverage() float64 { return float64(s.inside) / float64(s.n) }
func (s *estStats) bias() float64     { return s.sumZ / float64(s.n) }
func (s *estStats) rmse() float64     { return math.Sqrt(s.sumE2 / float64(s.n)) }

// rabitqRun encodes clustered data against its mean, scans it with held-out
// queries and returns the statistics of the 1-bit and extended estimates.
func rabitqRun(t *testing.T, cfg RaBitQConfig, n, queries int) (bin, ext estStats) {
	t.Helper()
	r := rand.New(rand.NewPCG(uint64(cfg.Dim), uint64(cfg.Metric)))
	data := clustered(r, n+queries, cfg.Dim, 8)
	data, qs := data[:n], data[n:]
	rq, err := NewRaBitQ(cfg)
	if err != nil {
		t.Fatal(err)
	}
	centroid := mean(data)
	if cfg.Metric == Cosine {
		unit := make([][]float32, n)
		for j, v := range data {
			unit[j] = make([]float32, cfg.Dim)
			prepareVector(unit[j], v, Cosine)
		}
		centroid = mean(unit)
	}
	blocks := make([]byte, n/BlockVectors*BlockBytes(rq.CodeBytes()))
	factors := make([]Factors, n)
	exts := make([]byte, n*rq.ExtBytes())
	extF := make([]Factors, n)
	code := make([]byte, rq.CodeBytes())
	for j, v := range data {
		e := exts[j*rq.ExtBytes() : (j+1)*rq.ExtBytes()]
		factors[j], extF[j] = rq.Encode(v, centroid, code, e)
		b := j / BlockVectors
		SetBlockCode(blocks[b*BlockBytes(rq.CodeBytes()):], j%BlockVectors, code)
	}
	cRot, qRot := make([]float32, cfg.Dim), make([]float32, cfg.Dim)
	rq.Rotate(cRot, centroid)
	var q Query
	var est, bound [BlockVectors]float32
	for _, qv := range qs {
		rq.RotateQuery(qRot, qv)
		rq.PrepareQuery(&q, qRot, cRot)
		for b := range n / BlockVectors {
			blk := blocks[b*BlockBytes(rq.CodeBytes()) : (b+1)*BlockBytes(rq.CodeBytes())]
			rq.FastScan(&q, blk, (*[BlockVectors]Factors)(factors[b*BlockVectors:]), &est, &bound)
			for v := range BlockVectors {
				j := b*BlockVectors + v
				truth := trueDist(cfg.Metric, data[j], qv)
				bin.add(est[v], bound[v], truth, rq.cfg.Epsilon)
				if cfg.ExBits > 0 {
					e, eb := rq.ExtEstimate(&q, exts[j*rq.ExtBytes():(j+1)*rq.ExtBytes()], &extF[j])
					ext.add(e, eb, truth, rq.cfg.Epsilon)
				}
			}
		}
	}
	return bin, ext
}

// TestRaBitQBounds checks the estimators on clustered data for every metric,
// a non-power-of-two and a power-of-two-free dimension: the true distance
// lies within the reported bound for at least 99% of pairs at the default
// epsilon, the mean error is within 0.2 estimated standard deviations of zero
// (unbiased), and extended codes are more precise than 1-bit codes.
func TestRaBitQBounds(t *testing.T) {
	for _, dim := range []int{100, 384} {
		for _, m := range []Metric{L2, IP, Cosine} {
			var binRMSE float64
			for _, bits := range []int{4, 6, 8} {
				name := fmt.Sprintf("%d/%v/ex%d", dim, m, bits)
				bin, ext := rabitqRun(t, RaBitQConfig{Dim: dim, Metric: m, ExBits: bits, Seed: 1}, 1024, 16)
				t.Logf("%s: 1-bit coverage %.4f bias %+.3f rmse %.4g; extended coverage %.4f bias %+.3f rmse %.4g",
					name, bin.coverage(), bin.bias(), bin.rmse(), ext.coverage(), ext.bias(), ext.rmse())
				for _, c := range []struct {
					what string
					s    estStats
				}{{"1-bit", bin}, {"extended", ext}} {
					if c.s.coverage() < 0.99 {
						t.Errorf("%s %s: true distance inside the bound for %.4f of pairs, want >= 0.99", name, c.what, c.s.coverage())
					}
					if math.Abs(c.s.bias()) > 0.2 {
						t.Errorf("%s %s: mean error %+.3f standard deviations, want within 0.2", name, c.what, c.s.bias())
					}
				}
				binRMSE = bin.rmse()
				if gain := binRMSE / ext.rmse(); gain < float64(int(1)<<(bits-2)) {
					t.Errorf("%s: extended codes only %.1fx more precise than 1-bit, want >= %d", name, gain, 1<<(bits-2))
				}
			}
		}
	}
}

// A decoded extended code keeps the residual's norm and points close to
// its direction: at 4 bits the cosine with the true rotated residual is
// above 0.95, at 6 bits above 0.99, at 8 bits above 0.999, for odd and
// even dimensions.
func TestDecodeExt(t *testing.T) {
	r := rand.New(rand.NewPCG(7, 8))
	for _, dim := range []int{37, 128, 200} {
		for _, c := range []struct {
			bits int
			cos  float64
		}{{4, 0.95}, {6, 0.99}, {8, 0.999}} {
			rq, err := NewRaBitQ(RaBitQConfig{Dim: dim, Metric: L2, ExBits: c.bits, Seed: 5})
			if err != nil {
				t.Fatal(err)
			}
			data := clustered(r, 64, dim, 4)
			centroid := mean(data)
			code, ext := make([]byte, rq.CodeBytes()), make([]byte, rq.ExtBytes())
			got, want := make([]float32, dim), make([]float32, dim)
			worst := 1.0
			for _, v := range data {
				_, xf := rq.Encode(v, centroid, code, ext)
				rq.DecodeExt(got, ext, &xf, nil)
				for i := range want {
					want[i] = v[i] - centroid[i]
				}
				rq.rot.Apply(want)
				gg, ww := float64(Dot(got, got)), float64(Dot(want, want))
				if math.Abs(gg-ww) > 1e-3*ww {
					t.Fatalf("%d-d ex%d: decoded norm² %g, residual's %g", dim, c.bits, gg, ww)
				}
				worst = min(worst, float64(Dot(got, want))/math.Sqrt(gg*ww))
			}
			if worst < c.cos {
				t.Errorf("%d-d ex%d: cosine of a decoded residual with the true one down to %.4f, want ≥ %g", dim, c.bits, worst, c.cos)
			}
		}
	}
}

// The decoding's kernels give every code's grid point exactly (a code
// minus 7.5, where packU4 put it) and the sum of their squares, and
// scaleAddInto x·s+y, to within a rounding, at every length and in every
// implementation; DecodeTop with a centroid is its decoding plus the
// centroid.
func TestDecodeKernels(t *testing.T) {
	forEachImpl(t, f32Family, func(t *testing.T) {
		rng := rand.New(rand.NewPCG(13, 14))
		for n := 2; n <= 300; n += 2 {
			codes := make([]uint8, n)
			for i := range codes {
				codes[i] = uint8(rng.IntN(16))
			}
			packed := make([]byte, n/2)
			packU4(packed, codes)
			got := make([]float32, n)
			sq := gridU4(got, packed)
			var want float64
			for i, c := range codes {
				p := float32(c) - 7.5
				if got[i] != p {
					t.Fatalf("n=%d: grid point %d is %v, want %v", n, i, got[i], p)
				}
				want += float64(p) * float64(p)
			}
			if math.Abs(float64(sq)-want) > 1e-6*want {
				t.Fatalf("n=%d: sum of squares %v, want %v", n, sq, want)
			}
			y := make([]float32, n)
			for i := range y {
				y[i] = float32(rng.NormFloat64())
			}
			x := slices.Clone(got)
			scaleAddInto(x, y, 0.3)
			for i := range x {
				if w := float64(got[i])*0.3 + float64(y[i]); math.Abs(float64(x[i])-w) > 1e-6*(math.Abs(w)+1) {
					t.Fatalf("n=%d: scaleAddInto element %d is %v, want %v", n, i, x[i], w)
				}
			}
		}
		for _, dim := range []int{37, 128, 200, 1536} {
			rq, err := NewRaBitQ(RaBitQConfig{Dim: dim, Metric: L2, ExBits: 6, Seed: 5})
			if err != nil {
				t.Fatal(err)
			}
			v, c := make([]float32, dim), make([]float32, dim)
			for i := range v {
				v[i], c[i] = float32(rng.NormFloat64()), float32(rng.NormFloat64())
			}
			code, ext := make([]byte, rq.CodeBytes()), make([]byte, rq.ExtBytes())
			_, f := rq.Encode(v, nil, code, ext)
			alone, moved := make([]float32, dim), make([]float32, dim)
			rq.DecodeTop(alone, ext, &f, nil)
			rq.DecodeTop(moved, ext, &f, c)
			if n := Dot(alone, alone); math.Abs(float64(n-f.NormSq)) > 1e-4*float64(f.NormSq) {
				t.Fatalf("%d-d: decoded norm² %v, the residual's %v", dim, n, f.NormSq)
			}
			for i := range moved {
				if d := moved[i] - c[i] - alone[i]; math.Abs(float64(d)) > 1e-5*(math.Abs(float64(alone[i]))+math.Abs(float64(c[i]))) {
					t.Fatalf("%d-d: element %d with the centroid is %v, without %v, centroid %v", dim, i, moved[i], alone[i], c[i])
				}
			}
		}
	})
}

// A row encoded against one centroid and a query prepared against
// another: ExtInner's <r, t>, composed with the centroids' terms, holds
// the true L2 distance within its bound as often as ExtEstimate does with
// one centroid; EncodeRotated and PrepareExtQuery agree with Encode and
// PrepareQuery.
func TestExtInnerAcrossCentroids(t *testing.T) {
	r := rand.New(rand.NewPCG(11, 12))
	const dim = 96
	rq, err := NewRaBitQ(RaBitQConfig{Dim: dim, Metric: L2, ExBits: 4, Seed: 9})
	if err != nil {
		t.Fatal(err)
	}
	data := clustered(r, 400, dim, 8)
	g, c := mean(data), data[0]
	gRot, cRot := make([]float32, dim), make([]float32, dim)
	rq.Rotate(gRot, g)
	rq.Rotate(cRot, c)
	code, ext := make([]byte, rq.CodeBytes()), make([]byte, rq.ExtBytes())
	code2, ext2 := make([]byte, rq.CodeBytes()), make([]byte, rq.ExtBytes())
	vRot, res := make([]float32, dim), make([]float32, dim)
	var full, light Query
	inside, pairs := 0, 0
	for _, q := range data[200:220] {
		qRot := make([]float32, dim)
		rq.RotateQuery(qRot, q)
		rq.PrepareQuery(&full, qRot, gRot)
		rq.PrepareExtQuery(&light, qRot, gRot)
		qc := L2Sq(qRot, cRot)
		for _, v := range data[1:200] {
			rq.RotateQuery(vRot, v)
			for i := range res {
				res[i] = vRot[i] - cRot[i]
			}
			_, xf := rq.Encode(v, c, code, ext)
			_, xf2 := rq.EncodeRotated(res, code2, ext2)
			if !bytes.Equal(ext, ext2) || math.Abs(float64(xf.Scale-xf2.Scale)) > 1e-4*math.Abs(float64(xf.Scale)) {
				t.Fatalf("EncodeRotated differs from Encode: %v vs %v", xf2, xf)
			}
			e1, b1 := rq.ExtEstimate(&full, ext, &xf)
			e2, b2 := rq.ExtEstimate(&light, ext, &xf)
			if e1 != e2 || b1 != b2 {
				t.Fatalf("PrepareExtQuery's estimate %g±%g, PrepareQuery's %g±%g", e2, b2, e1, b1)
			}
			ip, e := rq.ExtInner(&light, ext, &xf)
			kappa := float32(0)
			for i := range res {
				kappa += (gRot[i] - cRot[i]) * res[i]
			}
			est := qc + xf.NormSq - 2*(ip+kappa)
			if d := L2Sq(q, v); math.Abs(float64(d-est)) <= float64(2*e) {
				inside++
			}
			pairs++
		}
	}
	if got := float64(inside) / float64(pairs); got < 0.99 {
		t.Errorf("true distance inside the composed bound for %.4f of pairs, want ≥ 0.99", got)
	}
}

// The top plane of a 6-bit code is a 4-bit code: DecodeTop points close
// to the residual, ExtInnerTop, with TopScale, estimates <r, t> about as
// well as a 4-bit codec of the same rotation does, and the whole code (ExtInner) several times better, for
// a dimension that is a multiple of four and one that is not.
func TestExtInnerTop(t *testing.T) {
	r := rand.New(rand.NewPCG(13, 14))
	for _, dim := range []int{96, 101} {
		six, err := NewRaBitQ(RaBitQConfig{Dim: dim, Metric: L2, ExBits: 6, Seed: 9})
		if err != nil {
			t.Fatal(err)
		}
		four, _ := NewRaBitQ(RaBitQConfig{Dim: dim, Metric: L2, ExBits: 4, Seed: 9})
		data := clustered(r, 300, dim, 8)
		c := mean(data)
		cRot, qRot, res := make([]float32, dim), make([]float32, dim), make([]float32, dim)
		six.Rotate(cRot, c)
		code := make([]byte, six.CodeBytes())
		ext6, ext4 := make([]byte, six.ExtBytes()), make([]byte, four.ExtBytes())
		var q6, q4 Query
		var top, whole, coarse estStats
		for _, v := range data[:200] {
			six.RotateQuery(res, v)
			for i := range res {
				res[i] -= cRot[i]
			}
			_, f6 := six.EncodeRotated(res, code, ext6)
			_, f4 := four.EncodeRotated(res, code, ext4)
			scale := six.TopScale(ext6, res)
			decoded := make([]float32, dim)
			six.DecodeTop(decoded, ext6, &f6, nil)
			if cos := Dot(decoded, res) / sqrt32(Dot(decoded, decoded)*Dot(res, res)); cos < 0.95 {
				t.Fatalf("%d-d: cosine of the top plane's decoded residual with the true one %.4f, want ≥ 0.95", dim, cos)
			}
			for _, qv := range data[200:220] {
				six.RotateQuery(qRot, qv)
				six.PrepareExtQuery(&q6, qRot, cRot)
				four.PrepareExtQuery(&q4, qRot, cRot)
				truth := float64(Dot(res, q6.t[:dim]))
				top.add(six.ExtInnerTop(&q6, ext6, scale), 0, truth, 1)
				ip, _ := six.ExtInner(&q6, ext6, &f6)
				whole.add(ip, 0, truth, 1)
				ip, _ = four.ExtInner(&q4, ext4, &f4)
				coarse.add(ip, 0, truth, 1)
			}
		}
		t.Logf("%d-d: rmse of <r,t> from the top plane %.4g, the whole 6-bit code %.4g, a 4-bit code %.4g", dim, top.rmse(), whole.rmse(), coarse.rmse())
		if top.rmse() > 1.3*coarse.rmse() {
			t.Errorf("%d-d: the top plane's rmse %.4g, want within 1.3x of a 4-bit code's %.4g", dim, top.rmse(), coarse.rmse())
		}
		if whole.rmse() > coarse.rmse()/2.5 {
			t.Errorf("%d-d: the whole 6-bit code's rmse %.4g, want below a 4-bit code's %.4g / 2.5", dim, whole.rmse(), coarse.rmse())
		}
	}
}

// TestRaBitQDegenerate covers a vector equal to the centroid and a zero
// query: the estimates must be finite and exact where the math says so.
func TestRaBitQDegenerate(t *testing.T) {
	rq, err := NewRaBitQ(RaBitQConfig{Dim: 70, Metric: L2, ExBits: 4, Seed: 3})
	if err != nil {
		t.Fatal(err)
	}
	v := make([]float32, 70)
	for i := range v {
		v[i] = float32(i)
	}
	code, ext := make([]byte, rq.CodeBytes()), make([]byte, rq.ExtBytes())
	f, ef := rq.Encode(v, v, code, ext)
	block := make([]byte, BlockBytes(rq.CodeBytes()))
	SetBlockCode(block, 0, code)
	var fs [BlockVectors]Factors
	fs[0] = f
	q := make([]float32, 70)
	q[5] = 2
	qRot, cRot := make([]float32, 70), make([]float32, 70)
	rq.RotateQuery(qRot, q)
	rq.Rotate(cRot, v)
	var pq Query
	rq.PrepareQuery(&pq, qRot, cRot)
	var est, bound [BlockVectors]float32
	rq.FastScan(&pq, block, &fs, &est, &bound)
	want := float32(trueDist(L2, v, q))
	if math.Abs(float64(est[0]-want)) > 1e-3*float64(want) || bound[0] != 0 {
		t.Errorf("vector at the centroid: estimate %g ± %g, want %g ± 0", est[0], bound[0], want)
	}
	if e, b := rq.ExtEstimate(&pq, ext, &ef); math.Abs(float64(e-want)) > 1e-3*float64(want) || b != 0 {
		t.Errorf("vector at the centroid, extended: estimate %g ± %g, want %g ± 0", e, b, want)
	}
	rq.PrepareQuery(&pq, cRot, cRot) // query at the centroid: t = 0
	rq.FastScan(&pq, block, &fs, &est, &bound)
	if est[0] != 0 || bound[0] != 0 {
		t.Errorf("query at the centroid: estimate %g ± %g, want 0 ± 0", est[0], bound[0])
	}
}

func TestSQ8(t *testing.T) {
	for _, m := range []Metric{L2, IP, Cosine} {
		r := rand.New(rand.NewPCG(31, uint64(m)))
		const dim, n = 384, 200
		data := clustered(r, n+4, dim, 4)
		sq, err := NewSQ8(SQ8Config{Dim: dim, Metric: m, Seed: 9})
		if err != nil {
			t.Fatal(err)
		}
		codes := make([]byte, n*dim)
		fs := make([]SQ8Factors, n)
		for j := range n {
			fs[j] = sq.Encode(codes[j*dim:(j+1)*dim], data[j])
		}
		var q SQ8Query
		var sumErr2, sumTrue2 float64
		for _, qv := range data[n:] {
			sq.PrepareQuery(&q, qv)
			for j := range n {
				truth := trueDist(m, data[j], qv)
				e := float64(sq.Distance(&q, codes[j*dim:(j+1)*dim], fs[j])) - truth
				sumErr2 += e * e
				sumTrue2 += truth * truth
			}
		}
		// The SQ8 distance error is a fraction of a percent of the distances.
		if rel := math.Sqrt(sumErr2 / sumTrue2); rel > 0.005 {
			t.Errorf("%v: relative RMS error %.4g, want <= 0.005", m, rel)
		}
	}
}

// TestCodecState round-trips both codecs through MarshalBinary and checks
// that a restored codec encodes identically, and that damaged state is
// refused with ErrState.
func TestCodecState(t *testing.T) {
	rq, err := NewRaBitQ(RaBitQConfig{Dim: 100, Metric: Cosine, ExBits: 8, Seed: 77, Epsilon: 2.5})
	if err != nil {
		t.Fatal(err)
	}
	sq, err := NewSQ8(SQ8Config{Dim: 100, Metric: IP, Seed: 78})
	if err != nil {
		t.Fatal(err)
	}
	rqState, _ := rq.MarshalBinary()
	sqState, _ := sq.MarshalBinary()
	var rq2 RaBitQ
	var sq2 SQ8
	if err := rq2.UnmarshalBinary(rqState); err != nil {
		t.Fatal(err)
	}
	if err := sq2.UnmarshalBinary(sqState); err != nil {
		t.Fatal(err)
	}
	if rq2.Config() != rq.Config() || sq2.Config() != sq.Config() {
		t.Fatalf("configs changed: %+v/%+v, %+v/%+v", rq2.Config(), rq.Config(), sq2.Config(), sq.Config())
	}
	v := randF32(rand.New(rand.NewPCG(1, 1)), 100, f32Gens[0])
	c1, c2 := make([]byte, rq.CodeBytes()), make([]byte, rq.CodeBytes())
	e1, e2 := make([]byte, rq.ExtBytes()), make([]byte, rq.ExtBytes())
	f1, x1 := rq.Encode(v, nil, c1, e1)
	f2, x2 := rq2.Encode(v, nil, c2, e2)
	if !bytes.Equal(c1, c2) || !bytes.Equal(e1, e2) || f1 != f2 || x1 != x2 {
		t.Error("restored RaBitQ encodes differently")
	}
	s1, s2 := make([]byte, 100), make([]byte, 100)
	if sq.Encode(s1, v) != sq2.Encode(s2, v) || !bytes.Equal(s1, s2) {
		t.Error("restored SQ8 encodes differently")
	}
	damage := []struct {
		name string
		f    func([]byte) []byte
	}{
		{"truncated", func(b []byte) []byte { return b[:len(b)-1] }},
		{"magic", func(b []byte) []byte { b[0] ^= 1; return b }},
		{"version", func(b []byte) []byte { b[4]++; return b }},
		{"metric", func(b []byte) []byte { b[5] = 9; return b }},
		{"dim", func(b []byte) []byte { b[7], b[8], b[9], b[10] = 0, 0, 0, 0; return b }},
	}
	for _, d := range damage {
		if err := rq2.UnmarshalBinary(d.f(bytes.Clone(rqState))); !errors.Is(err, ErrState) {
			t.Errorf("RaBitQ state with bad %s: err %v, want ErrState", d.name, err)
		}
		if err := sq2.UnmarshalBinary(d.f(bytes.Clone(sqState))); !errors.Is(err, ErrState) {
			t.Errorf("SQ8 state with bad %s: err %v, want ErrState", d.name, err)
		}
	}
	bad := bytes.Clone(rqState)
	bad[stateHeaderLen] = 5 // extended bits
	if err := rq2.UnmarshalBinary(bad); !errors.Is(err, ErrState) {
		t.Errorf("RaBitQ state with 5 extended bits: err %v, want ErrState", err)
	}
}
