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
)

// conn is one client connection, served by one goroutine.
type conn struct {
	srv    *Server
	ctx    context.Context // ends when the server stops
	nc     net.Conn
	be     *pgproto3.Backend
	log    *slog.Logger
	pid    uint32
	secret [4]byte

	sess       *session
	tx         byte // txIdle, txOpen or txFailed
	statements map[string]*prepared
	portals    map[string]*portal
	skipToSync bool // an extended-protocol message failed

	mu       sync.Mutex
	cancelFn context.CancelCauseFunc // the running request's; nil when idle
}

// shutdownGrace is how long a stopping server waits to tell a client why.
const shutdownGrace = time.Second

// serveConn owns nc: it runs the handshake and then the message loop, and
// closes nc when the client leaves or ctx ends.
func (s *Server) serveConn(ctx context.Context, nc net.Conn) {
	defer nc.Close()
	// Unblock reads when the server stops; leave writes a moment to say so.
	stop := context.AfterFunc(ctx, func() {
		nc.SetReadDeadline(time.Now())
		nc.SetWriteDeadline(time.Now().Add(shutdownGrace))
	})
	defer stop()
	nc.SetDeadline(time.Now().Add(startupTimeout))
	c, err := s.handshake(ctx, nc)
	if err != nil {
		s.log.Debug("connection failed in startup", "remote", nc.RemoteAddr().String(), "err", err)
	}
	if c == nil {
		return
	}
	defer s.unregister(c)
	nc.SetDeadline(time.Time{})
	if ctx.Err() != nil { // stopped while the deadline was being cleared
		return
	}
	c.serve()
}

// serve reads and answers messages until the client leaves, a protocol
// violation, or the server stops.
func (c *conn) serve() {
	for {
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
		ok = c.be.Flush() == nil
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
	c.be.Send(pe.message())
	if pe.fatal {
		c.be.Flush()
		return false
	}
	if c.tx == txOpen {
		c.tx = txFailed
	}
	c.skipToSync = extended
	return true
}

// receiveFailed ends the connection after Receive failed: quietly if the
// client went away, with a FATAL error if it broke the protocol or the
// server is stopping.
func (c *conn) receiveFailed(err error) {
	var ne net.Error
	switch {
	case c.ctx.Err() != nil:
		c.fail(&pgError{code: codeAdminShutdown, msg: "terminating connection due to administrator command", fatal: true}, false)
	case errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF), errors.Is(err, net.ErrClosed), errors.As(err, &ne):
	default:
		c.log.Warn("protocol violation", "err", err)
		c.fail(protocolViolation("invalid message: %v", err), false)
	}
}

// ready tells the client the server awaits a query, and flushes.
func (c *conn) ready() error {
	c.be.Send(&pgproto3.ReadyForQuery{TxStatus: c.tx})
	return c.be.Flush()
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
