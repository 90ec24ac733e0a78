package kernels

import (
	"math"
	"math/rand/v2"
	"slices"
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

// The rotation's kernels give the textbook transform's results bit for
// bit, and the element-wise ones the Go versions' at every length (whole
// vectors and a tail), touching nothing past the slices they are given.
func TestRotationKernels(t *testing.T) {
	forEachImpl(t, f32Family, func(t *testing.T) {
		rng := rand.New(rand.NewPCG(1, 2))
		for n := 1; n <= 1024; n *= 2 {
			x := make([]float32, n)
			for i := range x {
				x[i] = float32(rng.NormFloat64())
			}
			want := slices.Clone(x)
			for h := 1; h < n; h *= 2 { // stage by stage, then scaled
				for i := 0; i < n; i += 2 * h {
					for j := i; j < i+h; j++ {
						want[j], want[j+h] = want[j]+want[j+h], want[j]-want[j+h]
					}
				}
			}
			s := float32(1 / math.Sqrt(float64(n)))
			for i := range want {
				want[i] *= s
			}
			fwht(x)
			for i := range x {
				if math.Float32bits(x[i]) != math.Float32bits(want[i]) {
					t.Fatalf("fwht, n=%d, element %d: got %v, want %v", n, i, x[i], want[i])
				}
			}
		}
		fill := func(n int) []float32 {
			v := make([]float32, n)
			for i := range v {
				v[i] = float32(rng.NormFloat64())
			}
			return v
		}
		for n := 1; n <= 80; n++ {
			a, b, s := fill(n+16), fill(n+16), fill(n+16)
			wantA, wantB, wantX := slices.Clone(a), slices.Clone(b), slices.Clone(a)
			butterflyGo(wantA[:n], wantB[:n])
			mulGo(wantX[:n], s[:n])
			x := slices.Clone(a)
			butterfly(a[:n], b[:n])
			mulInto(x[:n], s[:n])
			for i := range a {
				if math.Float32bits(a[i]) != math.Float32bits(wantA[i]) || math.Float32bits(b[i]) != math.Float32bits(wantB[i]) {
					t.Fatalf("butterfly, n=%d, element %d: got %v %v, want %v %v", n, i, a[i], b[i], wantA[i], wantB[i])
				}
				if math.Float32bits(x[i]) != math.Float32bits(wantX[i]) {
					t.Fatalf("mulInto, n=%d, element %d: got %v, want %v", n, i, x[i], wantX[i])
				}
			}
		}
	})
}

// quantize gives quantizeGo's codes and sum at every length, halves
// rounded to even and values past ±levels clamped.
func TestQuantizeKernels(t *testing.T) {
	forEachImpl(t, f32Family, func(t *testing.T) {
		rng := rand.New(rand.NewPCG(3, 4))
		for n := 1; n <= 80; n++ {
			src := make([]float32, n)
			for i := range src {
				switch i % 4 {
				case 0:
					src[i] = float32(rng.IntN(300)-150) + 0.5 // ties, some past the levels
				default:
					src[i] = float32(rng.NormFloat64() * 60)
				}
			}
			for _, levels := range []int32{127, 15} {
				for _, inv := range []float32{1, 0.75} { // 1 leaves the ties
					want, got := make([]int8, n+8), make([]int8, n+8)
					wantSum := quantizeGo(want[:n], src, inv, levels)
					gotSum := quantize(got[:n], src, inv, levels)
					if gotSum != wantSum || !slices.Equal(got, want) {
						t.Fatalf("n=%d levels=%d inv=%v: sum %d codes %v, want %d %v", n, levels, inv, gotSum, got, wantSum, want)
					}
				}
			}
		}
	})
}

// maxAbs is the largest magnitude at every length and position, signs,
// zeros of both signs, infinities and NaN included.
func TestMaxAbs(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 6))
	for n := 0; n <= 40; n++ {
		src := make([]float32, n)
		for i := range src {
			src[i] = float32(rng.NormFloat64())
		}
		for at := range n {
			for _, v := range []float32{-9, 9, float32(math.Copysign(0, -1)), float32(math.Inf(-1))} {
				s := slices.Clone(src)
				s[at] = v
				want := float32(0)
				for _, x := range s {
					want = max(want, float32(math.Abs(float64(x))))
				}
				if got := maxAbs(s); got != want {
					t.Fatalf("n=%d, %v at %d: maxAbs %v, want %v", n, v, at, got, want)
				}
			}
		}
		if n > 0 {
			s := slices.Clone(src)
			s[n/2] = float32(math.NaN())
			if got := maxAbs(s); !math.IsNaN(float64(got)) {
				t.Fatalf("n=%d with a NaN: maxAbs %v, want NaN", n, got)
			}
		}
	}
}
