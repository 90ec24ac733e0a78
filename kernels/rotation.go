package kernels

import (
	"math"
	"math/bits"
)

// DefaultRotationRounds is the number of rounds of a Rotation.
const DefaultRotationRounds = 4

// Rotation is a seeded random orthogonal transform of R^dim built from
// rounds of random sign flips and normalised fast Walsh-Hadamard transforms.
// When dim is not a power of two, each round transforms the first and then
// the last L = 2^floor(log2 dim) coordinates (two overlapping blocks, each
// step orthogonal on the whole space), and ends with a butterfly that mixes
// the two halves of the vector, so every output depends on every input after
// the first round. Vectors keep their dimension: no padding, no wasted code
// bits. A Rotation is immutable and safe for concurrent use; it is fully
// determined by (dim, rounds, seed), which is what a checkpoint stores.
type Rotation struct {
	dim, rounds int
	seed        uint64
	signs       []float32 // per round: dim signs, then dim more when L < dim
}

// NewRotation returns the rotation of R^dim drawn from seed.
func NewRotation(dim, rounds int, seed uint64) *Rotation {
	if dim <= 0 || rounds <= 0 {
		panic("kernels: rotation needs dim > 0 and rounds > 0")
	}
	r := &Rotation{dim: dim, rounds: rounds, seed: seed}
	perRound := dim
	if r.pow2() < dim {
		perRound = 2 * dim
	}
	r.signs = make([]float32, rounds*perRound)
	state := seed
	var word uint64
	for i := range r.signs {
		if i%64 == 0 {
			word = splitmix64(&state)
		}
		r.signs[i] = 1 - 2*float32(word>>(i%64)&1)
	}
	return r
}

// splitmix64 is the SplitMix64 generator: tiny, and fixed forever, so a seed
// stored in a checkpoint always rebuilds the same rotation.
func splitmix64(state *uint64) uint64 {
	*state += 0x9e3779b97f4a7c15
	z := *state
	z = (z ^ z>>30) * 0xbf58476d1ce4e5b9
	z = (z ^ z>>27) * 0x94d049bb133111eb
	return z ^ z>>31
}

// pow2 returns the largest power of two not above dim.
func (r *Rotation) pow2() int { return 1 << (bits.Len(uint(r.dim)) - 1) }

// Dim returns the dimension the rotation acts on.
func (r *Rotation) Dim() int { return r.dim }

// Apply rotates x in place; len(x) must be Dim().
func (r *Rotation) Apply(x []float32) {
	if len(x) != r.dim {
		panic("kernels: rotation dimension mismatch")
	}
	n, l := r.dim, r.pow2()
	signs := r.signs
	for range r.rounds {
		mulInto(x, signs[:n])
		fwht(x[:l])
		signs = signs[n:]
		if l < n {
			mulInto(x, signs[:n])
			fwht(x[n-l:])
			signs = signs[n:]
			halfButterfly(x)
		}
	}
}

func mulGo(x, s []float32) {
	s = s[:len(x)]
	for i := range x {
		x[i] *= s[i]
	}
}

func scaleGo(x []float32, s float32) {
	for i := range x {
		x[i] *= s
	}
}

func butterflyGo(a, b []float32) {
	b = b[:len(a)]
	for j := range a {
		a[j], b[j] = a[j]+b[j], a[j]-b[j]
	}
}

// fwht is the fast Walsh-Hadamard transform scaled by 1/sqrt(len(x)), which
// makes it orthogonal; len(x) is a power of two. The first stages run as
// one pass (fwhtHead: 8-point transforms in Go, 16-point with AVX2), the
// others as element-wise butterflies, all computing each output as the
// same a+b or a−b, so every implementation gives the same bits.
func fwht(x []float32) {
	n := len(x)
	for h := fwhtHead(x); h < n; h *= 2 {
		for i := 0; i < n; i += 2 * h {
			butterfly(x[i:i+h], x[i+h:i+2*h])
		}
	}
	scaleInto(x, float32(1/math.Sqrt(float64(n))))
}

// fwhtHeadGo runs the stages h = 1, 2, 4 of fwht as one pass of 8-point
// transforms (stage by stage, their slices of one or two elements cost
// more than the arithmetic), and returns the width of the next stage.
func fwhtHeadGo(x []float32) int {
	if len(x) < 8 {
		return 1
	}
	for i := 0; i+8 <= len(x); i += 8 {
		fwht8((*[8]float32)(x[i : i+8]))
	}
	return 8
}

// fwht8 is the unscaled Walsh-Hadamard transform of 8 elements: the
// stages h = 1, 2, 4 of fwht.
func fwht8(v *[8]float32) {
	a0, a1 := v[0]+v[1], v[0]-v[1]
	a2, a3 := v[2]+v[3], v[2]-v[3]
	a4, a5 := v[4]+v[5], v[4]-v[5]
	a6, a7 := v[6]+v[7], v[6]-v[7]
	b0, b2 := a0+a2, a0-a2
	b1, b3 := a1+a3, a1-a3
	b4, b6 := a4+a6, a4-a6
	b5, b7 := a5+a7, a5-a7
	v[0], v[4] = b0+b4, b0-b4
	v[1], v[5] = b1+b5, b1-b5
	v[2], v[6] = b2+b6, b2-b6
	v[3], v[7] = b3+b7, b3-b7
}

// halfButterfly rotates each pair (x[i], x[i+h]), h = len(x)/2, by 45
// degrees (a Kac-walk step); an odd last coordinate is left alone.
func halfButterfly(x []float32) {
	h := len(x) / 2
	a, b := x[:h], x[h:2*h]
	const s = math.Sqrt2 / 2
	for i := range a {
		a[i], b[i] = (a[i]+b[i])*s, (a[i]-b[i])*s
	}
}
