package kernels

// Neighbor is a candidate found by a search: an index-internal id and its
// distance (or a monotone stand-in for it, such as the squared L2 distance).
type Neighbor struct {
	ID   uint32
	Dist float32
}

// TopK keeps the k nearest neighbors pushed into it. It is a bounded
// max-heap: the root is the current k-th distance, so a scan can reject
// most candidates with one comparison against Worst.
type TopK struct {
	k    int
	heap []Neighbor
}

// NewTopK returns an empty selection of the k nearest.
func NewTopK(k int) *TopK { return &TopK{k: k, heap: make([]Neighbor, 0, k)} }

// Reset empties t and sets its capacity to k, keeping its storage.
func (t *TopK) Reset(k int) {
	t.k = k
	t.heap = t.heap[:0]
}

// Full reports whether t already holds k neighbors.
func (t *TopK) Full() bool { return len(t.heap) >= t.k }

// Worst is the largest distance held once t is full; +Inf-like before.
func (t *TopK) Worst() float32 {
	if len(t.heap) < t.k {
		return maxFloat32
	}
	return t.heap[0].Dist
}

// Push offers a candidate; it is kept if t is not full or it beats Worst.
// Ties are broken towards the smaller id so that results are deterministic.
func (t *TopK) Push(id uint32, dist float32) {
	if len(t.heap) < t.k {
		t.heap = append(t.heap, Neighbor{id, dist})
		t.up(len(t.heap) - 1)
		return
	}
	if t.k == 0 || !less(Neighbor{id, dist}, t.heap[0]) {
		return
	}
	t.heap[0] = Neighbor{id, dist}
	t.down(0)
}

// Len is the number of neighbors t holds.
func (t *TopK) Len() int { return len(t.heap) }

// Unordered returns the neighbors t holds, in no order; the slice is t's
// own, valid until t changes.
func (t *TopK) Unordered() []Neighbor { return t.heap }

// Sorted empties t and returns its neighbors nearest first.
func (t *TopK) Sorted() []Neighbor {
	out := make([]Neighbor, len(t.heap))
	for i := len(out) - 1; i >= 0; i-- {
		out[i] = t.heap[0]
		last := len(t.heap) - 1
		t.heap[0] = t.heap[last]
		t.heap = t.heap[:last]
		t.down(0)
	}
	return out
}

const maxFloat32 = 3.40282346638528859811704183484516925440e+38

// less orders neighbors by distance, then id.
func less(a, b Neighbor) bool {
	return a.Dist < b.Dist || (a.Dist == b.Dist && a.ID < b.ID)
}

func (t *TopK) up(i int) {
	h := t.heap
	for i > 0 {
		p := (i - 1) / 2
		if !less(h[p], h[i]) {
			break
		}
		h[p], h[i] = h[i], h[p]
		i = p
	}
}

func (t *TopK) down(i int) {
	h := t.heap
	for {
		l := 2*i + 1
		if l >= len(h) {
			return
		}
		m := l
		if r := l + 1; r < len(h) && less(h[l], h[r]) {
			m = r
		}
		if !less(h[i], h[m]) {
			return
		}
		h[i], h[m] = h[m], h[i]
		i = m
	}
}
