package kernels

import (
	"math"
	"math/rand/v2"
	"testing"
)

func dot64(a, b []float32) float64 {
	var s float64
	for i := range a {
		s += float64(a[i]) * float64(b[i])
	}
	return s
}

// TestRotationOrthogonal checks that rotations preserve norms and inner
// products (relative error 1e-5), for powers of two and other dimensions,
// and that they are not the identity.
func TestRotationOrthogonal(t *testing.T) {
	r := rand.New(rand.NewPCG(21, 22))
	for _, dim := range []int{1, 2, 3, 7, 64, 100, 128, 384, 520, 768, 784, 1000, 1536} {
		rot := NewRotation(dim, DefaultRotationRounds, 42)
		for range 5 {
			a, b := randF32(r, dim, f32Gens[0]), randF32(r, dim, f32Gens[0])
			ra, rb := append([]float32(nil), a...), append([]float32(nil), b...)
			rot.Apply(ra)
			rot.Apply(rb)
			scale := math.Sqrt(dot64(a, a) * dot64(b, b))
			if d := math.Abs(dot64(ra, rb) - dot64(a, b)); d > 1e-5*scale {
				t.Errorf("dim %d: inner product %g became %g", dim, dot64(a, b), dot64(ra, rb))
			}
			if d := math.Abs(dot64(ra, ra) - dot64(a, a)); d > 1e-5*dot64(a, a) {
				t.Errorf("dim %d: squared norm %g became %g", dim, dot64(a, a), dot64(ra, ra))
			}
		}
		// A basis vector must spread over many coordinates (for dim >= 64:
		// none keeps more than a quarter of the energy).
		if dim >= 64 {
			e := make([]float32, dim)
			e[dim-1] = 1
			rot.Apply(e)
			for i, v := range e {
				if v*v > 0.25 {
					t.Errorf("dim %d: rotated basis vector keeps %g of its energy at %d", dim, v*v, i)
				}
			}
		}
	}
}

func TestRotationSeeded(t *testing.T) {
	x := make([]float32, 100)
	x[3] = 1
	a, b, c := append([]float32(nil), x...), append([]float32(nil), x...), append([]float32(nil), x...)
	NewRotation(100, 4, 7).Apply(a)
	NewRotation(100, 4, 7).Apply(b)
	NewRotation(100, 4, 8).Apply(c)
	for i := range a {
		if a[i] != b[i] {
			t.Fatalf("same seed gave different rotations at %d: %g vs %g", i, a[i], b[i])
		}
	}
	if dot64(a, c) > 0.9 {
		t.Errorf("different seeds gave nearly the same rotation (cos %g)", dot64(a, c))
	}
}
