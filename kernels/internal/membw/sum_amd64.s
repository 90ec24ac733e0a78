//go:build amd64 && !noasm

// sumSSE2 adds the 64-bit words of n bytes (n a positive multiple of 128) in
// eight independent SSE2 accumulators, wrapping modulo 2^64.

#include "textflag.h"

// func sumSSE2(p *byte, n int) uint64
TEXT ·sumSSE2(SB), NOSPLIT, $0-24
	MOVQ  p+0(FP), SI
	MOVQ  n+8(FP), CX
	PXOR  X0, X0
	PXOR  X1, X1
	PXOR  X2, X2
	PXOR  X3, X3
	PXOR  X4, X4
	PXOR  X5, X5
	PXOR  X6, X6
	PXOR  X7, X7

loop:
	PADDQ 0(SI), X0
	PADDQ 16(SI), X1
	PADDQ 32(SI), X2
	PADDQ 48(SI), X3
	PADDQ 64(SI), X4
	PADDQ 80(SI), X5
	PADDQ 96(SI), X6
	PADDQ 112(SI), X7
	ADDQ  $128, SI
	SUBQ  $128, CX
	JNZ   loop

	PADDQ  X1, X0
	PADDQ  X3, X2
	PADDQ  X5, X4
	PADDQ  X7, X6
	PADDQ  X2, X0
	PADDQ  X6, X4
	PADDQ  X4, X0
	PSHUFD $0x4e, X0, X1
	PADDQ  X1, X0
	MOVQ   X0, AX
	MOVQ   AX, ret+16(FP)
	RET
