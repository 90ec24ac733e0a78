package ivf

import (
	"math"

	"github.com/vecside/vecside/indexer/store"
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
	samplePerList = store.KMeansSamplePer
)

// train returns k centroids for sample (converted to the codec's space):
// k-means, then every list of the sample over listCap times the mean split
// in two until none is; and the margin adaptive probing needs on this
// data at each depth, learned from the sample of a table of rows rows (see
// learnMargin).
func train(cfg store.CodedConfig, sample [][]float32, k int, listCap float64, rows, minProbes int, seed uint64) ([]float32, margins) {
	n, d := len(sample), cfg.Dims
	space := make([]float32, n*d)
	for i, v := range sample {
		store.ToCodecSpace(cfg.Metric, space[i*d:i*d], v) // in place
	}
	in := store.Vectors{N: n, All: space, Get: func(i int, dst []float32) { copy(dst, space[i*d:(i+1)*d]) }}
	k = max(1, min(k, n))
	cent := store.KMeans(in, d, k, seed)
	assign := assignAll(in, d, cent)
	limit := int(math.Ceil(listCap * float64(n) / float64(k)))
	cent, assign = splitOversized(in, d, cent, assign, limit, seed)
	return cent, learnMargin(space, d, cent, assign, rows, minProbes, seed)
}

// assignAll returns the nearest centroid of every vector, on every core.
func assignAll(in store.Vectors, dims int, cent []float32) []int32 {
	out := make([]int32, in.N)
	k := len(cent) / dims
	store.Parallel(in.N, func(lo, hi int) {
		v := make([]float32, dims)
		dist := make([]float32, k)
		for i := lo; i < hi; i++ {
			in.Get(i, v)
			out[i] = int32(store.Nearest(v, cent, dist))
		}
	})
	return out
}

// splitOversized splits every list of more than limit vectors in two,
// with 2-means on its members, until none is over the limit, and drops
// empty lists. It returns the new centroids and assignment.
func splitOversized(in store.Vectors, dims int, cent []float32, assign []int32, limit int, seed uint64) ([]float32, []int32) {
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
		sub := store.Vectors{N: len(m), Get: func(i int, dst []float32) { in.Get(m[i], dst) }}
		two := store.KMeans(sub, dims, 2, seed+uint64(c))
		halves := [2][]int{}
		dist := make([]float32, 2)
		for _, i := range m {
			in.Get(i, v)
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
