//go:build amd64 && gc && !noasm

package kernels

import "github.com/klauspost/cpuid/v2"

const buildFlavour = "amd64 assembly"

var (
	hasAVX2    = cpuid.CPU.Supports(cpuid.AVX2)
	hasAVX2FMA = hasAVX2 && cpuid.CPU.Supports(cpuid.FMA3)
	hasAVX512F = cpuid.CPU.Supports(cpuid.AVX512F)
	// The byte kernels use masked byte loads, VPSRLVW and VPSHUFB on ZMM.
	hasAVX512BW   = hasAVX512F && cpuid.CPU.Supports(cpuid.AVX512BW)
	hasAVX512VNNI = hasAVX512BW && cpuid.CPU.Supports(cpuid.AVX512VNNI)
)

var (
	f32Family = newFamily("f32", "go",
		implChoice{isaAVX512, "avx512", hasAVX512F},
		implChoice{isaAVX2, "avx2fma", hasAVX2FMA})
	intFamily = newFamily("int8", "go",
		implChoice{isaAVX512, "avx512vnni", hasAVX512VNNI},
		implChoice{isaAVX2, "avx2", hasAVX2})
	scanFamily = newFamily("fastscan", "go-popcount",
		implChoice{isaAVX512, "avx512bw", hasAVX512BW},
		implChoice{isaAVX2, "avx2", hasAVX2})
)

// The assembly functions are declared in the generated f32_amd64.go,
// int8_amd64.go, scan_amd64.go and prefetch_amd64.go (see doc.go).

func pairF32(op f32Op, a, b []float32) float32 {
	if len(a) > smallDim {
		switch {
		case f32Family.active == isaAVX512 && op == opDot:
			return dotAVX512(&a[0], &b[0], len(a))
		case f32Family.active == isaAVX512:
			return l2SqAVX512(&a[0], &b[0], len(a))
		case f32Family.active == isaAVX2 && op == opDot:
			return dotAVX2(&a[0], &b[0], len(a))
		case f32Family.active == isaAVX2:
			return l2SqAVX2(&a[0], &b[0], len(a))
		}
	}
	return pairGo(op, a, b)
}

// blockF32Impl runs one chunk; len(q) > 0 and len(out) > 0.
func blockF32Impl(op f32Op, q, block, out []float32) {
	if d := len(q); d > smallDim && f32Family.active != isaGo {
		distF32(&q[0], &block[0], d, len(out), &out[0], f32Kind(op))
		return
	}
	blockGo(op, q, block, out)
}

// f32Kind is the kind argument of distF32 for op and the active
// implementation.
func f32Kind(op f32Op) int {
	kind := 0
	if op == opL2Sq {
		kind = kindL2Sq
	}
	if f32Family.active == isaAVX512 {
		kind |= kindAVX512
	}
	return kind
}

// fwhtHead runs the first stages of an unscaled Walsh-Hadamard transform
// of x (a power of two long) in one pass, and returns the width of the
// next stage.
func fwhtHead(x []float32) int {
	if len(x) >= 16 && hasAVX2FMA && f32Family.active != isaGo {
		fwht16AVX2(&x[0], len(x))
		return 16
	}
	return fwhtHeadGo(x)
}

// quantize sets dst to src·inv rounded half to even and clamped to
// ±levels, and returns their sum (see quantizeSym).
func quantize(dst []int8, src []float32, inv float32, levels int32) int32 {
	head := 0
	var sum int32
	if f32Family.active == isaAVX512 {
		if head = len(src) &^ 15; head > 0 {
			sum = quantizeAVX512(&dst[0], &src[0], head, inv, levels)
		}
	}
	return sum + quantizeGo(dst[head:], src[head:], inv, levels)
}

// butterfly sets a, b = a+b, a−b element-wise (len(a) == len(b)).
func butterfly(a, b []float32) {
	head := vectorHead(len(a), func(i, n, kind int) { rotateStep(&a[i], &b[i], n, kind) })
	butterflyGo(a[head:], b[head:len(a)])
}

// mulInto sets x *= s element-wise (len(x) == len(s)).
func mulInto(x, s []float32) {
	head := vectorHead(len(x), func(i, n, kind int) { rotateStep(&x[i], &s[i], n, kind|kindMul) })
	mulGo(x[head:], s[head:len(x)])
}

// scaleInto sets x *= s element-wise.
func scaleInto(x []float32, s float32) {
	head := vectorHead(len(x), func(i, n, kind int) { scaleF32(&x[i], n, s, kind) })
	scaleGo(x[head:], s)
}

// gridU4 writes to dst the grid points of the 4-bit codes packed by
// packU4 in ext (len(dst) = 2·len(ext)) and returns the sum of their
// squares.
func gridU4(dst []float32, ext []byte) float32 {
	if !hasAVX2FMA || f32Family.active == isaGo {
		return gridU4Go(dst, ext)
	}
	chunks := len(dst) / (2 * u4Chunk)
	head, sq := chunks*2*u4Chunk, float32(0)
	if chunks > 0 {
		sq = gridU4AVX2(&dst[0], &ext[0], chunks)
	}
	if m := (len(dst) - head) / 2; m > 0 {
		// A short chunk goes through the kernel too, zero-padded to a
		// whole one (in Go it was half a 100-d row's decoding): each pad
		// decodes to −7.5, whose square comes back off exactly.
		var codes [u4Chunk]byte
		var points [2 * u4Chunk]float32
		copy(codes[:], ext[head/2:])
		sq += gridU4AVX2(&points[0], &codes[0], 1) - float32(2*(u4Chunk-m))*56.25
		copy(dst[head:head+m], points[:m])
		copy(dst[head+m:], points[u4Chunk:u4Chunk+m])
	}
	return sq
}

// gridSums is gridSumsGo, its head in vectors (bestScale runs it 26
// times a row encoded: at 1,536 dimensions 140 µs of the row's 160 in Go,
// the whole kernel a few).
func gridSums(a []float32, lambda float32, top int32) (yr, yy float64) {
	head := 0
	var sums [2]float32
	switch {
	case f32Family.active == isaAVX512:
		if head = len(a) &^ 31; head > 0 {
			gridSumsAVX512(&a[0], head, lambda, top, &sums)
		}
	case hasAVX2FMA && f32Family.active != isaGo:
		if head = len(a) &^ 15; head > 0 {
			gridSumsAVX2(&a[0], head, lambda, top, &sums)
		}
	}
	yr, yy = gridSumsGo(a[head:], lambda, top)
	return yr + float64(sums[0]), yy + float64(sums[1])
}

// scaleAddInto sets x = x·s + y element-wise (len(x) == len(y)).
func scaleAddInto(x, y []float32, s float32) {
	head := 0
	if hasAVX2FMA && f32Family.active != isaGo {
		if head = len(x) &^ 7; head > 0 {
			scaleAddAVX2(&x[0], &y[0], head, s)
		}
	}
	scaleAddGo(x[head:], y[head:len(x)], s)
}

// vectorHead runs kernel(i, n, kind) over the longest head of a length l
// in whole vectors of the active ISA, of the kind of their width, and
// returns the head's length; the Go version does the rest.
func vectorHead(l int, kernel func(i, n, kind int)) int {
	head := 0
	switch f32Family.active {
	case isaAVX512:
		if head = l &^ 15; head > 0 {
			kernel(0, head, kindAVX512)
		}
		if more := (l - head) &^ 7; more > 0 && hasAVX2 {
			kernel(head, more, 0)
			head += more
		}
	case isaAVX2:
		if head = l &^ 7; head > 0 {
			kernel(0, head, 0)
		}
	}
	return head
}

func dotU8I8Impl(a []byte, b []int8) int32 {
	if len(a) > smallDim {
		switch intFamily.active {
		case isaAVX512:
			return dotU8I8AVX512(&a[0], &b[0], len(a))
		case isaAVX2:
			head := len(a) &^ 31
			if head == 0 {
				break
			}
			return dotU8I8AVX2(&a[0], &b[0], head) + dotU8I8Go(a[head:], b[head:])
		}
	}
	return dotU8I8Go(a, b)
}

func dotU4I8Impl(a []byte, b []int8) int32 {
	return chunkedDot(a, b, u4Chunk, 2, dotU4I8AVX512, dotU4I8AVX2, dotU4I8Go)
}

func dotU2I8Impl(a []byte, b []int8) int32 {
	return chunkedDot(a, b, u2Chunk, 4, dotU2I8AVX512, dotU2I8AVX2, dotU2I8Go)
}

// chunkedDot runs the active ISA's kernel over the codes packed perByte to
// a byte in chunks of chunk bytes: the AVX-512 kernel over all of them, its
// masked loads reading a final short chunk too; the AVX2 one over the
// whole chunks, leaving a short tail to the Go version (at 100 dimensions
// a third of the codes, which in Go cost more than the rest together).
func chunkedDot(a []byte, b []int8, chunk, perByte int, avx512 func(*byte, *int8, int, int) int32, avx2 func(*byte, *int8, int) int32, tail func([]byte, []int8) int32) int32 {
	chunks := len(a) / chunk
	switch {
	case len(a) == 0:
		return 0
	case intFamily.active == isaAVX512:
		return avx512(&a[0], &b[0], chunks, len(a)-chunks*chunk)
	case chunks == 0 || intFamily.active == isaGo:
		return tail(a, b)
	}
	sum := avx2(&a[0], &b[0], chunks)
	if head := chunks * chunk; head < len(a) {
		sum += tail(a[head:], b[perByte*head:])
	}
	return sum
}

// scanBlock sets out[v] to the table sum of vector v of a fast-scan block.
func scanBlock(q *scanQuery, codes []byte, out *[BlockVectors]uint32) {
	if scanFamily.active == isaGo {
		scanPopcount(q, codes, out)
		return
	}
	_ = codes[BlockBytes(q.cols)-1]
	*out = [BlockVectors]uint32{}
	var part [BlockVectors]uint16
	for c := 0; c < q.cols; c += maxScanCols {
		n := min(maxScanCols, q.cols-c)
		if scanFamily.active == isaAVX512 {
			fastScanAVX512(&codes[c*BlockVectors], &q.lut[c*64], n, &part)
		} else {
			fastScanAVX2(&codes[c*BlockVectors], &q.lut[c*64], n, &part)
		}
		for i, v := range part {
			out[i] += uint32(v)
		}
	}
}
