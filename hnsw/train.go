package hnsw

import (
	"errors"
	"math"

	"github.com/vecside/vecside/indexer/store"
	"github.com/vecside/vecside/kernels"
)

// centroids are what rows are encoded against, rotated (see codes): the
// leaves, found in two levels. Each top centroid has a group of leaves,
// and a row's centroid is the nearest leaf of its two nearest top
// centroids, about 2·√K distances for K leaves instead of K.
type centroids struct {
	dims   int
	g      []float32 // the training sample's mean: queries are prepared against it
	top    []float32
	groups []int32 // top t's leaves are [groups[t], groups[t+1])
	leaves []float32
}

// CentroidsFor is the number of centroids rows are encoded against for a
// table of n rows: one per RowsPerCentroid rows, at most MaxCentroids.
func CentroidsFor(n int) int { return max(1, min(MaxCentroids, n/RowsPerCentroid)) }

// SampleFor is how many rows of a table of n rows training wants, read
// before the copy: samplePerCentroid per centroid, every row of a table
// of up to minSample rows, at most maxSampleBytes of vectors of dims
// dimensions.
func SampleFor(n, dims int) int {
	want := max(min(n, minSample), samplePerCentroid*CentroidsFor(n))
	return min(n, want, max(minSample, maxSampleBytes/(4*dims)))
}

const (
	// RowsPerCentroid: a centroid per hundred rows keeps residuals at the
	// scale of the data's local structure (see the package doc).
	RowsPerCentroid = 100
	MaxCentroids    = 1 << 14
	// A centroid wants a dozen sample rows or more; k-means is given at
	// least four.
	samplePerCentroid = 16
	minPerCentroid    = 4
	minSample         = 20000
	maxSampleBytes    = 64 << 20
)

func (c *centroids) len() int                 { return len(c.leaves) / c.dims }
func (c *centroids) at(k int) []float32       { return c.leaves[k*c.dims : (k+1)*c.dims] }
func (c *centroids) bytes() int64             { return 4 * int64(len(c.g)+len(c.top)+len(c.groups)+len(c.leaves)) }
func (c *centroids) group(t int) (lo, hi int) { return int(c.groups[t]), int(c.groups[t+1]) }

// near returns the leaves nearest to v (rotated) among those of its two
// nearest top centroids, as many as top holds, nearest first.
func (c *centroids) near(v []float32, top *kernels.TopK) []kernels.Neighbor {
	d := c.dims
	nt := len(c.top) / d
	dist := make([]float32, max(nt, 64))
	kernels.L2SqBlock(v, c.top, dist[:nt])
	first, second := -1, -1
	for t, x := range dist[:nt] {
		switch {
		case first < 0 || x < dist[first]:
			first, second = t, first
		case second < 0 || x < dist[second]:
			second = t
		}
	}
	for _, t := range [2]int{first, second} {
		if t < 0 {
			continue
		}
		lo, hi := c.group(t)
		if cap(dist) < hi-lo {
			dist = make([]float32, hi-lo)
		}
		kernels.L2SqBlock(v, c.leaves[lo*d:hi*d], dist[:hi-lo])
		for i, x := range dist[:hi-lo] {
			top.Push(uint32(lo+i), x)
		}
	}
	return top.Sorted()
}

// train finds the centroids for a table of about rows rows from sample
// (rows of it): the sample's mean, then CentroidsFor(rows) leaves (fewer
// for a small sample) in √K groups: k-means for the top centroids, then
// k-means within each top centroid's share of the sample, with leaves in
// proportion to it. An empty sample gives one centroid, the origin.
func train(rq *kernels.RaBitQ, dims int, sample [][]float32, rows int, seed uint64) *centroids {
	c := &centroids{dims: dims, g: make([]float32, dims)}
	n := len(sample)
	if n == 0 {
		c.top, c.groups, c.leaves = make([]float32, dims), []int32{0, 1}, make([]float32, dims)
		return c
	}
	space := make([]float32, n*dims)
	store.Parallel(n, func(lo, hi int) {
		for i := lo; i < hi; i++ {
			rq.RotateQuery(space[i*dims:(i+1)*dims], sample[i])
		}
	})
	for i := range n {
		for j, v := range space[i*dims : (i+1)*dims] {
			c.g[j] += v / float32(n)
		}
	}
	k := max(1, min(CentroidsFor(max(rows, n)), n/minPerCentroid))
	in := func(ids []int) store.Vectors {
		return store.Vectors{N: len(ids), Get: func(i int, dst []float32) { copy(dst, space[ids[i]*dims:(ids[i]+1)*dims]) }}
	}
	all := make([]int, n)
	for i := range all {
		all[i] = i
	}
	top := store.KMeans(in(all), dims, int(math.Ceil(math.Sqrt(float64(k)))), seed)
	nt := len(top) / dims
	members := make([][]int, nt)
	dist := make([]float32, nt)
	for i := range n {
		t := store.Nearest(space[i*dims:(i+1)*dims], top, dist)
		members[t] = append(members[t], i)
	}
	c.groups = []int32{0}
	for t, m := range members {
		if len(m) == 0 {
			continue
		}
		want := max(1, int(math.Round(float64(k)*float64(len(m))/float64(n))))
		c.top = append(c.top, top[t*dims:(t+1)*dims]...)
		c.leaves = append(c.leaves, store.KMeans(in(m), dims, want, seed+uint64(t)+1)...)
		c.groups = append(c.groups, int32(len(c.leaves)/dims))
	}
	return c
}

var errGroups = errors.New("centroid groups out of order")

// write and read put the centroids in a checkpoint body.
func (c *centroids) write(b *store.BodyWriter) {
	b.Floats(c.g)
	b.Uvarint(uint64(len(c.groups) - 1))
	b.Floats(c.top)
	for _, g := range c.groups[1:] {
		b.Uvarint(uint64(g))
	}
	b.Floats(c.leaves)
}

func readCentroids(br *store.BodyReader, dims int) *centroids {
	c := &centroids{dims: dims, g: make([]float32, dims)}
	br.Floats(c.g)
	nt := br.Count(MaxCentroids)
	c.top = make([]float32, nt*dims)
	br.Floats(c.top)
	c.groups = make([]int32, nt+1)
	for t := range nt {
		c.groups[t+1] = int32(br.Count(MaxCentroids))
		if c.groups[t+1] <= c.groups[t] {
			br.Fail(errGroups)
		}
	}
	if br.Err() != nil || nt == 0 {
		br.Fail(errGroups)
		return c
	}
	c.leaves = make([]float32, int(c.groups[nt])*dims)
	br.Floats(c.leaves)
	return c
}
