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
// Two relays move its messages, by what its connections are. A session
// whose connections are both plain sockets is relayed by the loop
// (loop.go) while it passes messages through: one OS thread, woken by
// epoll, reads, tracks and writes the messages itself. A message the
// proxy may answer (see mayAnswer) hands the session to its own
// goroutine (looped.run), which answers with blocking reads and writes,
// reading PostgreSQL's replies itself, and hands it back.
//
// A session over TLS is relayed by two goroutines (paired): crypto/tls
// reads and writes through a net.Conn that blocks, which epoll's
// readiness of the socket beneath does not say. The session's goroutine
// reads the client's messages and writes them upstream (accelerating
// what it can), the other reads PostgreSQL's and writes them to the
// client. While the session answers a statement itself (taken), the
// other hands it PostgreSQL's replies instead, except the asynchronous
// ones.
//
// Both relays read whole the messages the session follows and pass the
// rest as bytes; what they read, the session decodes with pgproto3 only
// where it looks inside.
type session struct {
	p        *Proxy
	nc, up   net.Conn
	c, u     *wire
	cmu      sync.Mutex // the client's writer, between the two goroutines
	reported bool       // the client has been told why its startup failed

	pid, secret     uint32    // the key the client got
	upPID, upSecret uint32    // PostgreSQL's
	upstream        *upstream // where the session's backend is, for its cancel requests

	flow  flow          // what PostgreSQL owes
	probe sessionProbe  // what the session's probes found
	book  statementBook // the client's prepared statements (see noteParse)
	// ex is the session's own conversation with PostgreSQL while it
	// answers a statement itself.
	ex     exchange
	asking asking // its requests for candidates
	// lastPlan is what SHOW vecside.last_plan answers.
	lastPlan string

	// encoding says whether the session's SQL reads as the parser and
	// the deparser read and write it.
	encoding sqlEncoding

	taken atomic.Bool // the session reads PostgreSQL's replies itself

	looped *looped // the loop's state of a session it relays
}

func newSession(p *Proxy, nc, up net.Conn) *session {
	s := &session{p: p, nc: nc, up: up, c: newWire(nc, p.limits.MaxMessage), u: newWire(up, p.limits.MaxMessage),
		probe: sessionProbe{dirty: true}, asking: asking{p: p}}
	// Its own statements' name is random, so that no name of the
	// client's meets it.
	s.ex = exchange{u: s.u, relayAsync: s.relayReply, status: &s.flow.status, ownName: "vecside_" + rand.Text()}
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
			return newLooped(s, fds).run(ctx, l)
		}
	}
	return newPaired(s).run()
}

// quiet is a session's end as worth reporting: nil for either side
// closing its connection.
func quiet(err error) error {
	if errors.Is(err, io.EOF) || errors.Is(err, net.ErrClosed) {
		return nil
	}
	return err
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
		s.flow.batch, s.flow.describing = false, false
	}
	return err
}

// mayAnswer reports whether the proxy may do more with a client message
// than pass it on: answer it (a Query), or hold the batch it starts (a
// Parse or a Bind), to answer that. It is the one test of it: handle
// passes the rest on, and the loop hands these to the session's
// goroutine and passes the rest on itself.
func (s *session) mayAnswer(m message) bool {
	holds := func() bool { return s.p.cfg.Sidecar != nil && s.flow.settled() }
	switch m.typ {
	case 'Q':
		sql := string(m.body)
		return s.p.cfg.Sidecar != nil && mentionsDistance(sql) || containsFold(sql, lastPlanName)
	case 'P':
		// hold would send on a Parse of a statement recognize cannot
		// take, and what follows it, as they came.
		return holds() && (mentionsDistance(string(m.body)) || containsFold(string(m.body), lastPlanName))
	case 'B':
		return holds() && s.book.get(boundStatement(m.body)) != nil
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
// and that a statement that runs may have changed the session's
// settings.
func (s *session) track(typ byte) {
	if s.flow.sent(typ) {
		s.probe.dirty = true
	}
}

// relayReply sends the client one of PostgreSQL's replies, whose header
// was read, noting what it says of the session.
func (s *session) relayReply(typ byte, n int) error {
	if !s.flow.watches(typ, n, s.u.held) {
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

// noteReply follows a reply flow.watches names.
func (s *session) noteReply(m message) {
	if m.typ == 'S' {
		s.encoding.note(m.body)
		return
	}
	s.flow.replied(m)
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
