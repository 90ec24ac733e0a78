//go:build amd64 && gc && !noasm

// Byte dot products for quantized codes: unsigned codes times a signed query.
//
// Semantics. The result is sum a[i]*b[i] over unsigned a and signed b,
// computed exactly in int32 lanes and wrapping modulo 2^32 (never for
// n <= 65536). VPMADDUBSW saturates its int16 pair sums, so it is used only
// for 4-bit codes (2*15*128 < 32767) and 2-bit codes (the four quarters'
// pair sums added in int16 stay within 4*2*3*128); 8-bit codes are widened
// to int16 and multiplied with VPMADDWD on AVX2, and fed to VPDPBUSD (u8 x
// s8, four products into int32 with no intermediate saturation) on AVX-512
// VNNI, as are the unpacked 4- and 2-bit codes.
// Lengths: dotU8I8AVX2 takes a positive multiple of 32 (the Go caller adds
// the tail), dotU8I8AVX512 any n > 0 (masked loads read nothing past the
// end); the U4 and U2 kernels take whole 32-byte chunks (64 or 128 codes,
// see packU4 and packU2 in int8.go), the Go caller handles a final short
// chunk.

#include "textflag.h"

// AX = sum of the eight int32 lanes of Y0. Clobbers Y1.
#define HSUM_D \
	VEXTRACTI128 $1, Y0, X1 \
	VPADDD       X1, X0, X0 \
	VPSHUFD      $0x4e, X0, X1 \
	VPADDD       X1, X0, X0 \
	VPSHUFD      $0xb1, X0, X1 \
	VPADDD       X1, X0, X0 \
	VMOVD        X0, AX

// func dotU8I8AVX2(a *byte, b *int8, n int) int32
TEXT ·dotU8I8AVX2(SB), NOSPLIT, $0-28
	MOVQ  a+0(FP), SI
	MOVQ  b+8(FP), DI
	MOVQ  n+16(FP), CX
	VPXOR Y0, Y0, Y0
	VPXOR Y1, Y1, Y1

loop:
	VPMOVZXBW (SI), Y2
	VPMOVSXBW (DI), Y3
	VPMADDWD  Y3, Y2, Y2
	VPADDD    Y2, Y0, Y0
	VPMOVZXBW 16(SI), Y4
	VPMOVSXBW 16(DI), Y5
	VPMADDWD  Y5, Y4, Y4
	VPADDD    Y4, Y1, Y1
	ADDQ      $32, SI
	ADDQ      $32, DI
	SUBQ      $32, CX
	JNZ       loop
	VPADDD    Y1, Y0, Y0
	HSUM_D
	MOVL      AX, ret+24(FP)
	VZEROUPPER
	RET

// func dotU8I8AVX512(a *byte, b *int8, n int) int32
TEXT ·dotU8I8AVX512(SB), NOSPLIT, $0-28
	MOVQ   a+0(FP), SI
	MOVQ   b+8(FP), DI
	MOVQ   n+16(FP), CX
	VPXORD Z0, Z0, Z0
	VPXORD Z1, Z1, Z1
	CMPQ   CX, $128
	JB     step64

loop128:
	VMOVDQU64 (SI), Z2
	VMOVDQU64 64(SI), Z3
	VPDPBUSD  (DI), Z2, Z0
	VPDPBUSD  64(DI), Z3, Z1
	ADDQ      $128, SI
	ADDQ      $128, DI
	SUBQ      $128, CX
	CMPQ      CX, $128
	JAE       loop128

step64:
	CMPQ      CX, $64
	JB        tail
	VMOVDQU64 (SI), Z2
	VPDPBUSD  (DI), Z2, Z0
	ADDQ      $64, SI
	ADDQ      $64, DI
	SUBQ      $64, CX

tail:
	TESTQ      CX, CX
	JZ         reduce
	MOVQ       $-1, AX
	SHLQ       CX, AX
	NOTQ       AX
	KMOVQ      AX, K1
	VMOVDQU8.Z (SI), K1, Z2
	VMOVDQU8.Z (DI), K1, Z3
	VPDPBUSD   Z3, Z2, Z1

reduce:
	VPADDD        Z1, Z0, Z0
	VEXTRACTI64X4 $1, Z0, Y1
	VPADDD        Y1, Y0, Y0
	HSUM_D
	MOVL          AX, ret+24(FP)
	VZEROUPPER
	RET

// func dotU4I8AVX2(a *byte, b *int8, chunks int) int32
TEXT ·dotU4I8AVX2(SB), NOSPLIT, $0-28
	MOVQ         a+0(FP), SI
	MOVQ         b+8(FP), DI
	MOVQ         chunks+16(FP), CX
	MOVL         $0x0f, AX
	VMOVD        AX, X15
	VPBROADCASTB X15, Y15
	MOVL         $1, AX
	VMOVD        AX, X14
	VPBROADCASTW X14, Y14
	VPXOR        Y0, Y0, Y0

loop:
	VMOVDQU    (SI), Y2
	VPSRLW     $4, Y2, Y3
	VPAND      Y15, Y2, Y2
	VPAND      Y15, Y3, Y3
	VPMADDUBSW (DI), Y2, Y2   // low nibbles x b[0:32]
	VPMADDUBSW 32(DI), Y3, Y3 // high nibbles x b[32:64]
	VPADDW     Y3, Y2, Y2
	VPMADDWD   Y14, Y2, Y2
	VPADDD     Y2, Y0, Y0
	ADDQ       $32, SI
	ADDQ       $64, DI
	DECQ       CX
	JNZ        loop
	HSUM_D
	MOVL       AX, ret+24(FP)
	VZEROUPPER
	RET

// func dotU4I8AVX512(a *byte, b *int8, chunks int) int32
TEXT ·dotU4I8AVX512(SB), NOSPLIT, $0-28
	MOVQ          a+0(FP), SI
	MOVQ          b+8(FP), DI
	MOVQ          chunks+16(FP), CX
	MOVL          $0x0f, AX
	VPBROADCASTB  AX, Z15
	// Z14: word shift counts, 0 in the low half and 4 in the high half, so
	// one VPSRLVW of the chunk copied to both halves lays out its 64 codes
	// in query order.
	MOVL          $4, AX
	VPBROADCASTW  AX, Y13
	VPXORD        Z14, Z14, Z14
	VINSERTI64X4  $1, Y13, Z14, Z14
	VPXORD        Z0, Z0, Z0

loop:
	VBROADCASTI64X4 (SI), Z2
	VPSRLVW         Z14, Z2, Z2
	VPANDQ          Z15, Z2, Z2
	VPDPBUSD        (DI), Z2, Z0
	ADDQ            $32, SI
	ADDQ            $64, DI
	DECQ            CX
	JNZ             loop
	VEXTRACTI64X4   $1, Z0, Y1
	VPADDD          Y1, Y0, Y0
	HSUM_D
	MOVL            AX, ret+24(FP)
	VZEROUPPER
	RET

// func dotU2I8AVX2(a *byte, b *int8, chunks int) int32
TEXT ·dotU2I8AVX2(SB), NOSPLIT, $0-28
	MOVQ         a+0(FP), SI
	MOVQ         b+8(FP), DI
	MOVQ         chunks+16(FP), CX
	MOVL         $3, AX
	VMOVD        AX, X15
	VPBROADCASTB X15, Y15
	MOVL         $1, AX
	VMOVD        AX, X14
	VPBROADCASTW X14, Y14
	VPXOR        Y0, Y0, Y0

loop:
	VMOVDQU    (SI), Y2
	VPAND      Y15, Y2, Y3
	VPMADDUBSW (DI), Y3, Y3    // bits 0-1 x b[0:32]
	VPSRLW     $2, Y2, Y4
	VPAND      Y15, Y4, Y4
	VPMADDUBSW 32(DI), Y4, Y4  // bits 2-3 x b[32:64]
	VPADDW     Y4, Y3, Y3
	VPSRLW     $4, Y2, Y4
	VPAND      Y15, Y4, Y4
	VPMADDUBSW 64(DI), Y4, Y4  // bits 4-5 x b[64:96]
	VPADDW     Y4, Y3, Y3
	VPSRLW     $6, Y2, Y4
	VPAND      Y15, Y4, Y4
	VPMADDUBSW 96(DI), Y4, Y4  // bits 6-7 x b[96:128]
	VPADDW     Y4, Y3, Y3
	VPMADDWD   Y14, Y3, Y3
	VPADDD     Y3, Y0, Y0
	ADDQ       $32, SI
	SUBQ       $-128, DI
	DECQ       CX
	JNZ        loop
	HSUM_D
	MOVL       AX, ret+24(FP)
	VZEROUPPER
	RET

// func dotU2I8AVX512(a *byte, b *int8, chunks int) int32
TEXT ·dotU2I8AVX512(SB), NOSPLIT, $0-28
	MOVQ          a+0(FP), SI
	MOVQ          b+8(FP), DI
	MOVQ          chunks+16(FP), CX
	MOVL          $3, AX
	VPBROADCASTB  AX, Z15
	// Z14 and Z13: word shift counts 0|2 and 4|6 (low half|high half), so
	// that a VPSRLVW of the chunk copied to both halves lays out quarters 0
	// and 1, or 2 and 3, of its 128 codes in query order.
	MOVL          $2, AX
	VPBROADCASTW  AX, Y12
	VPXORD        Z14, Z14, Z14
	VINSERTI64X4  $1, Y12, Z14, Z14
	MOVL          $4, AX
	VPBROADCASTW  AX, Y13
	MOVL          $6, AX
	VPBROADCASTW  AX, Y12
	VINSERTI64X4  $1, Y12, Z13, Z13
	VPXORD        Z0, Z0, Z0
	VPXORD        Z1, Z1, Z1

loop:
	VBROADCASTI64X4 (SI), Z2
	VPSRLVW         Z14, Z2, Z3
	VPANDQ          Z15, Z3, Z3
	VPDPBUSD        (DI), Z3, Z0
	VPSRLVW         Z13, Z2, Z4
	VPANDQ          Z15, Z4, Z4
	VPDPBUSD        64(DI), Z4, Z1
	ADDQ            $32, SI
	SUBQ            $-128, DI
	DECQ            CX
	JNZ             loop
	VPADDD          Z1, Z0, Z0
	VEXTRACTI64X4   $1, Z0, Y1
	VPADDD          Y1, Y0, Y0
	HSUM_D
	MOVL            AX, ret+24(FP)
	VZEROUPPER
	RET
