package main

import (
	"fmt"

	"github.com/mmcloughlin/avo/attr"
	"github.com/mmcloughlin/avo/ir"
	. "github.com/mmcloughlin/avo/operand"
	"github.com/mmcloughlin/avo/reg"
)

const int8Header = `
Byte dot products for quantized codes: unsigned codes times a signed query;
the quantization of a rotated float32 query to int8.

Semantics. The result is sum a[i]*b[i] over unsigned a and signed b,
computed exactly in int32 lanes and wrapping modulo 2^32 (never for
n <= 65536). VPMADDUBSW saturates its int16 pair sums, so it is used only
for 4-bit codes (2*15*128 < 32767) and 2-bit codes (the four quarters'
pair sums added in int16 stay within 4*2*3*128); 8-bit codes are widened
to int16 and multiplied with VPMADDWD on AVX2, and fed to VPDPBUSD (u8 x
s8, four products into int32 with no intermediate saturation) on AVX-512
VNNI, as are the unpacked 4- and 2-bit codes.
Lengths: dotU8I8AVX2 takes a positive multiple of 32 (the Go caller adds
the tail), dotU8I8AVX512 any n > 0 (masked loads read nothing past the
end); dotU4I8* and dotU2I8* take whole 32-byte chunks of codes (64 or
128 codes, see packU4 and packU2 in int8.go): on AVX2 the Go caller
handles a final short chunk, on AVX-512 the kernel does, through masked
loads.

quantizeAVX512 takes n a positive multiple of 16; the product src[i]·inv is
rounded to float32 first, as the Go version does, and VCVTPS2DQ rounds it
under the default MXCSR mode, to nearest even.
`

func buildInt8(g gen) {
	g.dotU8I8AVX2()
	g.dotU8I8AVX512()
	masks := g.codeMaskData()
	for _, w := range []width{avx2, avx512} {
		for _, bits := range []int{4, 2} {
			g.packedI8(w, bits, masks)
		}
	}
	g.quantizeAVX512()
	g.sumI32()
}

// vpdpbusd emits VPDPBUSD (AVX-512 VNNI), which avo v0.5.0 lacks: acc +=
// the sums of four adjacent products u8(a)·s8(b), lane by lane in int32.
func (g gen) vpdpbusd(b Op, a, acc reg.VecVirtual) {
	g.Instruction(&ir.Instruction{
		Opcode:   "VPDPBUSD",
		Operands: []Op{b, a, acc},
		Inputs:   []Op{b, a, acc},
		Outputs:  []Op{acc},
		ISA:      []string{"AVX512_VNNI"},
	})
}

func (g gen) dotU8I8AVX2() {
	g.text("dotU8I8AVX2", "func(a *byte, b *int8, n int) int32",
		"dotU8I8AVX2 returns sum a[i]·b[i] for i < n, a positive multiple of 32.")
	a, b, n := g.gp64("a"), g.gp64("b"), g.gp64("n")
	acc := g.zeros(avx2, 2)
	g.Label("loop")
	for i, r := range acc {
		x, y := g.YMM(), g.YMM()
		g.VPMOVZXBW(at(a, 16*i), x)
		g.VPMOVSXBW(at(b, 16*i), y)
		g.VPMADDWD(y, x, x)
		g.VPADDD(x, r, r)
	}
	g.ADDQ(U8(32), a)
	g.ADDQ(U8(32), b)
	g.SUBQ(U8(32), n)
	g.JNZ(LabelRef("loop"))
	g.VPADDD(acc[1], acc[0], acc[0])
	g.retI32(avx2, acc[0])
}

func (g gen) dotU8I8AVX512() {
	g.text("dotU8I8AVX512", "func(a *byte, b *int8, n int) int32",
		"dotU8I8AVX512 returns sum a[i]·b[i] for i < n; n > 0.")
	a, b, n := g.gp64("a"), g.gp64("b"), g.gp64("n")
	acc := g.zeros(avx512, 2)
	g.CMPQ(n, U8(128))
	g.JB(LabelRef("step"))

	g.Label("loop")
	for i, r := range acc {
		x := g.ZMM()
		g.VMOVDQU64(at(a, 64*i), x)
		g.vpdpbusd(at(b, 64*i), x, r)
	}
	g.ADDQ(U32(128), a)
	g.ADDQ(U32(128), b)
	g.SUBQ(U32(128), n)
	g.CMPQ(n, U32(128))
	g.JAE(LabelRef("loop"))

	g.Label("step")
	g.CMPQ(n, U8(64))
	g.JB(LabelRef("tail"))
	x := g.ZMM()
	g.VMOVDQU64(Mem{Base: a}, x)
	g.vpdpbusd(Mem{Base: b}, x, acc[0])
	g.ADDQ(U8(64), a)
	g.ADDQ(U8(64), b)
	g.SUBQ(U8(64), n)

	g.Label("tail")
	k := g.loadMask(n, "reduce")
	y := g.ZMM()
	g.VMOVDQU8_Z(Mem{Base: a}, k, x)
	g.VMOVDQU8_Z(Mem{Base: b}, k, y)
	g.vpdpbusd(y, x, acc[1])

	g.Label("reduce")
	g.VPADDD(acc[1], acc[0], acc[0])
	g.retI32(avx512, acc[0])
}

// loadMask emits a jump to the label skip if n is 0, else returns a mask
// register with the low n bits set (n < 64): the lanes of a masked byte
// load that read n bytes and nothing past them.
func (g gen) loadMask(n reg.Register, skip string) reg.OpmaskVirtual {
	g.TESTQ(n, n)
	g.JZ(LabelRef(skip))
	g.MOVQ(n, reg.RCX)
	bits := g.GP64()
	g.MOVQ(I32(-1), bits)
	g.SHLQ(reg.CL, bits)
	g.NOTQ(bits)
	k := g.K()
	g.KMOVQ(bits, k)
	return k
}

// packedI8 emits the dot product of packed codes of bits bits (4 or 2) at
// width w: a body of its own, from the one template of each width
// (packedAVX2, packedVNNI), with no branch but its loop's and, at AVX-512,
// those around the loop and the masked tail; it ends with a jump to sumI32.
func (g gen) packedI8(w width, bits int, masks map[int]Mem) {
	name, needs := fmt.Sprintf("dotU%dI8%s", bits, w.name), "AVX2"
	if w == avx512 {
		needs = "AVX-512 VNNI"
	}
	packer := map[int]string{4: "packU4", 2: "packU2"}[bits]
	if w == avx512 {
		g.text(name, "func(a *byte, b *int8, chunks, tail int) int32",
			fmt.Sprintf("%s returns the dot product of chunks 32-byte chunks of %d-bit", name, bits),
			fmt.Sprintf("codes (packed by %s), then a final short chunk of tail bytes (0 to 31),", packer),
			fmt.Sprintf("with the %d·(32·chunks + tail) bytes of the query.", 8/bits),
			"Needs "+needs+".")
		a, b, chunks, tail := g.gp64("a"), g.gp64("b"), g.gp64("chunks"), g.gp64("tail")
		g.toY0(w, g.packedVNNI(masks[bits], bits, name, a, b, chunks, tail))
		g.jumpSumI32()
		return
	}
	g.text(name, "func(a *byte, b *int8, chunks int) int32",
		fmt.Sprintf("%s returns the dot product of chunks 32-byte chunks of %d-bit", name, bits),
		fmt.Sprintf("codes (packed by %s) with the %d·chunks bytes of the query.", packer, 256/bits),
		"Needs "+needs+".")
	a, b, chunks := g.gp64("a"), g.gp64("b"), g.gp64("chunks")
	g.packedAVX2(masks[bits], bits, name+"loop", a, b, chunks)
	g.jumpSumI32()
}

// codeMaskData declares the byte masks of a code's bits, 0x0f and 0x03,
// and returns them by the code's width in bits.
func (g gen) codeMaskData() map[int]Mem {
	m := g.StaticGlobal("codemask")
	g.DataAttributes(attr.RODATA | attr.NOPTR)
	g.AddDatum(0, U8(0x0f))
	g.AddDatum(1, U8(0x03))
	return map[int]Mem{4: m, 2: m.Offset(1)}
}

// packedLoop emits the loop, at label, over the chunks of codes of bits
// bits at a with the query at b: chunk adds the products of one.
func (g gen) packedLoop(label string, bits int, a, b, chunks reg.Register, chunk func()) {
	g.Label(label)
	chunk()
	g.ADDQ(U8(32), a)
	g.ADDQ(U32(32*8/bits), b)
	g.DECQ(chunks)
	g.JNZ(LabelRef(label))
}

// packedAVX2 emits the AVX2 loop, which adds up into Y0: each quarter
// (or half) of the codes, shifted down and masked, is multiplied with
// VPMADDUBSW, the int16 pair sums added up in int16 and widened to int32
// by a VPMADDWD with ones.
func (g gen) packedAVX2(codeMask Mem, bits int, label string, a, b, chunks reg.Register) {
	acc, mask, ones := reg.Y0, g.YMM(), g.YMM()
	g.VPXOR(acc, acc, acc)
	g.VPBROADCASTB(codeMask, mask)
	g.VPCMPEQW(ones, ones, ones)
	g.VPSRLW(U8(15), ones, ones)
	g.packedLoop(label, bits, a, b, chunks, func() {
		codes := g.YMM()
		g.VMOVDQU(Mem{Base: a}, codes)
		var sum reg.VecVirtual
		for i := 0; i < 8/bits; i++ {
			t := g.YMM()
			if i == 0 {
				g.VPAND(mask, codes, t)
			} else {
				g.VPSRLW(U8(bits*i), codes, t)
				g.VPAND(mask, t, t)
			}
			g.VPMADDUBSW(at(b, 32*i), t, t) // code 32i+j × b[32i+j], in pairs
			if i == 0 {
				sum = t
			} else {
				g.VPADDW(t, sum, sum)
			}
		}
		g.VPMADDWD(ones, sum, sum)
		g.VPADDD(sum, acc, acc)
	})
}

// packedVNNI emits the AVX-512 VNNI loop and returns its accumulator: the
// chunk is copied to both halves of a ZMM and VPSRLVW shifts each half by
// its own count, so that one register holds two quarters (or halves) of
// the codes in query order, fed to VPDPBUSD. The word shift counts of pair
// h are 2h·bits in the low half and (2h+1)·bits in the high half: 4-bit
// codes make one pair, 2-bit codes two. A final short chunk of tail bytes
// is read the same way through a byte mask: its codes and each part of the
// query it meets (tail bytes each, one after the other) are loaded with
// the bytes past tail zeroed, so they add nothing and nothing past the end
// is read.
func (g gen) packedVNNI(codeMask Mem, bits int, name string, a, b, chunks, tail reg.Register) reg.VecVirtual {
	mask := g.ZMM()
	g.VPBROADCASTB(codeMask, mask)
	pairs := 8 / bits / 2
	// broadcast sets every word of the YMM v to count.
	broadcast := func(count int, v reg.Register) {
		n := g.GP32()
		g.MOVL(U32(count), n)
		g.VPBROADCASTW(n, v)
	}
	shifts := make([]reg.VecVirtual, pairs)
	for h := range shifts {
		shifts[h] = g.ZMM()
		if h == 0 {
			g.zero(avx512, shifts[h])
		} else {
			broadcast(2*h*bits, shifts[h].AsY()) // zeroes the high half
		}
		hi := g.YMM()
		broadcast((2*h+1)*bits, hi)
		g.VINSERTI64X4(U8(1), hi, shifts[h], shifts[h])
	}
	acc := g.zeros(avx512, pairs)
	// dot adds the products of the codes (both halves of the ZMM codes)
	// and the query parts in query[h], 64 bytes each.
	dot := func(codes reg.VecVirtual, query func(h int) Op) {
		for h := range pairs {
			t := g.ZMM()
			g.VPSRLVW(shifts[h], codes, t)
			g.VPANDQ(mask, t, t)
			g.vpdpbusd(query(h), t, acc[h])
		}
	}
	g.TESTQ(chunks, chunks)
	g.JZ(LabelRef(name + "tail"))
	g.packedLoop(name+"loop", bits, a, b, chunks, func() {
		codes := g.ZMM()
		g.VBROADCASTI64X4(Mem{Base: a}, codes)
		dot(codes, func(h int) Op { return at(b, 64*h) })
	})

	g.Label(name + "tail")
	k := g.loadMask(tail, name+"reduce")
	// halves loads tail bytes at p into the low half of a ZMM and tail
	// bytes at p+tail into its high half, advancing p by 2·tail.
	halves := func(p reg.Register) reg.VecVirtual {
		z, hi := g.ZMM(), g.YMM()
		g.VMOVDQU8_Z(Mem{Base: p}, k, z.AsY())
		g.ADDQ(tail, p)
		g.VMOVDQU8_Z(Mem{Base: p}, k, hi)
		g.ADDQ(tail, p)
		g.VINSERTI64X4(U8(1), hi, z, z)
		return z
	}
	codes, y := g.ZMM(), g.YMM()
	g.VMOVDQU8_Z(Mem{Base: a}, k, y)
	g.VINSERTI64X4(U8(1), y, y.AsZ(), codes)
	query := make([]reg.VecVirtual, pairs)
	for h := range query {
		query[h] = halves(b)
	}
	dot(codes, func(h int) Op { return query[h] })

	g.Label(name + "reduce")
	for _, r := range acc[1:] {
		g.VPADDD(r, acc[0], acc[0])
	}
	return acc[0]
}

// sumI32 is the end of every kernel with an int32 result: it stores the
// sum, modulo 2^32, of the int32 lanes of Y0 at the address in DI.
const sumI32 routine = "sumI32"

func (g gen) sumI32() {
	g.static(sumI32, "Y0: the int32 lanes to add up; DI: where their sum goes.")
	sum := g.sumLanes(reg.Y0, g.i32Lanes())
	g.VMOVD(sum, Mem{Base: reg.RDI})
	g.VZEROUPPER()
	g.RET()
}

// retI32 ends a kernel whose int32 result is the sum of the lanes of acc
// (width w).
func (g gen) retI32(w width, acc reg.VecVirtual) {
	g.toY0(w, acc)
	g.jumpSumI32()
}

// toY0 sets Y0 to acc (width w), folded to 256 bits.
func (g gen) toY0(w width, acc reg.VecVirtual) {
	if w == avx512 {
		g.foldHalves(acc, reg.Y0, g.i32Lanes())
	} else {
		g.VMOVDQU(acc, reg.Y0)
	}
}

// jumpSumI32 ends a kernel with a jump to sumI32, which stores the sum of
// the lanes of Y0 as the kernel's int32 result.
func (g gen) jumpSumI32() { g.returnVia(sumI32, reg.Y0) }

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
	g.retI32(avx512, sum)
}
