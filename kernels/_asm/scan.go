package main

import (
	"math/bits"

	. "github.com/mmcloughlin/avo/operand"
	"github.com/mmcloughlin/avo/reg"
)

const scanHeader = `
1-bit fast scan over one block of 32 vectors (layout in fastscan.go and
doc.go): for every code column (8 dimensions, one byte per vector) the low
and high nibbles index 16-entry uint8 tables with VPSHUFB, and the looked-up
bytes are added into uint16 lanes.

Semantics. cols is a positive multiple of 8 and at most 128 (so no lane can
exceed 128*2*252 < 65536: exact, no wrap). Bytes are added as 16-bit words:
the low accumulator A collects even bytes + 256*odd bytes (mod 2^16), the
high accumulator B collects odd bytes (word >> 8); the even sums are
A - (B << 8). out[0:16] receives the even-byte sums (vectors 0-15),
out[16:32] the odd-byte sums (vectors 16-31). The table for two columns c,
c+1 is 128 bytes: low-nibble tables of c and c+1, then their high-nibble
tables, each 16-byte table stored twice. With AVX-512 each register holds
two columns, one per 256-bit half, which the same 64-byte table load matches
lane for lane; the halves are folded at the end (the sums are linear modulo
2^16).
`

func buildScan(g gen) {
	for _, w := range []width{avx2, avx512} {
		g.fastScan(w)
	}
	g.scanStore()
}

// fastScan emits fastScan{width}: two code registers (2 columns with AVX2,
// 4 with AVX-512) per iteration, each split into its low and high nibbles,
// each nibble register looked up in its tables.
func (g gen) fastScan(w width) {
	name := "fastScan" + w.name
	g.text(name, "func(codes, lut *byte, cols int, out *[32]uint16)",
		name+" sets out to the table sums of the 32 vectors of a fast-scan block",
		"over cols columns, a positive multiple of 8 and at most 128.")
	codes, lut, cols := g.gp64("codes"), g.gp64("lut"), g.gp64("cols")
	g.Load(g.Param("out"), reg.RDI) // for scanStore
	mask := g.byteMask(w, 0x0f)
	acc := g.zeros(w, 2)   // A and B above
	perReg := w.bytes / 32 // columns in one register
	g.SHRQ(U8(bits.TrailingZeros(uint(2*perReg))), cols)

	g.Label("loop")
	var nibbles, tables [4]reg.VecVirtual
	for k := 0; k < 2; k++ {
		lo, hi := g.vec(w), g.vec(w)
		g.movdqu(w, at(codes, k*w.bytes), lo)
		g.VPSRLW(U8(4), lo, hi)
		g.and(w, mask, lo, lo)
		g.and(w, mask, hi, hi)
		nibbles[k], nibbles[2+k] = lo, hi
	}
	for k := 0; k < 2; k++ {
		// The tables of the register's first column c: its pair's 128
		// bytes, then c's place in the pair.
		c := k * perReg
		low := c/2*128 + c%2*32
		tables[k], tables[2+k] = g.vec(w), g.vec(w)
		g.movdqu(w, at(lut, low), tables[k])
		g.movdqu(w, at(lut, low+64), tables[2+k])
	}
	for i, t := range tables {
		g.VPSHUFB(nibbles[i], t, t)
	}
	for _, t := range tables {
		g.VPADDW(t, acc[0], acc[0])
		g.VPSRLW(U8(8), t, t)
		g.VPADDW(t, acc[1], acc[1])
	}
	g.ADDQ(U32(2*w.bytes), codes)
	g.ADDQ(U32(4*w.bytes), lut)
	g.DECQ(cols)
	g.JNZ(LabelRef("loop"))

	// A and B, folded to 256 bits with AVX-512, go to scanStore in Y0, Y1.
	sums := []reg.Register{reg.Y0, reg.Y1}
	for i, r := range acc {
		if w == avx512 {
			t := g.YMM()
			g.VEXTRACTI64X4(U8(1), r, t)
			g.VPADDW(t, r.AsY(), sums[i])
		} else {
			g.VMOVDQU(r, sums[i])
		}
	}
	g.tailJump(scanStore, reg.Y0, reg.Y1, reg.RDI)
}

// scanStore is the end of both fast-scan kernels: it stores the even-byte
// sums A - (B << 8) and the odd-byte sums B at out.
const scanStore routine = "scanStore"

func (g gen) scanStore() {
	g.static(scanStore, "Y0: A; Y1: B (see above); DI: out.")
	t := g.YMM()
	g.VPSLLW(U8(8), reg.Y1, t)
	g.VPSUBW(t, reg.Y0, reg.Y0)
	g.VMOVDQU(reg.Y0, Mem{Base: reg.RDI})
	g.VMOVDQU(reg.Y1, at(reg.RDI, 32))
	g.VZEROUPPER()
	g.RET()
}

// byteMask returns a register of width w with every byte set to m.
func (g gen) byteMask(w width, m int) reg.VecVirtual {
	r := g.GP32()
	g.MOVL(U32(m), r)
	return g.broadcastByte(w, r)
}

// broadcastByte returns a register of width w with every byte set to the
// low byte of the 32-bit register r.
func (g gen) broadcastByte(w width, r reg.Register) reg.VecVirtual {
	v := g.vec(w)
	if w == avx512 {
		g.VPBROADCASTB(r, v)
	} else {
		g.VMOVD(r, v.AsX())
		g.VPBROADCASTB(v.AsX(), v)
	}
	return v
}

// movdqu loads or stores a register of width w, unaligned.
func (g gen) movdqu(w width, src, dst Op) {
	if w == avx512 {
		g.VMOVDQU64(src, dst)
	} else {
		g.VMOVDQU(src, dst)
	}
}

// and sets dst = a & b, of width w.
func (g gen) and(w width, a, b, dst Op) {
	if w == avx512 {
		g.VPANDQ(a, b, dst)
	} else {
		g.VPAND(a, b, dst)
	}
}
