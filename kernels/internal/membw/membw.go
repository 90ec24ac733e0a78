// Package membw measures memory read bandwidth for the kernels' benchmarks:
// Sum reads a buffer once and does as little else as possible, giving the
// ceiling a memory-bound scan can reach.
package membw

// Sum returns the sum of b read as little-endian uint64 words (a trailing
// partial word is ignored). The value is only there so the reads cannot be
// optimised away.
func Sum(b []byte) uint64 { return sum(b[:len(b)&^127]) + sumGo(b[len(b)&^127:]) }

func sumGo(b []byte) uint64 {
	var s uint64
	for ; len(b) >= 8; b = b[8:] {
		s += uint64(b[0]) | uint64(b[1])<<8 | uint64(b[2])<<16 | uint64(b[3])<<24 |
			uint64(b[4])<<32 | uint64(b[5])<<40 | uint64(b[6])<<48 | uint64(b[7])<<56
	}
	return s
}
