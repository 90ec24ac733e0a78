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
rotation; the quantization of a rotated query to int8.

Semantics of the distances. Lengths (n, dim) and rows are > 0; any length is
accepted: the last n mod 8 (AVX2) or n mod 16 (AVX-512) elements are read
with masked loads, which never touch memory past the end. Products are
accumulated with fused multiply-add (one rounding per element,
round-to-nearest-even) into four vector accumulators that are summed
pairwise at the end, so the result differs from a sequential sum only by
rounding: within n*eps*sum|a_i*b_i|. NaN in any input gives NaN; infinities
follow IEEE arithmetic (+Inf plus -Inf gives NaN in any order). Nothing is
written but the result.

Element-wise kernels of the rotation (rotation.go): n is a positive multiple
of 8 (AVX2) or 16 (AVX-512); a and b (x and s) do not overlap. fwht16AVX2
takes n a positive multiple of 16; each output of its transform is one fused
multiply-add of ±1, exactly a+b or a−b.

quantizeAVX512 takes n a positive multiple of 16; the product src[i]·inv is
rounded to float32 first, as the Go version does, and VCVTPS2DQ rounds it
under the default MXCSR mode, to nearest even.
`

func buildF32(g gen) {
	tailmask := g.tailMaskData()
	signs := g.fwhtSignsData()
	for _, w := range []width{avx2, avx512} {
		for _, s := range []f32Step{dotStep, l2Step} {
			g.pairF32(w, s, tailmask)
			g.blockF32(w, s, tailmask)
		}
	}
	for _, w := range []width{avx2, avx512} {
		g.butterfly(w)
		g.mul(w)
	}
	g.fwht16AVX2(signs)
	g.quantizeAVX512()
}

// f32Step adds f(q, b) to acc lane by lane; q is memory or a register, b is
// clobbered.
type f32Step struct {
	name string
	doc  string // what the kernels return
	emit func(g gen, q Op, b, acc reg.VecVirtual)
}

var (
	dotStep = f32Step{"dot", "dot product", func(g gen, q Op, b, acc reg.VecVirtual) {
		g.VFMADD231PS(q, b, acc)
	}}
	l2Step = f32Step{"l2Sq", "squared L2 distance", func(g gen, q Op, b, acc reg.VecVirtual) {
		g.VSUBPS(q, b, b)
		g.VFMADD231PS(b, b, acc)
	}}
)

// tailMaskData declares eight all-ones lanes then eight zero lanes: the
// eight lanes starting at lane 8-r select the first r elements.
func (g gen) tailMaskData() Mem {
	m := g.StaticGlobal("tailmask")
	g.DataAttributes(attr.RODATA | attr.NOPTR)
	for i := 0; i < 8; i++ {
		v := U64(0)
		if i < 4 {
			v = U64(^uint64(0))
		}
		g.AddDatum(8*i, v)
	}
	return m
}

// tailMask returns the mask of the first n mod lanes elements: a vector
// register for AVX2's VMASKMOVPS, an opmask register for AVX-512.
func (g gen) tailMask(w width, n reg.GPVirtual, tailmask Mem) reg.Register {
	if w == avx512 {
		g.MOVQ(n, reg.RCX)
		g.ANDQ(U8(w.f32s()-1), reg.RCX)
		bits := g.GP32()
		g.MOVL(U32(1), bits)
		g.SHLL(reg.CL, bits)
		g.DECL(bits)
		k := g.K()
		g.KMOVW(bits, k)
		return k
	}
	r, p := g.GP64(), g.GP64()
	g.MOVQ(n, r)
	g.ANDQ(U8(w.f32s()-1), r)
	g.SHLQ(U8(2), r)
	g.LEAQ(tailmask.Offset(32), p)
	g.SUBQ(r, p)
	m := g.YMM()
	g.VMOVDQU(Mem{Base: p}, m)
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

// rowF32 returns an X register whose lane 0 is the sum of s over the n
// elements at q (the query) and p (the row), and leaves p just past the
// row; q and n are clobbered.
func (g gen) rowF32(w width, s f32Step, q, p, n reg.GPVirtual, mask reg.Register) reg.Register {
	const unroll = 4
	lanes := w.f32s()
	acc := g.zeros(w, unroll)
	g.CMPQ(n, U8(unroll*lanes))
	g.JB(LabelRef("step"))

	g.Label("loop")
	for i := range acc {
		b := g.vec(w)
		g.VMOVUPS(at(p, i*w.bytes), b)
		s.emit(g, at(q, i*w.bytes), b, acc[i])
	}
	g.ADDQ(U32(unroll*w.bytes), p)
	g.ADDQ(U32(unroll*w.bytes), q)
	g.SUBQ(U8(unroll*lanes), n)
	g.CMPQ(n, U8(unroll*lanes))
	g.JAE(LabelRef("loop"))

	g.Label("step")
	g.CMPQ(n, U8(lanes))
	g.JB(LabelRef("tail"))
	b := g.vec(w)
	g.VMOVUPS(Mem{Base: p}, b)
	s.emit(g, Mem{Base: q}, b, acc[0])
	g.ADDQ(U8(w.bytes), p)
	g.ADDQ(U8(w.bytes), q)
	g.SUBQ(U8(lanes), n)
	g.JMP(LabelRef("step"))

	g.Label("tail")
	g.TESTQ(n, n)
	g.JZ(LabelRef("reduce"))
	b, qv := g.vec(w), g.vec(w)
	g.loadMasked(w, Mem{Base: p}, mask, b)
	g.loadMasked(w, Mem{Base: q}, mask, qv)
	s.emit(g, qv, b, acc[1])
	g.LEAQ(Mem{Base: p, Index: n, Scale: 4}, p)

	g.Label("reduce")
	g.VADDPS(acc[1], acc[0], acc[0])
	g.VADDPS(acc[3], acc[2], acc[2])
	g.VADDPS(acc[2], acc[0], acc[0])
	return g.sumLanes(w, acc[0], g.f32Lanes())
}

func (g gen) pairF32(w width, s f32Step, tailmask Mem) {
	name := s.name + w.name
	g.text(name, "func(a, b *float32, n int) float32",
		name+" returns the "+s.doc+" of a[:n] and b[:n]; n > 0.")
	a := g.gp64("a")
	b := g.gp64("b")
	n := g.gp64("n")
	mask := g.tailMask(w, n, tailmask)
	sum := g.rowF32(w, s, a, b, n, mask)
	g.VZEROUPPER()
	g.Store(sum, g.ReturnIndex(0))
	g.RET()
}

func (g gen) blockF32(w width, s f32Step, tailmask Mem) {
	name := s.name + "Block" + w.name
	g.text(name, "func(q, block *float32, dim, rows int, out *float32)",
		name+" sets out[r] to the "+s.doc+" of q[:dim] and row r",
		"of the row-major block, for r < rows; dim and rows are > 0.")
	q := g.gp64("q")
	p := g.gp64("block")
	dim := g.gp64("dim")
	rows := g.gp64("rows")
	out := g.gp64("out")
	mask := g.tailMask(w, dim, tailmask)
	g.Label("nextrow")
	qi, n := g.GP64(), g.GP64()
	g.MOVQ(q, qi)
	g.MOVQ(dim, n)
	sum := g.rowF32(w, s, qi, p, n, mask)
	g.VMOVSS(sum, Mem{Base: out})
	g.ADDQ(U8(4), out)
	g.DECQ(rows)
	g.JNZ(LabelRef("nextrow"))
	g.VZEROUPPER()
	g.RET()
}

// elementwise emits a kernel whose three parameters are two float32
// pointers x and y and a length n, a positive multiple of the lanes: body
// runs on each whole vector of x and y.
func (g gen) elementwise(w width, name, signature, doc string, body func(x, y Mem)) {
	g.text(name+w.name, signature, doc)
	x, y, n := g.GP64(), g.GP64(), g.GP64()
	g.Load(g.ParamIndex(0), x)
	g.Load(g.ParamIndex(1), y)
	g.Load(g.ParamIndex(2), n)
	g.Label("loop")
	body(Mem{Base: x}, Mem{Base: y})
	g.ADDQ(U8(w.bytes), x)
	g.ADDQ(U8(w.bytes), y)
	g.SUBQ(U8(w.f32s()), n)
	g.JNZ(LabelRef("loop"))
	g.VZEROUPPER()
	g.RET()
}

// butterfly emits a, b = a+b, a−b lane by lane.
func (g gen) butterfly(w width) {
	doc := fmt.Sprintf("butterfly%s sets a, b = a+b, a−b element-wise; n is a positive multiple of %d.", w.name, w.f32s())
	g.elementwise(w, "butterfly", "func(a, b *float32, n int)", doc, func(a, b Mem) {
		x, y, s, d := g.vec(w), g.vec(w), g.vec(w), g.vec(w)
		g.VMOVUPS(a, x)
		g.VMOVUPS(b, y)
		g.VADDPS(y, x, s)
		g.VSUBPS(y, x, d)
		g.VMOVUPS(s, a)
		g.VMOVUPS(d, b)
	})
}

// mul emits x *= s lane by lane.
func (g gen) mul(w width) {
	doc := fmt.Sprintf("mul%s sets x *= s element-wise; n is a positive multiple of %d.", w.name, w.f32s())
	g.elementwise(w, "mul", "func(x, s *float32, n int)", doc, func(x, s Mem) {
		v := g.vec(w)
		g.VMOVUPS(x, v)
		g.VMULPS(s, v, v)
		g.VMOVUPS(v, x)
	})
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

// quantizeAVX512 sets dst[i] = clamp(round-half-even(src[i]·inv),
// ±levels) for n elements and returns their sum.
func (g gen) quantizeAVX512() {
	g.text("quantizeAVX512", "func(dst *int8, src *float32, n int, inv float32, levels int32) int32",
		"quantizeAVX512 sets dst[i] = clamp(round-half-even(src[i]·inv), ±levels) for",
		"n, a positive multiple of 16, elements and returns their sum.")
	dst, src, n := g.gp64("dst"), g.gp64("src"), g.gp64("n")
	inv, hi, lo, sum := g.ZMM(), g.ZMM(), g.ZMM(), g.ZMM()
	g.VBROADCASTSS(g.addr(g.Param("inv")), inv)
	levels := g.GP32()
	g.Load(g.Param("levels"), levels)
	g.VPBROADCASTD(levels, hi)
	g.zero(avx512, lo)
	g.VPSUBD(hi, lo, lo)
	g.zero(avx512, sum)
	g.Label("loop")
	v := g.ZMM()
	g.VMULPS(Mem{Base: src}, inv, v)
	g.VCVTPS2DQ(v, v)
	g.VPMINSD(hi, v, v)
	g.VPMAXSD(lo, v, v)
	g.VPADDD(v, sum, sum)
	g.VPMOVDB(v, Mem{Base: dst})
	g.ADDQ(U8(64), src)
	g.ADDQ(U8(16), dst)
	g.SUBQ(U8(16), n)
	g.JNZ(LabelRef("loop"))
	total := g.sumI32(avx512, sum)
	g.VZEROUPPER()
	g.Store(total, g.ReturnIndex(0))
	g.RET()
}
