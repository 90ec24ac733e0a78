package dataset

import (
	"runtime"
	"sync"

	"github.com/vecside/vecside/kernels"
)

// Truth is one query's exact nearest rows: their indexes into the data
// and their distances under the metric, nearest first.
type Truth struct {
	Rows      []int
	Distances []float64
}

// KthDistance is the k-th smallest distance: a returned row is a hit for
// recall@k when its exact distance is at most this (ties count).
func (t Truth) KthDistance() float64 { return t.Distances[len(t.Distances)-1] }

// GroundTruth finds the k nearest rows of data to each query by brute
// force with the SIMD kernels, queries spread over every core. Distances
// are recomputed exactly (float64) for the k found.
func GroundTruth(m kernels.Metric, data, queries [][]float32, k int) []Truth {
	out := make([]Truth, len(queries))
	next := make(chan int)
	var wg sync.WaitGroup
	for range runtime.GOMAXPROCS(0) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			top := kernels.NewTopK(k)
			for qi := range next {
				q := queries[qi]
				top.Reset(k)
				for i, v := range data {
					var d float32
					switch m {
					case kernels.L2:
						d = kernels.L2Sq(q, v)
					case kernels.Cosine:
						d = kernels.CosineDistance(q, v)
					default:
						d = -kernels.Dot(q, v)
					}
					if d != d { // NaN: zero vector under cosine
						continue
					}
					if !top.Full() || d < top.Worst() {
						top.Push(uint32(i), d)
					}
				}
				var t Truth
				for _, n := range top.Sorted() {
					t.Rows = append(t.Rows, int(n.ID))
					t.Distances = append(t.Distances, m.Distance(q, data[n.ID]))
				}
				out[qi] = t
			}
		}()
	}
	for i := range queries {
		next <- i
	}
	close(next)
	wg.Wait()
	return out
}
