// Package kernels holds vecside's distance and quantization kernels: float32
// distances, integer dot products for quantized codes, the 1-bit fast scan,
// the random rotation, and the RaBitQ and SQ8 codecs. Each kernel has a
// pure-Go implementation and, where it pays, amd64 assembly chosen at
// start-up. It depends on nothing of ours; the index packages build on it.
// It does not hold centroids, train k-means, or know about index layouts
// beyond the 32-vector fast-scan block.
//
// # Float32 kernels
//
// Dot, L2Sq and CosineDistance compare two vectors; DotBlock, L2SqBlock and
// CosineBlock compare a query with the rows of a row-major block. Results
// differ from a sequential float32 sum only by rounding: assembly and Go sum
// in different orders, so two implementations agree within
// 2*n*eps*sum|a_i*b_i| (eps = 2^-24; the tests use exactly this). NaN inputs
// give NaN. Vectors of 12 or fewer elements stay in Go, where a call into
// assembly would cost more than it saves.
//
// # Byte kernels and code formats
//
// DotU8I8 multiplies unsigned 8-bit codes by a signed 8-bit query, exactly
// in int32 for up to 65536 elements (MaxDim). The instructions dictate the
// formats: VPMADDUBSW multiplies unsigned by signed bytes but saturates its
// pair sums at int16 (2*255*127 overflows), so 8-bit codes are widened to
// int16 and multiplied with VPMADDWD on AVX2, and fed to VPDPBUSD (u8 x s8
// into int32, no intermediate saturation) with AVX-512 VNNI. 4-bit codes fit
// VPMADDUBSW (2*15*128 < 32767). They are packed in 32-byte chunks of 64
// codes: byte j holds code j in its low nibble and code 32+j in its high
// nibble, so one shift and two masks yield both halves in query order (a
// final short chunk of m bytes holds 2m codes the same way). 2-bit codes
// are packed four to a byte in 32-byte chunks of 128 codes, bits 2i..2i+1
// of byte j holding code 32i+j, so shifts by 0, 2, 4 and 6 and a mask
// yield the four quarters in query order. A 6-bit extended code is a
// 4-bit plane of its top bits followed by a 2-bit plane of its low bits:
// its dot product is 4·(top plane's) + (low plane's), and the top plane
// alone is a 4-bit code a graph's walk reads (RaBitQ.ExtInnerTop).
// Queries are quantized symmetrically to int8 in [-127, 127] with one step
// per query (and once more, the remainder, where an estimate must lose
// nothing to it: RaBitQ.ExtInnerAt).
//
// # 1-bit fast scan
//
// A 1-bit code has one bit per dimension (bit i%8 of byte i/8, 1 meaning a
// positive rotated residual), padded with zero bits to a multiple of 64
// dimensions. Codes are stored in blocks of 32 vectors (BlockVectors,
// SetBlockCode): column c, 32 bytes, holds byte c (dimensions 8c..8c+7) of
// every vector; vector v sits at byte 2v if v < 16 and at byte 2(v-16)+1
// otherwise, which makes the 16-bit accumulation below come out in vector
// order.
//
// The query residual t is quantized to t' = round(t/delta) with
// delta = max|t_i|/63, so |t'_i| <= 63. For each group of four dimensions
// (one nibble) a 16-entry table gives, for nibble value k,
// sum_j bit_j(k)*t'_{4g+j} plus the group's negative part
// sum_j max(-t'_{4g+j}, 0): entries lie in [0, 252] and fit a byte. VPSHUFB
// looks up 32 (AVX2) or 64 (AVX-512BW) nibbles at once; the bytes are added
// as uint16 words (the even bytes of a word into its low half, the odd bytes
// recovered with a shift). A column adds at most 2*252 to a lane, so one
// assembly call covers at most 128 columns (1024 dimensions; 128*504 =
// 64512 < 65536) and longer codes are summed over several calls in uint32:
// no overflow up to MaxDim. The sum is acc = <x, t'> + N with
// N = sum max(-t'_i, 0), so the sign-vector product is
// <2x-1, t'> = 2*acc - sum|t'_i|. The pure-Go fallback gets the same integer
// from popcounts over the seven bit planes of t'+63; every implementation
// is bit-exact.
//
// # Rotation
//
// Rotation is a seeded orthogonal transform: DefaultRotationRounds rounds of
// random sign flips followed by a normalised fast Walsh-Hadamard transform.
// For a dimension D that is not a power of two, with L the largest power of
// two below D, each round transforms the first L coordinates, flips signs
// again, transforms the last L (overlapping blocks), and ends with a 45-degree
// butterfly between the two halves (a Kac-walk step). Every step is
// orthogonal, so norms and inner products are preserved (tested), and codes
// keep exactly D dimensions. The signs come from SplitMix64, so
// (dim, rounds, seed) rebuilds the same rotation forever. The f32
// family runs its element-wise steps: sign flips, the transform's first
// four stages in one pass of 16-point transforms (each output computed by
// one fused multiply-add of ±1, exactly a+b or a−b) and its later stages
// as whole-vector butterflies; every implementation gives the same bits
// (tested against the textbook transform). A query's quantization to
// int8 runs in vector instructions too (VCVTPS2DQ rounds half to even, as
// the Go version). What both cost a query, against Go, is in
// docs/benchmarks/kernels.md, "Rotation and quantization".
//
// # RaBitQ
//
// The codec follows RaBitQ (Gao and Long, SIGMOD 2024) and Extended RaBitQ
// (Gao et al., "Practical and Asymptotically Optimal Quantization of
// High-Dimensional Vectors in Euclidean Space for Approximate Nearest
// Neighbor Search", SIGMOD 2025). A vector o is encoded relative to a
// centroid c: r = P(o - c), P the rotation. Its 1-bit code is sign(r); its
// extended code of B = 4 or 8 bits has u_i in [0, 2^B) standing for the grid
// point y_i = u_i - (2^B-1)/2 = sign(r_i)(k_i + 1/2), where
// k_i = min(floor(lambda*|r_i|), 2^(B-1)-1) and lambda maximises the cosine
// between y and r (its top bit is the 1-bit code; for 1-bit codes y is the
// +-1 sign vector). With t the rotated query residual and a = <y,r>/(|y||r|),
//
//	<r, t> ~ |r|^2/<y,r> * <y, t>                      (unbiased)
//	|error| <= eps * |r| |t| sqrt(1-a^2) / (a sqrt(D-1))
//
// where eps is a number of standard deviations: the orthogonal part of the
// query projects onto y like one coordinate of a random unit vector in D-1
// dimensions. <y, t> is computed from the quantized query, which adds an
// error of standard deviation step*|y|/sqrt(12); the bound combines the two
// in quadrature, eps*sqrt((|t| Err)^2 + (step QErr)^2), with Err and QErr
// stored per vector in Factors. Distances follow: L2 (squared) =
// |r|^2 + |t|^2 - 2<r,t> with t = P(q - c) and twice the bound; cosine =
// half of that on vectors normalised first (the squared distance on the
// unit sphere, so that the error grows with |q - c|, small near a list's
// centroid, rather than with |q| = 1); inner product = -(<r,t> + <c,q>)
// with t = Pq. The default eps = 3 keeps the true distance inside the
// bound for nearly every pair on clustered test data (TestRaBitQBounds
// asserts >= 99%; docs/benchmarks/kernels.md, "RaBitQ's bound").
//
// The flow an index follows:
//
//	rq, _ := kernels.NewRaBitQ(kernels.RaBitQConfig{Dim: 768, Metric: kernels.L2, ExBits: 8, Seed: s})
//	f, xf := rq.Encode(vec, centroid, code, ext)   // per vector
//	kernels.SetBlockCode(block, slot, code)        // block of 32, factors beside it
//	rq.Rotate(cRot, centroid)                      // once per centroid
//	rq.RotateQuery(qRot, q)                        // once per query
//	rq.PrepareQuery(&pq, qRot, cRot)               // per centroid (IVF list)
//	rq.FastScan(&pq, block, &factors, &est, &bound) // per block: est ± bound
//	e, b := rq.ExtEstimate(&pq, ext, &xf)          // re-rank survivors
//
// SQ8 is the simpler codec: rotate, then one byte per dimension on the
// vector's own [min, max] range; estimates without bounds. Both codecs
// serialise their state (MarshalBinary, UnmarshalBinary; a magic, a format
// version, dimension, metric, rotation rounds and seed); centroids are the
// index's to store.
//
// # Dispatch
//
// Kernels come in families (f32, int8, fastscan), each with implementations
// registered by name, best first, and the first the CPU supports (per
// github.com/klauspost/cpuid/v2) chosen at start-up. Choices and Describe
// report the choice. The build tag noasm compiles the pure-Go set only
// (files *_amd64.go/.s carry "amd64 && gc && !noasm", impl_generic.go the
// exact opposite, "!amd64 || !gc || noasm": only the gc toolchain
// assembles Go assembly). Tests run every suite once per implementation
// the CPU runs.
// Assembly is not preemptible, so long block scans are cut into calls of at
// most 64K floats, and fast scans run one 32-vector block per call.
//
// # Generated assembly
//
// The assembly (*_amd64.s) and the Go declarations of its functions
// (f32_amd64.go, int8_amd64.go, scan_amd64.go, prefetch_amd64.go) are
// generated by an avo (github.com/mmcloughlin/avo) program in
// kernels/_asm: a module of its own, which ./... skips for its leading
// underscore, so that this one does not depend on avo. The generated files
// are never edited by hand. Where an AVX2 kernel and its AVX-512 twin
// share a loop structure, one Go function there emits both, parameterised
// by the vector width, and the assembly shares what they would repeat.
// The kernels a search calls once per vector, the float32 pair distances
// (dotAVX2, l2SqAVX512, ...) and the packed-code dot products
// (dotU4I8AVX2, dotU2I8AVX512, ...), have a body each with no branch but
// their loop's (and the AVX-512 packed ones' two around it, which skip
// the loop or the masked tail, so that a code of 100 dimensions does not
// leave a third of its work to Go): branches on a kind argument in one
// shared body cost them measurable time (docs/benchmarks/kernels.md,
// "Generated assembly"). They end with a jump to the sum of their
// accumulator's lanes (sumF32, sumI32), which all of a file's kernels
// share, as Go's internal/bytealg jumps to memeqbody, and which costs no
// measurable time. The block distances (distF32) and the rotation steps
// (rotateStep, scaleF32), whose calls run long enough to hide it, are one
// body each, whose kind argument picks the loop of each width and
// operation with a branch or two that go the same way every time; both
// fast scans end with a jump to one store. The decoding of 4-bit codes
// for a graph choosing its edges (gridU4AVX2, scaleAddAVX2) is AVX2
// alone, and the AVX-512 machines run it too. The search for an extended
// code's scale (bestScale, 26 trial scales a row) has a kernel of each
// width (gridSumsAVX2, gridSumsAVX512); what these kernels save against
// Go is on the same page. Each generated file's header states the
// kernels' exact semantics: rounding, NaN, length multiples, who handles
// the tail.
// After changing the generator, run
//
//	go generate ./kernels
//
// (it runs `go run -C _asm . -out ..`) and commit the result; CI
// (scripts/test, stage kernels-generate) regenerates the files and fails
// on any difference.
package kernels

//go:generate go run -C _asm . -out ..
