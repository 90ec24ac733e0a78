package rpc

import (
	"context"
	"errors"
	"runtime/debug"
	"strconv"
	"sync"
	"time"

	"github.com/jackc/pgx/v5/pgproto3"

	"github.com/vecside/vecside/indexer"
)

// Transaction status, as ReadyForQuery reports it.
const (
	txIdle   = 'I'
	txOpen   = 'T'
	txFailed = 'E'
)

// errUserCancel is the cause of a request's context cancelled by a
// CancelRequest.
var errUserCancel = errors.New("canceled by the client")

// errClientGone is the cause of a request's context cancelled because the
// client closed its connection.
var errClientGone = errors.New("client closed the connection")

// clientCheckInterval is how often a request waiting for the Catalog
// checks that its client is still connected, as PostgreSQL's
// client_connection_check_interval does: nobody would read the answer of
// a search whose client left, so it should stop using the CPU.
const clientCheckInterval = 5 * time.Millisecond

// run executes a portal's statement once, filling its rows and tag. It
// runs under ctx, which a CancelRequest cancels.
func (c *conn) run(ctx context.Context, pt *portal) error {
	pt.ran = true
	if c.tx == txFailed && pt.stmt.kind != stmtCommit && pt.stmt.kind != stmtRollback {
		return errorf(codeInFailedSQLTransaction, "current transaction is aborted, commands ignored until end of transaction block")
	}
	s := pt.stmt
	switch s.kind {
	case stmtSelectFunc:
		if s.fn == fnKNN {
			return c.runKNN(ctx, pt)
		}
		var st []indexer.Status
		err := c.callCatalog(ctx, c.sess.search.Timeout, func(context.Context) error {
			st = c.srv.cfg.Catalog.Status()
			return nil
		})
		if err != nil {
			return err
		}
		for _, s := range st {
			pt.rows = append(pt.rows, statusRow(s))
		}
		pt.rows, err = s.clauses.apply(pt.rows, statusColumns, s.agg)
		return err
	case stmtSelectInt:
		n, _ := strconv.ParseInt(s.value, 10, 64)
		pt.rows = [][]any{{n}}
	case stmtVersion:
		pt.rows = [][]any{{c.srv.version()}}
	case stmtShow:
		_, v, err := c.sess.show(s.name)
		pt.rows, pt.tag = [][]any{{v}}, "SHOW"
		return err
	case stmtSet:
		pt.tag = "SET"
		changes, err := c.sess.set(s.name, s.value)
		c.sendStatus(changes)
		return err
	case stmtReset:
		pt.tag = "RESET"
		if s.name == "" {
			c.sendStatus(c.sess.resetAll())
			return nil
		}
		changes, err := c.sess.reset(s.name)
		c.sendStatus(changes)
		return err
	case stmtBegin:
		if c.tx != txIdle {
			c.warn(codeActiveSQLTransaction, "there is already a transaction in progress")
		}
		pt.tag, c.tx = s.tag, txOpen
	case stmtCommit, stmtRollback:
		if c.tx == txIdle {
			c.warn(codeNoActiveSQLTransaction, "there is no transaction in progress")
		}
		pt.tag = s.tag
		if c.tx == txFailed {
			pt.tag = "ROLLBACK"
		}
		c.tx = txIdle
	case stmtDiscardAll:
		if c.tx != txIdle {
			return errorf(codeActiveSQLTransaction, "DISCARD ALL cannot run inside a transaction block")
		}
		pt.tag = "DISCARD ALL"
		c.sendStatus(c.sess.resetAll())
		c.statements.clear()
		c.portals.clear()
	case stmtDeallocate:
		pt.tag = "DEALLOCATE"
		if s.name == "" {
			pt.tag = "DEALLOCATE ALL"
			c.statements.clear()
		} else if _, ok := c.statements.get(s.name); !ok {
			return errorf(codeInvalidSQLStatementName, "prepared statement %q does not exist", s.name)
		}
		c.statements.drop(s.name)
	}
	return nil
}

// runKNN runs a search. The call's timeout bounds it whether or not the
// index honours ctx.
func (c *conn) runKNN(ctx context.Context, pt *portal) error {
	opts, err := pt.call.searchOptions(c.sess.search)
	if err != nil {
		return err
	}
	var res indexer.Result
	start := time.Now()
	err = c.callCatalog(ctx, opts.Timeout, func(ctx context.Context) error {
		var err error
		res, err = c.srv.cfg.Catalog.Search(ctx, pt.call.index, pt.call.vec, int(pt.call.k), opts)
		return err
	})
	c.srv.metrics.observeSearch(pt.call.index, err, time.Since(start))
	if err != nil {
		return err
	}
	if res.KeyType != pt.keyType {
		return errorf(codeFeatureNotSupported, "cached plan must not change result type").
			withHint("index %s changed its key type to %s: prepare the statement again", pt.call.index, res.KeyType)
	}
	pt.rows = make([][]any, len(res.Hits))
	for i, h := range res.Hits {
		pt.rows[i] = knnRow(h, opts.WithXID)
	}
	pt.rows, err = pt.stmt.clauses.apply(pt.rows, knnColumns(pt.keyType), pt.stmt.agg)
	return err
}

// callCatalog runs fn under timeout and returns when fn does, or, unless
// the Catalog is prompt, when the context ends, whichever is first: a
// call that overruns then finishes in the background and its result is
// dropped. dblink cannot interrupt a call, so the server must answer by
// the deadline itself. A client that closes its connection meanwhile
// cancels the call, and the connection ends.
func (c *conn) callCatalog(ctx context.Context, timeout time.Duration, fn func(context.Context) error) error {
	ctx, leave := context.WithCancelCause(ctx)
	defer leave(nil)
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	if detectsClientGone {
		defer c.watchClient(leave)()
	}
	var err error
	if c.srv.cfg.PromptCatalog {
		// On the connection's goroutine: a goroutine per call wakes an
		// idle thread, which spins, and passes the call between threads.
		// With clients in other processes, on two cores, that was a
		// tenth of the sidecar's CPU for a search asked through the SQL
		// helpers and a fifth for a prepared knn statement sent in a loop.
		err = c.callGuarded(ctx, fn)
	} else {
		err = c.callAside(ctx, fn)
	}
	if err == nil {
		return nil
	}
	switch cause := context.Cause(ctx); {
	case errors.Is(cause, errClientGone):
		return &pgError{code: codeConnectionFailure, msg: "connection to client lost", fatal: true}
	case errors.Is(cause, errUserCancel):
		return errorf(codeQueryCanceled, "canceling statement due to user request")
	case c.ctx.Err() != nil:
		return &pgError{code: codeAdminShutdown, msg: "terminating connection due to administrator command", fatal: true}
	case errors.Is(err, context.DeadlineExceeded), errors.Is(err, indexer.ErrTimeout), errors.Is(cause, context.DeadlineExceeded):
		return errorf(codeQueryCanceled, "canceling statement due to statement timeout (%s)", timeout).
			withHint("raise vecside.timeout with SET, or pass timeout=… in knn's options")
	}
	return err
}

// callGuarded runs fn, a panic in it turned into an internal error.
func (c *conn) callGuarded(ctx context.Context, fn func(context.Context) error) (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = c.internalError(r)
		}
	}()
	return fn(ctx)
}

// callAside makes a call on a goroutine of its own and returns when it
// does or when ctx ends.
func (c *conn) callAside(ctx context.Context, fn func(context.Context) error) error {
	done := make(chan error, 1)
	go func() { done <- c.callGuarded(ctx, fn) }()
	select {
	case err := <-done:
		return err
	case <-ctx.Done():
		return ctx.Err()
	}
}

// watchClient checks every clientCheckInterval, until the returned func
// is called, that the client is still connected, and if not, ends the
// call's context with leave(errClientGone). It is a timer rather than a
// goroutine: a call shorter than the interval only sets and stops it.
func (c *conn) watchClient(leave context.CancelCauseFunc) (stop func()) {
	var (
		mu      sync.Mutex
		t       *time.Timer
		stopped bool
	)
	mu.Lock()
	defer mu.Unlock()
	t = time.AfterFunc(clientCheckInterval, func() {
		if clientGone(c.nc) {
			leave(errClientGone)
			return
		}
		mu.Lock()
		defer mu.Unlock()
		if !stopped {
			t.Reset(clientCheckInterval)
		}
	})
	return func() {
		mu.Lock()
		defer mu.Unlock()
		stopped = true
		t.Stop()
	}
}

func (c *conn) internalError(r any) *pgError {
	c.log.Error("panic while serving a request", "panic", r, "stack", string(debug.Stack()))
	return errorf(codeInternalError, "internal error: %v", r)
}

// sendStatus reports changed parameters to the client.
func (c *conn) sendStatus(changes []statusChange) {
	for _, ch := range changes {
		c.out.send(&pgproto3.ParameterStatus{Name: ch.name, Value: ch.value})
	}
}

func (c *conn) warn(code, msg string) {
	c.out.send(&pgproto3.NoticeResponse{Severity: "WARNING", SeverityUnlocalized: "WARNING", Code: code, Message: msg})
}
