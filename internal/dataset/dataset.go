// Package dataset generates seeded synthetic vector sets for the demo,
// benchmarks and tests. Uniform random vectors are the worst case of every
// index and unlike real embeddings, so the generator draws clustered data:
// cluster centres uniform in [-1, 1]^d, members Gaussian around a centre
// with a per-cluster spread, cluster sizes uneven. Queries are drawn from
// the same distribution and never appear in the data (held out).
package dataset

import (
	"math"
	"math/rand/v2"
)

// Clustered describes a synthetic set. The same values always give the
// same vectors.
type Clustered struct {
	Seed     uint64
	Rows     int
	Queries  int
	Dims     int
	Clusters int     // default Rows/100, at least 1
	Spread   float64 // mean standard deviation around a centre; default 0.15
	// Normalize scales every vector to unit length, as embeddings for the
	// cosine metric usually are.
	Normalize bool
}

// Generate returns the data rows and the held-out queries.
func (c Clustered) Generate() (data, queries [][]float32) {
	clusters := c.Clusters
	if clusters <= 0 {
		clusters = max(1, c.Rows/100)
	}
	spread := c.Spread
	if spread <= 0 {
		spread = 0.15
	}
	rng := rand.New(rand.NewPCG(c.Seed, 0x7665637369646521))
	centres := make([][]float64, clusters)
	sigma := make([]float64, clusters)
	weight := make([]float64, clusters)
	var total float64
	for i := range centres {
		centres[i] = make([]float64, c.Dims)
		for j := range centres[i] {
			centres[i][j] = rng.Float64()*2 - 1
		}
		sigma[i] = spread * (0.5 + rng.Float64())
		weight[i] = 0.2 + rng.ExpFloat64() // uneven sizes
		total += weight[i]
	}
	draw := func() []float32 {
		r := rng.Float64() * total
		k := 0
		for ; k < clusters-1 && r >= weight[k]; k++ {
			r -= weight[k]
		}
		v := make([]float32, c.Dims)
		var norm float64
		for j := range v {
			x := centres[k][j] + rng.NormFloat64()*sigma[k]
			v[j] = float32(x)
			norm += x * x
		}
		if c.Normalize && norm > 0 {
			inv := 1 / math.Sqrt(norm)
			for j := range v {
				v[j] = float32(float64(v[j]) * inv)
			}
		}
		return v
	}
	data = make([][]float32, c.Rows)
	for i := range data {
		data[i] = draw()
	}
	queries = make([][]float32, c.Queries)
	for i := range queries {
		queries[i] = draw()
	}
	return data, queries
}
