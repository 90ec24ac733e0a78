package ivf

import (
	"math"
	"sync"

	"github.com/vecside/vecside/kernels"
)

// Probing, by default: lists are ranked by their centroid's distance to
// the query, and scanned nearest first until the next list is unlikely to
// hold a row nearer than the current k-th: with d² the query's squared
// distance to that list's centroid, r its rows' root mean square distance
// from the centroid and τ the searcher's k-th upper bound (all squared L2
// in the codec's space), a row x of the list is at
//
//	‖q−x‖² = d² + ‖x−c‖² − 2⟨q−c, x−c⟩,
//
// and the scan stops once d² + r² − 2·m·d·r > τ. The cross term is bounded
// by d·‖x−c‖ (Cauchy–Schwarz; m = 1 is the triangle inequality with the
// mean radius, which at 100+ dimensions prunes almost nothing), but how
// much of that bound a list's best row reaches depends on the data: rows
// whose neighbours share their list need m ≈ 0, embeddings with little
// contrast between near and far rows need m ≈ 0.5, and a query's 100th
// nearest rows need more than its 10th. So m is learned at training
// (learnMargin) for searches of 10, 100 and 1,000 rows: sample rows are
// tried as queries against the rest of the sample, and m is set so that
// 99% of their neighbours' lists would be reached; a search for k rows
// takes the margin of the first of those depths ≥ k. At least MinProbes
// and at most MaxProbes lists are scanned.
//
// Measured with BenchmarkProbing (200k rows; compact store, candidates
// capped at 3k; recall@10 after an exact re-rank; µs per query on one of
// two shared cores; at least 4 lists): clustered 128-d cosine learns
// m = 0.00, 0.975 at 226 µs; text-like 384-d cosine learns 0.42, 0.980
// at 4.7 ms (a third of its lists); Fashion-MNIST 784-d L2 (60k rows)
// learns 0.67, 0.996 at 267 µs. A fixed m could not serve all three: 0.35
// left text-like at 0.75 and Fashion-MNIST at 0.94, while 0.9 made the
// clustered set's queries three times slower for 1% of recall. Two lists
// at least instead of four lost 1 to 2% of recall on the clustered sets
// for a tenth of the time.
//
// The inner-product metric has no such geometry: it scans ProbesFor
// lists, ranked as lists says.
const (
	DefaultMarginScale = 1.0
	DefaultMinProbes   = 4
)

// margin is the stopping rule's allowance for the cross term of a search
// for k rows, as a share of its Cauchy–Schwarz bound: fixed by
// Config.Margin, or learned at training for k's depth (learnMargin) and
// scaled by Config.MarginScale.
func (x *Index) margin(k int) float64 {
	if x.cfg.Margin > 0 {
		return x.cfg.Margin
	}
	return min(1, x.cfg.MarginScale*x.learned.forK(k))
}

// MaxProbes is the most lists an adaptive search scans: half of them, at
// least 32. Data with little contrast between near and far rows (text
// embeddings) needs a third of the lists or more for recall@10 of 0.95.
func MaxProbes(lists int) int { return min(lists, max(32, lists/2)) }

// ProbesFor is the fixed number of lists a query probes for the ip
// metric: 2% of them, at least 8 (all of them when there are fewer).
func ProbesFor(lists int) int {
	return min(lists, max(8, int(math.Ceil(0.02*float64(lists)))))
}

// probe is one search's choice of lists.
type probe struct {
	x      *Index
	fixed  int     // scan exactly this many lists; 0: adaptively
	widen  float64 // a filter's inverse selectivity
	margin float64
	dist   []float32
	top    *kernels.TopK
	order  []kernels.Neighbor
}

var probes = sync.Pool{New: func() any { return &probe{top: kernels.NewTopK(1)} }}

// probing returns the probe of one search for k rows; put it back in
// probes after.
func (x *Index) probing(k, fixed int, widen float64) *probe {
	p := probes.Get().(*probe)
	p.x, p.fixed, p.widen, p.margin = x, fixed, widen, x.margin(k)
	return p
}

// lists ranks the lists for a rotated query, nearest first, and returns as
// many as the search may scan.
func (p *probe) lists(qRot []float32, dst []int) []int {
	x := p.x
	k := x.Lists()
	n := p.fixed
	switch {
	case n > 0:
	case x.cfg.Metric == kernels.IP:
		n = ProbesFor(k)
	default:
		n = MaxProbes(k)
	}
	n = min(k, int(math.Ceil(float64(n)*p.widen)))
	if cap(p.dist) < k {
		p.dist = make([]float32, k)
	}
	dist := p.dist[:k]
	cRot := x.RotatedCentroids()
	if x.cfg.Metric == kernels.IP {
		// Inner product is no distance, and the rows with the largest one
		// lie at the edges of their lists, not near the centroids: a list
		// ranks by the largest inner product expected in it, ⟨q, c⟩ plus
		// the expected maximum of its n rows' projections on q,
		// ‖q‖·σ·√(2 ln n) (the maximum of n Gaussians).
		kernels.DotBlock(qRot, cRot, dist)
		qn := float32(math.Sqrt(float64(kernels.Dot(qRot, qRot))))
		for c := range dist {
			dist[c] = -(dist[c] + qn*x.Reach(c))
		}
	} else {
		kernels.L2SqBlock(qRot, cRot, dist)
	}
	p.top.Reset(n)
	for c, v := range dist {
		if !p.top.Full() || v < p.top.Worst() {
			p.top.Push(uint32(c), v)
		}
	}
	p.order = p.top.Sorted()
	for _, nb := range p.order {
		dst = append(dst, int(nb.ID))
	}
	return dst
}

// more decides, before the scanned-th list, whether to scan it: always
// under a fixed count or for ip, else by the stopping rule above.
func (p *probe) more(scanned int, threshold float32) bool {
	x := p.x
	if p.fixed > 0 || x.cfg.Metric == kernels.IP || scanned < x.cfg.MinProbes {
		return true
	}
	next := p.order[scanned]
	tau := float64(threshold)
	if x.cfg.Metric == kernels.Cosine {
		tau *= 2 // 1 − cos is half the squared distance on the unit sphere
	}
	d2 := float64(next.Dist)
	r := float64(x.Radius(int(next.ID)))
	return d2+r*r-2*p.margin*math.Sqrt(d2)*r <= tau
}
