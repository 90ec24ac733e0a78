package store

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math"

	"github.com/vecside/vecside/kernels"
)

// BodyWriter writes the little-endian fields of a checkpoint body, the
// part an index kind owns inside the indexer's container. Errors stick:
// check Flush's.
type BodyWriter struct {
	bw  *bufio.Writer
	buf []byte
	err error
}

// BodyBuffer is the buffer size of body writers and readers. A reader
// given a *bufio.Reader at least this large reads through it, leaving
// what it did not read for the next reader of the same body.
const BodyBuffer = 1 << 20

// NewBodyWriter writes to w.
func NewBodyWriter(w io.Writer) *BodyWriter {
	return &BodyWriter{bw: bufio.NewWriterSize(w, BodyBuffer)}
}

func (b *BodyWriter) spill() {
	if len(b.buf) >= 64<<10 {
		b.Flush()
	}
}

// Uvarint writes v.
func (b *BodyWriter) Uvarint(v uint64) { b.buf = binary.AppendUvarint(b.buf, v); b.spill() }

// Raw writes p as it is.
func (b *BodyWriter) Raw(p []byte) { b.buf = append(b.buf, p...); b.spill() }

// String writes s with its length.
func (b *BodyWriter) String(s string) {
	b.buf = binary.AppendUvarint(b.buf, uint64(len(s)))
	b.buf = append(b.buf, s...)
	b.spill()
}

// Floats writes v, without its length.
func (b *BodyWriter) Floats(v []float32) {
	for len(v) > 0 {
		n := min(len(v), floatChunk)
		for _, f := range v[:n] {
			b.buf = binary.LittleEndian.AppendUint32(b.buf, math.Float32bits(f))
		}
		b.spill()
		v = v[n:]
	}
}

// floatChunk bounds the buffers Floats uses, whatever the slice's length.
const floatChunk = 16 << 10

// Encoded writes e's codes and factors, 1-bit then extended.
func (b *BodyWriter) Encoded(e *Encoded) {
	b.buf = append(b.buf, e.Code...)
	b.buf = appendFactors(b.buf, e.F)
	b.buf = append(b.buf, e.Ext...)
	b.buf = appendFactors(b.buf, e.XF)
	b.spill()
}

func appendFactors(buf []byte, f kernels.Factors) []byte {
	for _, v := range [4]float32{f.NormSq, f.Scale, f.Err, f.QErr} {
		buf = binary.LittleEndian.AppendUint32(buf, math.Float32bits(v))
	}
	return buf
}

// Flush writes out what is buffered and returns the first error met.
func (b *BodyWriter) Flush() error {
	if b.err == nil {
		_, b.err = b.bw.Write(b.buf)
	}
	b.buf = b.buf[:0]
	if b.err == nil {
		b.err = b.bw.Flush()
	}
	return b.err
}

// BodyReader reads what a BodyWriter wrote. Errors stick: check Err.
type BodyReader struct {
	br  *bufio.Reader
	err error
	raw []byte
}

// NewBodyReader reads from r.
func NewBodyReader(r io.Reader) *BodyReader {
	return &BodyReader{br: bufio.NewReaderSize(r, BodyBuffer)}
}

// Err is the first error met, io.ErrUnexpectedEOF for a short body.
func (r *BodyReader) Err() error { return r.err }

// Fail records err unless an earlier error is recorded.
func (r *BodyReader) Fail(err error) {
	if r.err == nil {
		r.err = err
	}
}

// Uvarint reads a uvarint.
func (r *BodyReader) Uvarint() uint64 {
	if r.err != nil {
		return 0
	}
	v, err := binary.ReadUvarint(r.br)
	r.Fail(eof(err))
	return v
}

// Count reads a uvarint that counts things of at least size bytes each,
// refusing counts the body cannot hold.
func (r *BodyReader) Count(limit uint64) int {
	n := r.Uvarint()
	if n > limit {
		r.Fail(fmt.Errorf("count %d exceeds %d", n, limit))
		return 0
	}
	return int(n)
}

// Raw reads len(p) bytes into p.
func (r *BodyReader) Raw(p []byte) {
	if r.err == nil {
		_, err := io.ReadFull(r.br, p)
		r.Fail(eof(err))
	}
}

// String reads a string of at most 1 MiB.
func (r *BodyReader) String() string {
	n := r.Count(1 << 20)
	if r.err != nil {
		return ""
	}
	p := make([]byte, n)
	r.Raw(p)
	return string(p)
}

// Floats fills v.
func (r *BodyReader) Floats(v []float32) {
	for len(v) > 0 && r.err == nil {
		n := min(len(v), floatChunk)
		r.raw = grow(r.raw, 4*n)
		r.Raw(r.raw)
		for i := range v[:n] {
			v[i] = math.Float32frombits(binary.LittleEndian.Uint32(r.raw[4*i:]))
		}
		v = v[n:]
	}
}

// Encoded fills e (sized by NewEncoded) with codes and factors.
func (r *BodyReader) Encoded(e *Encoded) {
	r.Raw(e.Code)
	e.F = r.factors()
	r.Raw(e.Ext)
	e.XF = r.factors()
}

func (r *BodyReader) factors() kernels.Factors {
	var v [4]float32
	r.Floats(v[:])
	return kernels.Factors{NormSq: v[0], Scale: v[1], Err: v[2], QErr: v[3]}
}

func eof(err error) error {
	if errors.Is(err, io.EOF) {
		return io.ErrUnexpectedEOF
	}
	return err
}

func grow[T any](s []T, n int) []T {
	if cap(s) < n {
		return make([]T, n)
	}
	return s[:n]
}

// MaxRows bounds the counts a body may declare, so that a corrupt count
// fails cleanly instead of allocating without end.
const MaxRows = 1 << 31
