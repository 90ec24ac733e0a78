package kernels

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
)

// valid reports whether m is one of the defined metrics.
func (m Metric) valid() bool { return m == L2 || m == Cosine || m == IP }

// MaxDim is the largest dimension the codecs accept: it keeps the integer
// dot products of 8-bit codes exact in int32 (65536*255*128 < 2^31).
const MaxDim = 65536

// ErrState is returned, wrapped, when serialised codec state cannot be
// decoded: wrong magic, unknown version, truncated or invalid fields.
var ErrState = errors.New("kernels: invalid codec state")

// stateHeader starts every serialised codec: a magic, a format version and
// the fields every codec has.
type stateHeader struct {
	magic   string // 4 bytes
	version uint8
	metric  Metric
	rounds  uint8
	dim     uint32
	seed    uint64
}

const stateHeaderLen = 4 + 1 + 1 + 1 + 4 + 8

func (h stateHeader) append(b []byte) []byte {
	b = append(b, h.magic...)
	b = append(b, h.version, uint8(h.metric), h.rounds)
	b = binary.LittleEndian.AppendUint32(b, h.dim)
	return binary.LittleEndian.AppendUint64(b, h.seed)
}

// decodeHeader checks the magic, version and common fields of data, whose
// total length must be stateHeaderLen+rest, and returns the header and the
// rest.
func decodeHeader(data []byte, magic string, version uint8, rest int) (stateHeader, []byte, error) {
	var h stateHeader
	if len(data) < stateHeaderLen || string(data[:4]) != magic {
		return h, nil, fmt.Errorf("%w: not a %s state", ErrState, magic)
	}
	h = stateHeader{
		magic:   magic,
		version: data[4],
		metric:  Metric(data[5]),
		rounds:  data[6],
		dim:     binary.LittleEndian.Uint32(data[7:]),
		seed:    binary.LittleEndian.Uint64(data[11:]),
	}
	switch {
	case h.version != version:
		return h, nil, fmt.Errorf("%w: %s version %d, want %d", ErrState, magic, h.version, version)
	case len(data) != stateHeaderLen+rest:
		return h, nil, fmt.Errorf("%w: %s state is %d bytes, want %d", ErrState, magic, len(data), stateHeaderLen+rest)
	case !h.metric.valid():
		return h, nil, fmt.Errorf("%w: unknown metric %d", ErrState, h.metric)
	case h.dim == 0 || h.dim > MaxDim:
		return h, nil, fmt.Errorf("%w: dimension %d", ErrState, h.dim)
	case h.rounds != DefaultRotationRounds:
		return h, nil, fmt.Errorf("%w: %d rotation rounds, want %d", ErrState, h.rounds, DefaultRotationRounds)
	}
	return h, data[stateHeaderLen:], nil
}

func checkConfig(dim int, m Metric) error {
	if dim <= 0 || dim > MaxDim {
		return fmt.Errorf("kernels: dimension %d out of range [1, %d]", dim, MaxDim)
	}
	if !m.valid() {
		return fmt.Errorf("kernels: unknown metric %d", m)
	}
	return nil
}

// prepareVector copies v into dst (len(v) == dim), normalised to unit length
// for the cosine metric, so that cosine is inner product on the unit sphere.
func prepareVector(dst, v []float32, m Metric) {
	copy(dst, v)
	if m != Cosine {
		return
	}
	if n := math.Sqrt(float64(Dot(dst, dst))); n > 0 {
		s := float32(1 / n)
		for i := range dst {
			dst[i] *= s
		}
	}
}

// quantizeSym rounds src to integers in [-levels, levels] on the grid
// step*k, with step = max|src|/levels (0 for a zero vector). It returns the
// step and the sum of the integers.
func quantizeSym(dst []int8, src []float32, levels int) (step float32, sum int32) {
	m := maxAbs(src)
	if m == 0 {
		clear(dst)
		return 0, 0
	}
	step = m / float32(levels)
	return step, quantize(dst[:len(src)], src, 1/step, int32(levels))
}

// maxAbs is the largest |v| of src. It compares bits: a float's
// magnitude orders as its bits do (a NaN's above all), and an integer
// max is a couple of instructions where the float max, which must order
// NaN and ±0, is a dozen; it was most of a 1,536-d query's preparation.
func maxAbs(src []float32) float32 {
	const mag = 1<<31 - 1
	var m0, m1, m2, m3 uint32
	i := 0
	for ; i+4 <= len(src); i += 4 {
		m0 = max(m0, math.Float32bits(src[i])&mag)
		m1 = max(m1, math.Float32bits(src[i+1])&mag)
		m2 = max(m2, math.Float32bits(src[i+2])&mag)
		m3 = max(m3, math.Float32bits(src[i+3])&mag)
	}
	for ; i < len(src); i++ {
		m0 = max(m0, math.Float32bits(src[i])&mag)
	}
	return math.Float32frombits(max(m0, m1, m2, m3))
}

func quantizeGo(dst []int8, src []float32, inv float32, levels int32) (sum int32) {
	dst = dst[:len(src)]
	for i, v := range src {
		k := int32(math.RoundToEven(float64(v * inv))) // one instruction, where Round is a dozen
		k = max(-levels, min(levels, k))
		dst[i] = int8(k)
		sum += k
	}
	return sum
}

func abs32(v float32) float32 { return math.Float32frombits(math.Float32bits(v) &^ (1 << 31)) }

func sqrt32(v float32) float32 { return float32(math.Sqrt(float64(v))) }
