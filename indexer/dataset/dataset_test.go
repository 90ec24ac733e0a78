package dataset

import (
	"bytes"
	"math"
	"slices"
	"strings"
	"testing"

	"github.com/vecside/vecside/kernels"
)

func TestGenerateIsSeededAndClustered(t *testing.T) {
	c := Clustered{Seed: 7, Rows: 2000, Queries: 20, Dims: 16, Clusters: 10}
	a, qa := c.Generate()
	b, _ := c.Generate()
	if len(a) != 2000 || len(qa) != 20 || len(a[0]) != 16 {
		t.Fatalf("got %d rows, %d queries of %d dims", len(a), len(qa), len(a[0]))
	}
	for i := range a {
		if !slices.Equal(a[i], b[i]) {
			t.Fatalf("row %d differs between two runs with one seed", i)
		}
	}
	other, _ := Clustered{Seed: 8, Rows: 2000, Dims: 16, Clusters: 10}.Generate()
	if slices.Equal(a[0], other[0]) {
		t.Fatal("different seeds gave the same first row")
	}
	// Clustered: a point's nearest neighbour is far closer than a random
	// other point.
	var nn, random float64
	for i := 0; i < 100; i++ {
		best := math.Inf(1)
		for j := range a {
			if j != i {
				best = min(best, dist(a[i], a[j]))
			}
		}
		nn += best
		random += dist(a[i], a[(i*7919+1)%len(a)])
	}
	if nn*3 > random {
		t.Errorf("mean nearest-neighbour distance %.3f is not well below a random pair's %.3f: not clustered", nn/100, random/100)
	}
}

// TestPerturbedQueries: with Perturb, each query lies next to a row, much
// nearer than rows lie to one another, and the set is still seeded.
func TestPerturbedQueries(t *testing.T) {
	c := Clustered{Seed: 3, Rows: 3000, Queries: 30, Dims: 32, Clusters: 10, Normalize: true, Perturb: 0.5}
	data, queries := c.Generate()
	_, again := c.Generate()
	if len(queries) != 30 || !slices.Equal(queries[29], again[29]) {
		t.Fatalf("%d queries; the last differs between two runs with one seed", len(queries))
	}
	nearest := func(v []float32, skip int) float64 {
		best := math.Inf(1)
		for j, r := range data {
			if j != skip {
				best = min(best, dist(v, r))
			}
		}
		return best
	}
	var fromQuery, betweenRows float64
	for i, q := range queries {
		var norm float64
		for _, x := range q {
			norm += float64(x) * float64(x)
		}
		if math.Abs(norm-1) > 1e-5 {
			t.Fatalf("query %d: squared length %v, want 1", i, norm)
		}
		fromQuery += nearest(q, -1)
		betweenRows += nearest(data[i*97], i*97)
	}
	if fromQuery > 0.6*betweenRows {
		t.Errorf("mean distance from a query to its nearest row %.4f, between nearest rows %.4f: the queries are not perturbed rows",
			fromQuery/30, betweenRows/30)
	}
}

func TestNormalize(t *testing.T) {
	data, _ := Clustered{Seed: 1, Rows: 50, Dims: 8, Normalize: true}.Generate()
	for i, v := range data {
		var n float64
		for _, x := range v {
			n += float64(x) * float64(x)
		}
		if math.Abs(n-1) > 1e-5 {
			t.Fatalf("row %d has squared norm %v", i, n)
		}
	}
}

func dist(a, b []float32) float64 {
	var s float64
	for i := range a {
		d := float64(a[i] - b[i])
		s += d * d
	}
	return math.Sqrt(s)
}

func TestFashionMNISTLoader(t *testing.T) {
	// A tiny IDX file: 2 images of 2 × 2 pixels.
	raw := []byte{0, 0, 8, 3, 0, 0, 0, 2, 0, 0, 0, 2, 0, 0, 0, 2, 1, 2, 3, 4, 255, 0, 0, 7}
	got, err := decodeIDXImages(bytes.NewReader(raw), "test")
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 2 || !slices.Equal(got[1], []float32{255, 0, 0, 7}) {
		t.Fatalf("got %v", got)
	}
	if _, err := decodeIDXImages(bytes.NewReader(raw[:20]), "test"); err == nil {
		t.Error("truncated file accepted")
	}
	raw[3] = 1
	if _, err := decodeIDXImages(bytes.NewReader(raw), "test"); err == nil {
		t.Error("wrong magic accepted")
	}
	_, _, err = FashionMNIST(t.TempDir())
	if err == nil || !strings.Contains(err.Error(), "dataset-fashion-mnist") {
		t.Errorf("missing files: got %v, want an error naming the package", err)
	}
}

func TestGroundTruth(t *testing.T) {
	data := [][]float32{{0, 0}, {1, 0}, {3, 0}, {0, 2}}
	got := GroundTruth(kernels.L2, data, [][]float32{{0.9, 0}}, 2)
	if !slices.Equal(got[0].Rows, []int{1, 0}) || math.Abs(got[0].KthDistance()-0.9) > 1e-6 {
		t.Fatalf("got %+v", got[0])
	}
}
