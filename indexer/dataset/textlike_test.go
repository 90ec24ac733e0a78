package dataset

import (
	"fmt"
	"math"
	"slices"
	"testing"

	"github.com/vecside/vecside/kernels"
)

func TestTextLikeIsSeededAndNormalized(t *testing.T) {
	c := TextLike{Seed: 7, Rows: 3000, Queries: 20, Dims: 24}
	a, qa := c.Generate()
	b, qb := c.Generate()
	if len(a) != 3000 || len(qa) != 20 || len(a[0]) != 24 {
		t.Fatalf("got %d rows, %d queries of %d dims", len(a), len(qa), len(a[0]))
	}
	again := append(b, qb...)
	for i, v := range append(a, qa...) {
		if !slices.Equal(v, again[i]) {
			t.Fatalf("vector %d differs between two runs with one seed", i)
		}
		if n := float64(kernels.Dot(v, v)); math.Abs(n-1) > 1e-5 {
			t.Fatalf("vector %d has squared norm %v", i, n)
		}
	}
	other, _ := TextLike{Seed: 8, Rows: 3000, Dims: 24}.Generate()
	if slices.Equal(a[0], other[0]) {
		t.Fatal("different seeds gave the same first row")
	}
}

// TestTextLikeStatistics holds the preset to the statistics the package
// documentation states, against the clustered set, at 20,000 rows and
// 100 queries.
func TestTextLikeStatistics(t *testing.T) {
	if testing.Short() {
		t.Skip("measures 20,000-row sets")
	}
	for _, dims := range []int{128, 768} {
		t.Run(fmt.Sprintf("%dd", dims), func(t *testing.T) {
			data, queries, topic := TextLike{Seed: 1, Rows: 20000, Queries: 100, Dims: dims}.generate()
			got := Measure(data, queries)
			t.Logf("text-like: %+v", got)
			for _, c := range []struct {
				name   string
				v      float64
				lo, hi float64
			}{
				{"relative contrast", got.RelativeContrast, 1.2, 1.6},
				{"10th-NN/median", got.TenthToMedian, 0.7, 0.85},
				{"mean cosine", got.MeanCosine, 0.3, 0.45},
				{"top component's share", got.TopComponent, 0.06, 0.15},
			} {
				if c.v < c.lo || c.v > c.hi {
					t.Errorf("%s %.3f, want it within [%g, %g]", c.name, c.v, c.lo, c.hi)
				}
			}
			// Findable: a query's true neighbours are mostly in its topic.
			same := 0
			for qi, truth := range GroundTruth(kernels.L2, data, queries, 10) {
				for _, r := range truth.Rows {
					if topic[r] == topic[len(data)+qi] {
						same++
					}
				}
			}
			share := float64(same) / float64(10*len(queries))
			t.Logf("%.3f of the 10 nearest rows share the query's topic", share)
			if share < 0.7 {
				t.Errorf("%.2f of the 10 nearest rows share the query's topic, want at least 0.7", share)
			}
			clustered := Measure(Clustered{Seed: 1, Rows: 20000, Queries: 100, Dims: dims, Normalize: true}.Generate())
			t.Logf("clustered: %+v", clustered)
			if clustered.RelativeContrast < 3 || clustered.TenthToMedian > 0.3 {
				t.Errorf("the clustered set is no longer well separated: %+v", clustered)
			}
		})
	}
}
