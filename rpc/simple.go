package rpc

import (
	"time"

	"github.com/jackc/pgx/v5/pgproto3"
)

// simpleQuery answers a Query message: each statement gets its own
// RowDescription, DataRows and CommandComplete; the first error stops the
// rest. The caller sends the one ReadyForQuery.
func (c *conn) simpleQuery(sql string) error {
	start := time.Now()
	stmts, err := parseQuery(sql, c.srv.limits.MaxQueryStatements)
	if err != nil {
		c.srv.metrics.observe("invalid", err, time.Since(start))
		return err
	}
	if len(stmts) == 0 {
		c.out.send(&pgproto3.EmptyQueryResponse{})
		return nil
	}
	ctx, done := c.startRequest()
	defer done()
	for _, s := range stmts {
		start := time.Now()
		pt, err := c.simplePortal(s)
		if err == nil {
			err = c.run(ctx, pt)
		}
		c.srv.metrics.observe(s.kind.label(), err, time.Since(start))
		if err != nil {
			return err
		}
		if pt.shape.cols != nil {
			c.out.send(rowDescription(pt.shape.cols, pt.formats))
		}
		c.sendRows(pt, 0)
	}
	return nil
}

// simplePortal binds a statement of a simple Query, where there are no
// parameters and every result is text.
func (c *conn) simplePortal(s statement) (*portal, error) {
	for _, a := range s.args {
		if a.param > 0 {
			return nil, errorf(codeUndefinedParameter, "there is no parameter $%d", a.param).
				withHint("parameters need the extended query protocol; in a simple query, write the value as a literal")
		}
	}
	p, err := prepare(s, nil)
	if err != nil {
		return nil, err
	}
	return c.bind(p, nil, nil)
}
