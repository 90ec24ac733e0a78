package hnsw

import (
	"context"
	"fmt"
	"runtime"

	"github.com/vecside/vecside/indexer/store"
	"github.com/vecside/vecside/kernels"
)

// scratch is one search's or one link's working memory, pooled.
type scratch struct {
	q       query
	vis     visited
	cand    minHeap
	res     *kernels.TopK // the ef nearest eligible nodes found
	near    *kernels.TopK // the centroids nearest to the query
	nearIDs []uint32      // their ids
	s       *store.Searcher
	done    <-chan struct{}
	budget  int // estimates a filtered search may spend on the graph; 0: no limit
	spent   int // estimates made
	// absent is a node the search treats as not in the graph (none: no
	// such node): never walked to, never a result (see SearchWithout).
	absent  uint32
	found   []kernels.Neighbor
	entries []kernels.Neighbor
	ids     []uint32 // the heuristic's choice
	own     []uint32 // a linked node's own choice, while its neighbours' lists change
	fresh   []uint32 // the neighbours of a node being expanded not visited yet
	list    []uint32
	cands   []cand
	arena   []float32        // decoded rows, by the slots of dec
	dec     map[uint32]int32 // a link's decoded rows: id → slot in arena
	dims    int
}

func (x *Index) getScratch(k int) *scratch {
	sc, _ := x.scratch.Get().(*scratch)
	if sc == nil {
		sc = &scratch{res: kernels.NewTopK(1), near: kernels.NewTopK(1), s: store.NewSearcher(x.rq, k), dims: x.cfg.Dims}
	}
	sc.s.Reset(k)
	sc.budget, sc.spent, sc.absent = 0, 0, none
	return sc
}

func (x *Index) putScratch(sc *scratch) {
	sc.done = nil
	x.scratch.Put(sc)
}

// checkEvery is how many node expansions a search makes between checks of
// its context: a few hundred expansions of 32 neighbours are well under a
// millisecond of work.
const checkEvery = 128

// Search returns the smallest set of candidates that, with the codec's
// confidence, holds the k nearest to q among the rows the search reaches,
// at most limit of them, nearest estimate first. ef is the beam width (0:
// the index's EfSearch; at least k). A non-nil allow restricts the search
// to those keys (see the package doc for how it switches to a scan of
// the allowed rows). It gives up with ctx's error once ctx ends.
func (x *Index) Search(ctx context.Context, q []float32, k, limit, ef int, allow []string) ([]store.Hit, error) {
	return x.search(ctx, q, k, limit, ef, allow, "", true)
}

// SearchWithout is Search as if the row of key were not in the graph:
// the walk neither returns it nor passes through it, so that the search
// for a row's own vector meets the graph as a search for a new item
// would, instead of walking to the row and reading its neighbours off its
// links (the recall calibration's held-out queries, indexer/calibrate).
// Only when the row is the graph's entry point does the walk start there.
func (x *Index) SearchWithout(ctx context.Context, q []float32, k, limit, ef int, key string) ([]store.Hit, error) {
	return x.search(ctx, q, k, limit, ef, nil, key, true)
}

// search is Search without the row of absent (""; none); without scan, a
// filtered search walks the graph first however few rows are allowed
// (for tests of that path).
func (x *Index) search(ctx context.Context, q []float32, k, limit, ef int, allow []string, absent string, scan bool) ([]store.Hit, error) {
	if len(q) != x.cfg.Dims {
		panic(fmt.Sprintf("hnsw: %d-d query against %d-d index", len(q), x.cfg.Dims))
	}
	if x.cfg.Metric == kernels.Cosine && kernels.Dot(q, q) == 0 {
		return nil, nil // no row has a cosine distance to the zero vector
	}
	r := x.cur.Load()
	g := r.ep.Pin()
	defer g.Unpin()
	sc := x.getScratch(k)
	defer x.putScratch(sc)
	sc.done = ctx.Done()
	r.codes.setQuery(&sc.q, q)
	var a *store.Allow
	if allow != nil {
		a = r.allowSet(allow)
	}
	if absent != "" {
		if id, ok := r.keys.Lookup(absent); ok {
			sc.absent = id
		}
	}
	if ef <= 0 {
		ef = x.cfg.EfSearch
	}
	r.search(sc, k, max(ef, k), a, scan)
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	return store.Hits(r.keys, x.cfg.Metric, sc.s.Result(limit), q, r.codes.floats), nil
}

// allowSet turns keys into the set of their live ids, under the caller's
// pin; unknown keys are left out.
func (r *gen) allowSet(keys []string) *store.Allow {
	a := store.NewAllow()
	for _, k := range keys {
		if id, ok := r.keys.Lookup(k); ok && r.keys.Live(id) {
			a.Add(id)
		}
	}
	return a
}

// search fills sc.s with the candidates of one query, under a pin: the
// ef nearest eligible rows a walk of the graph (or a scan of the allowed
// rows) finds by their estimates against the query's centroid, estimated
// again against their own (refine).
func (r *gen) search(sc *scratch, k, ef int, allow *store.Allow, scan bool) {
	sc.res.Reset(ef)
	defer r.refine(sc)
	if allow != nil {
		n := allow.Len()
		if n == 0 {
			return
		}
		if scan && r.scanCheaper(n, ef) {
			r.scanAllowed(sc, allow)
			return
		}
		sc.budget = max(1, n/scanWeight) // a walk as dear as the scan
	}
	sc.vis.reset()
	if sc.absent != none {
		sc.vis.add(sc.absent) // seen already: never pushed, never a result
	}
	sc.cand = sc.cand[:0]
	r.scanPending(sc, allow)
	complete := true
	if ep, top, ok := r.g.entryPoint(); ok {
		est, _ := r.codes.estimate(&sc.q, ep)
		cur := kernels.Neighbor{ID: ep, Dist: est}
		for layer := top; layer > 0; layer-- {
			cur = r.greedy(sc, cur, layer)
		}
		sc.entries = append(sc.entries[:0], cur)
		r.nearReps(sc, sc.absent, nil)
		complete = r.beam(sc, 0, ef, none, allow)
	}
	if allow != nil && (!complete || sc.res.Len() < k) && !stopped(sc) {
		// The graph search cost more than a scan of the allowed rows, or
		// found fewer than k of them: scan them all.
		sc.res.Reset(ef)
		r.scanAllowed(sc, allow)
	}
}

// refine offers the rows found to sc.s at their precise estimates.
func (r *gen) refine(sc *scratch) {
	for _, nb := range sc.res.Unordered() {
		est, bound := r.codes.refine(&sc.q, nb.ID)
		sc.s.Offer(nb.ID, est, bound)
	}
}

func stopped(sc *scratch) bool { return store.Pause(sc.done) }

// scanWeight is how many rows a scan of the allowed rows estimates for
// the cost of one estimate of a graph walk: the scan reads rows in id
// order, the walk in no order and pays for the neighbour lists, its
// heaps and its visited set on top (measured on 1M × 128 rows: a scan 80
// ns a row, a walk 370 ns an estimate).
const scanWeight = 4

// scanCheaper reports whether a filter allowing n rows is better served
// by a scan of its rows than by a graph search with beam ef. A graph
// search estimates about visitsPerEf·ef nodes when every row is allowed,
// and about that over the allowed share f = n/N with a filter, since the
// beam fills only with allowed rows; a scan costs n estimates, each
// scanWeight times cheaper. The scan wins when n·f < scanWeight·visitsPerEf·ef.
func (r *gen) scanCheaper(n, ef int) bool {
	total := max(r.keys.Len(), 1)
	f := float64(n) / float64(total)
	return float64(n)*f < float64(scanWeight*visitsPerEf*ef)
}

// visitsPerEf is how many nodes an unfiltered walk of layer 0 estimates
// per unit of beam width: 7.7, 5.4 and 4.7 at ef 32, 64 and 128 on 1M
// clustered 128-d rows.
const visitsPerEf = 6

// scanAllowed estimates every allowed row directly.
func (r *gen) scanAllowed(sc *scratch, allow *store.Allow) {
	i, halted := 0, false
	allow.Each(func(id uint32) {
		if i++; i%4096 == 0 && stopped(sc) {
			halted = true
		}
		if halted || !r.keys.Live(id) {
			return
		}
		est, _ := r.codes.estimate(&sc.q, id)
		sc.res.Push(id, est)
	})
}

// scanPending estimates the rows inserted but not linked yet: a search
// sees every row inserted before it started, linked or not.
func (r *gen) scanPending(sc *scratch, allow *store.Allow) {
	q := r.ring
	for s, head := q.tail.Load(), q.head.Load(); s < head; s++ {
		id := q.ids[s%q.size].Load()
		if r.g.linked(id) || !sc.vis.add(id) || !r.eligible(id, none, allow) {
			continue
		}
		est, _ := r.codes.estimate(&sc.q, id)
		sc.res.Push(id, est)
	}
}

// repEntries is how many centroids nearest to a query lend their
// representative node as an entry to layer 0.
const repEntries = 3

// nearReps adds to sc.entries, with their estimates, the representatives
// of the centroids nearest to sc's query (but self): a walk of layer 0
// starts in the query's neighbourhood even when the greedy descent from
// the top ended in another (see the package doc). near holds those
// centroids if known (a row's, found when it was encoded), else its
// first is none or it is nil.
func (r *gen) nearReps(sc *scratch, self uint32, near []uint32) {
	if r.reps == nil {
		return
	}
	if len(near) == 0 || near[0] == none {
		sc.near.Reset(repEntries)
		sc.nearIDs = sc.nearIDs[:0]
		for _, c := range r.codes.cents.near(sc.q.v, sc.near) {
			sc.nearIDs = append(sc.nearIDs, c.ID)
		}
		near = sc.nearIDs
	}
	for _, c := range near {
		if c == none {
			break
		}
		if rep := r.reps[c].Load(); rep != none && rep != self {
			est, _ := r.codes.estimate(&sc.q, rep)
			sc.entries = append(sc.entries, kernels.Neighbor{ID: rep, Dist: est})
		}
	}
}

// eligible reports whether id may be a result: live, not self, allowed.
func (r *gen) eligible(id, self uint32, allow *store.Allow) bool {
	return id != self && r.keys.Live(id) && (allow == nil || allow.Has(id))
}

// greedy walks a layer above 0 from cur to the nearest node it can reach
// by always moving to a nearer neighbour. Deleted nodes are walked
// through like any other.
func (r *gen) greedy(sc *scratch, cur kernels.Neighbor, layer int) kernels.Neighbor {
	for moved := true; moved; {
		moved = false
		words, n := r.g.list(cur.ID, layer)
		// The neighbours' codes are scattered rows, each a cache miss:
		// asked for all at once, their loads overlap.
		fresh := sc.fresh[:0]
		for i := range n {
			if nb := words[i].Load(); nb != none && nb != sc.absent {
				r.codes.prefetch(nb)
				fresh = append(fresh, nb)
			}
		}
		sc.fresh = fresh
		for _, nb := range fresh {
			if est, _ := r.codes.estimate(&sc.q, nb); est < cur.Dist {
				cur, moved = kernels.Neighbor{ID: nb, Dist: est}, true
			}
		}
	}
	return cur
}

// beam is the search of one layer from sc.entries (estimated already):
// it expands the nearest node not yet expanded until that is farther than
// the ef-th nearest eligible node found, which it keeps in sc.res.
// Deleted and disallowed nodes are expanded like the others, so that a
// search walks through them, but are never results. The caller resets
// sc.vis, sc.cand and sc.res. It returns false if it stopped early: its
// context ended, or it spent its budget.
func (r *gen) beam(sc *scratch, layer, ef int, self uint32, allow *store.Allow) bool {
	for _, e := range sc.entries {
		if sc.vis.add(e.ID) && r.eligible(e.ID, self, allow) {
			sc.res.Push(e.ID, e.Dist)
		}
		// An entry seen already is expanded all the same: the entry
		// point may be a row still being linked, which scanPending has
		// estimated, while rows linked through it meanwhile are reachable
		// only from its list.
		sc.cand.push(e.ID, e.Dist)
	}
	for expanded := 0; len(sc.cand) > 0; expanded++ {
		c := sc.cand.pop()
		if sc.res.Full() && c.Dist > sc.res.Worst() {
			break
		}
		if layer == 0 && len(sc.cand) > 0 {
			// The nearest candidate left is most likely the next one
			// expanded: its list loads while this one's neighbours are
			// estimated.
			r.g.l0.Prefetch(sc.cand[0].ID)
		}
		if expanded%checkEvery == checkEvery-1 {
			if stopped(sc) {
				return false
			}
			if self == none && r.linkingBehind() {
				runtime.Gosched() // let the linkers and the stream's apply have the core
			}
		}
		if sc.budget > 0 && sc.spent > sc.budget {
			return false
		}
		words, n := r.g.list(c.ID, layer)
		fresh := sc.fresh[:0]
		for i := range n {
			if nb := words[i].Load(); nb != none && sc.vis.add(nb) {
				r.codes.prefetch(nb)
				fresh = append(fresh, nb)
			}
		}
		sc.fresh = fresh
		for _, nb := range fresh {
			est, _ := r.codes.estimate(&sc.q, nb)
			sc.spent++
			if sc.res.Full() && est >= sc.res.Worst() {
				continue
			}
			sc.cand.push(nb, est)
			if r.eligible(nb, self, allow) {
				sc.res.Push(nb, est)
			}
		}
	}
	return true
}

// nearest moves sc.res's nodes, nearest first, into sc.found.
func (sc *scratch) nearest() []kernels.Neighbor {
	sc.found = append(sc.found[:0], sc.res.Sorted()...)
	return sc.found
}
