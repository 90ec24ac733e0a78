package store

import (
	"runtime"

	"github.com/vecside/vecside/kernels"
)

// Hit is a search result: a key and its distance under the index's metric.
type Hit struct {
	Key      string
	Distance float64
	// XID is the transaction that wrote the row the distance was computed
	// from, 0 if unknown (see Keys.SetXID).
	XID uint32
	// Exact says Distance was computed from the row's float32 vector as
	// kernels.ExactDistance computes it from the heap's value, bit for
	// bit; otherwise it is an estimate.
	Exact bool
}

// Hits turns a search's candidates (nearest first, see Searcher.Result)
// into keys, distances under m and xids, read under the search's pin; a
// key updated while the search ran may have been seen under its old and
// its new id, and is returned once, at its nearer estimate. With floats
// (store=float) each distance is computed again exactly from the row's
// vector and q, the way the client computes it from the heap's value.
func Hits(keys *Keys, m kernels.Metric, found []Candidate, q []float32, floats *Slab[float32]) []Hit {
	hits := make([]Hit, 0, len(found))
	seen := make(map[string]struct{}, len(found))
	for _, c := range found {
		key := keys.Key(c.ID)
		if _, dup := seen[key]; dup {
			continue
		}
		seen[key] = struct{}{}
		h := Hit{Key: key, Distance: Distance(m, c.Est), XID: keys.XID(c.ID)}
		if floats != nil {
			h.Distance, h.Exact = kernels.ExactDistance(m, q, floats.Row(c.ID)), true
		}
		hits = append(hits, h)
	}
	return hits
}

// Pause is what a search does every few blocks of rows: it lets other
// goroutines run, and reports whether done (its context's Done channel)
// is closed. Searches are long runs of CPU work with no reason to block;
// without the yield, the goroutine applying the replication stream could
// wait for the scheduler to preempt one (10 ms), and a change's apply lag
// would follow the search load. A yield with nothing else to run costs
// about 100 ns.
func Pause(done <-chan struct{}) bool {
	runtime.Gosched()
	select {
	case <-done:
		return true
	default:
		return false
	}
}
