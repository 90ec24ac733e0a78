package kernels

import "math/bits"

// BlockVectors is the number of vectors in one fast-scan block.
const BlockVectors = 32

// scanMax bounds the magnitude of the quantized query entries of the fast
// scan: a table entry sums at most four of them (plus an offset that makes it
// non-negative), so entries lie in [0, 4*scanMax] = [0, 252] and fit a byte.
const scanMax = 63

// maxScanCols is the most code columns (8 dimensions, one byte per vector)
// that one assembly call may add up in uint16 lanes: each column adds at most
// 2*252 to a lane, and 128*504 = 64512 < 65536. Longer codes are scanned in
// several calls whose results are added in uint32.
const maxScanCols = 128

// blockPos returns the byte offset of vector v within a 32-byte column of a
// fast-scan block. The assembly adds table lookups as 16-bit words, so the
// even bytes of a word sum into its low half and the odd bytes are recovered
// with a shift; placing vector v (v < 16) at byte 2v and vector v+16 at byte
// 2v+1 makes the two halves come out as vectors 0-15 and 16-31 in order.
func blockPos(v int) int {
	if v < 16 {
		return 2 * v
	}
	return 2*(v-16) + 1
}

// BlockBytes returns the size of a fast-scan block of 1-bit codes that are
// codeBytes long each.
func BlockBytes(codeBytes int) int { return codeBytes * BlockVectors }

// SetBlockCode stores the 1-bit code of vector i (0 <= i < 32) into a
// fast-scan block: byte c of the code goes to column c of the block.
func SetBlockCode(block []byte, i int, code []byte) {
	pos := blockPos(i)
	_ = block[BlockBytes(len(code))-1]
	for c, b := range code {
		block[c*BlockVectors+pos] = b
	}
}

// BlockCode copies the 1-bit code of vector i out of a fast-scan block.
func BlockCode(code, block []byte, i int) {
	pos := blockPos(i)
	_ = block[BlockBytes(len(code))-1]
	for c := range code {
		code[c] = block[c*BlockVectors+pos]
	}
}

// scanQuery is a query prepared for the fast scan, from a quantized query t'
// with |t'[i]| <= scanMax whose length is a multiple of 64.
type scanQuery struct {
	cols int // code bytes per vector: len(t')/8, a multiple of 8
	// lut holds 16-entry tables, one per group of 4 dimensions, each entry k
	// being sum_j bit_j(k)*t'[4g+j] + negative part of the group. For every
	// two columns c, c+1 it holds 128 bytes: the low-nibble tables of c and
	// c+1, then their high-nibble tables, each repeated twice so that one
	// 32-byte (AVX2) or 64-byte (AVX-512) load feeds VPSHUFB directly.
	lut []byte
	// planes[7*w+j] holds bit j of t'+63 for the 64 dimensions of word w, for
	// the popcount implementation, which builds them from tq on its first
	// scan (planesOK): the SIMD scans read only lut, and building planes
	// was half of preparing a 1,536-d query for them.
	planes   []uint64
	tq       []int8
	planesOK bool
	negSum   int32 // sum of max(-t'[i], 0): the offsets summed over all tables
}

func (s *scanQuery) init(tq []int8) {
	s.cols = len(tq) / 8
	s.lut = grow(s.lut, 64*s.cols)
	s.tq, s.planesOK = tq, false
	s.negSum = 0
	for c := range s.cols {
		base := (c&^1)*64 + (c&1)*32
		s.negSum += groupLUT(s.lut[base:base+32], tq[8*c:8*c+4])
		s.negSum += groupLUT(s.lut[base+64:base+96], tq[8*c+4:8*c+8])
	}
}

// buildPlanes fills planes from tq, once per init.
func (s *scanQuery) buildPlanes() {
	s.planes = grow(s.planes, 7*(len(s.tq)/64))
	for w := range len(s.tq) / 64 {
		var p [7]uint64
		for i, t := range s.tq[64*w : 64*w+64] {
			u := uint64(int(t) + scanMax)
			for j := range p {
				p[j] |= (u >> j & 1) << i
			}
		}
		copy(s.planes[7*w:], p[:])
	}
	s.planesOK = true
}

// groupLUT fills dst[:16] with the table of one group of four dimensions and
// copies it to dst[16:32]; it returns the group's offset.
func groupLUT(dst []byte, t []int8) int32 {
	var off int32
	for _, v := range t {
		off += max(-int32(v), 0)
	}
	dst[0] = byte(off)
	for k := 1; k < 16; k++ {
		// Entries are computed modulo 256; the true values lie in [0, 252].
		dst[k] = dst[k&(k-1)] + byte(t[bits.TrailingZeros(uint(k))])
	}
	copy(dst[16:32], dst[:16])
	return off
}

// scanPopcount is the pure-Go fast scan: for each vector it gathers the code
// bytes of 64 dimensions into a word and forms sum_i x_i*(t'_i+63) from
// popcounts over the bit planes, which equals the table sum exactly.
func scanPopcount(q *scanQuery, codes []byte, out *[BlockVectors]uint32) {
	if !q.planesOK {
		q.buildPlanes()
	}
	_ = codes[BlockBytes(q.cols)-1]
	for v := range BlockVectors {
		c := codes[blockPos(v):]
		var acc int32
		for w := range q.cols / 8 {
			col := c[w*8*BlockVectors:]
			x := uint64(col[0]) | uint64(col[32])<<8 | uint64(col[64])<<16 |
				uint64(col[96])<<24 | uint64(col[128])<<32 | uint64(col[160])<<40 |
				uint64(col[192])<<48 | uint64(col[224])<<56
			p := (*[7]uint64)(q.planes[7*w:])
			s := bits.OnesCount64(x&p[0]) + bits.OnesCount64(x&p[1])<<1 +
				bits.OnesCount64(x&p[2])<<2 + bits.OnesCount64(x&p[3])<<3 +
				bits.OnesCount64(x&p[4])<<4 + bits.OnesCount64(x&p[5])<<5 +
				bits.OnesCount64(x&p[6])<<6 - scanMax*bits.OnesCount64(x)
			acc += int32(s)
		}
		out[v] = uint32(acc + q.negSum)
	}
}

// grow returns s resized to n elements, reusing its array when it can.
func grow[T any](s []T, n int) []T {
	if cap(s) < n {
		return make([]T, n)
	}
	return s[:n]
}
