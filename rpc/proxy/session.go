//go:build cgo

package proxy

import (
	"bytes"
	"context"
	"crypto/rand"
	"errors"
	"io"
	"net"
	"sync"
	"sync/atomic"
)

// session is one client's connection and its own upstream connection.
//
// A session whose connections are both plain sockets is relayed by the
// loop (loop.go) while it passes messages through: one OS thread, woken
// by epoll, reads, tracks and writes the messages itself. A message the
// proxy may answer (see mayAnswer) hands the session to its own
// goroutine (runLooped), which answers with blocking reads and writes,
// reading PostgreSQL's replies itself, and hands it back.
//
// A session over TLS is relayed by two goroutines: the session's own
// reads the client's messages and writes them upstream (accelerating what
// it can), relayUpstream reads PostgreSQL's and writes them to the
// client. While the session answers a statement itself (taken),
// relayUpstream hands it PostgreSQL's replies instead, except the
// asynchronous ones.
type session struct {
	p        *Proxy
	nc, up   net.Conn
	c, u     *wire
	cmu      sync.Mutex // the client's writer, between the two goroutines
	reported bool       // the client has been told why its startup failed

	pid, secret     uint32    // the key the client got
	upPID, upSecret uint32    // PostgreSQL's
	upstream        *upstream // where the session's backend is, for its cancel requests

	// status is the transaction status of the last ReadyForQuery: 'I'
	// idle, 'T' in a transaction block, 'E' in a failed one.
	status atomic.Uint32
	// pending counts the ReadyForQuery messages PostgreSQL still owes: one
	// per Query and per Sync sent. batch: extended-protocol messages were
	// sent since the last Sync.
	pending atomic.Int32
	batch   bool
	// describing: the client prepared a statement, described it and
	// flushed, without a Sync (Parse, Describe, Flush, as postgres.js
	// does before its Bind), and describeOwed counts the
	// replies PostgreSQL still owes that; once they have come and none
	// failed (describeFailed), the batch the client sends next may be
	// held and answered as if nothing were owed.
	describing     bool
	describeOwed   atomic.Int32
	describeFailed atomic.Bool
	// terminated: the client's Terminate went upstream, alone or ending
	// a held batch; the session ends once it is flushed.
	terminated bool
	probe      sessionProbe  // what the session's probes found
	book       statementBook // the client's prepared statements (see noteParse)
	// ex is the session's own conversation with PostgreSQL while it
	// answers a statement itself.
	ex     exchange
	asking asking // its requests for candidates
	// lastPlan is what SHOW vecside.last_plan answers.
	lastPlan string

	// encoding says whether the session's SQL reads as the parser and
	// the deparser read and write it.
	encoding sqlEncoding

	taken atomic.Bool
	ended chan struct{} // closed when the client's side has ended

	looped *looped // the loop's state of a session it relays
}

func newSession(p *Proxy, nc, up net.Conn) *session {
	s := &session{p: p, nc: nc, up: up, c: newWire(nc, p.limits.MaxMessage), u: newWire(up, p.limits.MaxMessage),
		probe: sessionProbe{dirty: true}, asking: asking{p: p}, ended: make(chan struct{})}
	// Its own statements' name is random, so that no name of the
	// client's meets it.
	s.ex = exchange{u: s.u, relayAsync: s.relayReply, status: &s.status, ownName: "vecside_" + rand.Text()}
	return s
}

// run relays until either side ends the session or ctx ends.
func (s *session) run(ctx context.Context) error {
	if l := s.p.loop; l != nil {
		fds, ok, err := detach(s.nc, s.up)
		if err != nil {
			return err
		}
		if ok {
			return s.runLooped(ctx, l, fds)
		}
	}
	s.ex.replies = make(chan message, 64)
	done := make(chan error, 1)
	go func() { done <- s.relayUpstream() }()
	err := s.relayClient()
	close(s.ended)
	s.up.Close()
	if uerr := <-done; err == nil || errors.Is(err, net.ErrClosed) {
		err = uerr
	}
	return quiet(err)
}

// quiet is a session's end as worth reporting: nil for either side
// closing its connection.
func quiet(err error) error {
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
		if s.terminated {
			return s.u.flush()
		}
	}
}

// unread notes a client message too large to read whole, which passes
// through unread.
func (s *session) unread(typ byte) {
	if typ == 'P' || typ == 'Q' {
		// It may prepare or deallocate any statement.
		s.book.forgetAll()
	}
	s.track(typ)
}

// handle answers a client message or sends it upstream: mayAnswer
// decides which.
func (s *session) handle(m message) error {
	if !s.mayAnswer(m) {
		s.passOn(m)
		return nil
	}
	if m.typ == 'Q' {
		handled, err := s.accelerateQuery(m)
		if err == nil && !handled {
			handled, err = s.showLastPlan(m)
		}
		if err == nil && !handled {
			s.passOn(m)
		}
		return err
	}
	b, err := s.hold(m)
	if err == nil && b != nil {
		err = s.accelerateBatch(b)
		// Answered, its Sync was the proxy's; passed through, the
		// client's: either way nothing of the batch is open.
		s.batch, s.describing = false, false
	}
	return err
}

// holds reports whether an extended-protocol batch starting now is held
// back until its Sync, to see whether the proxy can answer it.
func (s *session) holds() bool {
	described := s.describing && s.describeOwed.Load() == 0 && !s.describeFailed.Load()
	return s.p.cfg.Sidecar != nil && s.pending.Load() == 0 && (!s.batch || described)
}

// mayAnswer reports whether the proxy may do more with a client message
// than pass it on: answer it (a Query), or hold the batch it starts (a
// Parse or a Bind), to answer that. It is the one test of it: handle
// passes the rest on, and the loop hands these to the session's
// goroutine and passes the rest on itself.
func (s *session) mayAnswer(m message) bool {
	switch m.typ {
	case 'Q':
		sql := string(m.body)
		return s.p.cfg.Sidecar != nil && mentionsDistance(sql) || containsFold(sql, lastPlanName)
	case 'P':
		// hold would send on a Parse of a statement recognize cannot
		// take, and what follows it, as they came.
		return s.holds() && (mentionsDistance(string(m.body)) || containsFold(string(m.body), lastPlanName))
	case 'B':
		return s.holds() && s.book.get(boundStatement(m.body)) != nil
	}
	return false
}

// boundStatement is the statement a Bind message's body binds: after its
// portal's name.
func boundStatement(body []byte) string {
	_, rest, _ := bytes.Cut(body, []byte{0})
	name, _, _ := bytes.Cut(rest, []byte{0})
	return string(name)
}

// passOn sends a client message upstream that the proxy does not answer.
func (s *session) passOn(m message) {
	if m.typ == 'Q' {
		s.book.passedQuery(string(m.body))
	}
	s.pass(m)
}

// track notes what a client message sent upstream makes PostgreSQL owe,
// and a Terminate.
func (s *session) track(typ byte) {
	s.describing = s.describing && typ == 'H'
	switch typ {
	case 'X':
		s.terminated = true
	case 'Q':
		s.pending.Add(1)
		s.probe.dirty = true
	case 'S':
		s.pending.Add(1)
		s.batch = false
	case 'P', 'B', 'D', 'E', 'C', 'H':
		s.batch = true
		s.probe.dirty = s.probe.dirty || typ == 'E'
	case 'F': // FunctionCall
		s.pending.Add(1)
		s.probe.dirty = true
	}
}

// relayUpstream sends PostgreSQL's messages to the client, flushing
// whenever PostgreSQL has sent all it has, as PostgreSQL itself flushed.
func (s *session) relayUpstream() error {
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
			if !s.hand(m) {
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

// inspected reports whether a reply of PostgreSQL's is read whole to be
// looked into as it passes: a ReadyForQuery or a ParameterStatus.
func (s *session) inspected(typ byte, n int) bool {
	return typ == 'Z' && n == 1 || typ == 'S' && n <= s.u.held || describeReply(typ) && s.describeOwed.Load() > 0 && n <= s.u.held
}

// describeReply reports whether a reply of type typ may answer a Parse
// or a Describe of a statement: ParseComplete, ParameterDescription,
// RowDescription, NoData, or an error.
func describeReply(typ byte) bool {
	return typ == '1' || typ == 't' || typ == 'T' || typ == 'n' || typ == 'E'
}

// relayReply sends the client one of PostgreSQL's replies, whose header
// was read, noting what it says of the session.
func (s *session) relayReply(typ byte, n int) error {
	if !s.inspected(typ, n) {
		return stream(s.c.w, s.u.r, typ, n)
	}
	m, err := s.u.body(typ, n)
	if err != nil {
		return err
	}
	s.noteReply(m)
	s.c.send(m)
	return nil
}

// noteReply follows a ReadyForQuery or a ParameterStatus.
func (s *session) noteReply(m message) {
	switch {
	case m.typ == 'Z':
		s.status.Store(uint32(m.body[0]))
		s.pending.Add(-1)
	case m.typ == 'S':
		s.encoding.note(m.body)
	case m.typ == 'E':
		s.describeFailed.Store(true)
		s.describeOwed.Store(0)
	default: // one of describeReply's, while owed
		s.describeOwed.Add(-1)
	}
}

// hand gives the session a reply it has taken, unless the session has
// ended (given up in the middle of an answer, it reads no more).
func (s *session) hand(m message) bool {
	select {
	case s.ex.replies <- m:
		return true
	case <-s.ended:
		return false
	}
}

// tooLarge stands for a reply the session was not given, being larger
// than Limits.MaxMessage.
const tooLarge = 0

// sqlEncoding follows the ParameterStatus messages that change how SQL
// text reads: only with client_encoding UTF8 and
// standard_conforming_strings on is a statement accelerated.
type sqlEncoding struct {
	plain atomic.Bool // both, as the parser and the deparser read and write SQL
	enc   [2]bool     // client_encoding UTF8, standard_conforming_strings on
}

// note follows one ParameterStatus message's body.
func (e *sqlEncoding) note(body []byte) {
	name, value, _ := bytes.Cut(body, []byte{0})
	value, _, _ = bytes.Cut(value, []byte{0})
	switch string(name) {
	case "client_encoding":
		e.enc[0] = string(value) == "UTF8"
	case "standard_conforming_strings":
		e.enc[1] = string(value) == "on"
	default:
		return
	}
	e.plain.Store(e.enc[0] && e.enc[1])
}

// asynchronous reports whether PostgreSQL may send a message of type typ
// at any time: a notice, a notification or a changed parameter.
func asynchronous(typ byte) bool { return typ == 'N' || typ == 'A' || typ == 'S' }

// stream copies one message of n body bytes, whose header was read, from
// r to w, whatever its size.
func stream(w *outbox, r *inbox, typ byte, n int) error {
	w.header(typ, n)
	return r.copyTo(w, n)
}
