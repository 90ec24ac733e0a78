package store

import (
	"math"
	"math/bits"
	"slices"

	"github.com/vecside/vecside/kernels"
)

// Searcher collects the candidates of one coded search: every row offered
// comes with an estimate and an error bound, and the searcher keeps those
// whose lower bound can still beat the k-th smallest upper bound seen.
// One Searcher serves one query at a time.
type Searcher struct {
	rq      *kernels.RaBitQ
	k       int
	upper   *kernels.TopK // the k smallest upper bounds offered
	cands   []Candidate
	scanned int
	// fast-scan output, kept here so that it does not escape per block
	est, bound [kernels.BlockVectors]float32
}

// Candidate is a row that may be among the k nearest: its id, its
// estimated distance (squared for L2) and the lower end of its bound.
type Candidate struct {
	ID       uint32
	Est, Low float32
}

// NewSearcher returns a searcher for the k nearest under rq's estimates.
func NewSearcher(rq *kernels.RaBitQ, k int) *Searcher {
	return &Searcher{rq: rq, k: k, upper: kernels.NewTopK(k)}
}

// Reset empties s for a new query for the k nearest.
func (s *Searcher) Reset(k int) {
	s.k = k
	s.upper.Reset(k)
	s.cands = s.cands[:0]
	s.scanned = 0
}

// Threshold is the k-th smallest upper bound offered so far: a row whose
// lower bound exceeds it is (with the codec's confidence) not among the k
// nearest. Before k offers it is the largest float32.
func (s *Searcher) Threshold() float32 { return s.upper.Worst() }

// Scanned counts the rows estimated so far.
func (s *Searcher) Scanned() int { return s.scanned }

// Offer considers id at distance est ± bound.
func (s *Searcher) Offer(id uint32, est, bound float32) {
	low := est - bound
	if low > s.Threshold() || math.IsNaN(float64(est)) {
		return
	}
	s.upper.Push(id, est+bound)
	s.cands = append(s.cands, Candidate{ID: id, Est: est, Low: low})
	if len(s.cands) >= max(256, 8*s.k) {
		s.prune()
	}
}

// prune drops the candidates the threshold has excluded since they came.
func (s *Searcher) prune() {
	thr := s.Threshold()
	s.cands = slices.DeleteFunc(s.cands, func(c Candidate) bool { return c.Low > thr })
}

// Result returns the smallest set of candidates that, with the codec's
// confidence, holds the k nearest: those whose lower bound does not exceed
// the final k-th upper bound, nearest estimate first, at most limit. The
// slice is the searcher's own, valid until its next use.
func (s *Searcher) Result(limit int) []Candidate {
	s.prune()
	slices.SortFunc(s.cands, func(a, b Candidate) int {
		if a.Est != b.Est {
			if a.Est < b.Est {
				return -1
			}
			return 1
		}
		return int(a.ID) - int(b.ID)
	})
	return s.cands[:min(limit, len(s.cands))]
}

// Distance turns an estimate into the metric's distance: the codec
// estimates squared L2 distances.
func Distance(m kernels.Metric, est float32) float64 {
	if m == kernels.L2 {
		return math.Sqrt(math.Max(float64(est), 0))
	}
	return float64(est)
}

// ExactEstimate is the exact distance in the codec's terms: squared for
// L2, 1-cos for cosine, the negative inner product for ip.
func ExactEstimate(m kernels.Metric, q, v []float32) float32 {
	switch m {
	case kernels.L2:
		return kernels.L2Sq(q, v)
	case kernels.Cosine:
		return kernels.CosineDistance(q, v)
	}
	return -kernels.Dot(q, v)
}

// Allow is a set of row ids, for a filtered search: a search reads only
// allowed rows and skips whole blocks that hold none.
type Allow struct {
	bits []uint64
	n    int
	// Rows is what the ids number, when the set's maker swaps its rows
	// wholesale (lists.Coded.Allow: the generation it read them in),
	// for its searches to read the same.
	Rows any
}

// NewAllow returns an empty set.
func NewAllow() *Allow { return &Allow{} }

// Add puts id in the set.
func (a *Allow) Add(id uint32) {
	w := int(id / 64)
	if w >= len(a.bits) {
		a.bits = append(a.bits, make([]uint64, w+1-len(a.bits))...)
	}
	if a.bits[w]&(1<<(id%64)) == 0 {
		a.bits[w] |= 1 << (id % 64)
		a.n++
	}
}

// Has reports whether id is in the set.
func (a *Allow) Has(id uint32) bool {
	w := int(id / 64)
	return w < len(a.bits) && a.bits[w]&(1<<(id%64)) != 0
}

// Each calls fn for every id in the set, in increasing order.
func (a *Allow) Each(fn func(id uint32)) {
	for w, word := range a.bits {
		for ; word != 0; word &= word - 1 {
			fn(uint32(w*64 + bits.TrailingZeros64(word)))
		}
	}
}

// Len is the number of ids in the set.
func (a *Allow) Len() int { return a.n }

// block returns the slots of mask whose ids are allowed.
func (a *Allow) block(ids *[kernels.BlockVectors]uint32, mask uint32) uint32 {
	var out uint32
	for m := mask; m != 0; m &= m - 1 {
		v := bits.TrailingZeros32(m)
		if a.Has(ids[v]) {
			out |= 1 << v
		}
	}
	return out
}
