package store

import (
	"fmt"
	"math"
	"sync"

	"github.com/vecside/vecside/internal/procs"
	"github.com/vecside/vecside/kernels"
)

// Kind names what an index keeps per row for the second, precise pass
// over the rows that survive the 1-bit fast scan: the store= option.
type Kind uint8

const (
	// Ext4 keeps a 4-bit extended RaBitQ code per row: the compact store.
	Ext4 Kind = 4
	// Ext6 keeps a 6-bit extended RaBitQ code per row, as a 4-bit code of
	// its top bits and a plane of its low two bits (kernels.ExtInnerTop).
	Ext6 Kind = 6
	// Ext8 keeps an 8-bit extended RaBitQ code per row.
	Ext8 Kind = 8
	// Float keeps the float32 vectors: the second pass is exact.
	Float Kind = 32
)

// ParseKind reads the store= option: ext4, ext6, ext8 or float.
func ParseKind(s string) (Kind, error) {
	switch s {
	case "ext4":
		return Ext4, nil
	case "ext6":
		return Ext6, nil
	case "ext8":
		return Ext8, nil
	case "float":
		return Float, nil
	}
	return 0, fmt.Errorf("store=%s: want ext4, ext6, ext8 or float", s)
}

func (k Kind) String() string {
	switch k {
	case Ext4:
		return "ext4"
	case Ext6:
		return "ext6"
	case Ext8:
		return "ext8"
	case Float:
		return "float"
	}
	return fmt.Sprintf("store(%d)", uint8(k))
}

// ExBits is the width of the extended code the store keeps, 0 for none.
func (k Kind) ExBits() int {
	if k == Float {
		return 0
	}
	return int(k)
}

// Encoded is one vector's codes: the 1-bit code and its factors, and the
// extended code and its factors when the codec has one.
type Encoded struct {
	Code, Ext []byte
	F, XF     kernels.Factors
}

// NewEncoded returns buffers sized for rq's codes.
func NewEncoded(rq *kernels.RaBitQ) Encoded {
	return Encoded{Code: make([]byte, rq.CodeBytes()), Ext: make([]byte, rq.ExtBytes())}
}

// Encode fills e with vec's codes relative to centroid.
func (e *Encoded) Encode(rq *kernels.RaBitQ, vec, centroid []float32) {
	e.F, e.XF = rq.Encode(vec, centroid, e.Code, e.Ext)
}

// Parallel runs fn over [0, n) cut into one contiguous range per core
// and waits for all of them.
func Parallel(n int, fn func(lo, hi int)) {
	workers := min(procs.Cores(), max(1, n/64))
	var wg sync.WaitGroup
	for w := range workers {
		lo, hi := n*w/workers, n*(w+1)/workers
		wg.Go(func() { fn(lo, hi) })
	}
	wg.Wait()
}

// Mean returns the mean of vecs (normalised first for the cosine metric,
// as the codec sees them); the zero vector when there are none.
func Mean(m kernels.Metric, dims int, vecs [][]float32) []float32 {
	sum := make([]float64, dims)
	for _, v := range vecs {
		scale := 1.0
		if m == kernels.Cosine {
			if nn := kernels.Dot(v, v); nn > 0 {
				scale = 1 / sqrt64(float64(nn))
			}
		}
		for j, f := range v {
			sum[j] += float64(f) * scale
		}
	}
	out := make([]float32, dims)
	if len(vecs) > 0 {
		for j, s := range sum {
			out[j] = float32(s / float64(len(vecs)))
		}
	}
	return out
}

func sqrt64(x float64) float64 { return math.Sqrt(x) }

// CodedConfig configures the codes of an index: lists.Coded's, and
// hnsw's.
type CodedConfig struct {
	Metric kernels.Metric
	Dims   int
	Store  Kind   // Ext4, Ext6, Ext8 or Float
	Seed   uint64 // of the random rotation
	// KeyWidth is the bytes of a fixed-width key, 0 for variable.
	KeyWidth int
}

// Codec returns the RaBitQ codec of cfg.
func (cfg CodedConfig) Codec() (*kernels.RaBitQ, error) {
	return kernels.NewRaBitQ(kernels.RaBitQConfig{Dim: cfg.Dims, Metric: cfg.Metric, ExBits: cfg.Store.ExBits(), Seed: cfg.Seed})
}
