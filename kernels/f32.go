package kernels

import "math"

// smallDim is the largest length kept in pure Go: below it the call into
// assembly costs more than it saves.
const smallDim = 12

// maxChunkFloats bounds the work of one assembly call over a block (about
// 256 KiB of rows, some microseconds), because assembly is not preemptible
// and a long call would delay garbage-collection pauses.
const maxChunkFloats = 1 << 16

// f32Op selects the float32 kernel.
type f32Op uint8

const (
	opDot f32Op = iota
	opL2Sq
)

// Dot returns the sum of a[i]*b[i]. It panics if the lengths differ.
func Dot(a, b []float32) float32 {
	checkLen(len(a), len(b))
	return pairF32(opDot, a, b)
}

// L2Sq returns the squared Euclidean distance, the sum of (a[i]-b[i])^2. It
// panics if the lengths differ.
func L2Sq(a, b []float32) float32 {
	checkLen(len(a), len(b))
	return pairF32(opL2Sq, a, b)
}

// CosineDistance returns 1 - Dot(a,b)/(|a||b|) as pgvector's <=> does: NaN
// when either vector has zero norm, the similarity clamped to [-1, 1].
func CosineDistance(a, b []float32) float32 {
	checkLen(len(a), len(b))
	return cosine(pairF32(opDot, a, b), pairF32(opDot, a, a), pairF32(opDot, b, b))
}

func cosine(ab, aa, bb float32) float32 {
	den := math.Sqrt(float64(aa) * float64(bb))
	if den == 0 {
		return float32(math.NaN())
	}
	sim := math.Max(-1, math.Min(1, float64(ab)/den))
	return float32(1 - sim)
}

// DotBlock sets out[j] = Dot(q, block[j*len(q):(j+1)*len(q)]) for each of the
// len(out) rows of the row-major block; it panics unless
// len(block) == len(q)*len(out).
func DotBlock(q, block, out []float32) {
	checkBlock(q, block, out)
	blockF32(opDot, q, block, out)
}

// L2SqBlock is DotBlock for the squared Euclidean distance.
func L2SqBlock(q, block, out []float32) {
	checkBlock(q, block, out)
	blockF32(opL2Sq, q, block, out)
}

// CosineBlock is DotBlock for the cosine distance. It reads the block twice
// (dot products, then row norms); an index that stores unit vectors should
// use DotBlock and 1-dot instead.
func CosineBlock(q, block, out []float32) {
	checkBlock(q, block, out)
	blockF32(opDot, q, block, out)
	d := len(q)
	qq := pairF32(opDot, q, q)
	for j := range out {
		row := block[j*d : (j+1)*d]
		out[j] = cosine(out[j], qq, pairF32(opDot, row, row))
	}
}

// blockF32 feeds the block to the active implementation in chunks of at most
// maxChunkFloats.
func blockF32(op f32Op, q, block, out []float32) {
	d := len(q)
	if d == 0 {
		clear(out)
		return
	}
	rows := max(1, maxChunkFloats/d)
	for len(out) > 0 {
		n := min(rows, len(out))
		blockF32Impl(op, q, block[:n*d], out[:n])
		block, out = block[n*d:], out[n:]
	}
}

func checkLen(a, b int) {
	if a != b {
		panic("kernels: vector lengths differ")
	}
}

func checkBlock(q, block, out []float32) {
	if len(block) != len(q)*len(out) {
		panic("kernels: block length is not len(q)*len(out)")
	}
}

// pairGo is the pure-Go twin of the float32 kernels: eight independent
// partial sums break the dependency chain through one accumulator.
func pairGo(op f32Op, a, b []float32) float32 {
	b = b[:len(a)]
	var s [8]float32
	i := 0
	if op == opDot {
		for ; i+8 <= len(a); i += 8 {
			a8, b8 := (*[8]float32)(a[i:]), (*[8]float32)(b[i:])
			s[0] += a8[0] * b8[0]
			s[1] += a8[1] * b8[1]
			s[2] += a8[2] * b8[2]
			s[3] += a8[3] * b8[3]
			s[4] += a8[4] * b8[4]
			s[5] += a8[5] * b8[5]
			s[6] += a8[6] * b8[6]
			s[7] += a8[7] * b8[7]
		}
		for ; i < len(a); i++ {
			s[0] += a[i] * b[i]
		}
	} else {
		for ; i+8 <= len(a); i += 8 {
			a8, b8 := (*[8]float32)(a[i:]), (*[8]float32)(b[i:])
			d0, d1, d2, d3 := a8[0]-b8[0], a8[1]-b8[1], a8[2]-b8[2], a8[3]-b8[3]
			d4, d5, d6, d7 := a8[4]-b8[4], a8[5]-b8[5], a8[6]-b8[6], a8[7]-b8[7]
			s[0] += d0 * d0
			s[1] += d1 * d1
			s[2] += d2 * d2
			s[3] += d3 * d3
			s[4] += d4 * d4
			s[5] += d5 * d5
			s[6] += d6 * d6
			s[7] += d7 * d7
		}
		for ; i < len(a); i++ {
			d := a[i] - b[i]
			s[0] += d * d
		}
	}
	return ((s[0] + s[1]) + (s[2] + s[3])) + ((s[4] + s[5]) + (s[6] + s[7]))
}

// blockGo applies pairGo to each row of block.
func blockGo(op f32Op, q, block, out []float32) {
	d := len(q)
	for j := range out {
		out[j] = pairGo(op, q, block[j*d:(j+1)*d])
	}
}
