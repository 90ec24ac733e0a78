//go:build cgo

package proxy

import (
	"bytes"
	"encoding/binary"
	"errors"
	"io"
	"net"
	"sync"
	"sync/atomic"
)

// session is one client's connection and its own upstream connection.
// Two goroutines relay: the session's own reads the client's messages
// and writes them upstream (accelerating what it can), relayUpstream
// reads PostgreSQL's and writes them to the client. While the session
// answers a statement itself (taken), relayUpstream hands it
// PostgreSQL's replies instead, except the asynchronous ones.
type session struct {
	p        *Proxy
	nc, up   net.Conn
	c, u     *wire
	cmu      sync.Mutex // the client's writer
	reported bool       // the client has been told why its startup failed

	pid, secret     uint32 // the key the client got
	upPID, upSecret uint32 // PostgreSQL's

	// status is the transaction status of the last ReadyForQuery: 'I'
	// idle, 'T' in a transaction block, 'E' in a failed one.
	status atomic.Uint32
	// pending counts the ReadyForQuery messages PostgreSQL still owes: one
	// per Query and per Sync sent. batch: extended-protocol messages were
	// sent since the last Sync.
	pending atomic.Int32
	batch   bool
	// dirty: a statement passed through since the last probe (see
	// accelerate.go), so the session may have written or changed its
	// search_path.
	dirty    bool
	resolved map[[2]string]bool // table names the last probe checked
	options  string             // knn options from the session's settings, as the last probe read them
	// vectorOID is pgvector's vector type in the session's database, as
	// the last probe read it (0: not installed, or not probed yet).
	vectorOID uint32
	// stmts are the client's prepared statements the proxy could answer,
	// by name (see noteParse); own, the session's (prepared.go).
	stmts map[string]*clientStatement
	own   ownStatements
	// lastPlan is what SHOW vecside.last_plan answers.
	lastPlan string

	// plain: the session's client_encoding is UTF8 and its
	// standard_conforming_strings on, as the parser and the deparser
	// read and write SQL (see noteParameter).
	plain atomic.Bool
	enc   [2]bool // client_encoding UTF8, standard_conforming_strings on

	taken   atomic.Bool
	replies chan message  // PostgreSQL's replies while taken
	ended   chan struct{} // closed when the client's side has ended
}

func newSession(p *Proxy, nc, up net.Conn) *session {
	return &session{p: p, nc: nc, up: up, c: newWire(nc, p.limits.MaxMessage), u: newWire(up, p.limits.MaxMessage),
		dirty: true, replies: make(chan message, 64), ended: make(chan struct{})}
}

// run relays until either side ends the session.
func (s *session) run() error {
	done := make(chan error, 1)
	go func() { done <- s.relayUpstream() }()
	err := s.relayClient()
	close(s.ended)
	s.up.Close()
	if uerr := <-done; err == nil || errors.Is(err, net.ErrClosed) {
		err = uerr
	}
	if errors.Is(err, io.EOF) || errors.Is(err, net.ErrClosed) {
		return nil
	}
	return err
}

// relayClient sends the client's messages upstream, flushing whenever
// the client has sent all it has.
func (s *session) relayClient() error {
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
			if typ == 'P' || typ == 'Q' {
				// Unread: it may prepare or deallocate any statement.
				s.forgetStatements()
			}
			s.track(typ)
			if err := stream(s.u.w, s.c.r, typ, n); err != nil {
				return err
			}
			continue
		}
		m, err := s.c.body(typ, n)
		if err != nil {
			return err
		}
		switch {
		case typ == 'Q':
			handled, err := s.accelerateQuery(m)
			if err == nil && !handled {
				handled, err = s.showLastPlan(m)
			}
			if err != nil {
				return err
			}
			if handled {
				continue
			}
			s.notePassedQuery(string(m.body))
		case (typ == 'P' || typ == 'B') && s.p.cfg.Sidecar != nil && s.pending.Load() == 0 && !s.batch:
			b, err := s.hold(m)
			if err == nil && b != nil {
				err = s.accelerateBatch(b)
			}
			if err != nil {
				return err
			}
			continue
		}
		s.pass(m)
		if typ == 'X' {
			return s.u.flush()
		}
	}
}

// track notes what a client message sent upstream makes PostgreSQL owe.
func (s *session) track(typ byte) {
	switch typ {
	case 'Q':
		s.pending.Add(1)
		s.dirty = true
	case 'S':
		s.pending.Add(1)
		s.batch = false
	case 'P', 'B', 'D', 'E', 'C', 'H':
		s.batch = true
		s.dirty = s.dirty || typ == 'E'
	case 'F': // FunctionCall
		s.pending.Add(1)
		s.dirty = true
	}
}

// relayUpstream sends PostgreSQL's messages to the client, flushing
// whenever PostgreSQL has sent all it has, as PostgreSQL itself flushed.
func (s *session) relayUpstream() error {
	defer close(s.replies)
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
			if n > s.u.held {
				// Too large to hold: dropped, and the statement passed
				// through instead (see takeover).
				if _, err := io.CopyN(io.Discard, s.u.r, int64(n)); err != nil {
					return err
				}
				if !s.hand(message{typ: tooLarge}) {
					return net.ErrClosed
				}
				continue
			}
			m, err := s.u.body(typ, n)
			if err != nil {
				return err
			}
			if !s.hand(message{typ, append([]byte(nil), m.body...)}) {
				return net.ErrClosed
			}
			continue
		}
		if typ == 'Z' && n == 1 {
			m, err := s.u.body(typ, n)
			if err != nil {
				return err
			}
			s.status.Store(uint32(m.body[0]))
			s.pending.Add(-1)
			s.cmu.Lock()
			s.c.send(m)
			s.cmu.Unlock()
			continue
		}
		if typ == 'S' && n <= s.u.held {
			m, err := s.u.body(typ, n)
			if err != nil {
				return err
			}
			s.noteParameter(m.body)
			s.cmu.Lock()
			s.c.send(m)
			s.cmu.Unlock()
			continue
		}
		s.cmu.Lock()
		err = stream(s.c.w, s.u.r, typ, n)
		s.cmu.Unlock()
		if err != nil {
			return err
		}
	}
}

// hand gives the session a reply it has taken, unless the session has
// ended (given up in the middle of an answer, it reads no more).
func (s *session) hand(m message) bool {
	select {
	case s.replies <- m:
		return true
	case <-s.ended:
		return false
	}
}

// tooLarge stands for a reply the session was not given, being larger
// than Limits.MaxMessage.
const tooLarge = 0

// noteParameter follows the ParameterStatus messages that change how
// SQL text reads: only with client_encoding UTF8 and
// standard_conforming_strings on is a statement accelerated.
func (s *session) noteParameter(body []byte) {
	name, value, _ := bytes.Cut(body, []byte{0})
	value, _, _ = bytes.Cut(value, []byte{0})
	switch string(name) {
	case "client_encoding":
		s.enc[0] = string(value) == "UTF8"
	case "standard_conforming_strings":
		s.enc[1] = string(value) == "on"
	default:
		return
	}
	s.plain.Store(s.enc[0] && s.enc[1])
}

// asynchronous reports whether PostgreSQL may send a message of type typ
// at any time: a notice, a notification or a changed parameter.
func asynchronous(typ byte) bool { return typ == 'N' || typ == 'A' || typ == 'S' }

// stream copies one message of n body bytes from r to w, whatever its
// size.
func stream(w io.Writer, r io.Reader, typ byte, n int) error {
	var hdr [5]byte
	hdr[0] = typ
	binary.BigEndian.PutUint32(hdr[1:], uint32(n+4))
	if _, err := w.Write(hdr[:]); err != nil {
		return err
	}
	_, err := io.CopyN(w, r, int64(n))
	return err
}
