//go:build amd64 && !noasm

package membw

// sum reads len(b) bytes, a multiple of 128, with SSE2 loads (baseline
// amd64: no CPU check needed; 16-byte loads already outrun DRAM).
//
//go:noescape
func sumSSE2(p *byte, n int) uint64

func sum(b []byte) uint64 {
	if len(b) == 0 {
		return 0
	}
	return sumSSE2(&b[0], len(b))
}
