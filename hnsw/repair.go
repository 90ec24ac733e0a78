package hnsw

import (
	"runtime"
	"slices"
)

// maintain starts the index's maintenance goroutine unless it runs: it
// repairs the lists that point at deleted rows once enough are waiting,
// and counts the rows a search cannot reach once the graph has changed
// enough since the last count, then ends. It never holds the writers'
// mutex for longer than taking the deleted rows or releasing their ids.
func (r *gen) maintain() {
	if r.closed.Load() || !r.maintaining.CompareAndSwap(false, true) {
		return
	}
	go func() {
		for {
			for !r.closed.Load() && r.maintenanceDue() {
				r.maintenance()
			}
			r.maintaining.Store(false)
			// Work that came while the flag was still set is ours too.
			if r.closed.Load() || !r.maintenanceDue() || !r.maintaining.CompareAndSwap(false, true) {
				return
			}
		}
	}()
}

// repairDue reports whether enough deleted rows wait for a repair pass.
func (r *gen) repairDue() bool {
	n := r.ntombs.Load()
	return n >= minRepair && float64(n) >= r.x.cfg.RepairAfter*float64(r.keys.Len())
}

// countDue reports whether the graph changed enough since the last count
// of unreachable rows (a tenth of its rows, at least 1,000) and no row
// waits for linking.
func (r *gen) countDue() bool {
	n := r.changes.Load()
	return n > 0 && r.ring.idle() && (n >= 1000 || r.unreachable.Load() < 0) && float64(n) >= 0.1*float64(r.keys.Len())
}

func (r *gen) maintenanceDue() bool { return r.repairDue() || r.countDue() }

func (r *gen) maintenance() {
	if r.repairDue() {
		r.repair()
	}
	if r.countDue() {
		r.countUnreachable()
	}
}

// Repair runs a repair pass over every deleted row waiting, and counts
// the rows left unreachable, before it returns (see the package doc).
func (x *Index) Repair() {
	r := x.cur.Load()
	r.repair()
	r.countUnreachable()
}

// repair takes the deleted rows out of the graph: every node's lists are
// read under its lock, and where one holds deleted rows it is rebuilt by
// the heuristic from its other neighbours and the deleted rows'
// neighbours (a deleted node's own lists just lose the deleted ids). A
// deleted row is taken only once its linking is over, so no list gains
// an edge to it afterwards (edges are written only to live rows, under
// the lock of the list's node, and the row stopped being live before the
// pass began). Once every list is clean, the rows' ids are released to
// the keys: a search that pins from then on cannot reach them, and they
// are reused only after every search pinned before has ended.
func (r *gen) repair() {
	r.x.repairMu.Lock()
	defer r.x.repairMu.Unlock()
	r.x.mu.Lock()
	var dead []uint32
	kept := r.tombs[:0]
	for _, id := range r.tombs {
		if r.g.linked(id) {
			dead = append(dead, id)
		} else {
			kept = append(kept, id)
		}
	}
	r.tombs = kept
	high := r.keys.High()
	r.x.mu.Unlock()
	if len(dead) == 0 {
		return
	}
	guard := r.ep.Pin()
	isDead := make([]uint64, (high+63)/64)
	for _, id := range dead {
		isDead[id/64] |= 1 << (id % 64)
	}
	sc := r.x.getScratch(1)
	for id := range high {
		if r.closed.Load() {
			break
		}
		r.repairNode(sc, id, isDead)
		if id%256 == 255 {
			runtime.Gosched() // see linker
		}
	}
	r.x.putScratch(sc)
	guard.Unpin()
	if r.closed.Load() {
		return // the rows are dropped whole
	}
	r.x.mu.Lock()
	for _, id := range dead {
		r.keys.Release(id)
	}
	r.ntombs.Add(-int64(len(dead)))
	r.g.compactUppers(r.keys.Live)
	r.x.mu.Unlock()
}

// repairNode takes the ids marked in dead out of id's lists.
func (r *gen) repairNode(sc *scratch, id uint32, dead []uint64) {
	g := r.g
	isDead := func(v uint32) bool { return int(v/64) < len(dead) && dead[v/64]&(1<<(v%64)) != 0 }
	g.lock(id)
	defer g.unlock(id)
	live := r.keys.Live(id)
	for layer := range level(g.header(id).Load()) + 1 {
		sc.list = g.readList(sc.list[:0], id, layer)
		if !slices.ContainsFunc(sc.list, isDead) {
			continue
		}
		kept := sc.own[:0]
		for _, v := range sc.list {
			if !isDead(v) {
				kept = append(kept, v)
			}
		}
		ids := kept
		if live {
			for _, v := range sc.list {
				if !isDead(v) {
					continue
				}
				words, n := g.list(v, layer)
				for i := range n {
					if w := words[i].Load(); w != none && w != id && !isDead(w) && !slices.Contains(kept, w) {
						kept = append(kept, w)
					}
				}
			}
			sc.forget()
			ids = r.shrink(sc, id, kept, g.capacity(layer))
		}
		g.setList(id, layer, ids)
		sc.own = kept[:0]
	}
}

// countUnreachable counts the live, linked rows that a walk of layer 0
// from the entry point does not reach: rows no search can find.
func (r *gen) countUnreachable() {
	r.changes.Store(0)
	guard := r.ep.Pin()
	defer guard.Unpin()
	high := r.keys.High()
	seen := make([]uint64, (high+63)/64)
	var stack []uint32
	if ep, _, ok := r.g.entryPoint(); ok {
		seen[ep/64] |= 1 << (ep % 64)
		stack = append(stack, ep)
	}
	for walked := 0; len(stack) > 0; walked++ {
		if walked%65536 == 65535 {
			runtime.Gosched() // see linker
		}
		id := stack[len(stack)-1]
		stack = stack[:len(stack)-1]
		words, n := r.g.list(id, 0)
		for i := range n {
			if v := words[i].Load(); v < high && seen[v/64]&(1<<(v%64)) == 0 {
				seen[v/64] |= 1 << (v % 64)
				stack = append(stack, v)
			}
		}
	}
	lost := 0
	r.keys.Each(func(id uint32) {
		if id < high && seen[id/64]&(1<<(id%64)) == 0 && r.g.linked(id) {
			lost++
		}
	})
	r.unreachable.Store(int64(lost))
}
