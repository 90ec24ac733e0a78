package calibrate

import (
	"math"
	"slices"
	"sync/atomic"
)

// NewItem is the offset assumed before any search is seen: queries for
// items as new to the table as its rows are to each other.
const NewItem = 1.0

// Offsets keeps the offsets (see Measured.Offset) of an index's latest
// searches, from the distance to each one's nearest candidate, so that
// the recall is read for the queries the index gets: a near-duplicate
// search finds its neighbours with far less work than a search for a new
// item. Observe is lock-free, for the search path.
type Offsets struct {
	ring [offsetWindow]atomic.Uint32 // float32 bits
	n    atomic.Uint64
}

const (
	// offsetWindow is how many of the latest searches Median reads.
	offsetWindow = 256
	// minObserved is the fewest searches Median trusts.
	minObserved = 32
)

// Observe records a search whose nearest candidate lay nearest away
// (Euclidean, in the metric's space) in a table whose spacing is
// spacing; it reports whether a window's worth was recorded since the
// last report, when a reader should read Median again.
func (o *Offsets) Observe(nearest, spacing float64) bool {
	if !(spacing > 0) || math.IsNaN(nearest) {
		return false
	}
	i := o.n.Add(1) - 1
	o.ring[i%offsetWindow].Store(math.Float32bits(float32(nearest / spacing)))
	return i%(offsetWindow/4) == minObserved-1
}

// Median is the median offset of the latest searches, NewItem before
// enough were seen.
func (o *Offsets) Median() float64 {
	n := min(o.n.Load(), offsetWindow)
	if n < minObserved {
		return NewItem
	}
	seen := make([]float32, n)
	for i := range seen {
		seen[i] = math.Float32frombits(o.ring[i].Load())
	}
	slices.Sort(seen)
	return float64(seen[n/2])
}
