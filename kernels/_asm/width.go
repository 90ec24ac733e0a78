package main

import (
	"fmt"

	"github.com/mmcloughlin/avo/attr"
	"github.com/mmcloughlin/avo/gotypes"
	"github.com/mmcloughlin/avo/ir"
	. "github.com/mmcloughlin/avo/operand"
	"github.com/mmcloughlin/avo/reg"
)

// width is a vector width the kernels come in: one Go function emits a
// kernel for both where the AVX2 and AVX-512 loops share their structure.
type width struct {
	name  string // suffix of the function names
	bytes int    // bytes in one vector register
}

var (
	avx2   = width{"AVX2", 32}
	avx512 = width{"AVX512", 64}
)

// A kernel whose loops of both widths share one body (distF32,
// rotateStep, scaleF32) takes a kind argument: kindAVX512 selects the
// AVX-512 loops, else those of AVX2; the bits below it say what the kernel
// computes. kindDecls declares them in package kernels.
const (
	kindAVX512 = 16
	kindL2Sq   = 1 // distF32: the squared L2 distance, else the dot product
	kindMul    = 1 // rotateStep: the product, else the butterfly
)

var kindDecls = fmt.Sprintf(`
// The kind argument of distF32 and the rotation's steps (rotateStep,
// scaleF32): kindAVX512 selects their AVX-512 loops, else those of AVX2;
// the bits below it say what they compute: for distF32 kindL2Sq, the
// squared L2 distance, else the dot product; for rotateStep kindMul, the
// product, else the butterfly.
const (
	kindAVX512 = %d
	kindL2Sq   = %d
	kindMul    = %d
)
`, kindAVX512, kindL2Sq, kindMul)

// either emits clear and set behind a branch on bit of kind, set at the
// label name; both go on at the label next, which the caller places.
func (g gen) either(kind reg.Register, bit int, name, next string, clear, set func()) {
	g.TESTQ(U32(bit), kind)
	g.JNZ(LabelRef(name))
	clear()
	g.JMP(LabelRef(next))
	g.Label(name)
	set()
}

// eachWidth emits body for AVX2 and for AVX-512, which kind's kindAVX512
// bit picks, the latter at the label name+"AVX512"; both go on at the
// label next, which the caller places.
func (g gen) eachWidth(kind reg.Register, name, next string, body func(w width)) {
	g.either(kind, kindAVX512, name+avx512.name, next, func() { body(avx2) }, func() { body(avx512) })
}

// f32s is the number of float32 lanes of a register.
func (w width) f32s() int { return w.bytes / 4 }

// vec allocates a vector register of width w.
func (g gen) vec(w width) reg.VecVirtual {
	if w == avx512 {
		return g.ZMM()
	}
	return g.YMM()
}

// zero sets r, of width w, to zero.
func (g gen) zero(w width, r reg.VecVirtual) {
	if w == avx512 {
		g.VPXORD(r, r, r)
	} else {
		g.VPXOR(r, r, r)
	}
}

// zeros allocates n vector registers of width w, set to zero.
func (g gen) zeros(w width, n int) []reg.VecVirtual {
	rs := make([]reg.VecVirtual, n)
	for i := range rs {
		rs[i] = g.vec(w)
		g.zero(w, rs[i])
	}
	return rs
}

// at is the memory operand disp bytes past the address in base.
func at(base reg.Register, disp int) Mem { return Mem{Base: base, Disp: disp} }

// laneOps are the instructions that add up the 32-bit lanes of a register,
// as float32 or as int32, each kind in its own domain.
type laneOps struct {
	extract256 func(...Op)      // the upper half of a ZMM
	extract128 func(i, y, x Op) // the upper half of a YMM
	shuffle    func(...Op)      // lanes within 128 bits
	add, last  func(...Op)      // lane by lane; the final one
}

func (g gen) f32Lanes() laneOps {
	return laneOps{g.VEXTRACTF64X4, g.VEXTRACTF128, g.VPERMILPS, g.VADDPS, g.VADDSS}
}

func (g gen) i32Lanes() laneOps {
	return laneOps{g.VEXTRACTI64X4, g.VEXTRACTI128, g.VPSHUFD, g.VPADDD, g.VPADDD}
}

// foldHalves sets the YMM dst to the lane-by-lane sum of the two halves of
// the ZMM z: what an AVX-512 kernel does before it hands its accumulator
// to a reduction shared with AVX2.
func (g gen) foldHalves(z reg.Vec, dst reg.Register, o laneOps) {
	t := g.YMM()
	o.extract256(U8(1), z.AsZ(), t)
	o.add(t, z.AsY(), dst)
}

// sumLanes returns an X register whose lane 0 is the sum of the 32-bit
// lanes of the YMM acc, added in halves; acc is clobbered.
func (g gen) sumLanes(acc reg.Vec, o laneOps) reg.Register {
	y, x, t := acc.AsY(), acc.AsX(), g.XMM()
	o.extract128(U8(1), y, t)
	o.add(t, x, x)
	o.shuffle(U8(0x4e), x, t)
	o.add(t, x, x)
	o.shuffle(U8(0xb1), x, t)
	o.last(t, x, x)
	return x
}

// addr is the memory operand of a parameter of the active function.
func (g gen) addr(c gotypes.Component) Mem {
	b, err := c.Resolve()
	if err != nil {
		panic(err)
	}
	return b.Addr
}

// gp64 loads the named parameter into a new 64-bit register.
func (g gen) gp64(param string) reg.GPVirtual {
	r := g.GP64()
	g.Load(g.Param(param), r)
	return r
}

// text starts a function: NOSPLIT, its arguments not escaping, doc the
// comment of its Go declaration.
func (g gen) text(name, signature string, doc ...string) {
	g.Function(name)
	g.Attributes(attr.NOSPLIT)
	g.SignatureExpr(signature)
	g.Pragma("noescape")
	g.Doc(doc...)
}

// routine is a file-local assembly routine (·name<>) that the kernels of
// one file share: a kernel ends with a jump to it, its arguments in
// registers, as Go's internal/bytealg jumps to memeqbody<>. The kernel is
// frameless, so the jump leaves its caller's return address on top of the
// stack and the routine's RET returns from the kernel; a result goes
// through a pointer register to the kernel's ret slot.
type routine string

// static starts the routine r; doc says which registers it takes.
func (g gen) static(r routine, doc ...string) {
	g.Function(string(r) + "<>")
	g.Attributes(attr.NOSPLIT)
	g.Comment(doc...)
}

// tailJump ends a kernel with a jump to r, which reads the registers args.
// avo branches only to labels of the function, so the jump is a raw
// instruction, its operand the symbol written as a label reference: it
// ends the function (IsTerminal) and reads args, which keeps them live.
func (g gen) tailJump(r routine, args ...reg.Register) {
	in := make([]Op, len(args))
	for i, a := range args {
		in[i] = a
	}
	g.Instruction(&ir.Instruction{
		Opcode:     "JMP",
		Operands:   []Op{LabelRef("·" + string(r) + "<>(SB)")},
		Inputs:     in,
		IsTerminal: true,
	})
}

// returnVia ends a kernel with a jump to r, which stores the sum of the
// lanes of acc as the kernel's result, through DI.
func (g gen) returnVia(r routine, acc reg.Register) {
	g.LEAQ(g.addr(g.ReturnIndex(0)), reg.RDI)
	g.tailJump(r, acc, reg.RDI)
}
