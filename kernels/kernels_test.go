package kernels

import (
	"math"
	"math/rand/v2"
	"slices"
	"testing"
)

// testLengths are the lengths every kernel is checked at: all tails up to
// 67 and the common embedding sizes.
var testLengths = append(seq(1, 67), 100, 128, 384, 768, 784, 1024, 1536)

func seq(lo, hi int) []int {
	var s []int
	for i := lo; i <= hi; i++ {
		s = append(s, i)
	}
	return s
}

// forEachImpl runs f once per implementation of fam that this CPU can run.
func forEachImpl(t *testing.T, fam *family, f func(t *testing.T)) {
	t.Helper()
	saved := fam.active
	defer func() { fam.active = saved }()
	for _, name := range fam.availNames() {
		if !fam.use(name) {
			t.Fatalf("cannot select %s", name)
		}
		t.Run(name, f)
	}
}

// f32Gen fills a vector; the generators cover ordinary, huge, tiny
// (subnormal) and cancelling values.
type f32Gen struct {
	name string
	gen  func(r *rand.Rand, i int) float32
}

var f32Gens = []f32Gen{
	{"normal", func(r *rand.Rand, _ int) float32 { return float32(r.NormFloat64()) }},
	{"huge", func(r *rand.Rand, _ int) float32 { return float32(r.NormFloat64() * 1e15) }},
	{"subnormal", func(r *rand.Rand, _ int) float32 { return float32(r.NormFloat64() * 1e-39) }},
	{"mixed", func(r *rand.Rand, i int) float32 {
		return float32(r.NormFloat64() * math.Pow(10, float64(i%24-12)))
	}},
	{"cancel", func(r *rand.Rand, i int) float32 { return float32(1e4 * float64(1-2*(i%2))) }},
}

func randF32(r *rand.Rand, n int, g f32Gen) []float32 {
	v := make([]float32, n)
	for i := range v {
		v[i] = g.gen(r, i)
	}
	return v
}

// f32Tol is the accepted difference between two float32 sums of the same n
// terms t_i: c*n*eps*sum|t_i| with c = 2 (each summation order is within
// n*eps*sum|t_i| of the exact sum), plus n subnormal units for terms that
// underflow.
func f32Tol(op f32Op, a, b []float32) float64 {
	var s float64
	for i := range a {
		if op == opDot {
			s += math.Abs(float64(a[i]) * float64(b[i]))
		} else {
			d := float64(a[i] - b[i])
			s += d * d
		}
	}
	n := float64(len(a))
	return 2*n*0x1p-24*s + n*0x1p-149
}

func checkF32(t *testing.T, op f32Op, what string, got float32, a, b []float32) {
	t.Helper()
	want := pairGo(op, a, b)
	if d := math.Abs(float64(got) - float64(want)); !(d <= f32Tol(op, a, b)) {
		t.Errorf("%s n=%d: got %g, want %g (diff %g > tol %g)", what, len(a), got, want, d, f32Tol(op, a, b))
	}
}

func TestF32Kernels(t *testing.T) {
	forEachImpl(t, f32Family, func(t *testing.T) {
		r := rand.New(rand.NewPCG(1, 2))
		for _, g := range f32Gens {
			for _, n := range testLengths {
				a, b := randF32(r, n, g), randF32(r, n, g)
				checkF32(t, opDot, g.name+" Dot", Dot(a, b), a, b)
				checkF32(t, opL2Sq, g.name+" L2Sq", L2Sq(a, b), a, b)
				const rows = 3
				block := randF32(r, n*rows, g)
				dots, l2s := make([]float32, rows), make([]float32, rows)
				DotBlock(a, block, dots)
				L2SqBlock(a, block, l2s)
				for j := range rows {
					row := block[j*n : (j+1)*n]
					checkF32(t, opDot, g.name+" DotBlock", dots[j], a, row)
					checkF32(t, opL2Sq, g.name+" L2SqBlock", l2s[j], a, row)
				}
			}
		}
	})
}

// TestF32Chunks covers blocks longer than one assembly call.
func TestF32Chunks(t *testing.T) {
	forEachImpl(t, f32Family, func(t *testing.T) {
		r := rand.New(rand.NewPCG(3, 4))
		const dim, rows = 1536, 100 // > maxChunkFloats/dim rows
		q, block := randF32(r, dim, f32Gens[0]), randF32(r, dim*rows, f32Gens[0])
		out := make([]float32, rows)
		L2SqBlock(q, block, out)
		for j := range rows {
			checkF32(t, opL2Sq, "L2SqBlock", out[j], q, block[j*dim:(j+1)*dim])
		}
	})
}

func TestF32Special(t *testing.T) {
	nan, inf := float32(math.NaN()), float32(math.Inf(1))
	forEachImpl(t, f32Family, func(t *testing.T) {
		for _, n := range []int{5, 16, 33, 100} {
			for _, k := range []int{0, n / 2, n - 1} {
				a, b := make([]float32, n), make([]float32, n)
				for i := range a {
					a[i], b[i] = 1, 2
				}
				a[k] = nan
				if got := Dot(a, b); !math.IsNaN(float64(got)) {
					t.Errorf("Dot with NaN at %d/%d = %g, want NaN", k, n, got)
				}
				if got := L2Sq(a, b); !math.IsNaN(float64(got)) {
					t.Errorf("L2Sq with NaN at %d/%d = %g, want NaN", k, n, got)
				}
				a[k] = inf
				if got := Dot(a, b); !math.IsInf(float64(got), 1) {
					t.Errorf("Dot with +Inf at %d/%d = %g, want +Inf", k, n, got)
				}
			}
		}
	})
}

func TestCosine(t *testing.T) {
	a := []float32{1, 0, 0}
	tests := []struct {
		b    []float32
		want float64
	}{
		{[]float32{1, 0, 0}, 0},
		{[]float32{0, 3, 0}, 1},
		{[]float32{-2, 0, 0}, 2},
		{[]float32{0, 0, 0}, math.NaN()},
	}
	for _, tc := range tests {
		got := float64(CosineDistance(a, tc.b))
		if !(math.Abs(got-tc.want) < 1e-6 || math.IsNaN(got) && math.IsNaN(tc.want)) {
			t.Errorf("CosineDistance(%v, %v) = %g, want %g", a, tc.b, got, tc.want)
		}
	}
	r := rand.New(rand.NewPCG(5, 6))
	forEachImpl(t, f32Family, func(t *testing.T) {
		const dim, rows = 100, 7
		q, block := randF32(r, dim, f32Gens[0]), randF32(r, dim*rows, f32Gens[0])
		out := make([]float32, rows)
		CosineBlock(q, block, out)
		for j := range rows {
			row := block[j*dim : (j+1)*dim]
			want := 1 - float64(pairGo(opDot, q, row))/math.Sqrt(float64(pairGo(opDot, q, q))*float64(pairGo(opDot, row, row)))
			if math.Abs(float64(out[j])-want) > 1e-5 {
				t.Errorf("CosineBlock row %d = %g, want %g", j, out[j], want)
			}
		}
	})
}

// TestNoAlloc checks that the kernels keep caller arrays on the stack.
func TestNoAlloc(t *testing.T) {
	allocs := testing.AllocsPerRun(10, func() {
		var a, b [768]float32
		var out [4]float32
		var blk [4 * 768]float32
		_ = Dot(a[:], b[:]) + L2Sq(a[:], b[:])
		DotBlock(a[:], blk[:], out[:])
		var c [768]byte
		var d [768]int8
		_ = DotU8I8(c[:], d[:])
	})
	if allocs != 0 {
		t.Errorf("kernels allocated %v times per run, want 0", allocs)
	}
}

func refDotU8I8(a []byte, b []int8) int32 {
	var s int32
	for i := range a {
		s += int32(a[i]) * int32(b[i])
	}
	return s
}

// byteGen fills codes and a query; the generators include the saturating
// extremes that would break VPMADDUBSW on 8-bit codes.
type byteGen struct {
	name string
	a    func(r *rand.Rand) byte
	b    func(r *rand.Rand) int8
}

var byteGens = []byteGen{
	{"random", func(r *rand.Rand) byte { return byte(r.Uint32()) }, func(r *rand.Rand) int8 { return int8(r.Uint32()) }},
	{"max*min", func(*rand.Rand) byte { return 255 }, func(*rand.Rand) int8 { return -128 }},
	{"max*max", func(*rand.Rand) byte { return 255 }, func(*rand.Rand) int8 { return 127 }},
	{"zero", func(*rand.Rand) byte { return 0 }, func(*rand.Rand) int8 { return -128 }},
}

func randBytes(r *rand.Rand, n int, g byteGen) ([]byte, []int8) {
	a, b := make([]byte, n), make([]int8, n)
	for i := range a {
		a[i], b[i] = g.a(r), g.b(r)
	}
	return a, b
}

func TestDotU8I8(t *testing.T) {
	forEachImpl(t, intFamily, func(t *testing.T) {
		r := rand.New(rand.NewPCG(7, 8))
		for _, g := range byteGens {
			for _, n := range append(testLengths, 65536) {
				a, b := randBytes(r, n, g)
				if got, want := DotU8I8(a, b), refDotU8I8(a, b); got != want {
					t.Errorf("%s n=%d: got %d, want %d", g.name, n, got, want)
				}
			}
		}
	})
}

// packedDot is a kernel over codes packed several to a byte.
type packedDot struct {
	perByte int // codes per byte
	pack    func(dst []byte, u []uint8)
	dot     func(a []byte, b []int8) int32
}

var (
	u4Dot = packedDot{2, packU4, dotU4I8}
	u2Dot = packedDot{4, packU2, dotU2I8}
)

// mask keeps the bits of one code.
func (p packedDot) mask() byte { return 1<<(8/p.perByte) - 1 }

// check packs the codes u (len(u) a multiple of perByte, masked here) and
// compares the kernel's dot product with b to the plain sum.
func (p packedDot) check(u []byte, b []int8) (got, want int32) {
	for i := range u {
		u[i] &= p.mask()
	}
	packed := make([]byte, len(u)/p.perByte)
	p.pack(packed, u)
	return p.dot(packed, b), refDotU8I8(u, b)
}

// testPackedDot checks p on every implementation, at every test length in
// packed bytes (and none), with every byte generator; the generators'
// extremes become the largest code times -128 and 127.
func testPackedDot(t *testing.T, p packedDot, seed uint64) {
	forEachImpl(t, intFamily, func(t *testing.T) {
		r := rand.New(rand.NewPCG(seed, seed+1))
		for _, g := range byteGens {
			for _, n := range append([]int{0}, testLengths...) {
				u, b := randBytes(r, p.perByte*n, g)
				if got, want := p.check(u, b); got != want {
					t.Errorf("%s codes=%d: got %d, want %d", g.name, p.perByte*n, got, want)
				}
			}
		}
	})
}

// TestGridSums checks the vector kernels that bestScale runs against the
// plain sums, at scales from where no coordinate reaches the top code to
// where most are clamped to it: each y_i must be the same, only the order
// of the additions may differ.
func TestGridSums(t *testing.T) {
	forEachImpl(t, f32Family, func(t *testing.T) {
		r := rand.New(rand.NewPCG(13, 14))
		for _, g := range []f32Gen{f32Gens[0], f32Gens[3]} {
			for _, n := range testLengths {
				a := randF32(r, n, g)
				for i := range a {
					a[i] = abs32(a[i])
				}
				m := maxAbs(a)
				for _, top := range []int32{7, 31, 127} {
					for _, over := range []float32{0.3, 1, 4} {
						lambda := over * float32(top) / m
						yr, yy := gridSums(a, lambda, top)
						wantR, wantY := gridSumsGo(a, lambda, top)
						tol := 2 * float64(n) * 0x1p-24
						if math.Abs(yr-wantR) > tol*wantR || math.Abs(yy-wantY) > tol*wantY {
							t.Errorf("%s n=%d top=%d lambda=%g: got (%g, %g), want (%g, %g)", g.name, n, top, lambda, yr, yy, wantR, wantY)
						}
					}
				}
			}
		}
	})
}

func TestDotU4I8(t *testing.T) { testPackedDot(t, u4Dot, 9) }

func TestDotU2I8(t *testing.T) { testPackedDot(t, u2Dot, 11) }

// refScan computes the fast-scan sums from the definition: for vector v,
// sum over dimensions of bit*t' plus the tables' offset.
func refScan(tq []int8, codes [][]byte) [BlockVectors]uint32 {
	var neg int32
	for _, t := range tq {
		neg += max(-int32(t), 0)
	}
	var out [BlockVectors]uint32
	for v, c := range codes {
		s := neg
		for i, t := range tq {
			if c[i/8]>>(i%8)&1 == 1 {
				s += int32(t)
			}
		}
		out[v] = uint32(s)
	}
	return out
}

// scanCase builds a block of codes drawn from code and prepares the
// quantized query q (len(q) a multiple of 64).
func scanCase(q []int8, code func() byte) (*scanQuery, []byte, [BlockVectors]uint32) {
	dim := len(q)
	codes := make([][]byte, BlockVectors)
	block := make([]byte, BlockBytes(dim/8))
	for v := range codes {
		codes[v] = make([]byte, dim/8)
		for c := range codes[v] {
			codes[v][c] = code()
		}
		SetBlockCode(block, v, codes[v])
	}
	var sq scanQuery
	sq.init(q)
	return &sq, block, refScan(q, codes)
}

func TestFastScan(t *testing.T) {
	r := rand.New(rand.NewPCG(11, 12))
	rnd := func() byte { return byte(r.Uint32()) }
	rndq := func() int8 { return int8(r.IntN(2*scanMax+1) - scanMax) }
	cases := []struct {
		name string
		code func() byte
		tq   func() int8
	}{
		{"random", rnd, rndq},
		{"ones*max", func() byte { return 0xff }, func() int8 { return scanMax }},
		{"zeros*min", func() byte { return 0 }, func() int8 { return -scanMax }},
		{"ones*min", func() byte { return 0xff }, func() int8 { return -scanMax }},
	}
	forEachImpl(t, scanFamily, func(t *testing.T) {
		for _, tc := range cases {
			// 16000 is pgvector's largest vector dimension.
			for _, dim := range []int{64, 128, 384, 768, 1024, 1088, 1536, 2048, 16000} {
				q := make([]int8, dim)
				for i := range q {
					q[i] = tc.tq()
				}
				sq, block, want := scanCase(q, tc.code)
				var got [BlockVectors]uint32
				scanBlock(sq, block, &got)
				if got != want {
					t.Errorf("%s dim=%d: got %v, want %v", tc.name, dim, got, want)
				}
			}
		}
	})
}

func TestBlockCodeRoundTrip(t *testing.T) {
	r := rand.New(rand.NewPCG(13, 14))
	const n = 12
	block := make([]byte, BlockBytes(n))
	codes := make([][]byte, BlockVectors)
	for v := range codes {
		codes[v] = make([]byte, n)
		for i := range codes[v] {
			codes[v][i] = byte(r.Uint32())
		}
		SetBlockCode(block, v, codes[v])
	}
	got := make([]byte, n)
	for v := range codes {
		BlockCode(got, block, v)
		if !slices.Equal(got, codes[v]) {
			t.Errorf("vector %d: got %x, want %x", v, got, codes[v])
		}
	}
}
