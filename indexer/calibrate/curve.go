package calibrate

import (
	"context"
	"maps"
	"math"
	"slices"
	"sync"
	"time"

	"github.com/vecside/vecside/indexer/store"
)

// Search is an index's search for a calibration query: the keys of up to
// n candidates nearest to vec, for k rows, with the calibrated setting
// at value, as if the row of without (unless "") were not in the index
// (see kind.Excluder).
type Search func(ctx context.Context, vec []float32, k, n, value int, without string) ([]string, error)

// Knob is the setting a kind's calibration tunes: tried from From up to
// Max, a fifth more at each step.
type Knob struct {
	Setting   string
	From, Max int
}

// Point is what Curve.For chose: searches take Low, or High with the
// probability Share, so that their mean recall is Recall. Between two
// values of a setting whose recalls straddle the target (probes 2 and 3
// of an inverted file can be 0.93 and 0.99), the mixture meets the
// target rather than overshooting it at the cost of the higher.
type Point struct {
	Low, High int
	Share     float64
	Recall    float64
}

// Mean is the mean value searches get.
func (p Point) Mean() float64 { return float64(p.Low) + p.Share*float64(p.High-p.Low) }

// Pick draws a search's value, u uniform in [0, 1).
func (p Point) Pick(u float64) int {
	if u < p.Share {
		return p.High
	}
	return p.Low
}

// PickFor is the value of a search for vec: drawn from the vector's
// hash, so that the same query always gets the same setting, and with
// it the same answer from the same index.
func (p Point) PickFor(vec []float32) int {
	return p.Pick(float64(hash(vec)>>11) / (1 << 53))
}

// Curve is what one calibration measured: how many of its K nearest
// rows each query found among the candidates (the exact re-rank then
// finds them) at each value of the setting tried.
type Curve struct {
	Setting string     `json:"setting"`
	Values  []int      `json:"values"` // increasing
	Queries []Measured `json:"queries"`
	// Spacing is the median distance from a base row to its nearest
	// other row of the table (Euclidean, in the metric's space; 0 where
	// the metric has none): what Offset measures a search's nearest
	// candidate against.
	Spacing float64   `json:"spacing"`
	Rows    int       `json:"rows"` // the index's rows then
	At      time.Time `json:"at"`
}

// Measured is one query's part of a Curve.
type Measured struct {
	Base int32 `json:"base"`
	// Offset is how far the query lies off its base row, in multiples of
	// that row's distance to its nearest other row: 0 for the row
	// itself, about 1 for an item as new as the rows are to each other.
	Offset float32 `json:"offset"`
	Found  []uint8 `json:"found"` // per value, of K
}

// MinBases is the fewest bases with queries whose neighbours are known
// that a calibration trusts: fewer (a young table, a table whose rows
// were mostly replaced since its copy) leave the kind's own default.
const MinBases = 32

// alike is how far apart two offsets may be for searches at one to
// stand for searches at the other.
const alike = 0.25

// sureBy is how many standard errors of its measurement a setting's
// recall must clear the target by. The measurement's own error (about
// 0.005 over Bases queries) is not the whole gap: the searches an index
// gets are not its calibration queries (Fashion-MNIST's test images lie
// a little farther off the rows than held-out rows do), and the setting
// chosen is the first whose measurement came out high enough, so it
// tends to be one that came out high. With one standard error, HNSW on
// Fashion-MNIST and on a clustered set measured 0.003–0.011 below the
// estimate, and below a 0.95 target in three builds of six; with two
// and a half, the estimate sits about 0.013 above the target and every
// build measured 0.953 or more, while sets whose searches do better
// than their estimate (up to 0.017 seen) stay below 0.985.
const sureBy = 2.5

// stopAt is the recall beyond which larger values are not tried: once
// every kind of query (every offset) reaches it.
const stopAt = 0.998

// Measure runs the queries through search at increasing values of knob,
// with candidates capped at K × oversample as a search at the index's
// default oversampling is, and returns the curve; ok is false when too
// few queries know their neighbours.
func (s *Set) Measure(ctx context.Context, search Search, knob Knob, oversample float64, rows int) (c Curve, ok bool, err error) {
	ps, spacing := s.probes()
	c = Curve{Setting: knob.Setting, Spacing: spacing, Rows: rows, At: time.Now().Round(0)}
	bases := map[int32]bool{}
	for _, p := range ps {
		bases[p.base] = true
	}
	if len(bases) < MinBases {
		return c, false, nil
	}
	c.Queries = make([]Measured, len(ps))
	for i, p := range ps {
		c.Queries[i] = Measured{Base: p.base, Offset: p.offset}
	}
	flat := 0
	for v := max(knob.From, 1); v <= knob.Max; v = max(v+1, int(math.Ceil(float64(v)*1.2))) {
		if err := foundAt(ctx, ps, search, v, oversample, c.Queries); err != nil {
			return c, false, err
		}
		c.Values = append(c.Values, v)
		// A setting past what the index can use (more lists than it
		// has) measures the same as the last: stop after three such.
		n := len(c.Values)
		if n > 1 && c.same(n-1, n-2) {
			flat++
		} else {
			flat = 0
		}
		if c.worst(n-1) >= stopAt || flat == 3 {
			break
		}
	}
	s.mu.Lock()
	s.curve = &c
	s.mu.Unlock()
	return c, true, nil
}

// foundAt appends to each query's Found how many of its neighbours it
// found at value v. A query that found all K at a smaller value is taken
// to find them again and is not searched: a wider beam or more lists
// only adds rows to choose the candidates from, which loses a true
// neighbour only if the added rows estimate nearer than it, and the
// rungs where most queries are done cost the most (on 340k text-like
// rows at ef_search 600, all but a few).
func foundAt(ctx context.Context, ps []probe, search Search, v int, oversample float64, out []Measured) error {
	var (
		mu    sync.Mutex
		first error
	)
	store.Parallel(len(ps), func(lo, hi int) {
		for i := lo; i < hi; i++ {
			p := ps[i]
			if f := out[i].Found; len(f) > 0 && f[len(f)-1] == K {
				out[i].Found = append(f, K)
				continue
			}
			keys, err := search(ctx, p.vec, K, int(math.Ceil(K*max(oversample, 1))), v, p.without)
			if err != nil {
				mu.Lock()
				first = err
				mu.Unlock()
				return
			}
			found := 0
			for _, t := range p.truth {
				if slices.Contains(keys, t) {
					found++
				}
			}
			out[i].Found = append(out[i].Found, uint8(found))
		}
	})
	return first
}

// same reports whether every query found as many at the i-th value as
// at the j-th.
func (c *Curve) same(i, j int) bool {
	for _, q := range c.Queries {
		if q.Found[i] != q.Found[j] {
			return false
		}
	}
	return true
}

// worst is the lowest mean recall, over the three kinds of search (a
// stored row, a new item, a near-duplicate), at the i-th value.
func (c *Curve) worst(i int) float64 {
	sum := map[float32]float64{}
	n := map[float32]int{}
	for _, q := range c.Queries {
		kind := q.Offset
		if kind != 0 && kind != NewItem {
			kind = -1 // moved: each has an offset of its own
		}
		sum[kind] += float64(q.Found[i])
		n[kind]++
	}
	worst := 1.0
	for o, s := range sum {
		worst = min(worst, s/float64(K*n[o]))
	}
	return worst
}

// For returns how to meet target for queries that lie offset off the
// table's rows (see Measured.Offset): the smallest value whose recall
// surely reaches it (by sureBy standard errors), mixed with the value before
// it in the proportion that just does, or the largest tried if none
// reaches it, with the mean recall measured there; ok is
// false for a curve with no values. Each base contributes its search
// whose offset is nearest, if that is within alike of offset (the bases
// that were not moved have no near-duplicates to offer), or all do if
// none is.
func (c *Curve) For(target, offset float64) (Point, bool) {
	if len(c.Values) == 0 {
		return Point{}, false
	}
	nearest := map[int32]int{}
	for i, q := range c.Queries {
		j, seen := nearest[q.Base]
		if !seen || math.Abs(float64(q.Offset)-offset) < math.Abs(float64(c.Queries[j].Offset)-offset) {
			nearest[q.Base] = i
		}
	}
	near := maps.Clone(nearest)
	maps.DeleteFunc(near, func(_ int32, i int) bool { return math.Abs(float64(c.Queries[i].Offset)-offset) > alike })
	if len(near) > 0 {
		nearest = near
	}
	// In a fixed order, so that the sums come out the same every time.
	chosen := slices.Sorted(maps.Values(nearest))
	// At each value, the mean recall, and the mean less sureBy standard
	// errors, which must reach the target.
	measure := func(v int) (mean, sure float64) {
		var sum, sq float64
		for _, i := range chosen {
			r := float64(c.Queries[i].Found[v]) / K
			sum += r
			sq += r * r
		}
		n := float64(len(chosen))
		mean = sum / n
		return mean, mean - sureBy*math.Sqrt(max(0, sq/n-mean*mean)/n)
	}
	var below, belowSure float64
	for v, value := range c.Values {
		mean, sure := measure(v)
		switch {
		case sure < target:
			below, belowSure = mean, sure
			continue
		case v == 0 || sure == belowSure:
			return Point{Low: value, High: value, Recall: mean}, true
		}
		share := (target - belowSure) / (sure - belowSure)
		return Point{Low: c.Values[v-1], High: value, Share: share, Recall: below + share*(mean-below)}, true
	}
	last := c.Values[len(c.Values)-1]
	return Point{Low: last, High: last, Recall: below}, true
}
