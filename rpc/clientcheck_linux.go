//go:build linux

package rpc

import (
	"net"
	"syscall"
	"unsafe"
)

// detectsClientGone says whether clientGone can tell anything here.
const detectsClientGone = true

// poll(2) events, as in <poll.h>.
const (
	pollErr   = 0x8
	pollHup   = 0x10
	pollRDHup = 0x2000
)

// pollFd is struct pollfd.
type pollFd struct {
	fd      int32
	events  int16
	revents int16
}

// clientGone reports whether the client has closed its end of nc, or the
// connection broke, without reading from it: a poll with no timeout for
// POLLRDHUP, POLLHUP and POLLERR, the test PostgreSQL's
// client_connection_check_interval makes. Unlike a recv with MSG_PEEK,
// it also sees a close that follows bytes the server has not read yet (a
// query the client pipelined before leaving).
func clientGone(nc net.Conn) bool {
	rc := socket(nc)
	if rc == nil {
		return false
	}
	gone := false
	rc.Control(func(fd uintptr) {
		p := pollFd{fd: int32(fd), events: pollRDHup}
		var zero syscall.Timespec
		n, _, errno := syscall.Syscall6(syscall.SYS_PPOLL, uintptr(unsafe.Pointer(&p)), 1, uintptr(unsafe.Pointer(&zero)), 0, 0, 0)
		gone = errno == 0 && n == 1 && p.revents&(pollRDHup|pollHup|pollErr) != 0
	})
	return gone
}

// socket is the socket under nc, or nil if there is none.
func socket(nc net.Conn) syscall.RawConn {
	for {
		switch c := nc.(type) {
		case syscall.Conn:
			rc, err := c.SyscallConn()
			if err != nil {
				return nil
			}
			return rc
		case interface{ NetConn() net.Conn }: // *tls.Conn
			nc = c.NetConn()
		default:
			return nil
		}
	}
}
