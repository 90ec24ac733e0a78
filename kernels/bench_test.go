package kernels

import (
	"math/rand/v2"
	"strconv"
	"sync"
	"testing"
	"unsafe"

	"github.com/vecside/vecside/kernels/internal/membw"
)

// Benchmarks are named Benchmark<Kernel>/<dim>/<impl> so that benchstat can
// compare implementations; SetBytes counts the bytes each op reads.

var (
	sinkF32 float32
	sinkI32 int32
	sinkU64 uint64
)

var benchDims = []int{128, 384, 768, 1536}

// benchDimsImpls runs f for every dimension and every implementation of fam.
func benchDimsImpls(b *testing.B, fam *family, dims []int, f func(b *testing.B, dim int)) {
	for _, dim := range dims {
		b.Run(strconv.Itoa(dim), func(b *testing.B) {
			saved := fam.active
			defer func() { fam.active = saved }()
			for _, name := range fam.availNames() {
				fam.use(name)
				b.Run(name, func(b *testing.B) { f(b, dim) })
			}
		})
	}
}

func BenchmarkDot(b *testing.B) {
	r := rand.New(rand.NewPCG(1, 1))
	benchDimsImpls(b, f32Family, benchDims, func(b *testing.B, dim int) {
		x, y := randF32(r, dim, f32Gens[0]), randF32(r, dim, f32Gens[0])
		b.SetBytes(int64(8 * dim))
		for b.Loop() {
			sinkF32 += Dot(x, y)
		}
	})
}

func BenchmarkL2Sq(b *testing.B) {
	r := rand.New(rand.NewPCG(1, 2))
	benchDimsImpls(b, f32Family, benchDims, func(b *testing.B, dim int) {
		x, y := randF32(r, dim, f32Gens[0]), randF32(r, dim, f32Gens[0])
		b.SetBytes(int64(8 * dim))
		for b.Loop() {
			sinkF32 += L2Sq(x, y)
		}
	})
}

// BenchmarkL2SqBlock scans 32 rows per op.
func BenchmarkL2SqBlock(b *testing.B) {
	r := rand.New(rand.NewPCG(1, 3))
	benchDimsImpls(b, f32Family, benchDims, func(b *testing.B, dim int) {
		q, block := randF32(r, dim, f32Gens[0]), randF32(r, 32*dim, f32Gens[0])
		var out [32]float32
		b.SetBytes(int64(4 * len(block)))
		for b.Loop() {
			L2SqBlock(q, block, out[:])
		}
	})
}

func BenchmarkDotU8I8(b *testing.B) {
	r := rand.New(rand.NewPCG(1, 4))
	benchDimsImpls(b, intFamily, benchDims, func(b *testing.B, dim int) {
		x, y := randBytes(r, dim, byteGens[0])
		b.SetBytes(int64(2 * dim))
		for b.Loop() {
			sinkI32 += DotU8I8(x, y)
		}
	})
}

// benchPackedDot benchmarks p on random codes and query of each dim (a
// multiple of p.perByte).
func benchPackedDot(b *testing.B, p packedDot, dims []int, seed uint64) {
	r := rand.New(rand.NewPCG(1, seed))
	benchDimsImpls(b, intFamily, dims, func(b *testing.B, dim int) {
		x, y := randBytes(r, dim, byteGens[0])
		for i := range x {
			x[i] &= p.mask()
		}
		packed := make([]byte, dim/p.perByte)
		p.pack(packed, x)
		b.SetBytes(int64(len(packed) + dim))
		for b.Loop() {
			sinkI32 += p.dot(packed, y)
		}
	})
}

func BenchmarkDotU4I8(b *testing.B) { benchPackedDot(b, u4Dot, benchDims, 5) }

// BenchmarkDotU2I8 adds 784 dimensions to the usual sizes: their 196 code
// bytes end in a short chunk that the Go tail handles.
func BenchmarkDotU2I8(b *testing.B) {
	benchPackedDot(b, u2Dot, []int{128, 384, 768, 784, 1536}, 6)
}

// scanBench is a RaBitQ codec, a prepared query and nblocks blocks of random
// codes with random factors.
type scanBench struct {
	rq      *RaBitQ
	q       Query
	codes   []byte
	factors []Factors
	nblocks int
}

func newScanBench(dim, nblocks int) *scanBench {
	r := rand.New(rand.NewPCG(uint64(dim), uint64(nblocks)))
	rq, err := NewRaBitQ(RaBitQConfig{Dim: dim, Metric: L2, Seed: 1})
	if err != nil {
		panic(err)
	}
	s := &scanBench{rq: rq, nblocks: nblocks,
		codes: make([]byte, nblocks*BlockBytes(rq.CodeBytes())), factors: make([]Factors, nblocks*BlockVectors)}
	for i := 0; i+8 <= len(s.codes); i += 8 {
		*(*uint64)(unsafe.Pointer(&s.codes[i])) = r.Uint64()
	}
	for i := range s.factors {
		s.factors[i] = Factors{NormSq: r.Float32(), Scale: r.Float32(), Err: r.Float32(), QErr: r.Float32()}
	}
	qv := randF32(r, dim, f32Gens[0])
	qRot := make([]float32, dim)
	rq.RotateQuery(qRot, qv)
	rq.PrepareQuery(&s.q, qRot, nil)
	return s
}

// bytes returns the bytes one pass reads: codes and factors.
func (s *scanBench) bytes() int64 {
	return int64(len(s.codes)) + int64(len(s.factors))*int64(unsafe.Sizeof(Factors{}))
}

// scan runs FastScan over every block once.
func (s *scanBench) scan() {
	var est, bound [BlockVectors]float32
	bb := BlockBytes(s.rq.CodeBytes())
	for k := range s.nblocks {
		s.rq.FastScan(&s.q, s.codes[k*bb:(k+1)*bb], (*[BlockVectors]Factors)(s.factors[k*BlockVectors:]), &est, &bound)
	}
	sinkF32 += est[0] + bound[0]
}

// BenchmarkFastScan scans 16 blocks (512 vectors, in cache) per op,
// estimates and bounds included.
func BenchmarkFastScan(b *testing.B) {
	benchDimsImpls(b, scanFamily, benchDims, func(b *testing.B, dim int) {
		s := newScanBench(dim, 16)
		b.SetBytes(s.bytes())
		for b.Loop() {
			s.scan()
		}
	})
}

// memBenchBytes is the size of the code buffer of the memory-bound scan: 4x
// the 32 MiB L3 of the reference machine, so it streams from DRAM.
const memBenchBytes = 128 << 20

var memBench = sync.OnceValue(func() *scanBench {
	const dim = 768
	return newScanBench(dim, (memBenchBytes+BlockBytes(dim/8)-1)/BlockBytes(dim/8))
})

// BenchmarkFastScanMem scans a 128 MiB code buffer (plus factors) per op:
// compare with BenchmarkReadMem, a plain read of the same buffers.
func BenchmarkFastScanMem(b *testing.B) {
	benchDimsImpls(b, scanFamily, []int{768}, func(b *testing.B, _ int) {
		s := memBench()
		b.SetBytes(s.bytes())
		for b.Loop() {
			s.scan()
		}
	})
}

// BenchmarkReadMem is the bandwidth baseline: one assembly read-only pass
// over the buffers BenchmarkFastScanMem scans.
func BenchmarkReadMem(b *testing.B) {
	b.Run("768/sum", func(b *testing.B) {
		s := memBench()
		fb := unsafe.Slice((*byte)(unsafe.Pointer(&s.factors[0])), len(s.factors)*int(unsafe.Sizeof(Factors{})))
		b.SetBytes(s.bytes())
		for b.Loop() {
			sinkU64 += membw.Sum(s.codes) + membw.Sum(fb)
		}
	})
}

func BenchmarkRotate(b *testing.B) {
	r := rand.New(rand.NewPCG(1, 6))
	for _, dim := range append(benchDims, 100, 784) {
		b.Run(strconv.Itoa(dim), func(b *testing.B) {
			rot := NewRotation(dim, DefaultRotationRounds, 1)
			x := randF32(r, dim, f32Gens[0])
			b.SetBytes(int64(4 * dim))
			for b.Loop() {
				rot.Apply(x)
			}
		})
	}
}

func BenchmarkEncode(b *testing.B) {
	r := rand.New(rand.NewPCG(1, 7))
	for _, dim := range []int{768, 1536} {
		for _, bits := range []int{0, 4, 6, 8} {
			b.Run(strconv.Itoa(dim)+"/ex"+strconv.Itoa(bits), func(b *testing.B) {
				rq, _ := NewRaBitQ(RaBitQConfig{Dim: dim, Metric: L2, ExBits: bits, Seed: 1})
				v := randF32(r, dim, f32Gens[0])
				code, ext := make([]byte, rq.CodeBytes()), make([]byte, rq.ExtBytes())
				b.SetBytes(int64(4 * dim))
				for b.Loop() {
					rq.Encode(v, nil, code, ext)
				}
			})
		}
	}
}

// BenchmarkPrepareQuery prepares a rotated query against a centroid, as
// a search does once (hnsw) or once per list it probes (ivf).
func BenchmarkPrepareQuery(b *testing.B) {
	r := rand.New(rand.NewPCG(1, 9))
	for _, dim := range []int{768, 1536} {
		b.Run(strconv.Itoa(dim), func(b *testing.B) {
			rq, _ := NewRaBitQ(RaBitQConfig{Dim: dim, Metric: L2, ExBits: 4, Seed: 1})
			qRot, cRot := randF32(r, dim, f32Gens[0]), randF32(r, dim, f32Gens[0])
			var q Query
			for b.Loop() {
				rq.PrepareQuery(&q, qRot, cRot)
			}
		})
	}
}

func BenchmarkExtEstimate(b *testing.B) {
	r := rand.New(rand.NewPCG(1, 8))
	for _, bits := range []int{4, 8} {
		b.Run("768/ex"+strconv.Itoa(bits), func(b *testing.B) {
			saved := intFamily.active
			defer func() { intFamily.active = saved }()
			for _, name := range intFamily.availNames() {
				intFamily.use(name)
				b.Run(name, func(b *testing.B) {
					rq, _ := NewRaBitQ(RaBitQConfig{Dim: 768, Metric: L2, ExBits: bits, Seed: 1})
					v, qv := randF32(r, 768, f32Gens[0]), randF32(r, 768, f32Gens[0])
					code, ext := make([]byte, rq.CodeBytes()), make([]byte, rq.ExtBytes())
					_, f := rq.Encode(v, nil, code, ext)
					qRot := make([]float32, 768)
					rq.RotateQuery(qRot, qv)
					var q Query
					rq.PrepareQuery(&q, qRot, nil)
					b.SetBytes(int64(len(ext)))
					for b.Loop() {
						e, _ := rq.ExtEstimate(&q, ext, &f)
						sinkF32 += e
					}
				})
			}
		})
	}
}

// BenchmarkDecodeTop decodes the top plane of a 6-bit code with a
// centroid, as a graph does for every row whose edges it chooses.
func BenchmarkDecodeTop(b *testing.B) {
	r := rand.New(rand.NewPCG(1, 9))
	benchDimsImpls(b, f32Family, []int{100, 768, 1536}, func(b *testing.B, dim int) {
		rq, _ := NewRaBitQ(RaBitQConfig{Dim: dim, Metric: L2, ExBits: 6, Seed: 1})
		v, c := randF32(r, dim, f32Gens[0]), randF32(r, dim, f32Gens[0])
		code, ext := make([]byte, rq.CodeBytes()), make([]byte, rq.ExtBytes())
		_, f := rq.Encode(v, nil, code, ext)
		dst := make([]float32, dim)
		b.SetBytes(int64(rq.topBytes()))
		for b.Loop() {
			rq.DecodeTop(dst, ext, &f, c)
		}
	})
}
