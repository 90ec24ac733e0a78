//go:build cgo

package proxy

import (
	"bytes"
	"errors"
	"fmt"
	"sync/atomic"

	"github.com/jackc/pgx/v5/pgproto3"
)

// exchange is a session's own conversation with PostgreSQL while it
// answers a statement itself: what it sends goes up in the session's
// buffer, and PostgreSQL's replies come to it, not to the client, until
// the answer's last ReadyForQuery. Its statements are prepared under
// ownName and closed in the round trip that prepared them.
type exchange struct {
	u *wire
	// replies are PostgreSQL's replies, handed over by
	// the paired relay while the session has taken them; nil for a session
	// the loop handed over, which reads u itself and sends the client
	// the asynchronous replies it meets there (relayAsync).
	replies    chan message
	relayAsync func(typ byte, n int) error
	status     *atomic.Uint32 // the session's transaction status, of the last ReadyForQuery
	ownName    string
}

// closeOwn closes the session's own statement after a round that failed
// (its Close skipped with the rest), in a round trip of its own; the
// ReadyForQuery the client gets is that one's.
func (x *exchange) closeOwn(res *result) error {
	z, err := x.sync(&pgproto3.Close{ObjectType: 'S', Name: x.ownName})
	res.ready = z
	return err
}

// sync sends msgs and a Sync and reads the replies up to its
// ReadyForQuery, which it returns.
func (x *exchange) sync(msgs ...pgproto3.FrontendMessage) (message, error) {
	x.send(append(msgs, &pgproto3.Sync{})...)
	if err := x.u.flush(); err != nil {
		return message{}, err
	}
	z, err := x.until('Z')
	if err != nil {
		return message{}, err
	}
	x.status.Store(uint32(z.body[0]))
	return z, nil
}

// checked reads the replies to the Describe of the client's statement
// that went first in an answer's round: nil when it exists, else what
// the client is owed, PostgreSQL's error and the ReadyForQuery (the rest
// of the round was skipped).
func (x *exchange) checked() ([]message, error) {
	for {
		m, err := x.reply()
		if err != nil {
			return nil, err
		}
		switch m.typ {
		case 'T', 'n':
			return nil, nil
		case 'E':
			z, err := x.until('Z')
			if err != nil {
				return nil, err
			}
			x.status.Store(uint32(z.body[0]))
			return []message{m, z}, nil
		}
	}
}

// ownRow runs one of the session's own statements, which return one row
// of n columns and cannot fail, in a round trip of its own, prepared and
// closed there, and returns the row (nil if it failed after all) and the
// ReadyForQuery's status.
func (x *exchange) ownRow(sql string, types []uint32, params [][]byte, n int) (row [][]byte, status byte, err error) {
	x.send(&pgproto3.Parse{Name: x.ownName, Query: sql, ParameterOIDs: types},
		&pgproto3.Bind{PreparedStatement: x.ownName, Parameters: params}, &pgproto3.Execute{},
		&pgproto3.Close{ObjectType: 'S', Name: x.ownName}, &pgproto3.Sync{})
	if err := x.u.flush(); err != nil {
		return nil, 0, err
	}
	failed := false
	for {
		m, err := x.reply()
		if err != nil {
			return nil, 0, err
		}
		switch m.typ {
		case 'D':
			var dr pgproto3.DataRow
			if err := dr.Decode(m.body); err != nil || len(dr.Values) != n {
				return nil, 0, fmt.Errorf("proxy: unexpected row from the session's own statement")
			}
			for _, v := range dr.Values {
				row = append(row, bytes.Clone(v))
			}
		case 'E':
			failed = true
		case 'Z':
			x.status.Store(uint32(m.body[0]))
			if failed {
				var res result
				if err := x.closeOwn(&res); err != nil {
					return nil, 0, err
				}
				return nil, res.ready.body[0], nil
			}
			return row, m.body[0], nil
		}
	}
}

// result is one round's replies to the client's eyes: BindComplete,
// RowDescription (each round describes its own statement), DataRows and
// CommandComplete, or PostgreSQL's error; and the Sync's ReadyForQuery.
type result struct {
	msgs     []message
	err      *pgproto3.ErrorResponse
	tooLarge bool
	ready    message
}

func (r *result) rows() (n int) {
	for _, m := range r.msgs {
		if m.typ == 'D' {
			n++
		}
	}
	return n
}

// collect reads one round's replies, up to its ReadyForQuery.
func (x *exchange) collect(r *result) error {
	r.msgs = r.msgs[:0]
	held := 0
	for {
		m, err := x.reply()
		if err != nil {
			return err
		}
		if held += len(m.body); held > maxResult {
			r.tooLarge = true
			r.msgs = r.msgs[:0]
		}
		switch m.typ {
		case '2', 'T', 'D', 'C':
			if !r.tooLarge {
				r.msgs = append(r.msgs, m)
			}
		case 'E':
			r.err = &pgproto3.ErrorResponse{}
			if err := r.err.Decode(m.body); err != nil {
				return err
			}
		case tooLarge:
			r.tooLarge = true
		case 'Z':
			r.ready = m
			x.status.Store(uint32(m.body[0]))
			return nil
		}
	}
}

// until reads replies up to one of type typ.
func (x *exchange) until(typ byte) (message, error) {
	for {
		m, err := x.reply()
		if err != nil || m.typ == typ {
			return m, err
		}
	}
}

// reply is PostgreSQL's next reply while the session has taken them.
func (x *exchange) reply() (message, error) {
	if x.replies == nil {
		return x.readReply()
	}
	m, ok := <-x.replies
	if !ok {
		return message{}, errors.New("proxy: the server closed the connection")
	}
	return m, nil
}

// readReply reads PostgreSQL's next reply for a session the loop handed
// over, which reads its replies itself; the asynchronous ones go on to
// the client as they come.
func (x *exchange) readReply() (message, error) {
	for {
		typ, n, err := x.u.header()
		if err != nil {
			return message{}, err
		}
		if !asynchronous(typ) {
			return x.u.take(typ, n)
		}
		if err := x.relayAsync(typ, n); err != nil {
			return message{}, err
		}
	}
}

// send buffers messages of the session's own for PostgreSQL.
func (x *exchange) send(msgs ...pgproto3.FrontendMessage) {
	for _, m := range msgs {
		b, _ := m.Encode(nil)
		x.u.w.Write(b)
	}
}
