package rpc

import (
	"fmt"
	"net"
	"time"

	"github.com/jackc/pgx/v5/pgproto3"
)

// replies buffers the messages for a client. They are written when the
// session flushes (at ReadyForQuery, Flush, an error) and as soon as limit
// bytes are waiting: a client that pipelines requests without reading the
// answers then blocks the write, and the session reads nothing more until
// the client has taken them. So the replies a session holds never exceed
// limit plus one message, however many requests a client sends before a
// Sync. A write that the client does not take within timeout fails,
// and so does every later one: the session ends.
type replies struct {
	nc      net.Conn
	buf     []byte
	limit   int
	timeout time.Duration // negative: no deadline
	until   time.Time     // if set, the deadline instead (during authentication)
	err     error         // the first failure
}

// keepReplyBuffer is the largest buffer kept between flushes: a session
// that once sent a large result does not hold its buffer while idle.
const keepReplyBuffer = 16 << 10

func (r *replies) send(m pgproto3.BackendMessage) {
	if r.err != nil {
		return
	}
	buf, err := m.Encode(r.buf)
	if err != nil {
		r.err = fmt.Errorf("rpc: cannot encode %T: %w", m, err)
		return
	}
	r.buf = buf
	if len(r.buf) >= r.limit {
		r.flush()
	}
}

// flush writes what is buffered. It returns the first error of the
// session's writes, which stays: a connection whose writes failed is done.
func (r *replies) flush() error {
	if r.err != nil || len(r.buf) == 0 {
		return r.err
	}
	if r.until.IsZero() {
		r.nc.SetWriteDeadline(deadline(r.timeout))
	} else {
		r.nc.SetWriteDeadline(r.until)
	}
	_, err := r.nc.Write(r.buf)
	if err != nil {
		r.err = err
	}
	if cap(r.buf) > keepReplyBuffer {
		r.buf = nil
	} else {
		r.buf = r.buf[:0]
	}
	return r.err
}

// stalled says whether writing failed because the client did not read in
// time, rather than because it left.
func (r *replies) stalled() bool {
	ne, ok := r.err.(net.Error)
	return ok && ne.Timeout()
}
