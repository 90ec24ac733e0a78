package hnsw

import (
	"runtime"
	"slices"
	"sync/atomic"
	"time"

	"github.com/vecside/vecside/internal/procs"
	"github.com/vecside/vecside/kernels"
)

// ring holds the rows inserted but not linked yet, in insertion order:
// each one's id and the vector its linker searches the graph with.
// Positions are sequence numbers: the writer fills head, linkers claim
// next, and tail is the oldest row that may not be linked yet. Searches
// estimate the rows of [tail, head) one by one (scanPending).
//
// The writer reuses position s − size only once tail has passed it, so
// at most size rows wait; a writer that finds the ring full links rows
// itself until it is not (see enqueue).
type ring struct {
	size             uint64
	dims             int
	ids              []atomic.Uint32
	bulk             []bool          // a copy's row (see linkWidth); read only by its linker
	done             []atomic.Uint64 // position s holds s+1 once its row is linked
	vecs             []float32
	nearIDs          []uint32 // repEntries a row: its nearest centroids, or none (see nearReps)
	head, tail, next atomic.Uint64
	progress         chan struct{} // a row was linked
}

func newRing(size, dims int) *ring {
	return &ring{
		size: uint64(size), dims: dims,
		ids: make([]atomic.Uint32, size), bulk: make([]bool, size), done: make([]atomic.Uint64, size),
		vecs: make([]float32, size*dims), nearIDs: make([]uint32, size*repEntries),
		progress: make(chan struct{}, 1),
	}
}

func (q *ring) near(seq uint64) []uint32 {
	s := int(seq%q.size) * repEntries
	return q.nearIDs[s : s+repEntries]
}

func (q *ring) vec(seq uint64) []float32 {
	s := int(seq%q.size) * q.dims
	return q.vecs[s : s+q.dims]
}

func (q *ring) bytes() int64 { return int64(q.size) * (4 + 1 + 8 + 4*int64(q.dims) + 4*repEntries) }

// claim takes the next row to link.
func (q *ring) claim() (uint64, bool) {
	for {
		n := q.next.Load()
		if n >= q.head.Load() {
			return 0, false
		}
		if q.next.CompareAndSwap(n, n+1) {
			return n, true
		}
	}
}

// finish records seq's row linked and moves tail past every linked row.
func (q *ring) finish(seq uint64) {
	q.done[seq%q.size].Store(seq + 1)
	select {
	case q.progress <- struct{}{}:
	default:
	}
	for {
		t := q.tail.Load()
		if t >= q.head.Load() || q.done[t%q.size].Load() != t+1 {
			return
		}
		q.tail.CompareAndSwap(t, t+1)
	}
}

// wait waits until a row is linked, or a millisecond.
func (q *ring) wait() {
	t := time.NewTimer(time.Millisecond)
	defer t.Stop()
	select {
	case <-q.progress:
	case <-t.C:
	}
}

// waiting is how many rows queued are not linked yet (or being linked).
func (q *ring) waiting() uint64 { return q.head.Load() - q.tail.Load() }

// idle reports whether every row queued has been linked.
func (q *ring) idle() bool { return q.tail.Load() == q.head.Load() }

// enqueue queues a new node for linking, with vec (in the search space)
// to search its neighbours with and the centroids nearest it if known
// (near, nearest first; nil if not); bulk marks a copy's row. Writers
// only.
func (r *gen) enqueue(id uint32, vec []float32, near []uint32, bulk bool) {
	q := r.ring
	r.x.insertLinked.Add(r.linkWhileWaiting(q.size))
	h := q.head.Load()
	copy(q.vec(h), vec)
	slot := q.near(h)
	for i := range slot {
		slot[i] = none
	}
	copy(slot, near)
	q.bulk[h%q.size] = bulk
	q.ids[h%q.size].Store(id)
	q.head.Store(h + 1)
	r.kick()
}

// Admit marks p as a table copy's row, linked at full width, and waits
// for the linkers until a quarter of the ring is free, so that the Insert
// of p links none. A copy calls it before it takes the locks its Insert
// runs under: a writer that finds the ring full links rows while it holds
// them, and the stream's changes, which wait for the same locks, would
// wait for the copy's linking. The quarter left is for those changes,
// which are not admitted. Admit links no row itself: the linkers already
// fill the cores, and a copy that linked beside them would take the
// processor that the scheduler keeps for the network (internal/procs)
// from the searches served during a rebuild.
func (x *Index) Admit(p Prepared) Prepared {
	r := x.cur.Load()
	q := r.ring
	for q.waiting() >= q.size-q.size/4 && !r.closed.Load() {
		r.kick()
		q.wait()
	}
	p.bulk = true
	return p
}

// linkWhileWaiting links rows, or waits for the linkers to, until fewer
// than n wait; it returns how many it linked itself.
func (r *gen) linkWhileWaiting(n uint64) (linked int64) {
	q := r.ring
	for q.waiting() >= n {
		if r.linkOne() {
			linked++
		} else {
			q.wait()
		}
	}
	return linked
}

// linkOne links the next row waiting, if one is not being linked
// already.
func (r *gen) linkOne() bool {
	seq, ok := r.ring.claim()
	if !ok {
		return false
	}
	r.link(seq)
	r.ring.finish(seq)
	return true
}

// linkInSlot links the next row waiting, if any, in one of the process's
// slots for linking (procs.Slot): however many indexes link rows at once
// (a rebuild's beside the serving one), they fill no more processors than
// there are cores, and the spare one keeps polling the network.
func (r *gen) linkInSlot() bool {
	defer procs.Slot()()
	return r.linkOne()
}

// Flush links every row inserted so far before it returns.
func (x *Index) Flush() { x.cur.Load().linkWhileWaiting(1) }

// kick starts a linker if rows wait unclaimed and fewer than
// Config.Linkers run.
func (r *gen) kick() {
	for !r.closed.Load() {
		n := r.linkers.Load()
		if int(n) >= r.x.cfg.Linkers || uint64(n) >= r.ring.head.Load()-r.ring.next.Load() {
			return
		}
		if r.linkers.CompareAndSwap(n, n+1) {
			go r.linker()
			return
		}
	}
}

// linker links rows until none waits, then ends; the writer starts
// linkers as rows come (kick). When the graph has settled it asks for
// the unreachable rows to be counted.
func (r *gen) linker() {
	defer procs.Hold()() // linkers fill every processor: see internal/procs
	for {
		for !r.closed.Load() && r.linkInSlot() {
			// Let a search waiting for this core run: linking a row takes
			// a few hundred microseconds, the scheduler's time slice ten
			// milliseconds, which a search's latency would otherwise pay.
			runtime.Gosched()
		}
		r.linkers.Add(-1)
		if r.closed.Load() || r.ring.next.Load() >= r.ring.head.Load() {
			r.maintain()
			return
		}
		// A row came after the last claim failed: carry on if allowed.
		for {
			n := r.linkers.Load()
			if int(n) >= r.x.cfg.Linkers {
				return
			}
			if r.linkers.CompareAndSwap(n, n+1) {
				break
			}
		}
	}
}

// link links the row queued at seq into the graph: it finds the row's
// neighbours on each of its layers by a search from the entry point,
// keeps those the heuristic chooses, and adds the row to each of their
// lists. The row is marked linked at the end, even if it was deleted
// meanwhile (then nothing is linked).
func (r *gen) link(seq uint64) {
	q := r.ring
	id := q.ids[seq%q.size].Load()
	defer r.g.setLinked(id)
	guard := r.ep.Pin()
	defer guard.Unpin()
	if !r.keys.Live(id) {
		return
	}
	r.changes.Add(1)
	x := r.x
	sc := x.getScratch(1)
	defer x.putScratch(sc)
	sc.forget()
	r.codes.setSpaceQuery(&sc.q, q.vec(seq))
	width := r.linkWidth(q.bulk[seq%q.size])
	lvl := level(r.g.header(id).Load())
	ep, top, ok := r.g.entryPoint()
	if !ok {
		r.epMu.Lock()
		if ep, top, ok = r.g.entryPoint(); !ok && r.keys.Live(id) {
			r.g.setEntry(id, lvl) // the first node
		}
		r.epMu.Unlock()
		if !ok {
			return
		}
	}
	est, _ := r.codes.estimate(&sc.q, ep)
	cur := kernels.Neighbor{ID: ep, Dist: est}
	for layer := top; layer > lvl; layer-- {
		cur = r.greedy(sc, cur, layer)
	}
	sc.entries = append(sc.entries[:0], cur)
	for layer := min(lvl, top); layer >= 0; layer-- {
		if layer == 0 {
			r.nearReps(sc, id, q.near(seq))
		}
		sc.vis.reset()
		sc.cand = sc.cand[:0]
		sc.res.Reset(width)
		r.beam(sc, layer, width, id, nil)
		found := sc.nearest()
		sc.own = append(sc.own[:0], r.choose(sc, found, x.cfg.M)...)
		for _, nb := range r.setOwn(id, layer, sc.own) {
			r.addEdge(sc, nb, id, layer)
		}
		sc.entries = append(sc.entries[:0], found...)
	}
	if r.reps != nil {
		rep := &r.reps[r.codes.centroidOf(id)]
		if rep.CompareAndSwap(none, id) && !r.keys.Live(id) {
			rep.CompareAndSwap(id, none) // deleted meanwhile: see delete
		}
	}
	if lvl > top {
		r.epMu.Lock()
		if _, now, ok := r.g.entryPoint(); r.keys.Live(id) && (!ok || lvl > now) {
			r.g.setEntry(id, lvl)
		}
		r.epMu.Unlock()
	}
}

// linkWidth is the beam width a link searches with: EfConstruction, but for
// the stream's rows once the index follows it, while rows wait to be
// linked, half of it with an eighth of the ring waiting and a quarter with
// half of it, never below 2·M. A row of a million-row graph costs a core a
// few hundred microseconds to link at full width, so a steady 2,000 rows a
// second beside searches on two cores outruns the linkers; the rows linked
// while they catch up get edges chosen from fewer candidates, the stream
// keeps its lag. Every row of an index that does not follow the stream
// yet (the initial copy) and a rebuild's copied rows (bulk, see Admit)
// link at full width: their back-pressure holds no one's writes back. The
// stream's rows that a rebuild's new index takes meanwhile narrow like the
// serving index's, or a rebuild would hold the stream back for its
// full-width links.
func (r *gen) linkWidth(bulk bool) int {
	ef := r.x.cfg.EfConstruction
	q := r.ring
	switch {
	case bulk || !r.linkingBehind():
		return ef
	case q.waiting()*2 >= q.size:
		ef /= 4
	default:
		ef /= 2
	}
	return max(ef, min(r.x.cfg.EfConstruction, 2*r.x.cfg.M))
}

// linkingBehind reports whether rows wait for linking (an eighth of the
// ring) in an index the stream is applied to: searches then yield their
// core at each check, since the stream's lag counts on the linkers
// keeping up.
func (r *gen) linkingBehind() bool {
	q := r.ring
	return r.x.following.Load() && q.waiting()*8 >= q.size
}

// cand is a candidate neighbour of a base node: its distance from the
// base, and its decoded vector's slot in the scratch arena (−1: not
// decoded yet).
type cand struct {
	id  uint32
	d   float32
	vec int32
}

// choose keeps at most max of found (nearest first, with their distances
// from the node being linked) by the heuristic of the HNSW paper: a
// candidate is kept unless a node kept already is nearer to it than the
// base is, so that the edges point in different directions. It returns
// the ids kept, in sc.ids.
func (r *gen) choose(sc *scratch, found []kernels.Neighbor, max int) []uint32 {
	sc.cands = sc.cands[:0]
	for _, f := range found {
		sc.cands = append(sc.cands, cand{id: f.ID, d: f.Dist, vec: -1})
	}
	return r.heuristic(sc, max, max)
}

// heuristic applies choose's rule to sc.cands, sorted nearest first,
// decoding candidates as it needs them.
func (r *gen) heuristic(sc *scratch, max, fill int) []uint32 {
	vec := func(i int) []float32 {
		c := &sc.cands[i]
		if c.vec < 0 {
			c.vec = r.decoded(sc, c.id)
		}
		return sc.slot(c.vec)
	}
	kept := sc.ids[:0]
	var keptAt [2 * MaxM]int
	for i := range sc.cands {
		if len(kept) == max {
			break
		}
		v, good := vec(i), true
		for _, j := range keptAt[:len(kept)] {
			if r.codes.between(v, vec(j)) < sc.cands[i].d {
				good = false
				break
			}
		}
		if good {
			keptAt[len(kept)] = i
			kept = append(kept, sc.cands[i].id)
		}
	}
	// Fill the list with the nearest candidates the rule left out.
	for i := 0; i < len(sc.cands) && len(kept) < fill; i++ {
		if !slices.Contains(keptAt[:len(kept)], i) {
			keptAt[len(kept)] = i
			kept = append(kept, sc.cands[i].id)
		}
	}
	sc.ids = kept
	return kept
}

// setOwn writes a node's list at a layer: ids, less those deleted since
// they were chosen, which it returns. No list gains an edge to a deleted
// node (see repair).
func (r *gen) setOwn(id uint32, layer int, ids []uint32) []uint32 {
	r.g.lock(id)
	defer r.g.unlock(id)
	live := ids[:0]
	for _, v := range ids {
		if r.keys.Live(v) {
			live = append(live, v)
		}
	}
	if _, n := r.g.list(id, layer); n > 0 {
		// Rows linked meanwhile through id (an entry point whose own
		// linking was not over) added themselves to its list: they keep
		// their edge, or they could be reached from nowhere.
		r.mergeOwn(id, layer, live)
		return live
	}
	r.g.setList(id, layer, live)
	return live
}

// mergeOwn sets id's list at a layer when its linking ends: the ids it
// chose and those already on its list, shrunk by the heuristic to the
// layer's capacity. The caller holds id's lock.
func (r *gen) mergeOwn(id uint32, layer int, chosen []uint32) {
	sc := r.x.getScratch(1)
	defer r.x.putScratch(sc)
	sc.forget()
	merged := append(sc.own[:0], chosen...)
	for _, v := range r.g.readList(sc.list[:0], id, layer) {
		if r.keys.Live(v) && !slices.Contains(merged, v) {
			merged = append(merged, v)
		}
	}
	sc.own = merged
	if c := r.g.capacity(layer); len(merged) > c {
		merged = r.shrink(sc, id, merged, c)
	}
	r.g.setList(id, layer, merged)
}

// addEdge adds to to from's list at a layer, unless to was deleted;
// a full list is shrunk by the heuristic over its ids and to.
func (r *gen) addEdge(sc *scratch, from, to uint32, layer int) {
	g := r.g
	g.lock(from)
	defer g.unlock(from)
	if !r.keys.Live(to) || !r.keys.Live(from) {
		return
	}
	words, n := g.list(from, layer)
	for i := range n {
		if words[i].Load() == to {
			return
		}
	}
	if n < g.capacity(layer) {
		words[n].Store(to)
		g.setCount(from, layer, n+1)
		return
	}
	sc.list = append(g.readList(sc.list[:0], from, layer), to)
	g.setList(from, layer, r.shrink(sc, from, sc.list, g.capacity(layer)))
}

// dropLook bounds how many of the farthest candidates dropOne examines.
const dropLook = 4

// dropOne returns sc.cands (sorted nearest first) less one, when they are
// one more than a list holds: of the dropLook farthest, the farthest that
// a nearer candidate is nearer to than the base is (the heuristic's reason
// to leave a candidate out), else the farthest. The heuristic over the
// whole list would compare every candidate with every edge kept before
// it, hundreds of distances for each of the thirty-odd lists a link
// touches, to drop the same kind of edge.
func (r *gen) dropOne(sc *scratch) []uint32 {
	dominated := func(i int) bool {
		for _, near := range sc.cands[:i] {
			if r.codes.between(sc.slot(sc.cands[i].vec), sc.slot(near.vec)) < sc.cands[i].d {
				return true
			}
		}
		return false
	}
	last := len(sc.cands) - 1
	drop := last
	for i := last; i > max(0, last-dropLook); i-- {
		if dominated(i) {
			drop = i
			break
		}
	}
	kept := sc.ids[:0]
	for i, c := range sc.cands {
		if i != drop {
			kept = append(kept, c.id)
		}
	}
	sc.ids = kept
	return kept
}

// shrink chooses at most max of ids, by the heuristic, as the neighbours
// of base; deleted ids are dropped. A list one edge over (addEdge's) loses
// one by dropOne. The caller holds base's lock.
func (r *gen) shrink(sc *scratch, base uint32, ids []uint32, max int) []uint32 {
	baseVec := sc.slot(r.decoded(sc, base))
	sc.cands = sc.cands[:0]
	for _, id := range ids {
		if !r.keys.Live(id) {
			continue
		}
		at := r.decoded(sc, id)
		sc.cands = append(sc.cands, cand{id: id, d: r.codes.between(baseVec, sc.slot(at)), vec: at})
	}
	slices.SortFunc(sc.cands, func(a, b cand) int {
		switch {
		case a.d < b.d:
			return -1
		case a.d > b.d:
			return 1
		}
		return int(a.id) - int(b.id)
	})
	if len(sc.cands) == max+1 {
		return r.dropOne(sc)
	}
	return r.heuristic(sc, max, max)
}

// decoded returns the arena slot of id's decoded vector, decoding it on
// its first use since the last forget. A link decodes the lists of the
// thirty-odd rows it adds an edge to, which share most of their rows; a
// row's codes do not change while the link's epoch pin holds its id.
func (r *gen) decoded(sc *scratch, id uint32) int32 {
	if at, ok := sc.dec[id]; ok {
		return at
	}
	d := r.x.cfg.Dims
	n := len(sc.arena)
	sc.arena = slices.Grow(sc.arena, d)[:n+d]
	r.codes.decode(sc.arena[n:n+d], id)
	at := int32(n / d)
	sc.dec[id] = at
	return at
}

// slot is the decoded vector in arena slot at.
func (sc *scratch) slot(at int32) []float32 {
	return sc.arena[int(at)*sc.dims : int(at+1)*sc.dims]
}

// maxDecoded bounds the decoded rows a scratch keeps between links.
const maxDecoded = 4096

// forget empties the decoded rows' cache (and gives back an arena grown
// past maxDecoded rows).
func (sc *scratch) forget() {
	if sc.dec == nil {
		sc.dec = make(map[uint32]int32)
	}
	clear(sc.dec)
	if cap(sc.arena) > maxDecoded*sc.dims {
		sc.arena = nil
	}
	sc.arena = sc.arena[:0]
}
