package main

import (
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

The element-wise steps of the rotation (rotation.go), rotateStep and
scaleF32: n is a positive multiple of 8 (AVX2) or 16 (AVX-512); x and y
do not overlap; each product is the float32 one of Go.
fwht16AVX2 takes n a positive multiple of 16; each output of its transform
is one fused multiply-add of ±1, exactly a+b or a−b.
`

func buildF32(g gen) {
	tailmask := g.tailMaskData()
	signs := g.fwhtSignsData()
	g.distF32()
	g.distPairF32()
	g.distRows(tailmask)
	g.rotateStep()
	g.scale()
	g.fwht16AVX2(signs)
}

// f32Step adds f(q, b) to acc lane by lane; q is memory or a register, b is
// clobbered.
type f32Step struct {
	name string
	emit func(g gen, q Op, b, acc reg.Register)
}

var (
	dotStep = f32Step{"dot", func(g gen, q Op, b, acc reg.Register) {
		g.VFMADD231PS(q, b, acc)
	}}
	l2Step = f32Step{"l2Sq", func(g gen, q Op, b, acc reg.Register) {
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
func (g gen) tailMask(w width, n reg.Register, tailmask Mem) reg.Register {
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

// distRows is the one body of the float32 distances, dot product and
// squared L2, AVX2 and AVX-512, of a pair (one row, distPairF32) and of a
// block (distF32). Their loops differ in the step and the width (rowLoop);
// everything else is shared: the row loop, the pairwise sum of the
// accumulators and the sum of their lanes, which AVX-512 reaches after
// folding its 512 bits to 256. Two branches on kind a row, taken the same
// way for every row, select the loop.
const distRows routine = "distRows"

// The registers distRows takes: distF32's arguments.
var (
	rowsQ, rowsBlock, rowsDim = reg.RAX, reg.RDX, reg.RBX
	rowsN, rowsOut, rowsKind  = reg.RSI, reg.RDI, reg.R8
)

func (g gen) distF32() {
	g.text("distF32", "func(q, block *float32, dim, rows int, out *float32, kind int)",
		"distF32 sets out[r] to the distance kind selects (kindL2Sq, kindAVX512)",
		"between q[:dim] and row r of the row-major block, for r < rows; dim and",
		"rows are > 0. With kindAVX512 it needs AVX-512F, else AVX2 and FMA.")
	for i, r := range []reg.Register{rowsQ, rowsBlock, rowsDim, rowsN, rowsOut, rowsKind} {
		g.Load(g.ParamIndex(i), r)
	}
	g.tailJump(distRows, rowsQ, rowsBlock, rowsDim, rowsN, rowsOut, rowsKind)
}

func (g gen) distPairF32() {
	g.text("distPairF32", "func(a, b *float32, n, kind int) float32",
		"distPairF32 returns the distance kind selects (kindL2Sq, kindAVX512)",
		"between a[:n] and b[:n]; n > 0. With kindAVX512 it needs AVX-512F, else",
		"AVX2 and FMA.")
	for i, r := range []reg.Register{rowsQ, rowsBlock, rowsDim, rowsKind} {
		g.Load(g.ParamIndex(i), r)
	}
	g.MOVQ(U32(1), rowsN)
	g.LEAQ(g.addr(g.ReturnIndex(0)), rowsOut)
	g.tailJump(distRows, rowsQ, rowsBlock, rowsDim, rowsN, rowsOut, rowsKind)
}

func (g gen) distRows(tailmask Mem) {
	g.static(distRows, "AX: q; DX: block; BX: dim; SI: rows; DI: out; R8: kind (see distF32).")
	q, p, dim, rows, out, kind := rowsQ, rowsBlock, rowsDim, rowsN, rowsOut, rowsKind
	masks := map[width]reg.Register{}
	g.eachWidth(kind, "mask", "nextrow", func(w width) { masks[w] = g.tailMask(w, dim, tailmask) })

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
		g.either(kind, kindL2Sq, "l2Sq"+w.name, reduce,
			func() { g.rowLoop(w, dotStep, qi, p, n, masks[w], acc) },
			func() { g.rowLoop(w, l2Step, qi, p, n, masks[w], acc) })
		g.Label(reduce)
		g.addPairwise(w, acc)
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

// addPairwise sets acc[0] to (acc[0]+acc[1]) + (acc[2]+acc[3]) at width w.
func (g gen) addPairwise(w width, acc []reg.VecVirtual) {
	a0, a1, a2, a3 := in(w, acc[0]), in(w, acc[1]), in(w, acc[2]), in(w, acc[3])
	g.VADDPS(a1, a0, a0)
	g.VADDPS(a3, a2, a2)
	g.VADDPS(a2, a0, a0)
}

// rowLoop emits the loop of step s at width w over the n elements at q
// (the query) and p (the row), into the four accumulators acc, and leaves
// p just past the row; q and n are clobbered. Its tail jumps to the label
// reduce<width> when no element is left.
func (g gen) rowLoop(w width, s f32Step, q, p, n reg.Register, mask reg.Register, acc []reg.VecVirtual) {
	label := func(l string) string { return s.name + w.name + l }
	lanes := w.f32s()
	unroll := len(acc)
	g.CMPQ(n, U8(unroll*lanes))
	g.JB(LabelRef(label("step")))

	g.Label(label("loop"))
	for i := range acc {
		b := g.vec(w)
		g.VMOVUPS(at(p, i*w.bytes), b)
		s.emit(g, at(q, i*w.bytes), b, in(w, acc[i]))
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
	s.emit(g, Mem{Base: q}, b, in(w, acc[0]))
	g.ADDQ(U8(w.bytes), p)
	g.ADDQ(U8(w.bytes), q)
	g.SUBQ(U8(lanes), n)
	g.JMP(LabelRef(label("step")))

	g.Label(label("tail"))
	g.TESTQ(n, n)
	g.JZ(LabelRef("reduce" + w.name))
	b, qv := g.vec(w), g.vec(w)
	g.loadMasked(w, Mem{Base: p}, mask, b)
	g.loadMasked(w, Mem{Base: q}, mask, qv)
	s.emit(g, qv, b, in(w, acc[1]))
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
