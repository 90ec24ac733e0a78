package kernels

import (
	"encoding/binary"
	"math"
	"testing"
)

// Fuzz targets: each decodes its inputs into kernel arguments and checks
// every implementation this CPU runs against the pure-Go reference.

// eachImpl calls f once per available implementation of fam.
func eachImpl(fam *family, f func(name string)) {
	saved := fam.active
	defer func() { fam.active = saved }()
	for _, name := range fam.availNames() {
		fam.use(name)
		f(name)
	}
}

// fuzzFloats decodes 4-byte little-endian floats, replacing non-finite or
// huge values (whose sums may overflow differently in another order) by
// small ones derived from the same bits.
func fuzzFloats(b []byte) []float32 {
	v := make([]float32, len(b)/4)
	for i := range v {
		u := binary.LittleEndian.Uint32(b[4*i:])
		x := math.Float32frombits(u)
		if math.IsNaN(float64(x)) || math.Abs(float64(x)) > 1e15 {
			x = float32(int32(u)) / (1 << 31)
		}
		v[i] = x
	}
	return v
}

func FuzzF32(f *testing.F) {
	f.Add([]byte("\x00\x00\x80\x3f\x00\x00\x00\x40"), []byte("\x00\x00\x40\x40\x00\x00\x80\xc0"))
	f.Fuzz(func(t *testing.T, ab, bb []byte) {
		a, b := fuzzFloats(ab), fuzzFloats(bb)
		n := min(len(a), len(b))
		a, b = a[:n], b[:n]
		eachImpl(f32Family, func(name string) {
			checkF32(t, opDot, name+" Dot", Dot(a, b), a, b)
			checkF32(t, opL2Sq, name+" L2Sq", L2Sq(a, b), a, b)
			if half := n / 2; half > 0 {
				var out [2]float32
				L2SqBlock(a[:half], b[:2*half], out[:])
				checkF32(t, opL2Sq, name+" L2SqBlock", out[0], a[:half], b[:half])
				checkF32(t, opL2Sq, name+" L2SqBlock", out[1], a[:half], b[half:2*half])
			}
		})
	})
}

func fuzzInt8s(b []byte) []int8 {
	v := make([]int8, len(b))
	for i, x := range b {
		v[i] = int8(x)
	}
	return v
}

func FuzzDotU8I8(f *testing.F) {
	f.Add([]byte("\xff\xff\xff"), []byte("\x80\x80\x7f"))
	f.Fuzz(func(t *testing.T, a, bb []byte) {
		b := fuzzInt8s(bb)
		n := min(len(a), len(b))
		a, b = a[:n], b[:n]
		want := refDotU8I8(a, b)
		eachImpl(intFamily, func(name string) {
			if got := DotU8I8(a, b); got != want {
				t.Errorf("%s n=%d: got %d, want %d", name, n, got, want)
			}
		})
	})
}

// fuzzPackedDot checks p on every implementation with the codes u (their
// low bits) and the query bb, cut to a common length that packs whole bytes.
func fuzzPackedDot(t *testing.T, p packedDot, u, bb []byte) {
	b := fuzzInt8s(bb)
	n := min(len(u), len(b)) / p.perByte * p.perByte
	u, b = u[:n], b[:n]
	eachImpl(intFamily, func(name string) {
		if got, want := p.check(u, b); got != want {
			t.Errorf("%s n=%d: got %d, want %d", name, n, got, want)
		}
	})
}

func FuzzDotU4I8(f *testing.F) {
	f.Add([]byte("\xff\x0f\xf0"), []byte("\x80\x80\x7f\x01\x02\x03"))
	f.Fuzz(func(t *testing.T, u, bb []byte) { fuzzPackedDot(t, u4Dot, u, bb) })
}

func FuzzDotU2I8(f *testing.F) {
	f.Add([]byte("\xff\x03\x02\x01"), []byte("\x80\x80\x7f\x01\x02\x03\x04\x05"))
	f.Fuzz(func(t *testing.T, u, bb []byte) { fuzzPackedDot(t, u2Dot, u, bb) })
}

// FuzzFastScan takes the query from q (one entry per byte, folded into
// [-63, 63], up to 2048 dimensions in whole 64-dimension words) and the
// codes of the 32 vectors from codes, repeated as needed.
func FuzzFastScan(f *testing.F) {
	f.Add([]byte("\xff\x00\x0f\xf0"), []byte("\x3f\xc1\x00\x01"))
	f.Fuzz(func(t *testing.T, codes, q []byte) {
		if len(codes) == 0 || len(q) == 0 {
			return
		}
		dim := min(2048, (len(q)+63)&^63)
		tq := make([]int8, dim)
		for i := range tq {
			tq[i] = int8(int(q[i%len(q)])%(2*scanMax+1) - scanMax)
		}
		k := 0
		sq, block, want := scanCase(tq, func() byte { k++; return codes[k%len(codes)] })
		eachImpl(scanFamily, func(name string) {
			var got [BlockVectors]uint32
			scanBlock(sq, block, &got)
			if got != want {
				t.Errorf("%s dim=%d: got %v, want %v", name, dim, got, want)
			}
		})
	})
}
