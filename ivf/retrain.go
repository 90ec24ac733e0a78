package ivf

import (
	"math"
	"math/bits"
	"slices"

	"github.com/vecside/vecside/flat"
)

// view is a picture of a state's rows taken under wmu: how many ids were
// given out, which were live, and the append-only key and float stores,
// which stay readable without the lock.
type view struct {
	n      int
	live   []uint64
	keys   []string
	floats *floatStore
}

func (st *state) capture() *view {
	return &view{n: st.table.Slots(), live: slices.Clone(st.live), keys: st.table.Keys(), floats: st.floats.view()}
}

func (v *view) alive(id uint32) bool {
	w := int(id / 64)
	return w < len(v.live) && v.live[w]&(1<<(id%64)) != 0
}

// retrain builds the next state from a capture of the current one without
// any lock, catches up on the changes made meanwhile in a few rounds
// (each capturing under wmu and applying outside it), and swaps the
// result in under wmu once the remaining changes are few. Searches keep
// using the state they loaded; a Clear abandons the retrain.
func (x *Index) retrain(gen uint64) {
	defer x.retraining.Store(false)
	x.wmu.Lock()
	st := x.cur.Load()
	if st.gen != gen {
		x.wmu.Unlock()
		return
	}
	from := st.capture()
	x.wmu.Unlock()

	next := x.build(from)
	a := x.newAdder()
	const rounds, few = 4, 1000
	for round := 1; ; round++ {
		x.wmu.Lock()
		st := x.cur.Load()
		if st.gen != gen {
			x.wmu.Unlock()
			return
		}
		to := st.capture()
		if round == rounds || changes(from, to) <= few {
			catchUp(a, next, from, to)
			next.gen = gen
			x.cur.Store(next)
			x.retrains.Add(1)
			x.wmu.Unlock()
			return
		}
		x.wmu.Unlock()
		catchUp(a, next, from, to)
		from = to
	}
}

// changes counts the rows added or removed between two captures.
func changes(a, b *view) int {
	n := b.n - a.n
	for w := range a.live {
		n += bits.OnesCount64(a.live[w] &^ b.live[w])
	}
	return n
}

// catchUp applies to next what changed between captures a and b of the
// state it was built from: rows removed since a, then rows added since a
// and still live in b (a key updated gets a new id, so it is removed and
// added again).
func catchUp(ad *adder, next *state, a, b *view) {
	for w := range a.live {
		for gone := a.live[w] &^ b.live[w]; gone != 0; gone &= gone - 1 {
			next.remove(a.keys[w*64+bits.TrailingZeros64(gone)])
		}
	}
	for id := uint32(a.n); id < uint32(b.n); id++ {
		if b.alive(id) {
			next.remove(b.keys[id])
			ad.add(next, b.keys[id], b.floats.get(id))
		}
	}
}

// build trains lists on the live rows of v and encodes every row into
// them: k-means on a sample, then every row to its nearest centroid,
// oversized lists split, codes relative to each list's centroid. Rows are
// numbered list by list, so each list's ids are contiguous.
func (x *Index) build(v *view) *state {
	var ids []uint32
	for id := range uint32(v.n) {
		if v.alive(id) {
			ids = append(ids, id)
		}
	}
	n, d := len(ids), x.cfg.Dims
	if n == 0 {
		return newState(x, nil, 0)
	}
	in := vectors{n: n, get: func(i int, dst []float32) {
		copy(dst, x.toCodecSpace(dst[:0], v.floats.get(ids[i])))
	}}
	k := x.cfg.Lists
	if k == 0 {
		k = ListsFor(n)
	}
	k = min(k, n)
	seed := x.cfg.Seed ^ uint64(n)
	cent := trainCentroids(in, d, k, seed)
	assign := assignAll(in, d, cent)
	limit := int(math.Ceil(x.cfg.ListCap * float64(n) / float64(k)))
	cent, assign = splitOversized(in, d, cent, assign, limit, seed)
	next := newState(x, cent, n)
	codes := flat.EncodeAll(x.rq, n, func(i int) ([]float32, []float32) {
		c := int(assign[i])
		return v.floats.get(ids[i]), cent[c*d : (c+1)*d]
	})
	order := make([]int, n)
	for i := range order {
		order[i] = i
	}
	slices.SortStableFunc(order, func(a, b int) int { return int(assign[a]) - int(assign[b]) })
	for _, i := range order {
		next.append(v.keys[ids[i]], v.floats.get(ids[i]), uint32(assign[i]), &codes[i])
	}
	return next
}
