//go:build cgo

package proxy

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"syscall"
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

// bufferSize is a side's buffer each way: what one read or write moves.
const bufferSize = 32 << 10

// errWouldBlock: a side read or written without blocking (by the loop)
// has nothing more to give or take for now.
var errWouldBlock = errors.New("proxy: would block")

// wire reads and writes whole messages, buffered both ways. Messages
// larger than held pass through in pieces (see stream): a client's COPY
// data or a wide row costs the proxy a buffer, never its size.
//
// A wire is used by one goroutine at a time, in one of two modes: a
// session's goroutine reads and writes through the net.Conn, blocking on
// Go's poller; the loop (loop.go), which epoll told the socket is ready,
// reads and writes its descriptor without blocking (nonblocking), so that
// the thread woken by the kernel relays the message itself.
type wire struct {
	r    *inbox
	w    *outbox
	held int // the largest body read whole
}

func newWire(c net.Conn, held int) *wire {
	return &wire{r: &inbox{conn: c, fd: -1, buf: make([]byte, 0, bufferSize)}, w: &outbox{conn: c, fd: -1}, held: held}
}

// useFD switches the wire to the loop's reads and writes, without
// blocking, of the socket's descriptor fd.
func (w *wire) useFD(fd int) { w.r.fd, w.w.fd = fd, fd }

// useConn switches the wire to blocking reads and writes through c.
func (w *wire) useConn(c net.Conn) {
	w.r.fd, w.w.fd = -1, -1
	w.r.conn, w.w.conn = c, c
}

// header reads a message's type and body length.
func (w *wire) header() (typ byte, n int, err error) {
	if err := w.r.need(5); err != nil {
		return 0, 0, err
	}
	typ, n, err = w.r.peekHeader()
	if err == nil {
		w.r.skip(5)
	}
	return typ, n, err
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

// body reads the n bytes of a message whose header was read.
func (w *wire) body(typ byte, n int) (message, error) {
	if err := w.r.need(n); err != nil {
		return message{}, err
	}
	b := w.r.buffered()[:n]
	w.r.skip(n)
	return message{typ, b}, nil
}

// send buffers m for writing.
func (w *wire) send(m message) {
	w.w.header(m.typ, len(m.body))
	w.w.Write(m.body)
}

// take reads a message whose header was read, as a copy the reader may
// keep, or, larger than the wire holds, skips it and returns tooLarge.
func (w *wire) take(typ byte, n int) (message, error) {
	if n > w.held {
		// Too large to hold: dropped, and the statement passed
		// through instead (see takeover).
		return message{typ: tooLarge}, w.r.copyTo(nil, n)
	}
	m, err := w.body(typ, n)
	if err != nil {
		return message{}, err
	}
	return message{typ, append([]byte(nil), m.body...)}, nil
}

// flush writes what is buffered.
func (w *wire) flush() error { return w.w.flush() }

// idle reports whether the next read would wait for the peer: the time
// to flush what goes the other way, as the peer itself would have.
func (w *wire) idle() bool { return len(w.r.buffered()) == 0 }

// inbox buffers what one side has sent.
type inbox struct {
	conn net.Conn
	fd   int    // ≥ 0: read this descriptor without blocking (the loop), not conn
	buf  []byte // buf[r:] is buffered
	r    int
	// drained: the last read without blocking filled less than it
	// asked for, so the socket is empty until epoll says otherwise.
	drained bool
}

func (b *inbox) buffered() []byte { return b.buf[b.r:] }

func (b *inbox) skip(n int) { b.r += n }

// peekHeader decodes the buffered message header.
func (b *inbox) peekHeader() (typ byte, n int, err error) {
	hdr := b.buf[b.r:]
	l := int32(binary.BigEndian.Uint32(hdr[1:5]))
	if l < 4 {
		return 0, 0, fmt.Errorf("invalid message length %d", l)
	}
	return hdr[0], int(l - 4), nil
}

// need reads until n bytes are buffered; without blocking, it returns
// errWouldBlock once the socket is empty.
func (b *inbox) need(n int) error {
	for len(b.buf)-b.r < n {
		if err := b.more(n); err != nil {
			return err
		}
	}
	return nil
}

// more reads once, with room for at least n buffered bytes.
func (b *inbox) more(n int) error {
	if b.r > 0 {
		// Keep the buffered bytes at the front; a buffer grown for a
		// large message goes back to the usual size once it is read.
		rest := len(b.buf) - b.r
		if rest == 0 && cap(b.buf) > bufferSize {
			b.buf = make([]byte, 0, bufferSize)
		} else {
			copy(b.buf, b.buf[b.r:])
			b.buf = b.buf[:rest]
		}
		b.r = 0
	}
	if cap(b.buf) < n {
		b.buf = append(make([]byte, 0, n), b.buf...)
	}
	room := b.buf[len(b.buf):cap(b.buf)]
	var k int
	var err error
	if b.fd >= 0 {
		k, err = readRaw(b.fd, room)
		b.drained = k < len(room)
	} else {
		k, err = b.conn.Read(room)
	}
	b.buf = b.buf[:len(b.buf)+k]
	if k > 0 {
		return nil
	}
	if err == nil {
		err = io.ErrNoProgress
	}
	return err
}

// copyTo moves the next n bytes to w (nil: drops them), reading as it
// goes: how a message larger than held passes, a buffer at a time.
func (b *inbox) copyTo(w *outbox, n int) error {
	for n > 0 {
		if len(b.buf) == b.r {
			if err := b.more(1); err != nil {
				return err
			}
		}
		k := min(n, len(b.buf)-b.r)
		if w != nil {
			if _, err := w.Write(b.buf[b.r : b.r+k]); err != nil {
				return err
			}
		}
		b.r += k
		n -= k
	}
	return nil
}

// outbox buffers what goes to one side.
type outbox struct {
	conn net.Conn
	fd   int // ≥ 0: write this descriptor without blocking (the loop), not conn
	buf  []byte
}

func (b *outbox) header(typ byte, n int) {
	b.buf = binary.BigEndian.AppendUint32(append(b.buf, typ), uint32(n+4))
}

// Write buffers p; a session's goroutine writes out a full buffer as it
// goes (the loop stops reading instead: see loop.pump).
func (b *outbox) Write(p []byte) (int, error) {
	b.buf = append(b.buf, p...)
	if b.fd < 0 && len(b.buf) >= bufferSize {
		return len(p), b.flush()
	}
	return len(p), nil
}

// flush writes what is buffered; without blocking, what the socket
// does not take stays, and the error is errWouldBlock.
func (b *outbox) flush() error {
	if len(b.buf) == 0 {
		return nil
	}
	var n int
	var err error
	if b.fd >= 0 {
		n, err = writeRaw(b.fd, b.buf)
	} else {
		n, err = b.conn.Write(b.buf)
	}
	if n == len(b.buf) {
		b.buf = b.buf[:0]
		if cap(b.buf) > 4*bufferSize {
			b.buf = nil
		}
		return nil
	}
	b.buf = b.buf[:copy(b.buf, b.buf[n:])]
	if err == nil {
		err = errWouldBlock
	}
	return err
}

// readRaw reads a socket's descriptor without blocking.
func readRaw(fd int, p []byte) (int, error) {
	n, err := syscall.Read(fd, p)
	switch {
	case err == syscall.EAGAIN || err == syscall.EINTR:
		return 0, errWouldBlock
	case err != nil:
		return 0, err
	case n == 0:
		return 0, io.EOF
	}
	return n, nil
}

// writeRaw writes to a socket's descriptor without blocking.
func writeRaw(fd int, p []byte) (int, error) {
	n, err := syscall.Write(fd, p)
	if err == syscall.EAGAIN || err == syscall.EINTR {
		return 0, nil
	}
	return max(n, 0), err
}

// startupPacket is body with its length prefix, as sent.
func startupPacket(body []byte) []byte {
	return append(binary.BigEndian.AppendUint32(nil, uint32(len(body)+4)), body...)
}
