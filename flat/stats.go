package flat

import (
	"fmt"
	"slices"
)

// Stats describe an index's size and shape, for vecside_status() and
// metrics.
type Stats struct {
	Rows       int   // keys held
	Tombstones int   // removed vectors whose space a compaction will reclaim
	CodeBytes  int64 // codes and factors (or float vectors, for the float index)
	// FloatBytes is float32 vectors kept beside the codes: rows waiting
	// for Finish, or IVF's store for retraining.
	FloatBytes int64
	KeyBytes   int64 // the key map, estimated
	Lists      []int // live rows per list
	Pending    int   // rows not yet in a list (searched exactly)
	Retrains   int   // retrains swapped in since start or load
	Retraining bool  // a retrain is running
}

// BytesPerVector is the index memory per row held, with or without the
// key map and the float store.
func (s Stats) BytesPerVector(keys, floats bool) float64 {
	if s.Rows == 0 {
		return 0
	}
	b := s.CodeBytes
	if keys {
		b += s.KeyBytes
	}
	if floats {
		b += s.FloatBytes
	}
	return float64(b) / float64(s.Rows)
}

// ListHistogram summarises list sizes as min/p50/p90/p99/max.
func (s Stats) ListHistogram() string {
	if len(s.Lists) == 0 {
		return ""
	}
	l := slices.Clone(s.Lists)
	slices.Sort(l)
	at := func(p float64) int { return l[min(len(l)-1, int(p*float64(len(l))))] }
	return fmt.Sprintf("min=%d p50=%d p90=%d p99=%d max=%d", l[0], at(0.5), at(0.9), at(0.99), l[len(l)-1])
}
