package store

import (
	"sync/atomic"
	"unsafe"

	"github.com/vecside/vecside/kernels"
)

// chunkShift sets the rows per chunk of a Slab (1,024): big enough that
// the directory stays small, small enough that the unused end of the
// last chunk is a rounding error.
const (
	chunkShift = 10
	chunkRows  = 1 << chunkShift
	chunkMask  = chunkRows - 1
)

// Slab holds rows of Width elements by row id, in chunks that never move
// once allocated: a row written before its id is published (by an atomic
// store that readers load first) can be read without a lock while the
// writer grows the slab. The directory of chunks is replaced when it grows
// and published atomically. Only one writer may grow a slab at a time.
type Slab[T any] struct {
	width int
	dir   atomic.Pointer[[][]T]
}

// NewSlab returns an empty slab of rows of width elements.
func NewSlab[T any](width int) *Slab[T] {
	s := &Slab[T]{width: width}
	s.dir.Store(&[][]T{})
	return s
}

// Width is the elements per row.
func (s *Slab[T]) Width() int { return s.width }

// Row returns row i; it must have been made room for with Grow.
func (s *Slab[T]) Row(i uint32) []T {
	c := (*s.dir.Load())[i>>chunkShift]
	off := int(i&chunkMask) * s.width
	return c[off : off+s.width : off+s.width]
}

// At returns element i of a slab of width 1.
func (s *Slab[T]) At(i uint32) *T { return &(*s.dir.Load())[i>>chunkShift][i&chunkMask] }

// Chunks returns the chunks as they are now, for a scan that reads many
// rows: chunk c holds rows c·1024 … c·1024+1023.
func (s *Slab[T]) Chunks() [][]T { return *s.dir.Load() }

// Grow makes room for rows [0, n).
func (s *Slab[T]) Grow(n int) {
	dir := *s.dir.Load()
	need := (n + chunkRows - 1) >> chunkShift
	if need <= len(dir) {
		return
	}
	next := make([][]T, need, max(need, 2*len(dir)))
	copy(next, dir)
	for c := len(dir); c < need; c++ {
		next[c] = make([]T, chunkRows*s.width)
	}
	s.dir.Store(&next)
}

// Prefetch asks the CPU to load row i, which its caller is about to read:
// a walk of a graph or of codes reads rows in no order, each a cache miss.
func (s *Slab[T]) Prefetch(i uint32) {
	row := s.Row(i)
	var zero T
	kernels.Prefetch(unsafe.Slice((*byte)(unsafe.Pointer(&row[0])), len(row)*int(unsafe.Sizeof(zero))))
}

// Bytes is the memory the slab holds.
func (s *Slab[T]) Bytes() int64 {
	var zero T
	dir := *s.dir.Load()
	return int64(len(dir))*chunkRows*int64(s.width)*int64(unsafe.Sizeof(zero)) + 24*int64(cap(dir))
}

// Bitmap is a growable set of row ids whose words are read and written
// atomically, so that a search may test membership while a writer
// changes it. One writer at a time.
type Bitmap struct {
	words *Slab[atomic.Uint64]
}

// NewBitmap returns an empty set.
func NewBitmap() Bitmap { return Bitmap{words: NewSlab[atomic.Uint64](1)} }

// Grow makes room for ids [0, n).
func (b Bitmap) Grow(n int) { b.words.Grow((n + 63) / 64) }

// Set adds id.
func (b Bitmap) Set(id uint32) { b.words.At(id / 64).Or(1 << (id % 64)) }

// Clear removes id.
func (b Bitmap) Clear(id uint32) { b.words.At(id / 64).And(^(uint64(1) << (id % 64))) }

// Has reports whether id is in the set.
func (b Bitmap) Has(id uint32) bool { return b.words.At(id/64).Load()&(1<<(id%64)) != 0 }

// Word returns the 64 bits of ids 64w … 64w+63.
func (b Bitmap) Word(w uint32) uint64 { return b.words.At(w).Load() }

// Copy returns the words covering ids [0, n) as they are now.
func (b Bitmap) Copy(n int) []uint64 {
	out := make([]uint64, (n+63)/64)
	for w := range out {
		out[w] = b.Word(uint32(w))
	}
	return out
}

// Bytes is the memory the set holds.
func (b Bitmap) Bytes() int64 { return b.words.Bytes() }
