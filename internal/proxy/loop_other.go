//go:build cgo && !linux

package proxy

import (
	"context"
	"net"
	"syscall"
)

// loop relays sessions on one thread with epoll, on Linux only; elsewhere
// every session is relayed by its goroutines.
type loop struct{}

func newLoop() (*loop, error) { return nil, nil }

func (l *loop) stop() {}

func rawConns(...net.Conn) ([2]syscall.RawConn, bool) { return [2]syscall.RawConn{}, false }

func (s *session) runLooped(context.Context, *loop, [2]syscall.RawConn) error { panic("no loop") }

// looped is the loop's state of a session; there is no loop here.
type looped struct{}
