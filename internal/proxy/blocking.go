//go:build cgo

package proxy

import (
	"errors"
	"io"
	"net"
	"os"
	"sync/atomic"
	"syscall"

	"golang.org/x/sys/unix"
)

// Once a session is authenticated, its two relaying goroutines read
// their sockets with blocking read(2) calls, not through Go's network
// poller: the kernel then wakes the thread waiting in read the moment a
// message arrives, where the poller's wake-up first goes through the
// scheduler. Measured with pgbench -S (one client, simple protocol) on
// two shared cores, medians of five interleaved 4 s runs of p50: a bare
// relay added 83 to 108 µs to a direct statement through the poller and
// 77 through blocking reads; pinned to one CPU, 70 and 20 to 42 µs
// (PgBouncer 1.18: 22 to 39). The proxy itself went from 93 to 75 µs
// (62 pinned). The relay's messages, flushes and everything else stay
// as they were.
//
// The cost is two threads per session, each waiting in read while its
// peer says nothing; PostgreSQL spends a process on the same session.
// Past maxBlockingSessions sessions at once, new ones use the poller, so
// that the process stays far below Go's limit of 10,000 threads. TLS
// connections use the poller too (their records are read by crypto/tls).

// maxBlockingSessions is how many sessions at once read with blocking
// calls (two threads each).
const maxBlockingSessions = 1024

// blockingSessions counts the sessions reading with blocking calls.
var blockingSessions atomic.Int32

// blockingReader reads a socket with blocking read(2) calls on a
// duplicate of its descriptor. O_NONBLOCK belongs to the socket's open
// file description, which the duplicate shares, so the connection's own
// writes then block in write(2) until the kernel takes the bytes, as the
// poller would have parked them. closeConn wakes a blocked read.
type blockingReader struct {
	f *os.File
}

// readBlocking returns a blocking reader of c, or nil if c is not a
// plain TCP or Unix socket.
func readBlocking(c net.Conn) *blockingReader {
	fc, ok := c.(interface{ File() (*os.File, error) })
	if !ok {
		return nil
	}
	switch c.(type) {
	case *net.TCPConn, *net.UnixConn:
	default:
		return nil
	}
	f, err := fc.File()
	if err != nil {
		return nil
	}
	if err := unix.SetNonblock(int(f.Fd()), false); err != nil {
		f.Close()
		return nil
	}
	return &blockingReader{f: f}
}

func (b *blockingReader) Read(p []byte) (int, error) {
	for {
		n, err := unix.Read(int(b.f.Fd()), p)
		switch {
		case errors.Is(err, unix.EINTR):
			continue
		case err != nil:
			return 0, &net.OpError{Op: "read", Net: "tcp", Err: err}
		case n == 0 && len(p) > 0:
			return 0, io.EOF
		}
		return n, nil
	}
}

func (b *blockingReader) Close() error { return b.f.Close() }

// closeConn closes c after shutting its socket down, which ends a read
// blocked in read(2) on a duplicate of its descriptor (closing c alone
// would leave the socket open through the duplicate).
func closeConn(c net.Conn) error {
	if sc, ok := c.(syscall.Conn); ok {
		if raw, err := sc.SyscallConn(); err == nil {
			raw.Control(func(fd uintptr) { unix.Shutdown(int(fd), unix.SHUT_RDWR) })
		}
	}
	return c.Close()
}

// readBlocking switches the session's reads from plain sockets to
// blocking calls, unless maxBlockingSessions already do.
func (s *session) readBlocking() {
	if blockingSessions.Add(1) > maxBlockingSessions {
		blockingSessions.Add(-1)
		return
	}
	for _, side := range []struct {
		conn net.Conn
		w    *wire
	}{{s.nc, s.c}, {s.up, s.u}} {
		if b := readBlocking(side.conn); b != nil {
			side.w.readFrom(b)
			s.blocking = append(s.blocking, b)
		}
	}
	if s.blocking == nil {
		blockingSessions.Add(-1)
	}
}

// endBlocking closes the duplicate descriptors once both relays ended.
func (s *session) endBlocking() {
	for _, b := range s.blocking {
		b.Close()
	}
	if s.blocking != nil {
		blockingSessions.Add(-1)
	}
}
