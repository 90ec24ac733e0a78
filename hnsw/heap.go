package hnsw

import "github.com/vecside/vecside/kernels"

// minHeap is a search's frontier: nodes to expand, nearest first.
type minHeap []kernels.Neighbor

func (h *minHeap) push(id uint32, d float32) {
	*h = append(*h, kernels.Neighbor{ID: id, Dist: d})
	s := *h
	for i := len(s) - 1; i > 0; {
		p := (i - 1) / 2
		if s[p].Dist <= s[i].Dist {
			break
		}
		s[p], s[i] = s[i], s[p]
		i = p
	}
}

func (h *minHeap) pop() kernels.Neighbor {
	s := *h
	top := s[0]
	last := len(s) - 1
	s[0] = s[last]
	s = s[:last]
	for i := 0; ; {
		l := 2*i + 1
		if l >= len(s) {
			break
		}
		m := l
		if r := l + 1; r < len(s) && s[r].Dist < s[l].Dist {
			m = r
		}
		if s[i].Dist <= s[m].Dist {
			break
		}
		s[i], s[m] = s[m], s[i]
		i = m
	}
	*h = s
	return top
}

// visited is the set of nodes a search has estimated: open addressing
// over a table that grows with the search, so that a search touches
// memory in proportion to what it visits rather than to the graph.
type visited struct {
	slots []uint32 // id+1; 0 is empty
	used  int
}

func (v *visited) reset() {
	if v.slots == nil || len(v.slots) > 1<<16 {
		v.slots = make([]uint32, 1<<12)
	} else {
		clear(v.slots)
	}
	v.used = 0
}

// add puts id in the set, reporting whether it was new.
func (v *visited) add(id uint32) bool {
	if 2*(v.used+1) > len(v.slots) {
		v.rehash()
	}
	mask := uint32(len(v.slots) - 1)
	for i := (id * 0x9e3779b1) >> 7 & mask; ; i = (i + 1) & mask {
		switch v.slots[i] {
		case 0:
			v.slots[i] = id + 1
			v.used++
			return true
		case id + 1:
			return false
		}
	}
}

func (v *visited) rehash() {
	old := v.slots
	v.slots = make([]uint32, 2*len(old))
	mask := uint32(len(v.slots) - 1)
	for _, s := range old {
		if s == 0 {
			continue
		}
		i := ((s - 1) * 0x9e3779b1) >> 7 & mask
		for v.slots[i] != 0 {
			i = (i + 1) & mask
		}
		v.slots[i] = s
	}
}
