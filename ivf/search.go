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
// and the scan stops once d² + r² − 2·Margin·d·r > τ: the cross term,
// which Cauchy–Schwarz bounds by d·‖x−c‖ (Margin 1, the triangle
// inequality with the mean radius, which at 100+ dimensions prunes almost
// nothing), is in high dimensions a small fraction of that bound for all
// but a few rows. Margin was chosen by sweeping it on the clustered,
// text-like and Fashion-MNIST sets (see the package doc) for the lowest
// cost that keeps recall@10 after the heap re-rank at or above 0.95 on all
// of them. At least MinProbes and at most MaxProbes (a share of the lists)
// are scanned. The inner-product metric has no such geometry: it scans
// ProbesFor lists, ranked as nearestLists says.
const (
	DefaultMargin    = 0.35
	DefaultMinProbes = 2
)

// MaxProbes is the most lists an adaptive search scans: 10% of them, at
// least 16.
func MaxProbes(lists int) int { return min(lists, max(16, lists/10)) }

// ProbesFor is the fixed number of lists a query probes for the ip
// metric: 2% of them, at least 8 (all of them when there are fewer).
func ProbesFor(lists int) int {
	return min(lists, max(8, int(math.Ceil(0.02*float64(lists)))))
}

// probe is one search's choice of lists.
type probe struct {
	x     *Index
	fixed int     // scan exactly this many lists; 0: adaptively
	widen float64 // a filter's inverse selectivity
	dist  []float32
	top   *kernels.TopK
	order []kernels.Neighbor
}

var probes = sync.Pool{New: func() any { return &probe{top: kernels.NewTopK(1)} }}

// probing returns the probe of one search; put it back in probes after.
func (x *Index) probing(fixed int, widen float64) *probe {
	p := probes.Get().(*probe)
	p.x, p.fixed, p.widen = x, fixed, widen
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
	return d2+r*r-2*x.cfg.Margin*math.Sqrt(d2)*r <= tau
}
