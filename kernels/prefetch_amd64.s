//go:build amd64 && gc && !noasm

// prefetch: PREFETCHT0 of the cache line at p. A prefetch never faults and
// changes no architectural state.

#include "textflag.h"

// func prefetch(p *byte)
TEXT ·prefetch(SB), NOSPLIT, $0-8
	MOVQ p+0(FP), AX
	PREFETCHT0 (AX)
	RET
