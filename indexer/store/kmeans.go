package store

import (
	"math"
	"math/rand/v2"
	"slices"
	"sync"

	"github.com/vecside/vecside/kernels"
)

// Vectors is a training input: N vectors, each written into dst (in the
// codec's space: normalised for cosine) by Get.
type Vectors struct {
	N   int
	Get func(i int, dst []float32)
	All []float32 // all N, row-major, when they are held so: read in place
}

// k-means on a sample: at most KMeansSamplePer vectors per centroid are
// drawn, and at most kMeansIterations rounds of Lloyd's algorithm run,
// stopping early once fewer than kMeansConverged of the sample change
// centroid.
const (
	KMeansSamplePer  = 256
	kMeansIterations = 10
	kMeansConverged  = 0.005
)

// KMeans runs k-means with k centroids (fewer if there are fewer vectors)
// on a seeded sample of at most KMeansSamplePer·k of the vectors, on
// every core, and returns the centroids row-major. Centroids start at
// sample vectors; one left empty restarts at a random sample vector.
func KMeans(in Vectors, dims, k int, seed uint64) []float32 {
	rng := rand.New(rand.NewPCG(seed, 0x697666))
	m := min(in.N, KMeansSamplePer*k)
	sample := in.All
	if m < in.N || sample == nil { // a sample of its own, not a copy of all
		pick := rng.Perm(in.N)[:m]
		slices.Sort(pick) // read the source in order
		sample = make([]float32, m*dims)
		for i, p := range pick {
			in.Get(p, sample[i*dims:(i+1)*dims])
		}
	}
	k = min(k, m)
	cent := make([]float32, k*dims)
	for i, p := range rng.Perm(m)[:k] {
		copy(cent[i*dims:], sample[p*dims:(p+1)*dims])
	}
	assign := make([]int32, m)
	for it := range kMeansIterations {
		sums := make([]float64, k*dims)
		counts := make([]int, k)
		moved := 0
		var mu sync.Mutex
		Parallel(m, func(lo, hi int) {
			ps := make([]float64, k*dims)
			pc := make([]int, k)
			dist := make([]float32, k)
			pm := 0
			for i := lo; i < hi; i++ {
				v := sample[i*dims : (i+1)*dims]
				c := Nearest(v, cent, dist)
				if assign[i] != int32(c) || it == 0 {
					pm++
				}
				assign[i] = int32(c)
				pc[c]++
				row := ps[c*dims : (c+1)*dims]
				for j, f := range v {
					row[j] += float64(f)
				}
			}
			mu.Lock()
			for j := range sums {
				sums[j] += ps[j]
			}
			for j := range counts {
				counts[j] += pc[j]
			}
			moved += pm
			mu.Unlock()
		})
		for c := range k {
			row := cent[c*dims : (c+1)*dims]
			if counts[c] == 0 {
				p := rng.IntN(m)
				copy(row, sample[p*dims:(p+1)*dims])
				continue
			}
			for j := range row {
				row[j] = float32(sums[c*dims+j] / float64(counts[c]))
			}
		}
		if float64(moved) < kMeansConverged*float64(m) {
			break
		}
	}
	return cent
}

// ToCodecSpace copies v into dst, normalised for the cosine metric: the
// space the centroids live in.
func ToCodecSpace(m kernels.Metric, dst, v []float32) []float32 {
	dst = append(dst[:0], v...)
	if m == kernels.Cosine {
		if n := kernels.Dot(dst, dst); n > 0 {
			s := float32(1 / math.Sqrt(float64(n)))
			for i := range dst {
				dst[i] *= s
			}
		}
	}
	return dst
}

// Nearest returns the centroid nearest to v (in the codec's space) by L2,
// using dist (one per centroid) as scratch.
func Nearest(v, centroids, dist []float32) int {
	kernels.L2SqBlock(v, centroids, dist)
	best := 0
	for c, d := range dist {
		if d < dist[best] {
			best = c
		}
	}
	return best
}
