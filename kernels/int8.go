package kernels

// DotU8I8 returns the sum of int32(a[i])*int32(b[i]) for unsigned codes a and
// a signed query b, wrapping modulo 2^32 (exact for len(a) <= 65536, since
// |a[i]*b[i]| <= 255*128). It panics if the lengths differ.
func DotU8I8(a []byte, b []int8) int32 {
	checkLen(len(a), len(b))
	return dotU8I8Impl(a, b)
}

func dotU8I8Go(a []byte, b []int8) int32 {
	b = b[:len(a)]
	var s0, s1, s2, s3 int32
	i := 0
	for ; i+4 <= len(a); i += 4 {
		s0 += int32(a[i]) * int32(b[i])
		s1 += int32(a[i+1]) * int32(b[i+1])
		s2 += int32(a[i+2]) * int32(b[i+2])
		s3 += int32(a[i+3]) * int32(b[i+3])
	}
	for ; i < len(a); i++ {
		s0 += int32(a[i]) * int32(b[i])
	}
	return s0 + s1 + s2 + s3
}

// u4Chunk is the number of bytes in one chunk of packed 4-bit codes: 64
// codes, the low nibbles holding the first 32 and the high nibbles the next
// 32, so that SIMD code unpacks a chunk with one shift and two masks and
// finds both halves in query order. A final short chunk of m bytes holds
// 2m codes the same way.
const u4Chunk = 32

// packU4 packs the 4-bit codes u (len(u) even, values < 16) into
// dst[:len(u)/2] in the chunked nibble layout.
func packU4(dst []byte, u []uint8) {
	for base := 0; base < len(u); base += 2 * u4Chunk {
		m := min(u4Chunk, (len(u)-base)/2)
		for j := range m {
			dst[base/2+j] = u[base+j] | u[base+m+j]<<4
		}
	}
}

// dotU4I8 returns sum u[i]*b[i] over the codes u packed in a by packU4;
// len(b) must be 2*len(a).
func dotU4I8(a []byte, b []int8) int32 {
	checkLen(2*len(a), len(b))
	return dotU4I8Impl(a, b)
}

func dotU4I8Go(a []byte, b []int8) int32 {
	var s int32
	for base := 0; base < len(a); base += u4Chunk {
		m := min(u4Chunk, len(a)-base)
		c, lo := a[base:base+m], b[2*base:2*base+m]
		hi := b[2*base+m : 2*base+2*m]
		for j, x := range c {
			s += int32(x&15)*int32(lo[j]) + int32(x>>4)*int32(hi[j])
		}
	}
	return s
}

// u2Chunk is the number of bytes in one chunk of packed 2-bit codes: 128
// codes, bits 2i..2i+1 of byte j holding code i·32 + j, so that SIMD code
// unpacks a chunk with shifts and masks and finds each quarter in query
// order. A final short chunk of m bytes holds 4m codes the same way.
const u2Chunk = 32

// packU2 packs the 2-bit codes u (len(u) a multiple of 4, values < 4) into
// dst[:len(u)/4] in the chunked layout.
func packU2(dst []byte, u []uint8) {
	for base := 0; base < len(u); base += 4 * u2Chunk {
		m := min(u2Chunk, (len(u)-base)/4)
		for j := range m {
			dst[base/4+j] = u[base+j] | u[base+m+j]<<2 | u[base+2*m+j]<<4 | u[base+3*m+j]<<6
		}
	}
}

// dotU2I8 returns sum u[i]*b[i] over the codes u packed in a by packU2;
// len(b) must be 4*len(a).
func dotU2I8(a []byte, b []int8) int32 {
	checkLen(4*len(a), len(b))
	return dotU2I8Impl(a, b)
}

func dotU2I8Go(a []byte, b []int8) int32 {
	var s int32
	for base := 0; base < len(a); base += u2Chunk {
		m := min(u2Chunk, len(a)-base)
		c, q := a[base:base+m], b[4*base:4*base+4*m]
		for j, x := range c {
			s += int32(x&3)*int32(q[j]) + int32(x>>2&3)*int32(q[m+j]) +
				int32(x>>4&3)*int32(q[2*m+j]) + int32(x>>6)*int32(q[3*m+j])
		}
	}
	return s
}
