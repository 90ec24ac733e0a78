package pgvalue

import (
	"encoding/hex"
	"errors"
	"math"
	"math/rand/v2"
	"slices"
	"testing"
)

func TestHalfConversion(t *testing.T) {
	const p24, p25 = 1.0 / (1 << 24), 1.0 / (1 << 25)
	for _, c := range []struct {
		f        float32
		h        uint16
		overflow bool
	}{
		{1, 0x3c00, false},
		{-2, 0xc000, false},
		{0.1, 0x2e66, false},
		{float32(math.Copysign(0, -1)), 0x8000, false},
		{65504, 0x7bff, false},                       // the largest half
		{65519.996, 0x7bff, false},                   // just below the midpoint to infinity
		{65520, 0x7c00, true},                        // the midpoint: ties to even, infinity
		{-1e6, 0xfc00, true},                         // far beyond
		{1.0 / (1 << 14), 0x0400, false},             // the smallest normal
		{1023 * p24, 0x03ff, false},                  // the largest subnormal
		{p24, 0x0001, false},                         // the smallest subnormal
		{p25, 0x0000, false},                         // half of it: ties to even, zero
		{math.Nextafter32(p25, 1), 0x0001, false},    // just above: rounds up
		{3 * p25, 0x0002, false},                     // between 1 and 2 subnormal units: to even
		{5 * p25, 0x0002, false},                     // between 2 and 3: to even
		{-p24 / 4, 0x8000, false},                    // underflow keeps the sign
		{math.SmallestNonzeroFloat32, 0x0000, false}, // a float32 subnormal
		{1 + 1.0/(1<<11), 0x3c00, false},             // halfway between 1 and its successor: to even
		{1 + 3.0/(1<<11), 0x3c02, false},             // halfway between two odd and even: to even
		{2 - 1.0/(1<<11), 0x4000, false},             // a mantissa that rounds up carries into the exponent
		{float32(math.Inf(1)), 0x7c00, false},
		{float32(math.Inf(-1)), 0xfc00, false},
	} {
		h, overflow := Float32ToHalf(c.f)
		if h != c.h || overflow != c.overflow {
			t.Errorf("Float32ToHalf(%g) = %#04x, overflow %v; want %#04x, %v", c.f, h, overflow, c.h, c.overflow)
		}
	}
	if h, _ := Float32ToHalf(float32(math.NaN())); h&0x7c00 != 0x7c00 || h&0x3ff == 0 {
		t.Errorf("NaN converts to %#04x, not a NaN", h)
	}
	if f := HalfToFloat32(0x7e01); !math.IsNaN(float64(f)) {
		t.Errorf("HalfToFloat32(0x7e01) = %g, want NaN", f)
	}
	// Every half other than NaN converts to a float32 and back to itself,
	// and the halves are in order: conversion is exact and monotonic.
	var prev float32
	for i, h := range append(descending(0xfc00, 0x8000), ascending(0x0000, 0x7c00)...) {
		f := HalfToFloat32(h)
		if back, _ := Float32ToHalf(f); back != h {
			t.Fatalf("half %#04x → %g → %#04x", h, f, back)
		}
		if i > 0 && (f < prev || f == prev && h != 0) {
			t.Fatalf("half %#04x = %g is not above the previous half %g", h, f, prev)
		}
		prev = f
	}
	// A float32 rounds to the nearer of the two halves around it.
	rng := rand.New(rand.NewPCG(1, 2))
	for range 100000 {
		f := math.Float32frombits(rng.Uint32() & 0x477fffff) // |f| < 65536, any sign
		h, overflow := Float32ToHalf(f)
		if overflow {
			continue
		}
		got := HalfToFloat32(h)
		for _, n := range []uint16{h - 1, h + 1} {
			if n&0x7fff >= 0x7c00 {
				continue
			}
			if other := HalfToFloat32(n); math.Abs(float64(other)-float64(f)) < math.Abs(float64(got)-float64(f)) {
				t.Fatalf("%g rounds to %g, but %g is nearer", f, got, other)
			}
		}
	}
}

func ascending(from, to uint16) []uint16 {
	var out []uint16
	for h := from; h <= to; h++ {
		out = append(out, h)
	}
	return out
}

func descending(from, to uint16) []uint16 {
	out := ascending(to, from)
	slices.Reverse(out)
	return out
}

// Golden bytes of pgvector's binary send format for '[1,-2.5,0.125,6e-8]'::halfvec:
// int16 dim = 4, int16 unused = 0, then big-endian halves (6e-8 is the
// smallest subnormal, 2^-24).
const halfvecGolden = "0004" + "0000" + "3c00" + "c100" + "3000" + "0001"

func TestDecodeHalfvecGolden(t *testing.T) {
	b, _ := hex.DecodeString(halfvecGolden)
	want := []float32{1, -2.5, 0.125, 1.0 / (1 << 24)}
	for _, decode := range []func([]byte) ([]float32, error){DecodeHalfvec, VectorHalfvec.DecodeBinary, DecodeSent} {
		if v, err := decode(b); err != nil || !slices.Equal(v, want) {
			t.Fatalf("got %v, %v; want %v", v, err, want)
		}
	}
	if got := hex.EncodeToString(AppendHalfvec(nil, want)); got != halfvecGolden {
		t.Fatalf("encode: got %s, want %s", got, halfvecGolden)
	}
	// halfvec_out prints each half as the shortest float that reads back
	// as it; read back, it is the same half.
	if v, err := VectorHalfvec.DecodeText("[1,-2.5,0.125,6e-08]"); err != nil || !slices.Equal(v, want) {
		t.Fatalf("text: got %v, %v; want %v", v, err, want)
	}
	if v, err := VectorHalfvec.DecodeText("[0.1]"); err != nil || v[0] != HalfToFloat32(0x2e66) {
		t.Errorf("text [0.1]: got %v, %v; want the nearest half", v, err)
	}
	if _, err := VectorHalfvec.DecodeText("[70000]"); !errors.Is(err, ErrMalformedVector) {
		t.Errorf("text beyond halfvec's range: got %v, want ErrMalformedVector", err)
	}
	for _, bad := range []string{"", "00", "0003000000000000", "00010000ffff00", "000100003c00" + "3c00"} {
		b, _ := hex.DecodeString(bad)
		if _, err := DecodeHalfvec(b); !errors.Is(err, ErrMalformedVector) {
			t.Errorf("%q: got %v, want ErrMalformedVector", bad, err)
		}
	}
	// A vector's bytes are told from a halfvec's by their length.
	vec, _ := hex.DecodeString(pgvectorGolden)
	if v, err := DecodeSent(vec); err != nil || !slices.Equal(v, []float32{1, -2.5, 0.125}) {
		t.Errorf("DecodeSent(vector): got %v, %v", v, err)
	}
	if _, err := DecodeSent(append(vec, 0)); !errors.Is(err, ErrMalformedVector) {
		t.Errorf("DecodeSent(vector and a byte): got %v, want ErrMalformedVector", err)
	}
}

func TestVectorTypeTable(t *testing.T) {
	for _, c := range []struct {
		oid      uint32
		typname  string
		want     VectorType
		width    int
		typmod   int32
		wantDims int
	}{
		{0x12345, "vector", VectorPgvector, 4, 768, 768},
		{0x12346, "halfvec", VectorHalfvec, 2, 768, 768},
		{1021, "_float4", VectorFloat4Array, 4, -1, 0},
		{1022, "_float8", VectorFloat8Array, 8, -1, 0},
		{0x12347, "halfvec", VectorHalfvec, 2, -1, 0},
	} {
		got, err := VectorTypeFor(c.oid, c.typname)
		if err != nil || got != c.want {
			t.Errorf("VectorTypeFor(%d, %s) = %v, %v; want %v", c.oid, c.typname, got, err, c.want)
			continue
		}
		if got.Width() != c.width || got.TypmodDims(c.typmod) != c.wantDims {
			t.Errorf("%s: width %d, dims of typmod %d = %d; want %d, %d", got, got.Width(), c.typmod, got.TypmodDims(c.typmod), c.width, c.wantDims)
		}
		if named, ok := VectorTypeNamed(got.String()); !ok || named != got {
			t.Errorf("VectorTypeNamed(%s) = %v, %v", got, named, ok)
		}
	}
	if _, err := VectorTypeFor(1234, "sparsevec"); err == nil {
		t.Error("sparsevec accepted")
	}
	if q, err := VectorHalfvec.Round([]float32{0.1, -3}); err != nil || !slices.Equal(q, []float32{HalfToFloat32(0x2e66), -3}) {
		t.Errorf("Round to halfvec: %v, %v", q, err)
	}
	if _, err := VectorHalfvec.Round([]float32{1, 1e5}); err == nil {
		t.Error("Round to halfvec accepted 1e5")
	}
	q := []float32{0.1}
	if r, err := VectorPgvector.Round(q); err != nil || &r[0] != &q[0] {
		t.Errorf("Round to vector: %v, %v; want the query itself", r, err)
	}
}
