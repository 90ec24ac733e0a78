package replicate

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"fmt"
	"io"
)

// copySignature starts every binary COPY stream.
var copySignature = []byte("PGCOPY\n\xff\r\n\x00")

// copyReader reads tuples from a binary COPY stream: a signature, flags,
// a header extension, then per tuple a field count and each field as a
// length (-1 for NULL) and its bytes; a field count of -1 ends the data.
type copyReader struct {
	r      *bufio.Reader
	fields [][]byte // valid until the next call to next
	buf    []byte
}

func newCopyReader(r io.Reader) (*copyReader, error) {
	cr := &copyReader{r: bufio.NewReaderSize(r, 1<<20)}
	var hdr [19]byte
	if _, err := io.ReadFull(cr.r, hdr[:]); err != nil {
		return nil, fmt.Errorf("binary COPY header: %w", err)
	}
	if !bytes.Equal(hdr[:11], copySignature) {
		return nil, fmt.Errorf("binary COPY header: bad signature")
	}
	if ext := binary.BigEndian.Uint32(hdr[15:]); ext > 0 {
		if _, err := cr.r.Discard(int(ext)); err != nil {
			return nil, fmt.Errorf("binary COPY header extension: %w", err)
		}
	}
	return cr, nil
}

// next reads one tuple into cr.fields (nil entries for NULL). It returns
// false at the end of the data.
func (cr *copyReader) next() (bool, error) {
	var n [4]byte
	if _, err := io.ReadFull(cr.r, n[:2]); err != nil {
		return false, fmt.Errorf("binary COPY tuple: %w", err)
	}
	count := int16(binary.BigEndian.Uint16(n[:2]))
	if count == -1 {
		return false, nil
	}
	cr.fields = cr.fields[:0]
	cr.buf = cr.buf[:0]
	lens := make([]int32, count)
	for i := range lens {
		if _, err := io.ReadFull(cr.r, n[:]); err != nil {
			return false, fmt.Errorf("binary COPY field: %w", err)
		}
		lens[i] = int32(binary.BigEndian.Uint32(n[:]))
		if lens[i] < 0 {
			continue
		}
		start := len(cr.buf)
		cr.buf = append(cr.buf, make([]byte, lens[i])...)
		if _, err := io.ReadFull(cr.r, cr.buf[start:]); err != nil {
			return false, fmt.Errorf("binary COPY field: %w", err)
		}
	}
	off := 0
	for _, l := range lens {
		if l < 0 {
			cr.fields = append(cr.fields, nil)
			continue
		}
		if l == 0 {
			cr.fields = append(cr.fields, []byte{}) // empty, not NULL
			continue
		}
		cr.fields = append(cr.fields, cr.buf[off:off+int(l):off+int(l)])
		off += int(l)
	}
	return true, nil
}
