package ivf

import (
	"math"
	"math/rand/v2"
	"slices"
	"sync"

	"github.com/vecside/vecside/indexer/store"
	"github.com/vecside/vecside/kernels"
)

const (
	// marginQueries is how many sample rows learnMargin tries as queries.
	marginQueries = 256
	// marginRecall is the share of true neighbours whose lists the learned
	// margin lets a search reach: above the 0.95 recall@10 the defaults
	// promise after the heap re-rank, to leave room for the codes' errors.
	marginRecall = 0.99
)

// marginDepths are the numbers of neighbours, at the table's scale, a
// margin is learned for; a search for k rows takes the margin of the
// first depth ≥ k (the last beyond it). One margin does not serve every
// k: on clustered data a query's 10 nearest rows share its list (m ≈ 0),
// while its 100th lie in lists whose near side faces it, which the
// rule with m ≈ 0 stops short of (a 10%-selective post-filter asks for
// 200 rows: with the k = 10 margin, recall@10 fell to 0.915 on 50k
// clustered rows).
var marginDepths = [...]int{10, 100, 1000}

// margins are the margins learned for marginDepths.
type margins [len(marginDepths)]float64

// forK is the margin of a search for k rows.
func (m *margins) forK(k int) float64 {
	for i, d := range marginDepths {
		if k <= d {
			return m[i]
		}
	}
	return m[len(m)-1]
}

// learnMargin learns the stopping rule's margins (see Probing) from the
// training sample, by trying sample rows as queries against the rest of
// it: for each depth, for each query, the lists holding its nearest
// neighbours, the margin that would have let the rule reach each of them
// (the largest any list on the way needs), and then the margin under
// which marginRecall of all those neighbours are reached. The sample is
// sparser than the table, so a query's k nearest rows of the table are
// about as near as its k·f nearest rows of a sample that holds a share f
// of the table: those are the neighbours it looks for. In the codec's
// space (normalised rows for cosine), squared L2 throughout.
func learnMargin(space []float32, d int, cent []float32, assign []int32, rows, minProbes int, seed uint64) margins {
	var learned margins
	n, k := len(assign), len(cent)/d
	if n < 2 || k <= minProbes {
		return learned
	}
	radius := listRadii(space, d, cent, assign)
	var want [len(marginDepths)]int
	for i, depth := range marginDepths {
		want[i] = min(n-1, max(1, int(math.Ceil(float64(depth)*float64(n)/float64(max(rows, n))))))
	}
	rng := rand.New(rand.NewPCG(seed, 0x6d617267))
	queries := rng.Perm(n)[:min(n-1, marginQueries)]
	var mu sync.Mutex
	var needed [len(marginDepths)][]float64
	store.Parallel(len(queries), func(lo, hi int) {
		dist := make([]float32, n)
		cdist := make([]float32, k)
		rank := make([]int, k)
		var local [len(marginDepths)][]float64
		for _, qi := range queries[lo:hi] {
			q := space[qi*d : (qi+1)*d]
			kernels.L2SqBlock(q, space, dist)
			dist[qi] = float32(math.Inf(1))
			nearest := nearestRows(dist, want[len(want)-1])
			kernels.L2SqBlock(q, cent, cdist)
			order := make([]int, k)
			for c := range order {
				order[c] = c
			}
			slices.SortFunc(order, func(a, b int) int { return cmpFloat(cdist[a], cdist[b]) })
			for r, c := range order {
				rank[c] = r
			}
			for i, w := range want {
				local[i] = appendNeeded(local[i], nearest[:w], float64(dist[nearest[w-1]]), order, rank, assign, cdist, radius, minProbes)
			}
		}
		mu.Lock()
		for i := range needed {
			needed[i] = append(needed[i], local[i]...)
		}
		mu.Unlock()
	})
	for i := range needed {
		slices.Sort(needed[i])
		m := needed[i][min(len(needed[i])-1, int(marginRecall*float64(len(needed[i]))))]
		learned[i] = min(1, max(0, m))
	}
	// A deeper search never takes a smaller margin than a shallower one.
	for i := 1; i < len(learned); i++ {
		learned[i] = max(learned[i], learned[i-1])
	}
	return learned
}

// appendNeeded appends, for each row of near (a query's nearest rows, the
// farthest at squared distance tau), the margin that lets the rule reach
// its list and every list ranked before it (order: the lists nearest
// first; rank: each list's place in order).
func appendNeeded(dst []float64, near []int, tau float64, order, rank []int, assign []int32, cdist, radius []float32, minProbes int) []float64 {
	deepest := 0
	for _, i := range near {
		deepest = max(deepest, rank[assign[i]])
	}
	need := make([]float64, deepest+1)
	running := math.Inf(-1)
	for r := range need {
		if r >= minProbes {
			c := order[r]
			d2, rc := float64(cdist[c]), float64(radius[c])
			if dc := math.Sqrt(d2); dc*rc > 0 {
				running = max(running, (d2+rc*rc-tau)/(2*dc*rc))
			}
		}
		need[r] = running
	}
	for _, i := range near {
		dst = append(dst, need[rank[assign[i]]])
	}
	return dst
}

// listRadii is each list's root mean square distance of its rows from its
// centroid.
func listRadii(space []float32, d int, cent []float32, assign []int32) []float32 {
	k := len(cent) / d
	sum := make([]float64, k)
	count := make([]int, k)
	for i, c := range assign {
		sum[c] += float64(kernels.L2Sq(space[i*d:(i+1)*d], cent[int(c)*d:int(c+1)*d]))
		count[c]++
	}
	out := make([]float32, k)
	for c := range out {
		if count[c] > 0 {
			out[c] = float32(math.Sqrt(sum[c] / float64(count[c])))
		}
	}
	return out
}

// nearestRows returns the indexes of the n smallest distances, nearest
// first.
func nearestRows(dist []float32, n int) []int {
	top := kernels.NewTopK(n)
	for i, v := range dist {
		if !top.Full() || v < top.Worst() {
			top.Push(uint32(i), v)
		}
	}
	var out []int
	for _, nb := range top.Sorted() {
		out = append(out, int(nb.ID))
	}
	return out
}

func cmpFloat(a, b float32) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}
