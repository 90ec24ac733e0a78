package hnsw

import (
	"runtime"
	"slices"
	"sync/atomic"

	"github.com/vecside/vecside/indexer/store"
)

// graph is the layered neighbour lists, by row id, in flat slabs of
// uint32 that hold no pointers, so the garbage collector never scans
// them.
//
// Layer 0 holds every node: a row of 1 + m0 words, a header and up to m0
// neighbour ids. A node of level L > 0 also owns L consecutive rows of
// the upper slab, 1 + m words each (a count and up to m ids), the first
// of which upOf names.
//
// Every word is read and written atomically. Searches read without a
// lock: a count, then that many ids. A writer holds the node's lock (a
// bit of its header) and writes a list's new ids first, then overwrites
// what the old list held past the new count with none, then the count:
// a reader that loaded the old count sees, at each position, an id the
// list held before or after the write, or none; never an id from longer
// ago. Such a mixed read may miss a neighbour or see one twice, which
// costs one search a little recall and nothing else; every id it can see
// is safe to visit (see the package doc on epochs).
type graph struct {
	m, m0 int
	l0    *store.Slab[atomic.Uint32]
	up    *store.Slab[atomic.Uint32]
	upOf  *store.Slab[atomic.Uint32]
	// Writers only (under the index's mutex): upper rows handed out, and
	// runs of them freed by reused nodes, by length.
	upRows int
	upFree [maxLevel + 1][]uint32
	// uppers lists the nodes given upper layers (some since reused), to
	// find a new entry point among.
	uppers []uint32
	// spare is what upFree and uppers hold, in bytes, for bytes: they are
	// the writers', and bytes runs beside them (a status query).
	spare atomic.Int64
	// entry is the entry point: (id+1)<<8 | level, 0 for none. It is never
	// a deleted row (see Index.Delete).
	entry atomic.Uint64
}

// Header bits of a node's layer-0 row.
const (
	hdrCount  = 0xff
	hdrLevel  = 8       // shift of the level, 5 bits
	hdrLinked = 1 << 30 // the node's linking is over (or was skipped)
	hdrLock   = 1 << 31

	maxLevel = 15
	none     = ^uint32(0)
)

func newGraph(m int) *graph {
	return &graph{
		m: m, m0: 2 * m,
		l0:   store.NewSlab[atomic.Uint32](1 + 2*m),
		up:   store.NewSlab[atomic.Uint32](1 + m),
		upOf: store.NewSlab[atomic.Uint32](1),
	}
}

func (g *graph) header(id uint32) *atomic.Uint32 { return &g.l0.Row(id)[0] }

// level is the top layer of a node.
func level(h uint32) int { return int(h>>hdrLevel) & 31 }

// list returns a node's list at a layer: its words (ids, and none past
// the count) and the count. The layer must not exceed the node's level.
func (g *graph) list(id uint32, layer int) ([]atomic.Uint32, int) {
	if layer == 0 {
		row := g.l0.Row(id)
		return row[1:], int(row[0].Load() & hdrCount)
	}
	row := g.up.Row(g.upOf.At(id).Load() + uint32(layer-1))
	return row[1:], int(row[0].Load())
}

// capacity is the most neighbours a list of a layer holds.
func (g *graph) capacity(layer int) int {
	if layer == 0 {
		return g.m0
	}
	return g.m
}

// lock takes a node's writer lock, for changing its lists or header.
// Locks are never nested: a writer holds one node at a time.
func (g *graph) lock(id uint32) {
	h := g.header(id)
	for spins := 0; ; spins++ {
		v := h.Load()
		if v&hdrLock == 0 && h.CompareAndSwap(v, v|hdrLock) {
			return
		}
		if spins > 16 {
			runtime.Gosched()
		}
	}
}

func (g *graph) unlock(id uint32) { g.header(id).And(^uint32(hdrLock)) }

// setList replaces a node's list at a layer with ids (at most its
// capacity); the caller holds the node's lock.
func (g *graph) setList(id uint32, layer int, ids []uint32) {
	words, old := g.list(id, layer)
	for i, v := range ids {
		words[i].Store(v)
	}
	for i := len(ids); i < old; i++ {
		words[i].Store(none)
	}
	g.setCount(id, layer, len(ids))
}

// setCount sets the count of a node's list at a layer; the caller holds
// the node's lock. The header's other bits are kept as they are even if
// they change meanwhile (setLinked takes no lock).
func (g *graph) setCount(id uint32, layer, n int) {
	if layer > 0 {
		g.up.Row(g.upOf.At(id).Load() + uint32(layer-1))[0].Store(uint32(n))
		return
	}
	h := g.header(id)
	for {
		v := h.Load()
		if h.CompareAndSwap(v, v&^hdrCount|uint32(n)) {
			return
		}
	}
}

// readList appends a list's ids to dst.
func (g *graph) readList(dst []uint32, id uint32, layer int) []uint32 {
	words, n := g.list(id, layer)
	for i := range n {
		if v := words[i].Load(); v != none {
			dst = append(dst, v)
		}
	}
	return dst
}

// grow makes room for ids [0, n).
func (g *graph) grow(n int) {
	g.l0.Grow(n)
	g.upOf.Grow(n)
}

// init makes id a node of the given level with empty lists, before it
// is published; reused is true for an id that held a node before, whose
// upper rows go back to the free runs (no reader can reach them: the id
// was reclaimed). Writers only.
func (g *graph) init(id uint32, lvl int, reused bool) {
	g.lock(id)
	if reused {
		if old := level(g.header(id).Load()); old > 0 {
			g.upFree[old] = append(g.upFree[old], g.upOf.At(id).Load())
		}
	}
	if lvl > 0 {
		var first uint32
		if free := g.upFree[lvl]; len(free) > 0 {
			first = free[len(free)-1]
			g.upFree[lvl] = free[:len(free)-1]
		} else {
			first = uint32(g.upRows)
			g.upRows += lvl
			g.up.Grow(g.upRows)
		}
		for r := range lvl {
			g.up.Row(first + uint32(r))[0].Store(0)
		}
		g.upOf.At(id).Store(first)
		g.uppers = append(g.uppers, id)
	}
	if reused || lvl > 0 {
		g.noteSpare()
	}
	// The count is 0: what the row held past it is never read.
	g.l0.Row(id)[0].Store(uint32(lvl)<<hdrLevel | hdrLock) // not linked
	g.unlock(id)
}

// compactUppers drops from the nodes given upper layers those no longer
// live or no longer of an upper level (ids reused), and repeats, so that
// the list follows the graph's size under churn. Writers only.
func (g *graph) compactUppers(live func(uint32) bool) {
	slices.Sort(g.uppers)
	kept := g.uppers[:0]
	for i, id := range g.uppers {
		if (i == 0 || id != g.uppers[i-1]) && live(id) && level(g.header(id).Load()) > 0 {
			kept = append(kept, id)
		}
	}
	g.uppers = kept
	g.noteSpare()
}

// noteSpare records what upFree and uppers hold for bytes. Writers only.
func (g *graph) noteSpare() {
	b := 4 * int64(cap(g.uppers))
	for _, f := range g.upFree {
		b += 4 * int64(cap(f))
	}
	g.spare.Store(b)
}

// setLinked marks a node's linking over.
func (g *graph) setLinked(id uint32) { g.header(id).Or(hdrLinked) }

func (g *graph) linked(id uint32) bool { return g.header(id).Load()&hdrLinked != 0 }

// entryPoint returns the entry point and its level; ok is false for an
// empty graph.
func (g *graph) entryPoint() (id uint32, lvl int, ok bool) {
	v := g.entry.Load()
	if v == 0 {
		return 0, 0, false
	}
	return uint32(v>>8) - 1, int(v & 0xff), true
}

func (g *graph) setEntry(id uint32, lvl int) { g.entry.Store(uint64(id+1)<<8 | uint64(lvl)) }

// bytes is the memory the lists and headers hold.
func (g *graph) bytes() int64 {
	return g.l0.Bytes() + g.up.Bytes() + g.upOf.Bytes() + g.spare.Load()
}
