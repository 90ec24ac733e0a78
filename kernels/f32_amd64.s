//go:build amd64 && !noasm

// Float32 distance kernels: dot product and squared L2 distance, for one pair
// and for one query against rows of a row-major block.
//
// Semantics. Lengths (n, dim) and rows are > 0; any length is accepted: the
// last n mod 8 (AVX2) or n mod 16 (AVX-512) elements are read with masked
// loads, which never touch memory past the end. Products are accumulated with
// fused multiply-add (one rounding per element, round-to-nearest-even) into
// four vector accumulators that are summed pairwise at the end, so the result
// differs from a sequential sum only by rounding: within n*eps*sum|a_i*b_i|.
// NaN in any input gives NaN; infinities follow IEEE arithmetic (+Inf plus
// -Inf gives NaN in any order). Nothing is written but the result.

#include "textflag.h"

// tailmask<>: eight all-ones lanes then eight zero lanes; the eight lanes
// starting at lane 8-r select the first r elements.
DATA tailmask<>+0x00(SB)/8, $-1
DATA tailmask<>+0x08(SB)/8, $-1
DATA tailmask<>+0x10(SB)/8, $-1
DATA tailmask<>+0x18(SB)/8, $-1
DATA tailmask<>+0x20(SB)/8, $0
DATA tailmask<>+0x28(SB)/8, $0
DATA tailmask<>+0x30(SB)/8, $0
DATA tailmask<>+0x38(SB)/8, $0
GLOBL tailmask<>(SB), RODATA|NOPTR, $64

// Steps: acc += f(q, b) lane by lane; q may be memory, b is clobbered.
#define DOT_STEP(q, b, acc) VFMADD231PS q, b, acc
#define L2_STEP(q, b, acc) VSUBPS q, b, b; VFMADD231PS b, b, acc

// X0 lane 0 = sum of the eight lanes of Y0. Clobbers Y1.
#define HSUM_Y0 \
	VEXTRACTF128 $1, Y0, X1 \
	VADDPS       X1, X0, X0 \
	VPERMILPS    $0x4e, X0, X1 \
	VADDPS       X1, X0, X0 \
	VPERMILPS    $0xb1, X0, X1 \
	VADDSS       X1, X0, X0

// Y15 = mask of the first CX mod 8 lanes. Clobbers AX, R9.
#define MASK_AVX2 \
	MOVQ CX, AX \
	ANDQ $7, AX \
	SHLQ $2, AX \
	LEAQ tailmask<>+32(SB), R9 \
	SUBQ AX, R9 \
	VMOVDQU (R9), Y15

// ROW_AVX2 sets X0 to the sum of STEP over CX elements at SI (query) and DI
// (row), and leaves DI just past the row. Clobbers Y0-Y7, R10, R11.
#define ROW_AVX2(STEP) \
	VXORPS Y0, Y0, Y0 \
	VXORPS Y1, Y1, Y1 \
	VXORPS Y2, Y2, Y2 \
	VXORPS Y3, Y3, Y3 \
	MOVQ   SI, R10 \
	MOVQ   CX, R11 \
	CMPQ   R11, $32 \
	JB     step8 \
loop32: \
	VMOVUPS (DI), Y4 \
	VMOVUPS 32(DI), Y5 \
	VMOVUPS 64(DI), Y6 \
	VMOVUPS 96(DI), Y7 \
	STEP((R10), Y4, Y0) \
	STEP(32(R10), Y5, Y1) \
	STEP(64(R10), Y6, Y2) \
	STEP(96(R10), Y7, Y3) \
	ADDQ   $128, DI \
	ADDQ   $128, R10 \
	SUBQ   $32, R11 \
	CMPQ   R11, $32 \
	JAE    loop32 \
step8: \
	CMPQ   R11, $8 \
	JB     tail \
	VMOVUPS (DI), Y4 \
	STEP((R10), Y4, Y0) \
	ADDQ   $32, DI \
	ADDQ   $32, R10 \
	SUBQ   $8, R11 \
	JMP    step8 \
tail: \
	TESTQ  R11, R11 \
	JZ     reduce \
	VMASKMOVPS (DI), Y15, Y4 \
	VMASKMOVPS (R10), Y15, Y5 \
	STEP(Y5, Y4, Y1) \
	LEAQ   (DI)(R11*4), DI \
reduce: \
	VADDPS Y1, Y0, Y0 \
	VADDPS Y3, Y2, Y2 \
	VADDPS Y2, Y0, Y0 \
	HSUM_Y0

// K1 = mask of the first CX mod 16 lanes. Clobbers AX, BX, R9.
#define MASK_AVX512 \
	MOVQ  CX, R9 \
	ANDQ  $15, CX \
	MOVL  $1, BX \
	SHLL  CX, BX \
	DECL  BX \
	KMOVW BX, K1 \
	MOVQ  R9, CX

// ROW_AVX512 is ROW_AVX2 with sixteen lanes. Clobbers Z0-Z7, R10, R11.
#define ROW_AVX512(STEP) \
	VPXORD Z0, Z0, Z0 \
	VPXORD Z1, Z1, Z1 \
	VPXORD Z2, Z2, Z2 \
	VPXORD Z3, Z3, Z3 \
	MOVQ   SI, R10 \
	MOVQ   CX, R11 \
	CMPQ   R11, $64 \
	JB     step16 \
loop64: \
	VMOVUPS (DI), Z4 \
	VMOVUPS 64(DI), Z5 \
	VMOVUPS 128(DI), Z6 \
	VMOVUPS 192(DI), Z7 \
	STEP((R10), Z4, Z0) \
	STEP(64(R10), Z5, Z1) \
	STEP(128(R10), Z6, Z2) \
	STEP(192(R10), Z7, Z3) \
	ADDQ   $256, DI \
	ADDQ   $256, R10 \
	SUBQ   $64, R11 \
	CMPQ   R11, $64 \
	JAE    loop64 \
step16: \
	CMPQ   R11, $16 \
	JB     tail \
	VMOVUPS (DI), Z4 \
	STEP((R10), Z4, Z0) \
	ADDQ   $64, DI \
	ADDQ   $64, R10 \
	SUBQ   $16, R11 \
	JMP    step16 \
tail: \
	TESTQ  R11, R11 \
	JZ     reduce \
	VMOVUPS.Z (DI), K1, Z4 \
	VMOVUPS.Z (R10), K1, Z5 \
	STEP(Z5, Z4, Z1) \
	LEAQ   (DI)(R11*4), DI \
reduce: \
	VADDPS Z1, Z0, Z0 \
	VADDPS Z3, Z2, Z2 \
	VADDPS Z2, Z0, Z0 \
	VEXTRACTF64X4 $1, Z0, Y1 \
	VADDPS Y1, Y0, Y0 \
	HSUM_Y0

#define PAIR(MASK, ROW, STEP) \
	MOVQ  a+0(FP), SI \
	MOVQ  b+8(FP), DI \
	MOVQ  n+16(FP), CX \
	MASK \
	ROW(STEP) \
	VMOVSS X0, ret+24(FP) \
	VZEROUPPER \
	RET

#define BLOCK(MASK, ROW, STEP) \
	MOVQ  q+0(FP), SI \
	MOVQ  block+8(FP), DI \
	MOVQ  dim+16(FP), CX \
	MOVQ  rows+24(FP), DX \
	MOVQ  out+32(FP), R8 \
	MASK \
nextrow: \
	ROW(STEP) \
	VMOVSS X0, (R8) \
	ADDQ  $4, R8 \
	DECQ  DX \
	JNZ   nextrow \
	VZEROUPPER \
	RET

// BUTTERFLY(A, B, S, D, bytes, lanes): a, b = a+b, a−b lane by lane, in
// vector registers A, B, S, D of the given width.
#define BUTTERFLY(A, B, S, D, bytes, lanes) \
	MOVQ a+0(FP), SI \
	MOVQ b+8(FP), DI \
	MOVQ n+16(FP), CX \
bfly: \
	VMOVUPS (SI), A \
	VMOVUPS (DI), B \
	VADDPS  B, A, S \
	VSUBPS  B, A, D \
	VMOVUPS S, (SI) \
	VMOVUPS D, (DI) \
	ADDQ    $bytes, SI \
	ADDQ    $bytes, DI \
	SUBQ    $lanes, CX \
	JNZ     bfly \
	VZEROUPPER \
	RET

// MUL(X, bytes, lanes): x *= s lane by lane, in vector register X.
#define MUL(X, bytes, lanes) \
	MOVQ x+0(FP), SI \
	MOVQ s+8(FP), DI \
	MOVQ n+16(FP), CX \
mul: \
	VMOVUPS (SI), X \
	VMULPS  (DI), X, X \
	VMOVUPS X, (SI) \
	ADDQ    $bytes, SI \
	ADDQ    $bytes, DI \
	SUBQ    $lanes, CX \
	JNZ     mul \
	VZEROUPPER \
	RET

// func dotAVX2(a, b *float32, n int) float32
TEXT ·dotAVX2(SB), NOSPLIT, $0-28
	PAIR(MASK_AVX2, ROW_AVX2, DOT_STEP)

// func l2SqAVX2(a, b *float32, n int) float32
TEXT ·l2SqAVX2(SB), NOSPLIT, $0-28
	PAIR(MASK_AVX2, ROW_AVX2, L2_STEP)

// func dotBlockAVX2(q, block *float32, dim, rows int, out *float32)
TEXT ·dotBlockAVX2(SB), NOSPLIT, $0-40
	BLOCK(MASK_AVX2, ROW_AVX2, DOT_STEP)

// func l2SqBlockAVX2(q, block *float32, dim, rows int, out *float32)
TEXT ·l2SqBlockAVX2(SB), NOSPLIT, $0-40
	BLOCK(MASK_AVX2, ROW_AVX2, L2_STEP)

// func dotAVX512(a, b *float32, n int) float32
TEXT ·dotAVX512(SB), NOSPLIT, $0-28
	PAIR(MASK_AVX512, ROW_AVX512, DOT_STEP)

// func l2SqAVX512(a, b *float32, n int) float32
TEXT ·l2SqAVX512(SB), NOSPLIT, $0-28
	PAIR(MASK_AVX512, ROW_AVX512, L2_STEP)

// func dotBlockAVX512(q, block *float32, dim, rows int, out *float32)
TEXT ·dotBlockAVX512(SB), NOSPLIT, $0-40
	BLOCK(MASK_AVX512, ROW_AVX512, DOT_STEP)

// func l2SqBlockAVX512(q, block *float32, dim, rows int, out *float32)
TEXT ·l2SqBlockAVX512(SB), NOSPLIT, $0-40
	BLOCK(MASK_AVX512, ROW_AVX512, L2_STEP)

// Element-wise kernels of the rotation (rotation.go): n is a positive
// multiple of 8 (AVX2) or 16 (AVX-512); a and b (x and s) do not overlap.

// func butterflyAVX2(a, b *float32, n int)
TEXT ·butterflyAVX2(SB), NOSPLIT, $0-24
	BUTTERFLY(Y0, Y1, Y2, Y3, 32, 8)

// func butterflyAVX512(a, b *float32, n int)
TEXT ·butterflyAVX512(SB), NOSPLIT, $0-24
	BUTTERFLY(Z0, Z1, Z2, Z3, 64, 16)

// func mulAVX2(x, s *float32, n int)
TEXT ·mulAVX2(SB), NOSPLIT, $0-24
	MUL(Y0, 32, 8)

// func mulAVX512(x, s *float32, n int)
TEXT ·mulAVX512(SB), NOSPLIT, $0-24
	MUL(Z0, 64, 16)

// fwhtsigns<>: per stage h = 1, 2, 4 of a Walsh-Hadamard transform, the
// sign each lane's own element takes in its output (+1 for a+b, −1 for
// a−b, whose partner the permutation brings).
DATA fwhtsigns<>+0x00(SB)/4, $0x3f800000
DATA fwhtsigns<>+0x04(SB)/4, $0xbf800000
DATA fwhtsigns<>+0x08(SB)/4, $0x3f800000
DATA fwhtsigns<>+0x0c(SB)/4, $0xbf800000
DATA fwhtsigns<>+0x10(SB)/4, $0x3f800000
DATA fwhtsigns<>+0x14(SB)/4, $0xbf800000
DATA fwhtsigns<>+0x18(SB)/4, $0x3f800000
DATA fwhtsigns<>+0x1c(SB)/4, $0xbf800000
DATA fwhtsigns<>+0x20(SB)/4, $0x3f800000
DATA fwhtsigns<>+0x24(SB)/4, $0x3f800000
DATA fwhtsigns<>+0x28(SB)/4, $0xbf800000
DATA fwhtsigns<>+0x2c(SB)/4, $0xbf800000
DATA fwhtsigns<>+0x30(SB)/4, $0x3f800000
DATA fwhtsigns<>+0x34(SB)/4, $0x3f800000
DATA fwhtsigns<>+0x38(SB)/4, $0xbf800000
DATA fwhtsigns<>+0x3c(SB)/4, $0xbf800000
DATA fwhtsigns<>+0x40(SB)/4, $0x3f800000
DATA fwhtsigns<>+0x44(SB)/4, $0x3f800000
DATA fwhtsigns<>+0x48(SB)/4, $0x3f800000
DATA fwhtsigns<>+0x4c(SB)/4, $0x3f800000
DATA fwhtsigns<>+0x50(SB)/4, $0xbf800000
DATA fwhtsigns<>+0x54(SB)/4, $0xbf800000
DATA fwhtsigns<>+0x58(SB)/4, $0xbf800000
DATA fwhtsigns<>+0x5c(SB)/4, $0xbf800000
GLOBL fwhtsigns<>(SB), RODATA|NOPTR, $96

// FWHT8(x, t, s1, s2, s4): x = the 8-point transform of x (stages h = 1,
// 2, 4), each output s + x·sign with s the partner element, which one
// fused multiply-add computes exactly as a+b or a−b. Clobbers t.
#define FWHT8(x, t, s1, s2, s4) \
	VPERMILPS   $0xb1, x, t \
	VFMADD231PS s1, x, t \
	VPERMILPS   $0x4e, t, x \
	VFMADD231PS s2, t, x \
	VPERM2F128  $0x01, x, x, t \
	VFMADD231PS s4, x, t \
	VMOVAPS     t, x

// func fwht16AVX2(x *float32, n int): the stages h = 1, 2, 4, 8 of an
// unscaled Walsh-Hadamard transform, 16 elements at a time; n is a
// positive multiple of 16. Needs AVX2 and FMA.
TEXT ·fwht16AVX2(SB), NOSPLIT, $0-16
	MOVQ    x+0(FP), SI
	MOVQ    n+8(FP), CX
	VMOVUPS fwhtsigns<>+0x00(SB), Y13
	VMOVUPS fwhtsigns<>+0x20(SB), Y14
	VMOVUPS fwhtsigns<>+0x40(SB), Y15

fwht16:
	VMOVUPS (SI), Y0
	VMOVUPS 32(SI), Y1
	FWHT8(Y0, Y2, Y13, Y14, Y15)
	FWHT8(Y1, Y3, Y13, Y14, Y15)
	VADDPS  Y1, Y0, Y2
	VSUBPS  Y1, Y0, Y3
	VMOVUPS Y2, (SI)
	VMOVUPS Y3, 32(SI)
	ADDQ    $64, SI
	SUBQ    $16, CX
	JNZ     fwht16
	VZEROUPPER
	RET

// func quantizeAVX512(dst *int8, src *float32, n int, inv float32, levels int32) int32:
// dst[i] = clamp(round-half-even(src[i]·inv), ±levels) for n, a positive
// multiple of 16, elements; returns their sum. The product is rounded to
// float32 first, as the Go version does, and VCVTPS2DQ rounds it under
// the default MXCSR mode, to nearest even.
TEXT ·quantizeAVX512(SB), NOSPLIT, $0-36
	MOVQ         dst+0(FP), DI
	MOVQ         src+8(FP), SI
	MOVQ         n+16(FP), CX
	VBROADCASTSS inv+24(FP), Z1
	MOVL         levels+28(FP), AX
	VPBROADCASTD AX, Z2
	VPXORD       Z4, Z4, Z4
	VPSUBD       Z2, Z4, Z3    // −levels
	VPXORD       Z5, Z5, Z5    // the sum

quant16:
	VMULPS    (SI), Z1, Z0
	VCVTPS2DQ Z0, Z0
	VPMINSD   Z2, Z0, Z0
	VPMAXSD   Z3, Z0, Z0
	VPADDD    Z0, Z5, Z5
	VPMOVDB   Z0, (DI)
	ADDQ      $64, SI
	ADDQ      $16, DI
	SUBQ      $16, CX
	JNZ       quant16

	VEXTRACTI64X4 $1, Z5, Y6
	VPADDD        Y6, Y5, Y5
	VEXTRACTI128  $1, Y5, X6
	VPADDD        X6, X5, X5
	VPSHUFD       $0x4e, X5, X6
	VPADDD        X6, X5, X5
	VPSHUFD       $0xb1, X5, X6
	VPADDD        X6, X5, X5
	VMOVD         X5, AX
	MOVL          AX, ret+32(FP)
	VZEROUPPER
	RET
