package dataset

import (
	"math"
	"slices"

	"github.com/vecside/vecside/kernels"
)

// Stats describes how hard a set is for nearest-neighbour search, from
// queries' Euclidean distances to every row (on unit vectors these rank
// rows as cosine distance does).
type Stats struct {
	// RelativeContrast is the mean distance from a query to the rows over
	// the mean distance to its nearest row (He, Kumar and Chang, "On the
	// difficulty of nearest neighbor search", 2012). Near 1, the nearest
	// row is hardly nearer than any other.
	RelativeContrast float64
	// TenthToMedian is the mean distance to the 10th nearest row over the
	// mean median distance: near 1, the 10 nearest are hardly nearer than
	// a typical row.
	TenthToMedian float64
	// MeanCosine is the mean cosine similarity of a query and a row: above
	// 0, the set lies in a cone around a common direction.
	MeanCosine float64
	// TopComponent is the share of the rows' variance about their mean
	// that lies along their first principal component: 1/dims for
	// isotropic data.
	TopComponent float64
}

// Measure computes the Stats of queries against data (at least 10 rows).
func Measure(data, queries [][]float32) Stats {
	var nn, tenth, median, mean, cos float64
	ds := make([]float64, len(data))
	for _, q := range queries {
		var sum float64
		for i, v := range data {
			ds[i] = math.Sqrt(float64(kernels.L2Sq(q, v)))
			sum += ds[i]
			cos += 1 - float64(kernels.CosineDistance(q, v))
		}
		slices.Sort(ds)
		nn += ds[0]
		tenth += ds[9]
		median += ds[len(ds)/2]
		mean += sum / float64(len(ds))
	}
	return Stats{
		RelativeContrast: mean / nn,
		TenthToMedian:    tenth / median,
		MeanCosine:       cos / float64(len(queries)*len(data)),
		TopComponent:     topComponent(data),
	}
}

// topComponent finds the first principal component's share of the
// variance by power iteration over the centred rows.
func topComponent(data [][]float32) float64 {
	dims := len(data[0])
	mean := make([]float64, dims)
	for _, v := range data {
		for j, x := range v {
			mean[j] += float64(x) / float64(len(data))
		}
	}
	rows := make([][]float64, len(data))
	var total float64
	for i, v := range data {
		c := make([]float64, dims)
		for j, x := range v {
			c[j] = float64(x) - mean[j]
		}
		total += dot(c, c)
		rows[i] = c
	}
	w := make([]float64, dims)
	for j := range w {
		w[j] = float64(1 + j%7) // any start not orthogonal to the answer
	}
	normalize(w)
	var lambda float64
	for range 30 {
		next := make([]float64, dims)
		for _, c := range rows {
			p := dot(c, w)
			for j := range next {
				next[j] += p * c[j]
			}
		}
		lambda = math.Sqrt(dot(next, next)) // |Cw| → the top eigenvalue
		normalize(next)
		w = next
	}
	return lambda / total
}
