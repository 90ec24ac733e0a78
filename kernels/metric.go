package kernels

import (
	"fmt"
	"math"
)

// Metric names a distance function with pgvector's semantics, so a distance
// reported by vecside equals the one its operator would compute in SQL.
type Metric uint8

const (
	// L2 is the Euclidean distance, pgvector's <->.
	L2 Metric = iota + 1
	// Cosine is 1 - cos(a, b), pgvector's <=>. A zero vector has none.
	Cosine
	// IP is the negative inner product, pgvector's <#>.
	IP
)

// ParseMetric accepts the names used in index options: l2, cosine, ip.
func ParseMetric(s string) (Metric, error) {
	switch s {
	case "l2":
		return L2, nil
	case "cosine":
		return Cosine, nil
	case "ip":
		return IP, nil
	}
	return 0, fmt.Errorf("unknown metric %q (want l2, cosine or ip)", s)
}

func (m Metric) String() string {
	switch m {
	case L2:
		return "l2"
	case Cosine:
		return "cosine"
	case IP:
		return "ip"
	}
	return fmt.Sprintf("metric(%d)", uint8(m))
}

// Operator is the pgvector operator that computes m.
func (m Metric) Operator() string {
	switch m {
	case L2:
		return "<->"
	case Cosine:
		return "<=>"
	case IP:
		return "<#>"
	}
	return "?"
}

// Distance is the exact distance between a and b under m, accumulated in
// float64 so that it can serve as the reference for faster kernels. The
// cosine distance involving a zero vector is NaN, as in pgvector.
func (m Metric) Distance(a, b []float32) float64 { return ExactDistance(m, a, b) }

// ExactDistance is Distance for a heap value of either float width, as
// fetched from a real[] or double precision[] column.
func ExactDistance[T float32 | float64](m Metric, a []float32, b []T) float64 {
	var dot, na, nb, l2 float64
	for i := range a {
		// Each product is rounded before it is added (the conversions
		// keep the compiler from fusing them into one multiply-add, as it
		// may on arm64 and amd64 v3): the SQL helpers' distances over
		// real[] (deploy's distance.sql) then equal these to the bit.
		x, y := float64(a[i]), float64(b[i])
		dot += float64(x * y)
		na += float64(x * x)
		nb += float64(y * y)
		d := x - y
		l2 += float64(d * d)
	}
	switch m {
	case L2:
		return math.Sqrt(l2)
	case Cosine:
		return 1 - dot/math.Sqrt(na*nb)
	case IP:
		return -dot
	}
	panic("kernels: distance under unknown metric")
}
