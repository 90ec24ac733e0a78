package pgvalue

import (
	"errors"
	"math"
)

// IEEE 754 half precision (binary16), pgvector's halfvec element: a sign
// bit, 5 exponent bits (bias 15) and 10 mantissa bits. Every half is a
// float32 exactly, so halfvec values are held as float32 without loss;
// the other way rounds to nearest, ties to even, as the F16C instruction
// pgvector uses does.

// errHalfOverflow is a finite value beyond the largest half, 65,504
// (from 65,520 on, it rounds to infinity).
var errHalfOverflow = errors.New("value out of range for halfvec: overflow")

// HalfToFloat32 converts a half, given by its bits, to the float32 of the
// same value; NaN stays NaN.
func HalfToFloat32(h uint16) float32 {
	sign := uint32(h&0x8000) << 16
	exp := uint32(h>>10) & 0x1f
	man := uint32(h & 0x3ff)
	switch exp {
	case 0x1f: // infinity, NaN (its payload kept)
		return math.Float32frombits(sign | 0x7f800000 | man<<13)
	case 0: // zero, subnormal: man × 2^-24, exact in float32
		f := float32(man) * (1.0 / (1 << 24))
		if sign != 0 {
			f = -f
		}
		return f
	}
	return math.Float32frombits(sign | (exp+127-15)<<23 | man<<13)
}

// Float32ToHalf rounds f to the nearest half, ties to even, and gives its
// bits. Infinities and NaN convert to themselves; a finite f that rounds
// to infinity does too, and overflow says so.
func Float32ToHalf(f float32) (h uint16, overflow bool) {
	bits := math.Float32bits(f)
	sign := uint16(bits>>16) & 0x8000
	exp := int(bits>>23) & 0xff
	man := bits & 0x7fffff
	if exp == 0xff {
		if man != 0 {
			return sign | 0x7e00 | uint16(man>>13), false // a quiet NaN
		}
		return sign | 0x7c00, false
	}
	e := exp - 127 + 15 // the half's biased exponent
	switch {
	case e >= 0x1f:
		return sign | 0x7c00, true
	case e > 0:
		// Exponent and mantissa shifted together: a mantissa that rounds
		// up past its top carries into the exponent, as it should, and
		// the largest exponent's carry is infinity.
		h = roundShift(uint32(e)<<23|man, 13)
	case e > -11:
		// A subnormal half: the float's mantissa with its implicit one,
		// shifted by one more place for every step of e below 1. A
		// result of 0x400 is the smallest normal half, correctly encoded.
		h = roundShift(man|0x800000, uint(14-e))
	default:
		// Below half the smallest subnormal (2^-25): zero.
		return sign, false
	}
	return sign | h, h >= 0x7c00
}

// roundShift is v >> s rounded to nearest, ties to even.
func roundShift(v uint32, s uint) uint16 {
	r := v >> s
	rest, half := v&(1<<s-1), uint32(1)<<(s-1)
	if rest > half || rest == half && r&1 == 1 {
		r++
	}
	return uint16(r)
}

// roundHalf is f as a halfvec holds it.
func roundHalf(f float32) (float32, error) {
	h, overflow := Float32ToHalf(f)
	if overflow {
		return 0, errHalfOverflow
	}
	return HalfToFloat32(h), nil
}

// AppendHalfvec encodes v in pgvector's binary halfvec format, each
// element rounded to the nearest half (an element beyond halfvec's range
// becomes an infinity, which pgvector refuses).
func AppendHalfvec(dst []byte, v []float32) []byte {
	dst = append(dst, byte(len(v)>>8), byte(len(v)), 0, 0)
	for _, x := range v {
		h, _ := Float32ToHalf(x)
		dst = append(dst, byte(h>>8), byte(h))
	}
	return dst
}
