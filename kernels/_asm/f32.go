package main

import (
	"fmt"

	"github.com/mmcloughlin/avo/attr"
	. "github.com/mmcloughlin/avo/operand"
	"github.com/mmcloughlin/avo/reg"
)

const f32Header = `
Float32 kernels: dot product and squared L2 distance, for one pair and for
one query against rows of a row-major block; the element-wise steps of the
rotation.

Semantics of the distances. Lengths (n, dim) and rows are > 0; any length is
accepted: the last n mod 8 (AVX2) or n mod 16 (AVX-512) elements are read
with masked loads, which never touch memory past the end. Products are
accumulated with fused multiply-add (one rounding per element,
round-to-nearest-even) into four vector accumulators that are summed
pairwise at the end, so the result differs from a sequential sum only by
rounding: within n*eps*sum|a_i*b_i|. NaN in any input gives NaN; infinities
follow IEEE arithmetic (+Inf plus -Inf gives NaN in any order). Nothing is
written but the result.

gridU4AVX2 takes whole chunks of 4-bit codes (32 bytes, 64 codes, see
packU4 in int8.go); each grid point is exact (a code minus 7.5), and the
sum of their squares is accumulated with fused multiply-add in two vector
accumulators, within n*eps of the exact sum. scaleAddAVX2 takes n a
positive multiple of 8 and computes each x·s+y with one rounding (fused
multiply-add), x and y not overlapping.

The element-wise steps of the rotation (rotation.go), rotateStep and
scaleF32: n is a positive multiple of 8 (AVX2) or 16 (AVX-512); x and y
do not overlap; each product is the float32 one of Go.
fwht16AVX2 takes n a positive multiple of 16; each output of its transform
is one fused multiply-add of ±1, exactly a+b or a−b.

gridSumsAVX2 and gridSumsAVX512 take n a positive multiple of 16 (AVX2) or
32 (AVX-512) and a[i] >= 0 with lambda·a[i] below 2^31; each product
lambda·a[i] is the float32 one of Go, truncated as Go's int conversion
does, and the two sums are accumulated with fused multiply-add in two
vector accumulators each, within n*eps of the exact sums.
`

func buildF32(g gen) {
	lanes := g.laneIndexData()
	signs := g.fwhtSignsData()
	for _, w := range []width{avx2, avx512} {
		for _, s := range []f32Step{dotStep, l2Step} {
			g.pairF32(w, s, lanes)
		}
	}
	g.foldF32()
	g.sumF32()
	g.distF32(lanes)
	g.rotateStep()
	g.scale()
	g.fwht16AVX2(signs)
	g.gridU4AVX2()
	g.scaleAddAVX2()
	for _, w := range []width{avx2, avx512} {
		g.gridSums(w)
	}
}

// f32Step adds f(q, b) to acc lane by lane, or sets acc to it; q is memory
// or a register, b is clobbered.
type f32Step struct {
	name string
	doc  string // what the kernel sums f up to
	emit func(g gen, q Op, b, acc reg.Register, set bool)
}

var (
	dotStep = f32Step{"dot", "dot product", func(g gen, q Op, b, acc reg.Register, set bool) {
		g.mulAdd(q, b, acc, set)
	}}
	l2Step = f32Step{"l2Sq", "squared L2 distance", func(g gen, q Op, b, acc reg.Register, set bool) {
		g.VSUBPS(q, b, b)
		g.mulAdd(b, b, acc, set)
	}}
)

// mulAdd adds x·y to acc, or with set sets acc to x·y: the same bits, one
// rounding either way.
func (g gen) mulAdd(x Op, y, acc reg.Register, set bool) {
	if set {
		g.VMULPS(x, y, acc)
	} else {
		g.VFMADD231PS(x, y, acc)
	}
}

// laneIndexData declares the int32 lane indexes 0 to 15, which a tail's
// element count is compared with.
func (g gen) laneIndexData() Mem {
	m := g.StaticGlobal("laneindex")
	g.DataAttributes(attr.RODATA | attr.NOPTR)
	for i := 0; i < 16; i++ {
		g.AddDatum(4*i, U32(i))
	}
	return m
}

// tailMask returns the mask of the first r elements, r < lanes: a vector
// register for AVX2's VMASKMOVPS, an opmask register for AVX-512; lanes
// is laneIndexData.
func (g gen) tailMask(w width, r reg.GPVirtual, lanes Mem) reg.Register {
	if w == avx512 {
		v, k := g.ZMM(), g.K()
		g.VPBROADCASTD(r.As32(), v)
		g.VPCMPGTD(lanes, v, k)
		return k
	}
	m := g.YMM()
	g.VMOVD(r.As32(), m.AsX())
	g.VPBROADCASTD(m.AsX(), m)
	g.VPCMPGTD(lanes, m, m)
	return m
}

// loadMasked loads the elements of m that mask selects into dst, zeroing
// the others; it reads no memory outside them.
func (g gen) loadMasked(w width, m Mem, mask reg.Register, dst reg.VecVirtual) {
	if w == avx512 {
		g.VMOVUPS_Z(m, mask, dst)
	} else {
		g.VMASKMOVPS(m, mask, dst)
	}
}

// pairF32 emits the kernel of step s at width w for one pair of vectors:
// a body of its own, with no branch but its loop's, so that a call on a
// short vector costs little more than its loop. The first four vectors
// set the accumulators rather than add to zeroed ones; the tail's mask is
// computed only where there is a tail. The sum of the accumulators'
// lanes, which the dot product and L2 share, is a routine jumped to:
// sumF32, through foldF32 for AVX-512.
func (g gen) pairF32(w width, s f32Step, lanes Mem) {
	name, needs := s.name+w.name, "AVX2 and FMA"
	if w == avx512 {
		needs = "AVX-512F"
	}
	g.text(name, "func(a, b *float32, n int) float32",
		name+" returns the "+s.doc+" of a[:n] and b[:n]; n > 0. Needs "+needs+".")
	q, p, n := g.gp64("a"), g.gp64("b"), g.gp64("n")
	label := func(l string) string { return name + l }
	acc := make([]reg.VecVirtual, 4)
	for i := range acc {
		acc[i] = g.vec(w)
	}
	block := len(acc) * w.f32s()
	g.CMPQ(n, U8(block))
	g.JAE(LabelRef(label("first")))
	for _, r := range acc {
		g.zero(w, r)
	}
	g.JMP(LabelRef(label("step")))

	g.Label(label("first"))
	for i, r := range acc {
		b := g.vec(w)
		g.VMOVUPS(at(p, i*w.bytes), b)
		s.emit(g, at(q, i*w.bytes), b, r, true)
	}
	g.ADDQ(U32(len(acc)*w.bytes), p)
	g.ADDQ(U32(len(acc)*w.bytes), q)
	g.SUBQ(U8(block), n)
	tail := func() reg.Register { return g.tailMask(w, n, lanes) }
	g.rowLoop(w, s, q, p, n, tail, acc, label("reduce"))

	g.Label(label("reduce"))
	sum := sumF32
	if w == avx512 {
		g.addPairwise(w, acc, reg.Z0)
		sum = foldF32
	} else {
		g.addPairwise(w, acc, reg.Y0)
	}
	g.returnVia(sum, reg.Z0)
}

// foldF32 and sumF32 end the pair kernels: sumF32 stores the float32 sum
// of the lanes of Y0 at the address in DI; foldF32 adds the halves of Z0
// into Y0 first.
const foldF32, sumF32 routine = "foldF32", "sumF32"

func (g gen) foldF32() {
	g.static(foldF32, "Z0: the float32 lanes to add up; DI: where their sum goes.")
	g.foldHalves(reg.Z0, reg.Y0, g.f32Lanes())
	g.tailJump(sumF32, reg.Y0, reg.RDI)
}

func (g gen) sumF32() {
	g.static(sumF32, "Y0: the float32 lanes to add up; DI: where their sum goes.")
	g.VMOVSS(g.sumLanes(reg.Y0, g.f32Lanes()), Mem{Base: reg.RDI})
	g.VZEROUPPER()
	g.RET()
}

// distF32 is the one kernel of the block distances, dot product and
// squared L2, AVX2 and AVX-512: they share the row loop, the pairwise sum
// of the accumulators and the sum of their lanes, which AVX-512 reaches
// after folding its 512 bits to 256. Two branches on kind a row, taken the
// same way for every row, select the loop; a block of rows amortises them.
func (g gen) distF32(lanes Mem) {
	g.text("distF32", "func(q, block *float32, dim, rows int, out *float32, kind int)",
		"distF32 sets out[r] to the distance kind selects (kindL2Sq, kindAVX512)",
		"between q[:dim] and row r of the row-major block, for r < rows; dim and",
		"rows are > 0. With kindAVX512 it needs AVX-512F, else AVX2 and FMA.")
	q, p, dim := g.gp64("q"), g.gp64("block"), g.gp64("dim")
	rows, out, kind := g.gp64("rows"), g.gp64("out"), g.gp64("kind")
	masks := map[width]reg.Register{}
	g.eachWidth(kind, "mask", "nextrow", func(w width) {
		r := g.GP64()
		g.MOVQ(dim, r)
		g.ANDQ(U8(w.f32s()-1), r)
		masks[w] = g.tailMask(w, r, lanes)
	})

	g.Label("nextrow")
	qi, n := g.GP64(), g.GP64()
	g.MOVQ(q, qi)
	g.MOVQ(dim, n)
	// VEX-encoded zeroing clears all 512 bits, for either width.
	acc := make([]reg.VecVirtual, 4)
	for i := range acc {
		acc[i] = g.ZMM()
		g.VPXOR(acc[i].AsY(), acc[i].AsY(), acc[i].AsY())
	}
	g.eachWidth(kind, "", "sum", func(w width) {
		reduce := "reduce" + w.name
		mask := func() reg.Register { return masks[w] }
		g.either(kind, kindL2Sq, "l2Sq"+w.name, reduce,
			func() { g.rowLoop(w, dotStep, qi, p, n, mask, acc, reduce) },
			func() { g.rowLoop(w, l2Step, qi, p, n, mask, acc, reduce) })
		g.Label(reduce)
		g.addPairwise(w, acc, in(w, acc[0]))
		if w == avx512 {
			g.foldHalves(acc[0], acc[0].AsY(), g.f32Lanes())
		}
	})

	g.Label("sum")
	g.VMOVSS(g.sumLanes(acc[0], g.f32Lanes()), Mem{Base: out})
	g.ADDQ(U8(4), out)
	g.DECQ(rows)
	g.JNZ(LabelRef("nextrow"))
	g.VZEROUPPER()
	g.RET()
}

// in returns r as a register of width w.
func in(w width, r reg.Vec) reg.Register {
	if w == avx512 {
		return r.AsZ()
	}
	return r.AsY()
}

// addPairwise sets dst, of width w, to (acc[0]+acc[1]) + (acc[2]+acc[3]);
// acc is clobbered.
func (g gen) addPairwise(w width, acc []reg.VecVirtual, dst reg.Register) {
	a0, a1, a2, a3 := in(w, acc[0]), in(w, acc[1]), in(w, acc[2]), in(w, acc[3])
	g.VADDPS(a1, a0, a0)
	g.VADDPS(a3, a2, a2)
	g.VADDPS(a2, a0, dst)
}

// rowLoop emits the loop of step s at width w over the n elements at q
// (the query) and p (the row), adding to the four accumulators acc, and
// leaves p just past the row; q and n are clobbered. Its tail, where
// fewer than a vector's elements are left, loads them under mask(), and
// jumps to the label reduce when none is.
func (g gen) rowLoop(w width, s f32Step, q, p, n reg.Register, mask func() reg.Register, acc []reg.VecVirtual, reduce string) {
	label := func(l string) string { return s.name + w.name + l }
	lanes := w.f32s()
	unroll := len(acc)
	g.CMPQ(n, U8(unroll*lanes))
	g.JB(LabelRef(label("step")))

	g.Label(label("loop"))
	for i := range acc {
		b := g.vec(w)
		g.VMOVUPS(at(p, i*w.bytes), b)
		s.emit(g, at(q, i*w.bytes), b, in(w, acc[i]), false)
	}
	g.ADDQ(U32(unroll*w.bytes), p)
	g.ADDQ(U32(unroll*w.bytes), q)
	g.SUBQ(U8(unroll*lanes), n)
	g.CMPQ(n, U8(unroll*lanes))
	g.JAE(LabelRef(label("loop")))

	g.Label(label("step"))
	g.CMPQ(n, U8(lanes))
	g.JB(LabelRef(label("tail")))
	b := g.vec(w)
	g.VMOVUPS(Mem{Base: p}, b)
	s.emit(g, Mem{Base: q}, b, in(w, acc[0]), false)
	g.ADDQ(U8(w.bytes), p)
	g.ADDQ(U8(w.bytes), q)
	g.SUBQ(U8(lanes), n)
	g.JMP(LabelRef(label("step")))

	g.Label(label("tail"))
	g.TESTQ(n, n)
	g.JZ(LabelRef(reduce))
	m := mask()
	b, qv := g.vec(w), g.vec(w)
	g.loadMasked(w, Mem{Base: p}, m, b)
	g.loadMasked(w, Mem{Base: q}, m, qv)
	s.emit(g, qv, b, in(w, acc[1]), false)
	g.LEAQ(Mem{Base: p, Index: n, Scale: 4}, p)
}

// rotateStep emits the one kernel of the element-wise steps of the
// rotation, the butterfly and the product, AVX2 and AVX-512: they share
// all but their loops, which two branches a call pick.
func (g gen) rotateStep() {
	g.text("rotateStep", "func(x, y *float32, n, kind int)",
		"rotateStep sets x, y = x+y, x−y element-wise, or with kindMul x *= y;",
		"n is a positive multiple of 16 with kindAVX512 (which needs AVX-512F),",
		"else of 8.")
	x, y, n, kind := g.gp64("x"), g.gp64("y"), g.gp64("n"), g.gp64("kind")
	g.eachWidth(kind, "", "done", func(w width) {
		butterfly := func() {
			g.elementLoop(w, "butterfly"+w.name+"loop", x, y, n, func(a, b Mem) {
				u, v, s, d := g.vec(w), g.vec(w), g.vec(w), g.vec(w)
				g.VMOVUPS(a, u)
				g.VMOVUPS(b, v)
				g.VADDPS(v, u, s)
				g.VSUBPS(v, u, d)
				g.VMOVUPS(s, a)
				g.VMOVUPS(d, b)
			})
		}
		mul := func() {
			g.elementLoop(w, "mul"+w.name+"loop", x, y, n, func(x, s Mem) {
				v := g.vec(w)
				g.VMOVUPS(x, v)
				g.VMULPS(s, v, v)
				g.VMOVUPS(v, x)
			})
		}
		g.either(kind, kindMul, "mul"+w.name, "done", butterfly, mul)
	})
	g.Label("done")
	g.VZEROUPPER()
	g.RET()
}

// scale emits x *= s for the float32 s: the last step of every fast
// Walsh-Hadamard transform, a pass over the whole vector.
func (g gen) scale() {
	g.text("scaleF32", "func(x *float32, n int, s float32, kind int)",
		"scaleF32 sets x *= s element-wise; n is a positive multiple of 16 with",
		"kindAVX512 (which needs AVX-512F), else of 8.")
	x, n, kind := g.gp64("x"), g.gp64("n"), g.gp64("kind")
	g.eachWidth(kind, "", "done", func(w width) {
		s, v := g.vec(w), g.vec(w)
		g.VBROADCASTSS(g.addr(g.Param("s")), s)
		g.Label("loop" + w.name)
		g.VMULPS(Mem{Base: x}, s, v)
		g.VMOVUPS(v, Mem{Base: x})
		g.ADDQ(U8(w.bytes), x)
		g.SUBQ(U8(w.f32s()), n)
		g.JNZ(LabelRef("loop" + w.name))
	})
	g.Label("done")
	g.VZEROUPPER()
	g.RET()
}

// elementLoop emits, at label, the loop of body over the n elements at x
// and y, a whole vector of width w at a time.
func (g gen) elementLoop(w width, label string, x, y, n reg.Register, body func(x, y Mem)) {
	g.Label(label)
	body(Mem{Base: x}, Mem{Base: y})
	g.ADDQ(U8(w.bytes), x)
	g.ADDQ(U8(w.bytes), y)
	g.SUBQ(U8(w.f32s()), n)
	g.JNZ(LabelRef(label))
}

// fwhtSignsData declares, per stage h = 1, 2, 4 of a Walsh-Hadamard
// transform, the sign each lane's own element takes in its output (+1 for
// a+b, −1 for a−b, whose partner the permutation brings).
func (g gen) fwhtSignsData() Mem {
	m := g.StaticGlobal("fwhtsigns")
	g.DataAttributes(attr.RODATA | attr.NOPTR)
	const plus, minus = 0x3f800000, 0xbf800000
	for stage, h := range []int{1, 2, 4} {
		for lane := 0; lane < 8; lane++ {
			v := U32(plus)
			if lane&h != 0 {
				v = minus
			}
			g.AddDatum(32*stage+4*lane, v)
		}
	}
	return m
}

// fwht8 returns a register holding the 8-point transform (stages h = 1, 2,
// 4) of x, each output s + x·sign with s the partner element, which one
// fused multiply-add computes exactly as a+b or a−b; x is clobbered.
func (g gen) fwht8(x reg.VecVirtual, s1, s2, s4 reg.VecVirtual) reg.VecVirtual {
	t := g.YMM()
	g.VPERMILPS(U8(0xb1), x, t)
	g.VFMADD231PS(s1, x, t)
	g.VPERMILPS(U8(0x4e), t, x)
	g.VFMADD231PS(s2, t, x)
	g.VPERM2F128(U8(0x01), x, x, t)
	g.VFMADD231PS(s4, x, t)
	return t
}

// fwht16AVX2 runs the stages h = 1, 2, 4, 8 of an unscaled Walsh-Hadamard
// transform, 16 elements at a time. Needs AVX2 and FMA.
func (g gen) fwht16AVX2(signs Mem) {
	g.text("fwht16AVX2", "func(x *float32, n int)",
		"fwht16AVX2 runs the stages h = 1, 2, 4, 8 of an unscaled Walsh-Hadamard",
		"transform of x[:n], 16 elements at a time; n is a positive multiple of 16.",
		"Needs AVX2 and FMA.")
	x, n := g.gp64("x"), g.gp64("n")
	s1, s2, s4 := g.YMM(), g.YMM(), g.YMM()
	g.VMOVUPS(signs, s1)
	g.VMOVUPS(signs.Offset(32), s2)
	g.VMOVUPS(signs.Offset(64), s4)
	g.Label("loop")
	lo, hi := g.YMM(), g.YMM()
	g.VMOVUPS(Mem{Base: x}, lo)
	g.VMOVUPS(at(x, 32), hi)
	lo, hi = g.fwht8(lo, s1, s2, s4), g.fwht8(hi, s1, s2, s4)
	sum, diff := g.YMM(), g.YMM()
	g.VADDPS(hi, lo, sum)
	g.VSUBPS(hi, lo, diff)
	g.VMOVUPS(sum, Mem{Base: x})
	g.VMOVUPS(diff, at(x, 32))
	g.ADDQ(U8(64), x)
	g.SUBQ(U8(16), n)
	g.JNZ(LabelRef("loop"))
	g.VZEROUPPER()
	g.RET()
}

// gridU4AVX2 emits the decoding of 4-bit codes to their grid points, a
// code minus 7.5, a chunk at a time: a quarter of the chunk's bytes
// widened to int32 gives eight low codes (masked) and eight high codes
// (shifted), converted to float32. A graph that chooses edges decodes a
// thousand rows for each row it links, so this runs in one pass with the
// sum of squares the decoding's scale needs.
func (g gen) gridU4AVX2() {
	g.text("gridU4AVX2", "func(dst *float32, codes *byte, chunks int) float32",
		"gridU4AVX2 writes to dst the grid points of the chunks·64 4-bit codes",
		"packed by packU4 at codes, and returns the sum of their squares;",
		"chunks > 0. Needs AVX2 and FMA.")
	dst, codes, chunks := g.gp64("dst"), g.gp64("codes"), g.gp64("chunks")
	mask, mid, t := g.YMM(), g.YMM(), g.GP32()
	g.VPCMPEQD(mask, mask, mask)
	g.VPSRLD(U8(28), mask, mask) // 0x0000000f in each lane
	g.MOVL(U32(0x40f00000), t)   // 7.5
	g.VMOVD(t, mid.AsX())
	g.VBROADCASTSS(mid.AsX(), mid)
	acc := []reg.VecVirtual{g.YMM(), g.YMM()}
	for _, r := range acc {
		g.zero(avx2, r)
	}
	g.Label("gridU4AVX2loop")
	for q := 0; q < 4; q++ {
		wide, lo, hi := g.YMM(), g.YMM(), g.YMM()
		g.VPMOVZXBD(at(codes, 8*q), wide)
		g.VPAND(mask, wide, lo)
		g.VPSRLD(U8(4), wide, hi)
		for i, v := range []reg.VecVirtual{lo, hi} {
			g.VCVTDQ2PS(v, v)
			g.VSUBPS(mid, v, v)
			g.VMOVUPS(v, at(dst, 4*(32*i+8*q)))
			g.VFMADD231PS(v, v, acc[i])
		}
	}
	g.ADDQ(U8(32), codes)
	g.ADDQ(U32(256), dst)
	g.DECQ(chunks)
	g.JNZ(LabelRef("gridU4AVX2loop"))
	g.VADDPS(acc[1], acc[0], reg.Y0)
	g.returnVia(sumF32, reg.Y0)
}

// scaleAddAVX2 emits x = x·s + y: the scale and the centroid that turn a
// code's grid points into the vector it stands for.
func (g gen) scaleAddAVX2() {
	g.text("scaleAddAVX2", "func(x, y *float32, n int, s float32)",
		"scaleAddAVX2 sets x = x·s + y element-wise; n is a positive multiple",
		"of 8. Needs AVX2 and FMA.")
	x, y, n := g.gp64("x"), g.gp64("y"), g.gp64("n")
	s := g.YMM()
	g.VBROADCASTSS(g.addr(g.Param("s")), s)
	g.elementLoop(avx2, "scaleAddAVX2loop", x, y, n, func(x, y Mem) {
		v := g.YMM()
		g.VMOVUPS(x, v)
		g.VFMADD213PS(y, s, v)
		g.VMOVUPS(v, x)
	})
	g.VZEROUPPER()
	g.RET()
}

// gridSums emits the two sums by which bestScale (rabitq.go) judges a
// scale for the extended code: for y_i = min(trunc(lambda·a_i), top) +
// 1/2, the sums of y_i·a_i and of y_i², where a is a residual's
// magnitudes. It runs 26 times for each row encoded, and in Go was the
// whole of an encoding's time.
func (g gen) gridSums(w width) {
	name := "gridSums" + w.name
	needs := "AVX2 and FMA"
	if w == avx512 {
		needs = "AVX-512"
	}
	g.text(name, "func(a *float32, n int, lambda float32, top int32, sums *[2]float32)",
		name+" sets sums to the sums of y_i·a_i and of y_i² over i < n for",
		"y_i = min(trunc(lambda·a_i), top) + 1/2; n is a positive multiple of",
		fmt.Sprintf("%d. Needs %s.", 2*w.f32s(), needs))
	a, n, sums := g.gp64("a"), g.gp64("n"), g.gp64("sums")
	lambda, top, half := g.vec(w), g.vec(w), g.vec(w)
	g.VBROADCASTSS(g.addr(g.Param("lambda")), lambda)
	t := g.GP32()
	g.Load(g.Param("top"), t)
	g.VMOVD(t, top.AsX())
	g.VPBROADCASTD(top.AsX(), top)
	g.MOVL(U32(0x3f000000), t) // 0.5
	g.VMOVD(t, half.AsX())
	g.VBROADCASTSS(half.AsX(), half)
	yr, yy := g.zeros(w, 2), g.zeros(w, 2)
	g.Label(name + "loop")
	for i := range 2 {
		v, y := g.vec(w), g.vec(w)
		g.VMOVUPS(at(a, w.bytes*i), v)
		g.VMULPS(lambda, v, y)
		g.VCVTTPS2DQ(y, y)
		g.VPMINSD(top, y, y)
		g.VCVTDQ2PS(y, y)
		g.VADDPS(half, y, y)
		g.VFMADD231PS(v, y, yr[i])
		g.VFMADD231PS(y, y, yy[i])
	}
	g.ADDQ(U32(2*w.bytes), a)
	g.SUBQ(U8(2*w.f32s()), n)
	g.JNZ(LabelRef(name + "loop"))
	for i, acc := range [][]reg.VecVirtual{yr, yy} {
		g.VADDPS(acc[1], acc[0], acc[0])
		if w == avx512 {
			g.foldHalves(acc[0], acc[0].AsY(), g.f32Lanes())
		}
		g.VMOVSS(g.sumLanes(acc[0], g.f32Lanes()), at(sums, 4*i))
	}
	g.VZEROUPPER()
	g.RET()
}
