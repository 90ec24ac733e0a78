//go:build cgo

package proxy

import (
	"bufio"
	"encoding/binary"
	"fmt"
	"io"
)

// Startup request codes, in place of a protocol version.
const (
	cancelRequestCode = 80877102
	sslRequestCode    = 80877103
	gssEncRequestCode = 80877104
)

// message is one protocol message after startup: its type byte and body.
// body aliases the reader's buffer until the next read unless copied.
type message struct {
	typ  byte
	body []byte
}

// wire reads and writes whole messages, buffered both ways. Messages
// larger than held pass through in pieces (see relay): a client's COPY
// data or a wide row costs the proxy a buffer, never its size.
type wire struct {
	r    *bufio.Reader
	w    *bufio.Writer
	held int // the largest body read whole
	buf  []byte
}

func newWire(rw io.ReadWriter, held int) *wire {
	return &wire{r: bufio.NewReaderSize(rw, 32<<10), w: bufio.NewWriterSize(rw, 32<<10), held: held}
}

// header reads a message's type and body length.
func (w *wire) header() (typ byte, n int, err error) {
	var hdr [5]byte
	if _, err := io.ReadFull(w.r, hdr[:]); err != nil {
		return 0, 0, err
	}
	l := int32(binary.BigEndian.Uint32(hdr[1:]))
	if l < 4 {
		return 0, 0, fmt.Errorf("invalid message length %d", l)
	}
	return hdr[0], int(l - 4), nil
}

// read reads one whole message; a body longer than held is an error.
func (w *wire) read() (message, error) {
	typ, n, err := w.header()
	if err != nil {
		return message{}, err
	}
	if n > w.held {
		return message{}, fmt.Errorf("message %q of %d bytes exceeds the limit of %d", typ, n, w.held)
	}
	return w.body(typ, n)
}

func (w *wire) body(typ byte, n int) (message, error) {
	if cap(w.buf) < n {
		w.buf = make([]byte, n)
	}
	b := w.buf[:n]
	if _, err := io.ReadFull(w.r, b); err != nil {
		return message{}, err
	}
	return message{typ, b}, nil
}

// send buffers m for writing.
func (w *wire) send(m message) {
	w.w.WriteByte(m.typ)
	w.w.Write(binary.BigEndian.AppendUint32(nil, uint32(len(m.body)+4)))
	w.w.Write(m.body)
}

// flush writes what is buffered.
func (w *wire) flush() error { return w.w.Flush() }

// idle reports whether the next read would wait for the peer: the time
// to flush what goes the other way, as the peer itself would have.
func (w *wire) idle() bool { return w.r.Buffered() == 0 }

// startupPacket is body with its length prefix, as sent.
func startupPacket(body []byte) []byte {
	return append(binary.BigEndian.AppendUint32(nil, uint32(len(body)+4)), body...)
}
