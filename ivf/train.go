package ivf

import (
	"math"
	"math/rand/v2"
	"slices"
	"sync"

	"github.com/vecside/vecside/internal/store"
)

// ListsFor is the number of lists for a table of n rows:
//
//	lists(n) = n / (1000 * sqrt(1 + n/16e6)), at least 1
//
// which is about n/1000 for small tables (a list of a thousand rows is a
// few dozen fast-scan blocks) and grows like 4*sqrt(n) for large ones,
// with no step between the two regimes: 60k rows get 60 lists, 1M get
// 970, 100M get 37,000.
func ListsFor(n int) int {
	l := float64(n) / (1000 * math.Sqrt(1+float64(n)/16e6))
	return max(1, int(math.Round(l)))
}

// SampleFor is how many rows training wants from a table of n rows of
// dims dimensions, read before the copy. Until the copy is in, the sample
// and its working copy are most of what the process holds, so they are
// sized against the index they train: about a quarter of its bytes (at
// least 8 MiB, at most 64 MiB of vectors), and between 40 rows per list,
// below which k-means places centroids poorly, and 256, above which it
// gains nothing. A small table is read whole.
func SampleFor(n, dims int) int {
	lists := ListsFor(n)
	perRow := int(0.19*4*float64(dims)) + 60 // the compact store's bytes per row
	budget := min(maxSampleBytes, max(minSampleBytes, n/4*perRow))
	return min(n, max(minPerList*lists, min(samplePerList*lists, budget/(4*dims))))
}

const (
	minSampleBytes = 8 << 20
	maxSampleBytes = 64 << 20
	// minPerList and samplePerList bound the k-means training sample per
	// centroid.
	minPerList    = 40
	samplePerList = 256
	// iterations of Lloyd's algorithm on the sample, at most: training
	// stops early once fewer than converged of the sample change lists.
	iterations = 10
	converged  = 0.005
)

// vectors reads the training input: n vectors, each in the codec's space
// (normalised for cosine), written into dst.
type vectors struct {
	n   int
	get func(i int, dst []float32)
	all []float32 // all n, row-major, when they are held so: read in place
}

// train returns k centroids for sample (converted to the codec's space):
// k-means, then every list of the sample over listCap times the mean split
// in two until none is; and the margin adaptive probing needs on this
// data, learned from the sample of a table of rows rows (see
// learnMargin).
func train(cfg store.CodedConfig, sample [][]float32, k int, listCap float64, rows, minProbes int, seed uint64) ([]float32, float64) {
	n, d := len(sample), cfg.Dims
	space := make([]float32, n*d)
	for i, v := range sample {
		store.ToCodecSpace(cfg.Metric, space[i*d:i*d], v) // in place
	}
	in := vectors{n: n, all: space, get: func(i int, dst []float32) { copy(dst, space[i*d:(i+1)*d]) }}
	k = max(1, min(k, n))
	cent := trainCentroids(in, d, k, seed)
	assign := assignAll(in, d, cent)
	limit := int(math.Ceil(listCap * float64(n) / float64(k)))
	cent, assign = splitOversized(in, d, cent, assign, limit, seed)
	return cent, learnMargin(space, d, cent, assign, rows, minProbes, seed)
}

// trainCentroids runs k-means with k centroids on a seeded sample of at
// most samplePerList*k of the vectors, on every core, and returns the
// centroids row-major.
func trainCentroids(in vectors, dims, k int, seed uint64) []float32 {
	rng := rand.New(rand.NewPCG(seed, 0x697666))
	m := min(in.n, samplePerList*k)
	sample := in.all
	if m < in.n || sample == nil {
		pick := rng.Perm(in.n)[:m]
		slices.Sort(pick) // read the source in order
		sample = make([]float32, m*dims)
		for i, p := range pick {
			in.get(p, sample[i*dims:(i+1)*dims])
		}
	}
	k = min(k, m)
	cent := make([]float32, k*dims)
	for i, p := range rng.Perm(m)[:k] {
		copy(cent[i*dims:], sample[p*dims:(p+1)*dims])
	}
	assign := make([]int32, m)
	for it := range iterations {
		sums := make([]float64, k*dims)
		counts := make([]int, k)
		moved := 0
		var mu sync.Mutex
		store.Parallel(m, func(lo, hi int) {
			ps := make([]float64, k*dims)
			pc := make([]int, k)
			dist := make([]float32, k)
			pm := 0
			for i := lo; i < hi; i++ {
				v := sample[i*dims : (i+1)*dims]
				c := store.Nearest(v, cent, dist)
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
				// An empty cluster restarts at a random sample point.
				p := rng.IntN(m)
				copy(row, sample[p*dims:(p+1)*dims])
				continue
			}
			for j := range row {
				row[j] = float32(sums[c*dims+j] / float64(counts[c]))
			}
		}
		if float64(moved) < converged*float64(m) {
			break
		}
	}
	return cent
}

// assignAll returns the nearest centroid of every vector, on every core.
func assignAll(in vectors, dims int, cent []float32) []int32 {
	out := make([]int32, in.n)
	k := len(cent) / dims
	store.Parallel(in.n, func(lo, hi int) {
		v := make([]float32, dims)
		dist := make([]float32, k)
		for i := lo; i < hi; i++ {
			in.get(i, v)
			out[i] = int32(store.Nearest(v, cent, dist))
		}
	})
	return out
}

// splitOversized splits every list of more than limit vectors in two,
// with 2-means on its members, until none is over the limit, and drops
// empty lists. It returns the new centroids and assignment.
func splitOversized(in vectors, dims int, cent []float32, assign []int32, limit int, seed uint64) ([]float32, []int32) {
	k := len(cent) / dims
	members := make([][]int, k)
	for i, c := range assign {
		members[c] = append(members[c], i)
	}
	var out [][]int
	var outCent []float32
	v := make([]float32, dims)
	for c := 0; c < len(members); c++ {
		m := members[c]
		if len(m) == 0 {
			continue
		}
		if len(m) <= limit {
			out = append(out, m)
			outCent = append(outCent, cent[c*dims:(c+1)*dims]...)
			continue
		}
		sub := vectors{n: len(m), get: func(i int, dst []float32) { in.get(m[i], dst) }}
		two := trainCentroids(sub, dims, 2, seed+uint64(c))
		halves := [2][]int{}
		dist := make([]float32, 2)
		for _, i := range m {
			in.get(i, v)
			h := store.Nearest(v, two, dist)
			halves[h] = append(halves[h], i)
		}
		if len(halves[0]) == 0 || len(halves[1]) == 0 {
			// Identical vectors cannot be split: keep the list whole.
			out = append(out, m)
			outCent = append(outCent, cent[c*dims:(c+1)*dims]...)
			continue
		}
		// Both halves go back on the worklist: they may still be too big.
		members = append(members, halves[0], halves[1])
		cent = append(cent, two...)
	}
	newAssign := make([]int32, len(assign))
	for c, m := range out {
		for _, i := range m {
			newAssign[i] = int32(c)
		}
	}
	return outCent, newAssign
}
