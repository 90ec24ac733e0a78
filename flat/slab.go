package flat

import "slices"

// slab holds fixed-width float32 rows in chunks that snapshots share.
// freeze hands out the current chunks and starts a new generation; a
// later write to a chunk of an older generation copies it first, so a
// snapshot can be written out without a lock while the index changes, and
// taking one costs a copy of the chunk pointers, not of the vectors.
type slab struct {
	width  int // floats per row
	rows   int
	chunks []*chunk
	gen    uint64
}

type chunk struct {
	data []float32 // chunkRows × width
	gen  uint64    // generation that may write it in place
}

// chunkRows is the rows per chunk: a copy-on-write of one costs well
// under a millisecond at any dimension.
const chunkRows = 1024

func (s *slab) row(i int) []float32 {
	c, off := s.chunks[i/chunkRows], (i%chunkRows)*s.width
	return c.data[off : off+s.width]
}

// mutableRow is row i, after copying its chunk if a snapshot shares it.
func (s *slab) mutableRow(i int) []float32 {
	ci := i / chunkRows
	if c := s.chunks[ci]; c.gen != s.gen {
		s.chunks[ci] = &chunk{data: slices.Clone(c.data), gen: s.gen}
	}
	return s.row(i)
}

func (s *slab) appendRow(v []float32) {
	if s.rows%chunkRows == 0 {
		s.chunks = append(s.chunks, &chunk{data: make([]float32, chunkRows*s.width), gen: s.gen})
	}
	s.rows++
	copy(s.mutableRow(s.rows-1), v)
}

// dropLast forgets the last row.
func (s *slab) dropLast() {
	s.rows--
	if s.rows%chunkRows == 0 {
		s.chunks = s.chunks[:len(s.chunks)-1]
	}
}

// blocks calls fn with runs of consecutive rows (at most scanBlock each)
// and the index of their first row, until fn returns false.
func (s *slab) blocks(fn func(first int, rows []float32) bool) {
	for ci, c := range s.chunks {
		n := min(chunkRows, s.rows-ci*chunkRows)
		for off := 0; off < n; off += scanBlock {
			m := min(scanBlock, n-off)
			if !fn(ci*chunkRows+off, c.data[off*s.width:(off+m)*s.width]) {
				return
			}
		}
	}
}

// freeze returns a read-only view of the rows as they are now.
func (s *slab) freeze() slab {
	frozen := slab{width: s.width, rows: s.rows, chunks: slices.Clone(s.chunks), gen: s.gen}
	s.gen++
	return frozen
}

func (s *slab) bytes() int { return 4 * len(s.chunks) * chunkRows * s.width }
