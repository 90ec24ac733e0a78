package main

import (
	"github.com/mmcloughlin/avo/attr"
	"github.com/mmcloughlin/avo/gotypes"
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

// sumLanes returns an X register whose lane 0 is the sum of the 32-bit
// lanes of acc (width w), added in halves; acc is clobbered.
func (g gen) sumLanes(w width, acc reg.VecVirtual, o laneOps) reg.Register {
	y, x, t := acc.AsY(), acc.AsX(), g.XMM()
	if w == avx512 {
		o.extract256(U8(1), acc, t.AsY())
		o.add(t.AsY(), y, y)
	}
	o.extract128(U8(1), y, t)
	o.add(t, x, x)
	o.shuffle(U8(0x4e), x, t)
	o.add(t, x, x)
	o.shuffle(U8(0xb1), x, t)
	o.last(t, x, x)
	return x
}

// sumI32 returns a 32-bit register holding the sum, modulo 2^32, of the
// int32 lanes of acc (width w); acc is clobbered.
func (g gen) sumI32(w width, acc reg.VecVirtual) reg.GPVirtual {
	sum := g.GP32()
	g.VMOVD(g.sumLanes(w, acc, g.i32Lanes()), sum)
	return sum
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
