package calibrate

import (
	"context"
	"math"
	"slices"
	"sync"
	"time"

	"github.com/vecside/vecside/internal/store"
)

// Search is an index's search for a calibration query: the keys of up to
// n candidates nearest to vec, for k rows, with the calibrated setting
// at value.
type Search func(ctx context.Context, vec []float32, k, n, value int) ([]string, error)

// Knob is the setting a kind's calibration tunes: tried from From up to
// Max, a fifth more at each step.
type Knob struct {
	Setting   string
	From, Max int
}

// Point is a value of the setting and the recall measured there.
type Point struct {
	Value  int
	Recall float64
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

// MinQueries is the fewest queries with known neighbours a calibration
// trusts: fewer (a small or young table, a table whose rows were mostly
// replaced since its copy) leave the kind's own default.
const MinQueries = 50

// stopAt is the recall beyond which larger values are not tried: once
// every kind of query (every offset) reaches it.
const stopAt = 0.998

// Measure runs the queries through search at increasing values of knob,
// with candidates capped at K × oversample as a search at the index's
// default oversampling is, and returns the curve; ok is false when too
// few queries know their neighbours. A query whose own row is in the
// table asks for one row more and ignores it, as if it were held out.
func (s *Set) Measure(ctx context.Context, search Search, knob Knob, oversample float64, rows int) (c Curve, ok bool, err error) {
	ps, spacing := s.probes()
	c = Curve{Setting: knob.Setting, Spacing: spacing, Rows: rows, At: time.Now().Round(0)}
	if len(ps) < MinQueries {
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
// found at value v.
func foundAt(ctx context.Context, ps []probe, search Search, v int, oversample float64, out []Measured) error {
	var (
		mu    sync.Mutex
		first error
	)
	store.Parallel(len(ps), func(lo, hi int) {
		for i := lo; i < hi; i++ {
			p := ps[i]
			k := K
			if p.own != "" {
				k++
			}
			keys, err := search(ctx, p.vec, k, int(math.Ceil(float64(k)*max(oversample, 1))), v)
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

// worst is the lowest mean recall, over the kinds of query (their
// offsets as made), at the i-th value.
func (c *Curve) worst(i int) float64 {
	sum := map[float32]float64{}
	n := map[float32]int{}
	for _, q := range c.Queries {
		sum[q.Offset] += float64(q.Found[i])
		n[q.Offset]++
	}
	worst := 1.0
	for o, s := range sum {
		worst = min(worst, s/float64(K*n[o]))
	}
	return worst
}

// For returns the smallest value whose recall, for queries that lie
// offset off the table's rows (see Measured.Offset), reaches target, or
// the largest tried if none does, with that recall; ok is false for a
// curve with no values. Each base contributes the query whose offset is
// nearest.
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
	var p Point
	for v := range c.Values {
		found := 0
		for _, i := range nearest {
			found += int(c.Queries[i].Found[v])
		}
		p = Point{c.Values[v], float64(found) / float64(K*len(nearest))}
		if p.Recall >= target {
			break
		}
	}
	return p, true
}
