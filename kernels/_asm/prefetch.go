package main

import . "github.com/mmcloughlin/avo/operand"

const prefetchHeader = `
prefetch: PREFETCHT0 of the cache line at p. A prefetch never faults and
changes no architectural state.
`

func buildPrefetch(g gen) {
	g.text("prefetch", "func(p *byte)",
		"prefetch asks the CPU to bring the cache line at p into all its caches.")
	p := g.gp64("p")
	g.PREFETCHT0(Mem{Base: p})
	g.RET()
}
