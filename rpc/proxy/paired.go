//go:build cgo

package proxy

import (
	"errors"
	"net"
)

// paired relays a session by two goroutines, the session's own and one
// for PostgreSQL's replies: the relay of sessions the loop cannot take
// (over TLS, or where there is no loop).
type paired struct {
	s     *session
	ended chan struct{} // closed when the client's side has ended
}

func newPaired(s *session) *paired {
	s.ex.replies = make(chan message, 64)
	return &paired{s: s, ended: make(chan struct{})}
}

// run relays until either side ends the session.
func (r *paired) run() error {
	s := r.s
	done := make(chan error, 1)
	go func() { done <- r.fromUpstream() }()
	err := r.fromClient()
	close(r.ended)
	s.up.Close()
	if uerr := <-done; err == nil || errors.Is(err, net.ErrClosed) {
		err = uerr
	}
	return quiet(err)
}

// fromClient sends the client's messages upstream, flushing whenever the
// client has sent all it has.
func (r *paired) fromClient() error {
	s := r.s
	for {
		if s.c.idle() {
			if err := s.u.flush(); err != nil {
				return err
			}
		}
		typ, n, err := s.c.header()
		if err != nil {
			return err
		}
		if n > s.c.held {
			s.unread(typ)
			if err := stream(s.u.w, s.c.r, typ, n); err != nil {
				return err
			}
			continue
		}
		m, err := s.c.body(typ, n)
		if err != nil {
			return err
		}
		if err := s.handle(m); err != nil {
			return err
		}
		if s.flow.terminated {
			return s.u.flush()
		}
	}
}

// fromUpstream sends PostgreSQL's messages to the client, flushing
// whenever PostgreSQL has sent all it has, as PostgreSQL itself flushed.
func (r *paired) fromUpstream() error {
	s := r.s
	defer close(s.ex.replies)
	defer s.nc.Close()
	for {
		if s.u.idle() {
			s.cmu.Lock()
			err := s.c.flush()
			s.cmu.Unlock()
			if err != nil {
				return err
			}
		}
		typ, n, err := s.u.header()
		if err != nil {
			s.cmu.Lock()
			s.c.flush()
			s.cmu.Unlock()
			return err
		}
		if s.taken.Load() && !asynchronous(typ) {
			m, err := s.u.take(typ, n)
			if err != nil {
				return err
			}
			if !r.hand(m) {
				return net.ErrClosed
			}
			continue
		}
		s.cmu.Lock()
		err = s.relayReply(typ, n)
		s.cmu.Unlock()
		if err != nil {
			return err
		}
	}
}

// hand gives the session a reply it has taken, unless the session has
// ended (given up in the middle of an answer, it reads no more).
func (r *paired) hand(m message) bool {
	select {
	case r.s.ex.replies <- m:
		return true
	case <-r.ended:
		return false
	}
}
