//go:build !amd64 || !gc || noasm

package kernels

const buildFlavour = "pure Go"

var (
	f32Family  = newFamily("f32", "go")
	intFamily  = newFamily("int8", "go")
	scanFamily = newFamily("fastscan", "go-popcount")
)

func pairF32(op f32Op, a, b []float32) float32 { return pairGo(op, a, b) }

func blockF32Impl(op f32Op, q, block, out []float32) { blockGo(op, q, block, out) }

func dotU8I8Impl(a []byte, b []int8) int32 { return dotU8I8Go(a, b) }

func dotU4I8Impl(a []byte, b []int8) int32 { return dotU4I8Go(a, b) }

func dotU2I8Impl(a []byte, b []int8) int32 { return dotU2I8Go(a, b) }

func scanBlock(q *scanQuery, codes []byte, out *[BlockVectors]uint32) {
	scanPopcount(q, codes, out)
}

func prefetch(*byte) {}

func butterfly(a, b []float32) { butterflyGo(a, b) }

func fwhtHead(x []float32) int { return fwhtHeadGo(x) }

func quantize(dst []int8, src []float32, inv float32, levels int32) int32 {
	return quantizeGo(dst, src, inv, levels)
}

func mulInto(x, s []float32) { mulGo(x, s) }

func scaleInto(x []float32, s float32) { scaleGo(x, s) }

func gridU4(dst []float32, ext []byte) float32 { return gridU4Go(dst, ext) }

func scaleAddInto(x, y []float32, s float32) { scaleAddGo(x, y, s) }

func gridSums(a []float32, lambda float32, top int32) (yr, yy float64) {
	return gridSumsGo(a, lambda, top)
}
