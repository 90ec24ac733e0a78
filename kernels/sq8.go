package kernels

import (
	"fmt"
	"math"
)

// SQ8Config configures an SQ8 codec.
type SQ8Config struct {
	Dim    int
	Metric Metric
	Seed   uint64 // seed of the random rotation
}

// SQ8 is 8-bit scalar quantization after a random rotation: each vector
// keeps its own minimum and step, and code i stands for lo + step*code[i].
// The rotation spreads outlying coordinates, which narrows each vector's
// range. It is immutable and safe for concurrent use.
type SQ8 struct {
	cfg SQ8Config
	rot *Rotation
}

// SQ8Factors are the per-vector values stored beside an SQ8 code.
type SQ8Factors struct {
	Lo, Step float32 // the code grid
	NormSq   float32 // squared norm of the (normalised, for cosine) vector
}

// NewSQ8 returns the codec for cfg.
func NewSQ8(cfg SQ8Config) (*SQ8, error) {
	if err := checkConfig(cfg.Dim, cfg.Metric); err != nil {
		return nil, err
	}
	return &SQ8{cfg: cfg, rot: NewRotation(cfg.Dim, DefaultRotationRounds, cfg.Seed)}, nil
}

// Config returns the codec's configuration.
func (s *SQ8) Config() SQ8Config { return s.cfg }

// Encode writes the code of vec to code[:Dim] and returns its factors.
func (s *SQ8) Encode(code []byte, vec []float32) SQ8Factors {
	checkLen(len(vec), s.cfg.Dim)
	x := make([]float32, s.cfg.Dim)
	prepareVector(x, vec, s.cfg.Metric)
	s.rot.Apply(x)
	lo, hi := x[0], x[0]
	for _, v := range x {
		lo, hi = min(lo, v), max(hi, v)
	}
	f := SQ8Factors{Lo: lo, Step: (hi - lo) / 255, NormSq: Dot(x, x)}
	code = code[:s.cfg.Dim]
	if f.Step == 0 {
		clear(code)
		return f
	}
	inv := 1 / f.Step
	for i, v := range x {
		code[i] = uint8(min(255, math.Round(float64((v-lo)*inv))))
	}
	return f
}

// SQ8Query is a query prepared for SQ8 codes; its buffers are reused by the
// next PrepareQuery into it.
type SQ8Query struct {
	metric Metric
	q      []int8
	step   float32 // quantization step of q
	sum    float32 // sum of the rotated query's coordinates
	normSq float32
	x      []float32
}

// PrepareQuery rotates q (normalised for cosine) and quantizes it to int8.
func (s *SQ8) PrepareQuery(dst *SQ8Query, q []float32) {
	checkLen(len(q), s.cfg.Dim)
	dst.metric = s.cfg.Metric
	dst.x = grow(dst.x, s.cfg.Dim)
	prepareVector(dst.x, q, s.cfg.Metric)
	s.rot.Apply(dst.x)
	dst.q = grow(dst.q, s.cfg.Dim)
	dst.step, _ = quantizeSym(dst.q, dst.x, 127)
	dst.sum = 0
	for _, v := range dst.x {
		dst.sum += v
	}
	dst.normSq = Dot(dst.x, dst.x)
}

// Distance estimates the distance from the query to the vector with the
// given code: <x,q> = lo*sum(q) + step*<code,q>, the second term from the
// integer kernel. L2 estimates the squared distance.
func (s *SQ8) Distance(q *SQ8Query, code []byte, f SQ8Factors) float32 {
	ip := f.Lo*q.sum + f.Step*q.step*float32(DotU8I8(code[:s.cfg.Dim], q.q))
	switch q.metric {
	case L2:
		return f.NormSq + q.normSq - 2*ip
	case IP:
		return -ip
	}
	return 1 - ip
}

const (
	sq8Magic   = "VSQ8"
	sq8Version = 1
)

// MarshalBinary encodes the codec's state in a versioned format.
func (s *SQ8) MarshalBinary() ([]byte, error) {
	return stateHeader{
		magic: sq8Magic, version: sq8Version, metric: s.cfg.Metric,
		rounds: uint8(s.rot.rounds), dim: uint32(s.cfg.Dim), seed: s.cfg.Seed,
	}.append(nil), nil
}

// UnmarshalBinary restores a codec saved by MarshalBinary.
func (s *SQ8) UnmarshalBinary(data []byte) error {
	h, _, err := decodeHeader(data, sq8Magic, sq8Version, 0)
	if err != nil {
		return err
	}
	n, err := NewSQ8(SQ8Config{Dim: int(h.dim), Metric: h.metric, Seed: h.seed})
	if err != nil {
		return fmt.Errorf("%w: %v", ErrState, err)
	}
	*s = *n
	return nil
}
