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
	// Perturb, if more than 0, makes the queries perturbed rows instead
	// of held-out draws: each is a row chosen at random, moved along every
	// coordinate by Gaussian noise of Perturb times its cluster's spread
	// (before Normalize), as a search for something like a stored item.
	Perturb float64
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
	sizes := unevenSizes(clusters)
	for i := range centres {
		centres[i] = make([]float64, c.Dims)
		for j := range centres[i] {
			centres[i][j] = rng.Float64()*2 - 1
		}
		sigma[i] = spread * (0.5 + rng.Float64())
		sizes.draw(rng, i)
	}
	raw := make([]float64, c.Dims)
	// member draws a member of cluster k into raw and returns it as a row.
	member := func(k int) []float32 {
		for j := range raw {
			raw[j] = centres[k][j] + rng.NormFloat64()*sigma[k]
		}
		return c.row(raw)
	}
	if c.Perturb <= 0 {
		return drawSet(c.Rows, c.Queries, func() []float32 { return member(sizes.pick(rng)) })
	}
	// The rows the queries perturb, chosen before the rows are drawn so
	// that each query is made from its row's raw values.
	from := map[int][]int{}
	for q := range c.Queries {
		r := rng.IntN(c.Rows)
		from[r] = append(from[r], q)
	}
	data = make([][]float32, c.Rows)
	queries = make([][]float32, c.Queries)
	moved := make([]float64, c.Dims)
	for i := range data {
		k := sizes.pick(rng)
		data[i] = member(k)
		for _, q := range from[i] {
			for j := range moved {
				moved[j] = raw[j] + rng.NormFloat64()*c.Perturb*sigma[k]
			}
			queries[q] = c.row(moved)
		}
	}
	return data, queries
}

// row converts raw values to a row, scaled to unit length if c says so.
func (c Clustered) row(raw []float64) []float32 {
	v := make([]float32, len(raw))
	var norm float64
	for j, x := range raw {
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

// weights gives groups (clusters, topics) uneven sizes: each is picked
// with a probability proportional to its weight.
type weights struct {
	w     []float64
	total float64
}

func unevenSizes(n int) *weights { return &weights{w: make([]float64, n)} }

// draw gives group i its weight.
func (s *weights) draw(rng *rand.Rand, i int) {
	s.w[i] = 0.2 + rng.ExpFloat64()
	s.total += s.w[i]
}

// pick draws a group.
func (s *weights) pick(rng *rand.Rand) int {
	r := rng.Float64() * s.total
	k := 0
	for ; k < len(s.w)-1 && r >= s.w[k]; k++ {
		r -= s.w[k]
	}
	return k
}

// drawSet draws the rows, then the queries, from one distribution.
func drawSet(rows, queries int, draw func() []float32) (data, held [][]float32) {
	data = make([][]float32, rows)
	for i := range data {
		data[i] = draw()
	}
	held = make([][]float32, queries)
	for i := range held {
		held[i] = draw()
	}
	return data, held
}
