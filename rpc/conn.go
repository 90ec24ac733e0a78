package rpc

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"net"
	"sync"
	"time"

	"github.com/jackc/pgx/v5/pgproto3"

	"github.com/vecside/vecside/rpc/internal/pgstartup"
)

// conn is one client connection, served by one goroutine.
type conn struct {
	srv    *Server
	ctx    context.Context   // ends when the server stops
	nc     net.Conn          // a *tls.Conn once TLS is on
	tls    bool              // the connection is encrypted
	be     *pgproto3.Backend // reads messages; out writes them
	out    replies
	log    *slog.Logger
	pid    uint32
	secret [4]byte

	sess       *session
	tx         byte // txIdle, txOpen or txFailed
	statements held[*prepared]
	portals    held[*portal]
	skipToSync bool // an extended-protocol message failed

	mu       sync.Mutex
	cancelFn context.CancelCauseFunc // the running request's; nil when idle
}

// shutdownGrace is how long a stopping server waits to tell a client why,
// and how long the last words to a client that is being closed may take.
const shutdownGrace = time.Second

// serveConn owns st's connection, which holds a startup slot: it
// runs the handshake, gives the slot back, and then answers a
// CancelRequest or runs the message loop; it closes the connection when
// the client leaves or ctx ends.
func (s *Server) serveConn(ctx context.Context, st *pgstartup.Startup) {
	nc := st.Conn
	defer nc.Close()
	// Unblock reads when the server stops; leave writes a moment to say so.
	stop := context.AfterFunc(ctx, func() {
		nc.SetReadDeadline(time.Now())
		time.AfterFunc(shutdownGrace, func() { nc.Close() })
	})
	defer stop()
	c, cancel, err := s.handshake(ctx, st)
	st.Release()
	if cancel != nil {
		// Checked after the slot is given back: a wrong key's pause must
		// not keep others from starting up.
		s.cancel(nc, cancel.ProcessID, cancel.SecretKey)
		return
	}
	if c == nil {
		s.log.Debug("connection failed in startup", "remote", nc.RemoteAddr().String(), "err", err)
		return
	}
	defer s.unregister(c)
	c.serve()
}

// serve reads and answers messages until the client leaves, a protocol
// violation, an idle timeout, or the server stops.
func (c *conn) serve() {
	for {
		// Set before checking ctx: a stop that happened before this line
		// is seen below, and one after it moves the deadline to now.
		c.nc.SetReadDeadline(deadline(c.srv.limits.IdleTimeout))
		if c.ctx.Err() != nil {
			c.receiveFailed(c.ctx.Err())
			return
		}
		msg, err := c.be.Receive()
		if err != nil {
			c.receiveFailed(err)
			return
		}
		if c.skipToSync {
			switch msg.(type) {
			case *pgproto3.Sync:
			case *pgproto3.Terminate:
				return
			default:
				continue
			}
		}
		if !c.handle(msg) {
			return
		}
		if c.out.err != nil {
			if c.out.stalled() {
				c.srv.faults.add(faultStalled, "connection closed: the client did not read its replies", "remote", c.nc.RemoteAddr().String(), "idle_timeout", c.srv.limits.IdleTimeout)
			}
			return
		}
	}
}

// handle answers one message. It returns false if the connection must
// close. A panic fails the message, not the server: bad input must never
// take the other connections down.
func (c *conn) handle(msg pgproto3.FrontendMessage) (ok bool) {
	defer func() {
		if r := recover(); r != nil {
			_, simple := msg.(*pgproto3.Query)
			ok = c.fail(c.internalError(r), !simple) && (!simple || c.ready() == nil)
		}
	}()
	switch m := msg.(type) {
	case *pgproto3.Query:
		ok = c.fail(c.simpleQuery(m.String), false) && c.ready() == nil
	case *pgproto3.Parse:
		ok = c.fail(c.parseMsg(m), true)
	case *pgproto3.Bind:
		ok = c.fail(c.bindMsg(m), true)
	case *pgproto3.Describe:
		ok = c.fail(c.describeMsg(m), true)
	case *pgproto3.Execute:
		ok = c.fail(c.executeMsg(m), true)
	case *pgproto3.Close:
		ok = c.fail(c.closeMsg(m), true)
	case *pgproto3.Sync:
		ok = c.syncMsg() == nil
	case *pgproto3.Flush:
		ok = c.out.flush() == nil
	case *pgproto3.Terminate:
		return
	case *pgproto3.CopyData, *pgproto3.CopyDone, *pgproto3.CopyFail:
		ok = true // outside COPY these are ignored, as PostgreSQL does
	case *pgproto3.FunctionCall:
		ok = c.fail(errorf(codeFeatureNotSupported, "function calls are not supported"), false) && c.ready() == nil
	default:
		ok = c.fail(protocolViolation("unexpected message %T", msg), false)
	}
	return ok
}

// fail reports err, if any, to the client. An error in the extended
// protocol discards messages up to the next Sync; an error in a
// transaction block fails the block. It returns false if the connection
// must close.
func (c *conn) fail(err error, extended bool) bool {
	if err == nil {
		return true
	}
	pe := toPgError(err)
	if pe.fatal {
		c.bye(pe)
		return false
	}
	c.out.send(pe.message())
	if c.tx == txOpen {
		c.tx = txFailed
	}
	c.skipToSync = extended
	return true
}

// bye sends a FATAL error as the connection's last message, waiting at
// most shutdownGrace for the client to take it.
func (c *conn) bye(pe *pgError) {
	pe.fatal = true
	c.out.timeout = shutdownGrace
	c.out.send(pe.message())
	c.out.flush()
}

// receiveFailed ends the connection after Receive failed: quietly if the
// client went away, with a FATAL error if it broke the protocol, stayed
// idle too long, or the server is stopping.
func (c *conn) receiveFailed(err error) {
	var ne net.Error
	switch {
	case c.ctx.Err() != nil:
		c.bye(&pgError{code: codeAdminShutdown, msg: "terminating connection due to administrator command"})
	case errors.As(err, &ne) && ne.Timeout():
		c.srv.faults.add(faultIdle, "connection closed: idle too long", "remote", c.nc.RemoteAddr().String(), "user", c.sess.user, "idle_timeout", c.srv.limits.IdleTimeout)
		c.bye(&pgError{code: codeIdleSessionTimeout, msg: "terminating connection due to idle-session timeout"})
	case errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF), errors.Is(err, net.ErrClosed), errors.As(err, &ne):
	default:
		c.srv.faults.add(faultProtocol, "protocol violation", "remote", c.nc.RemoteAddr().String(), "user", c.sess.user, "err", err)
		c.bye(protocolViolation("invalid message: %v", err))
	}
}

// ready tells the client the server awaits a query, and flushes.
func (c *conn) ready() error {
	c.out.send(&pgproto3.ReadyForQuery{TxStatus: c.tx})
	return c.out.flush()
}

// startRequest returns the context a request runs under: a CancelRequest
// with this connection's key cancels it, until the returned func is
// called.
func (c *conn) startRequest() (context.Context, func()) {
	ctx, cancel := context.WithCancelCause(c.ctx)
	c.mu.Lock()
	c.cancelFn = cancel
	c.mu.Unlock()
	return ctx, func() {
		c.mu.Lock()
		c.cancelFn = nil
		c.mu.Unlock()
		cancel(nil)
	}
}

// cancelRequest cancels the running request, if any; a cancel that
// arrives between requests is ignored, as PostgreSQL does.
func (c *conn) cancelRequest() {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.cancelFn != nil {
		c.cancelFn(errUserCancel)
	}
}
