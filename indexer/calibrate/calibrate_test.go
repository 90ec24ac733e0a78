package calibrate

import (
	"bytes"
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"sort"
	"testing"

	"github.com/vecside/vecside/indexer/store"
	"github.com/vecside/vecside/kernels"
)

// table is the rows a Set should know: a brute-force reference.
type table map[string][]float32

// nearest is the reference's k nearest rows to q other than own.
func (t table) nearest(m kernels.Metric, q []float32, own string, k int) []string {
	type kd struct {
		key  string
		dist float64
	}
	var all []kd
	for key, v := range t {
		if key != own && (m != kernels.Cosine || kernels.Dot(v, v) > 0) {
			all = append(all, kd{key, m.Distance(q, v)})
		}
	}
	sort.Slice(all, func(i, j int) bool { return all[i].dist < all[j].dist })
	var keys []string
	for _, x := range all[:min(k, len(all))] {
		keys = append(keys, x.key)
	}
	return keys
}

func randVec(rng *rand.Rand, d int) []float32 {
	v := make([]float32, d)
	for i := range v {
		v[i] = float32(rng.NormFloat64())
	}
	return v
}

// churn applies random inserts, updates, deletes and renames to both s
// and t.
func churn(rng *rand.Rand, s *Set, t table, steps, d int) {
	next := len(t)
	keys := func() []string {
		ks := make([]string, 0, len(t))
		for k := range t {
			ks = append(ks, k)
		}
		slices.Sort(ks)
		return ks
	}
	for range steps {
		switch op := rng.IntN(10); {
		case op < 7 || len(t) == 0: // a new row, or an update
			key := fmt.Sprint(next)
			if op < 6 || len(t) == 0 {
				next++
			} else {
				ks := keys()
				key = ks[rng.IntN(len(ks))]
			}
			v := randVec(rng, d)
			t[key] = v
			s.Add(key, v, s.Prepare(v))
		case op < 9:
			ks := keys()
			key := ks[rng.IntN(len(ks))]
			delete(t, key)
			s.Remove(key)
		default:
			ks := keys()
			from, to := ks[rng.IntN(len(ks))], fmt.Sprint(next)
			next++
			t[to] = t[from]
			delete(t, from)
			s.Rename(from, to)
		}
	}
}

// checkTruth fails unless every query the Set offers knows its K nearest
// other rows exactly, and returns how many it offers.
func checkTruth(t *testing.T, m kernels.Metric, s *Set, tab table) int {
	t.Helper()
	// Every row a list claims to know, not only the K a probe uses.
	for i, q := range s.queries {
		n := q.exact()
		var got []string
		for _, nb := range q.list[:n] {
			got = append(got, nb.key)
		}
		vec := s.vecs[i*s.dims : (i+1)*s.dims]
		if want := tab.nearest(m, vec, q.own, n); !slices.Equal(got, want) {
			t.Fatalf("query %d (own %q) claims its %d nearest are %v, brute force %v", i, q.own, n, got, want)
		}
	}
	ps, _ := s.probes()
	searches := 0
	for i, p := range ps {
		var want []string
		switch {
		case p.without != "": // a row held out
			if m != kernels.Cosine && !slices.Equal(tab[p.without], p.vec) {
				t.Fatalf("probe %d: its row %s holds another vector", i, p.without)
			}
			want = tab.nearest(m, p.vec, p.without, K)
		case p.offset == 0: // a row searched for itself: found first
			want = append([]string{p.truth[0]}, tab.nearest(m, p.vec, p.truth[0], K-1)...)
			searches++ // the same query as its held-out probe
		default:
			want = tab.nearest(m, p.vec, "", K)
		}
		if !slices.Equal(p.truth, want) {
			t.Fatalf("probe %d (without %q, offset %g): neighbours %v, brute force %v", i, p.without, p.offset, p.truth, want)
		}
	}
	return len(ps) - searches
}

func TestTruthFollowsChanges(t *testing.T) {
	const d = 8
	for _, m := range []kernels.Metric{kernels.L2, kernels.Cosine, kernels.IP} {
		for _, sampled := range []bool{true, false} {
			t.Run(fmt.Sprintf("%s/sampled=%v", m, sampled), func(t *testing.T) {
				rng := rand.New(rand.NewPCG(1, uint64(m)))
				tab := table{}
				var rows [][]float32
				for range 400 {
					rows = append(rows, randVec(rng, d))
				}
				var sample [][]float32
				if sampled {
					sample = rows[:300]
				}
				s := New(m, d, sample, 7)
				// The copy: every row, in an order unlike the sample's.
				for i, v := range slices.Backward(rows) {
					key := fmt.Sprint("r", i)
					tab[key] = v
					s.Add(key, v, s.Prepare(v))
				}
				want, wantOwned := Bases, Bases // adopted rows: no moved queries
				if sampled {
					want = Queries
				}
				if len(s.queries) != want {
					t.Fatalf("%d queries, want %d", len(s.queries), want)
				}
				if n := checkTruth(t, m, s, tab); n != want {
					t.Fatalf("%d queries know their neighbours after the copy, want %d", n, want)
				}
				owned := 0
				for _, q := range s.queries {
					if q.own != "" {
						owned++
					}
				}
				if owned != wantOwned {
					t.Errorf("%d queries found their own row, want %d", owned, wantOwned)
				}
				churn(rng, s, tab, 2000, d)
				n := checkTruth(t, m, s, tab)
				t.Logf("%d of %d queries still know their neighbours after 2,000 changes", n, want)
				if n < want/2 {
					t.Errorf("only %d queries left", n)
				}
				s.Clear()
				clear(tab)
				churn(rng, s, tab, 300, d)
				if n := checkTruth(t, m, s, tab); n != want && sampled {
					t.Errorf("%d queries after a truncate and refill, want all %d", n, want)
				}
			})
		}
	}
}

func TestUnknownHasNoQueries(t *testing.T) {
	s := Unknown(kernels.L2, 4)
	rng := rand.New(rand.NewPCG(2, 2))
	for i := range 500 {
		v := randVec(rng, 4)
		s.Add(fmt.Sprint(i), v, s.Prepare(v))
	}
	if ps, _ := s.probes(); len(ps) != 0 {
		t.Fatalf("a Set that did not see the index's rows offers %d queries", len(ps))
	}
}

// exactSearch is a perfect index over tab: its answer does not depend on
// the value.
func exactSearch(m kernels.Metric, tab table) Search {
	return func(_ context.Context, vec []float32, k, n, _ int, without string) ([]string, error) {
		return tab.nearest(m, vec, without, n), nil
	}
}

func TestMeasure(t *testing.T) {
	const d = 16
	rng := rand.New(rand.NewPCG(3, 3))
	tab := table{}
	var rows [][]float32
	for range 1000 {
		rows = append(rows, randVec(rng, d))
	}
	s := New(kernels.L2, d, rows[:500], 1)
	for i, v := range rows {
		tab[fmt.Sprint(i)] = v
		s.Add(fmt.Sprint(i), v, s.Prepare(v))
	}
	knob := Knob{Setting: "beam", From: 1, Max: 64}

	c, ok, err := s.Measure(context.Background(), exactSearch(kernels.L2, tab), knob, 1, len(tab))
	if err != nil || !ok {
		t.Fatalf("Measure: ok %v, %v", ok, err)
	}
	if len(c.Values) != 1 || c.worst(0) != 1 {
		t.Fatalf("an exact index measured values %v, worst recall %.3f; want recall 1 at the first value", c.Values, c.worst(0))
	}
	if len(c.Queries) != Queries+Bases || c.Spacing <= 0 { // each base twice: held out, and itself
		t.Fatalf("%d queries, spacing %g", len(c.Queries), c.Spacing)
	}

	// An index that finds a table row's neighbours at once (it walks to
	// the row), but another query's only up to value of them (the rest
	// replaced by far rows): recall v/10 until v reaches 10.
	partial := func(_ context.Context, vec []float32, k, n, v int, without string) ([]string, error) {
		keys := tab.nearest(kernels.L2, vec, without, len(tab))
		if without == "" && kernels.L2.Distance(vec, tab[keys[0]]) == 0 {
			return keys[:n], nil
		}
		found := keys[:min(v, n)]
		return append(slices.Clone(found), keys[len(keys)-(n-len(found)):]...), nil
	}
	c, ok, err = s.Measure(context.Background(), partial, knob, 1, len(tab))
	if err != nil || !ok {
		t.Fatalf("Measure: ok %v, %v", ok, err)
	}
	for i, v := range c.Values {
		if want := float64(min(v, K)) / K; c.worst(i) != want {
			t.Errorf("value %d: worst recall %.3f, want %.3f", v, c.worst(i), want)
		}
	}
	if last := c.Values[len(c.Values)-1]; last < K || last > 13 {
		t.Errorf("the ladder went on to %d past recall 1 at %d", last, K)
	}
	for _, tc := range []struct {
		target, offset float64
		want           Point
	}{
		{0.95, 0, Point{1, 1, 0, 1}}, // rows of the table: found at any value
		{0.5, NewItem, Point{4, 5, 1, 0.5}},
		// The ladder: 1, 2, 3, 4, 5, 6, 8, 10; 8 finds 0.8, 10 finds 1.
		{0.95, NewItem, Point{8, 10, 0.75, 0.95}},
		{0.7, NewItem, Point{6, 8, 0.5, 0.7}},
		{1, NewItem, Point{8, 10, 1, 1}},
	} {
		p, _ := c.For(tc.target, tc.offset)
		if p.Low != tc.want.Low || p.High != tc.want.High || math.Abs(p.Share-tc.want.Share) > 1e-6 || math.Abs(p.Recall-tc.want.Recall) > 1e-6 {
			t.Errorf("For(%.2f, offset %.1f) = %+v, want %+v", tc.target, tc.offset, p, tc.want)
		}
	}
	// The mixture: a quarter of searches at 8, the rest at 10.
	p, _ := c.For(0.95, NewItem)
	if p.Pick(0.74) != 10 || p.Pick(0.76) != 8 || math.Abs(p.Mean()-9.5) > 1e-6 {
		t.Errorf("Pick(0.74) %d, Pick(0.76) %d, mean %g; want 10, 8, 9.5", p.Pick(0.74), p.Pick(0.76), p.Mean())
	}
	// By the query: the same every time, and in the mixture's share.
	high := 0
	for _, v := range rows {
		if got := p.PickFor(v); got != p.PickFor(slices.Clone(v)) {
			t.Fatalf("one query picked %d and then another value", got)
		} else if got == 10 {
			high++
		}
	}
	if share := float64(high) / float64(len(rows)); share < 0.7 || share > 0.8 {
		t.Errorf("%.2f of queries picked the higher value, want about 0.75", share)
	}
	if got := s.Curve(); got == nil || len(got.Values) != len(c.Values) {
		t.Errorf("the Set keeps curve %+v, measured %+v", got, c)
	}

	// Too few queries: no curve.
	small := New(kernels.L2, d, nil, 1)
	for i := range MinBases - 1 {
		v := randVec(rng, d)
		small.Add(fmt.Sprint(i), v, small.Prepare(v))
	}
	if _, ok, _ := small.Measure(context.Background(), exactSearch(kernels.L2, tab), knob, 1, MinBases-1); ok {
		t.Errorf("calibrated on %d queries, fewer than %d", MinBases-1, MinBases)
	}
}

// TestForMargin: a mean that reaches the target while its searches vary
// is not enough; the mean less sureBy standard errors must.
func TestForMargin(t *testing.T) {
	c := Curve{Values: []int{1, 2}}
	for b, found := range []uint8{10, 10, 9, 9} { // mean 0.95, standard error 0.025
		c.Queries = append(c.Queries, Measured{Base: int32(b), Offset: 1, Found: []uint8{found, 10}})
	}
	p, _ := c.For(0.95, NewItem)
	// 0.95 less sureBy·0.025 surely at 1, 1 at 2: searches at 2 in the
	// share that lifts the sure recall to 0.95.
	sure := 0.95 - sureBy*0.025
	share := (0.95 - sure) / (1 - sure)
	want := Point{Low: 1, High: 2, Share: share, Recall: 0.95 + share*0.05}
	if p.Low != want.Low || p.High != want.High || math.Abs(p.Share-want.Share) > 1e-9 || math.Abs(p.Recall-want.Recall) > 1e-9 {
		t.Errorf("For(0.95) = %+v, want %+v", p, want)
	}
}

func TestOffsets(t *testing.T) {
	var o Offsets
	if got := o.Median(); got != NewItem {
		t.Fatalf("median before any search %g, want %g", got, NewItem)
	}
	retunes := 0
	for i := range 1000 {
		if o.Observe(float64(i%10)/10, 2) { // offsets 0 … 0.45
			retunes++
		}
	}
	if got := o.Median(); got < 0.2 || got > 0.3 {
		t.Errorf("median %g, want about 0.25", got)
	}
	if retunes < 10 || retunes > 20 {
		t.Errorf("%d retunes over 1,000 searches", retunes)
	}
	if o.Observe(1, 0) {
		t.Error("a table without a spacing retuned")
	}
}

func TestSnapshotLoad(t *testing.T) {
	const d = 12
	rng := rand.New(rand.NewPCG(4, 4))
	tab := table{}
	s := New(kernels.Cosine, d, nil, 1)
	churn(rng, s, tab, 3000, d)
	if _, ok, err := s.Measure(context.Background(), exactSearch(kernels.Cosine, tab), Knob{"beam", 1, 8}, 1, len(tab)); !ok || err != nil {
		t.Fatalf("Measure: %v %v", ok, err)
	}
	var buf bytes.Buffer
	b := store.NewBodyWriter(&buf)
	s.Snapshot()(b)
	if err := b.Flush(); err != nil {
		t.Fatal(err)
	}
	loaded, err := Load(store.NewBodyReader(bytes.NewReader(buf.Bytes())), kernels.Cosine, d)
	if err != nil {
		t.Fatal(err)
	}
	got, _ := loaded.probes()
	want, _ := s.probes()
	if !slices.EqualFunc(got, want, func(a, b probe) bool {
		return a.without == b.without && a.base == b.base && a.offset == b.offset && slices.Equal(a.vec, b.vec) && slices.Equal(a.truth, b.truth)
	}) {
		t.Fatalf("loaded %d queries unlike the %d written", len(got), len(want))
	}
	if loaded.Curve() == nil || !slices.Equal(loaded.Curve().Queries[0].Found, s.Curve().Queries[0].Found) {
		t.Errorf("curve %+v loaded, %+v written", loaded.Curve(), s.Curve())
	}
	// It goes on following the rows as the original would.
	churn(rand.New(rand.NewPCG(5, 5)), loaded, tab, 500, d)
	checkTruth(t, kernels.Cosine, loaded, tab)

	// A torn body is refused.
	if _, err := Load(store.NewBodyReader(bytes.NewReader(buf.Bytes()[:buf.Len()/2])), kernels.Cosine, d); err == nil {
		t.Error("a torn calibration loaded")
	}
}
