package dataset

import (
	"math"
	"math/rand/v2"
)

// TextLike describes a synthetic set shaped like text embeddings (see the
// package documentation for the model and its measured statistics). The
// same values always give the same vectors; every vector has unit length.
type TextLike struct {
	Seed    uint64
	Rows    int
	Queries int
	Dims    int
	// Topics is how many topics the rows fall into, of uneven sizes;
	// default Rows/1000, at least 1, so that a topic's average size and
	// with it the set's statistics do not change with Rows.
	Topics int
}

// The model's constants: the share of a deviation's variance carried by
// the dominant directions, how many there are, and the scales of the
// common offset, of a topic's centre and of an item around its centre,
// relative to a deviation of unit expected squared length. Changing any
// of them changes the statistics the package documents and the tests hold.
const (
	textDominantShare = 0.3
	textDominant      = 16
	textOffset        = 0.8
	textTopicScale    = 0.45
	textCoordSpread   = 0.35 // log-normal spread of the per-coordinate scales
)

// Generate returns the data rows and the held-out queries.
func (t TextLike) Generate() (data, queries [][]float32) {
	data, queries, _ = t.generate()
	return data, queries
}

// generate also returns the topic of every row, then of every query.
func (t TextLike) generate() (data, queries [][]float32, topic []int) {
	topics := t.Topics
	if topics <= 0 {
		topics = max(1, t.Rows/1000)
	}
	rng := rand.New(rand.NewPCG(t.Seed, 0x746578746c696b65))
	shape := newAnisotropic(rng, t.Dims)
	offset := make([]float64, t.Dims)
	for j := range offset {
		offset[j] = rng.NormFloat64()
	}
	normalize(offset)
	centres := make([][]float64, topics)
	spread := make([]float64, topics)
	sizes := unevenSizes(topics)
	for i := range centres {
		c := make([]float64, t.Dims)
		for j := range c {
			c[j] = textOffset * offset[j]
		}
		shape.add(rng, c, textTopicScale)
		centres[i] = c
		spread[i] = 0.75 + 0.5*rng.Float64()
		sizes.draw(rng, i)
	}
	x := make([]float64, t.Dims)
	data, queries = drawSet(t.Rows, t.Queries, func() []float32 {
		k := sizes.pick(rng)
		topic = append(topic, k)
		copy(x, centres[k])
		shape.add(rng, x, spread[k])
		normalize(x)
		v := make([]float32, t.Dims)
		for j := range v {
			v[j] = float32(x[j])
		}
		return v
	})
	return data, queries, topic
}

// anisotropic is a zero-mean Gaussian whose covariance has a few dominant
// directions, at random angles to the axes and with variances falling as
// 1/i, over a diagonal part whose per-coordinate scales vary log-normally
// (a few coordinates stand out, as "rogue dimensions" do in transformer
// embeddings). A draw at scale 1 has expected squared length 1.
type anisotropic struct {
	dirs  [][]float64 // orthonormal
	scale []float64   // standard deviation along each of dirs
	coord []float64   // standard deviation of each coordinate's own part
}

func newAnisotropic(rng *rand.Rand, dims int) anisotropic {
	var a anisotropic
	var sum float64
	for i := range min(dims, textDominant) {
		v := make([]float64, dims)
		for j := range v {
			v[j] = rng.NormFloat64()
		}
		for _, u := range a.dirs { // Gram-Schmidt
			p := dot(v, u)
			for j := range v {
				v[j] -= p * u[j]
			}
		}
		normalize(v)
		a.dirs = append(a.dirs, v)
		a.scale = append(a.scale, 1/float64(i+1))
		sum += 1 / float64(i+1)
	}
	for i := range a.scale {
		a.scale[i] = math.Sqrt(textDominantShare * a.scale[i] / sum)
	}
	a.coord = make([]float64, dims)
	sum = 0
	for j := range a.coord {
		a.coord[j] = math.Exp(textCoordSpread * rng.NormFloat64())
		sum += a.coord[j] * a.coord[j]
	}
	for j := range a.coord {
		a.coord[j] *= math.Sqrt((1 - textDominantShare) / sum)
	}
	return a
}

// add adds a draw at the given scale to dst.
func (a anisotropic) add(rng *rand.Rand, dst []float64, scale float64) {
	for j := range dst {
		dst[j] += scale * a.coord[j] * rng.NormFloat64()
	}
	for i, u := range a.dirs {
		z := scale * a.scale[i] * rng.NormFloat64()
		for j := range dst {
			dst[j] += z * u[j]
		}
	}
}

func dot(a, b []float64) float64 {
	var s float64
	for i := range a {
		s += a[i] * b[i]
	}
	return s
}

// normalize scales v to unit length, unless it is zero.
func normalize(v []float64) {
	if n := math.Sqrt(dot(v, v)); n > 0 {
		for j := range v {
			v[j] /= n
		}
	}
}
