//go:build amd64 && gc && !noasm

// 1-bit fast scan over one block of 32 vectors (layout in fastscan.go and
// doc.go): for every code column (8 dimensions, one byte per vector) the low
// and high nibbles index 16-entry uint8 tables with VPSHUFB, and the looked-up
// bytes are added into uint16 lanes.
//
// Semantics. cols is a positive multiple of 8 and at most 128 (so no lane can
// exceed 128*2*252 < 65536: exact, no wrap). Bytes are added as 16-bit words:
// the low accumulator A collects even bytes + 256*odd bytes (mod 2^16), the
// high accumulator B collects odd bytes (word >> 8); the even sums are
// A - (B << 8). out[0:16] receives the even-byte sums (vectors 0-15),
// out[16:32] the odd-byte sums (vectors 16-31). The table for two columns c,
// c+1 is 128 bytes: low-nibble tables of c and c+1, then their high-nibble
// tables, each 16-byte table stored twice.

#include "textflag.h"

// ACC adds the looked-up bytes in r to the accumulators; r is clobbered.
#define ACC(r, lo, hi) \
	VPADDW r, lo, lo \
	VPSRLW $8, r, r \
	VPADDW r, hi, hi

// func fastScanAVX2(codes, lut *byte, cols int, out *[32]uint16)
TEXT ·fastScanAVX2(SB), NOSPLIT, $0-32
	MOVQ         codes+0(FP), SI
	MOVQ         lut+8(FP), DI
	MOVQ         cols+16(FP), CX
	MOVQ         out+24(FP), R8
	MOVL         $0x0f, AX
	VMOVD        AX, X15
	VPBROADCASTB X15, Y15
	VPXOR        Y8, Y8, Y8
	VPXOR        Y9, Y9, Y9
	SHRQ         $1, CX

loop:
	VMOVDQU (SI), Y0   // column c
	VMOVDQU 32(SI), Y1 // column c+1
	VPSRLW  $4, Y0, Y2
	VPSRLW  $4, Y1, Y3
	VPAND   Y15, Y0, Y0
	VPAND   Y15, Y1, Y1
	VPAND   Y15, Y2, Y2
	VPAND   Y15, Y3, Y3
	VMOVDQU (DI), Y4
	VMOVDQU 32(DI), Y5
	VMOVDQU 64(DI), Y6
	VMOVDQU 96(DI), Y7
	VPSHUFB Y0, Y4, Y4
	VPSHUFB Y1, Y5, Y5
	VPSHUFB Y2, Y6, Y6
	VPSHUFB Y3, Y7, Y7
	ACC(Y4, Y8, Y9)
	ACC(Y5, Y8, Y9)
	ACC(Y6, Y8, Y9)
	ACC(Y7, Y8, Y9)
	ADDQ    $64, SI
	ADDQ    $128, DI
	DECQ    CX
	JNZ     loop

	VPSLLW  $8, Y9, Y10
	VPSUBW  Y10, Y8, Y8
	VMOVDQU Y8, (R8)
	VMOVDQU Y9, 32(R8)
	VZEROUPPER
	RET

// func fastScanAVX512(codes, lut *byte, cols int, out *[32]uint16)
TEXT ·fastScanAVX512(SB), NOSPLIT, $0-32
	MOVQ         codes+0(FP), SI
	MOVQ         lut+8(FP), DI
	MOVQ         cols+16(FP), CX
	MOVQ         out+24(FP), R8
	MOVL         $0x0f, AX
	VPBROADCASTB AX, Z15
	VPXORD       Z8, Z8, Z8
	VPXORD       Z9, Z9, Z9
	SHRQ         $2, CX

loop:
	// Each ZMM holds two columns, one per 256-bit half; the tables are laid
	// out so that the same 64-byte load matches them lane for lane.
	VMOVDQU64 (SI), Z0   // columns c, c+1
	VMOVDQU64 64(SI), Z1 // columns c+2, c+3
	VPSRLW    $4, Z0, Z2
	VPSRLW    $4, Z1, Z3
	VPANDQ    Z15, Z0, Z0
	VPANDQ    Z15, Z1, Z1
	VPANDQ    Z15, Z2, Z2
	VPANDQ    Z15, Z3, Z3
	VMOVDQU64 (DI), Z4
	VMOVDQU64 128(DI), Z5
	VMOVDQU64 64(DI), Z6
	VMOVDQU64 192(DI), Z7
	VPSHUFB   Z0, Z4, Z4
	VPSHUFB   Z1, Z5, Z5
	VPSHUFB   Z2, Z6, Z6
	VPSHUFB   Z3, Z7, Z7
	ACC(Z4, Z8, Z9)
	ACC(Z5, Z8, Z9)
	ACC(Z6, Z8, Z9)
	ACC(Z7, Z8, Z9)
	ADDQ      $128, SI
	ADDQ      $256, DI
	DECQ      CX
	JNZ       loop

	// Fold the halves: the sums are linear modulo 2^16.
	VEXTRACTI64X4 $1, Z8, Y10
	VPADDW        Y10, Y8, Y8
	VEXTRACTI64X4 $1, Z9, Y11
	VPADDW        Y11, Y9, Y9
	VPSLLW        $8, Y9, Y10
	VPSUBW        Y10, Y8, Y8
	VMOVDQU       Y8, (R8)
	VMOVDQU       Y9, 32(R8)
	VZEROUPPER
	RET
