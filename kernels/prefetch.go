package kernels

// Prefetch asks the CPU to bring the cache lines b spans into its caches,
// without waiting for them: a graph walk calls it for the rows of every
// neighbour it is about to estimate, so that their memory latencies
// overlap instead of adding up. It does nothing in the pure-Go build.
func Prefetch(b []byte) {
	for i := 0; i < len(b); i += 64 {
		prefetch(&b[i])
	}
	if n := len(b); n > 0 && n%64 != 0 {
		prefetch(&b[n-1]) // the last line, which the row may reach into
	}
}
