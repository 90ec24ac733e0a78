//go:build cgo && !linux

package proxy

import (
	"context"
	"net"
)

// loop relays sessions on one thread with epoll, on Linux only; elsewhere
// every session is relayed by its goroutines.
type loop struct{}

func newLoop() (*loop, error) { return nil, nil }

func (l *loop) stop() {}

func detach(...net.Conn) ([2]int, bool, error) { return [2]int{}, false, nil }

// looped is the loop's state of a session; there is no loop here.
type looped struct{}

func newLooped(*session, [2]int) *looped { panic("no loop") }

func (lp *looped) run(context.Context, *loop) error { panic("no loop") }
