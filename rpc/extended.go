package rpc

import (
	"strconv"
	"time"

	"github.com/jackc/pgx/v5/pgproto3"
)

// prepare resolves a parsed statement's parameter types.
func prepare(s statement, declared []uint32) (*prepared, error) {
	types, err := paramTypes(s, declared)
	if err != nil {
		return nil, err
	}
	return &prepared{stmt: s, params: types}, nil
}

func (c *conn) parseMsg(m *pgproto3.Parse) error {
	if _, exists := c.statements[m.Name]; exists && m.Name != "" {
		return errorf(codeDuplicatePreparedStmt, "prepared statement %q already exists", m.Name)
	}
	s, err := parseOne(m.Query)
	if err == nil {
		var p *prepared
		if p, err = prepare(s, m.ParameterOIDs); err == nil {
			c.statements[m.Name] = p
			c.be.Send(&pgproto3.ParseComplete{})
			return nil
		}
	}
	c.srv.metrics.observe("invalid", err, 0)
	return err
}

func (c *conn) bindMsg(m *pgproto3.Bind) error {
	p, ok := c.statements[m.PreparedStatement]
	if !ok {
		return errorf(codeInvalidSQLStatementName, "prepared statement %q does not exist", m.PreparedStatement)
	}
	if _, exists := c.portals[m.DestinationPortal]; exists && m.DestinationPortal != "" {
		return errorf(codeDuplicateCursor, "portal %q already exists", m.DestinationPortal)
	}
	params, err := decodeParams(p.params, m.ParameterFormatCodes, m.Parameters)
	if err == nil {
		var pt *portal
		if pt, err = c.bind(p, params, m.ResultFormatCodes); err == nil {
			c.portals[m.DestinationPortal] = pt
			c.be.Send(&pgproto3.BindComplete{})
			return nil
		}
	}
	c.srv.metrics.observe(p.stmt.kind.label(), err, 0)
	return err
}

func (c *conn) describeMsg(m *pgproto3.Describe) error {
	var sh shape
	var formats []int16
	switch m.ObjectType {
	case 'S':
		p, ok := c.statements[m.Name]
		if !ok {
			return errorf(codeInvalidSQLStatementName, "prepared statement %q does not exist", m.Name)
		}
		var err error
		if sh, err = c.describeStatement(p); err != nil {
			return err
		}
		c.be.Send(&pgproto3.ParameterDescription{ParameterOIDs: p.params})
	case 'P':
		pt, ok := c.portals[m.Name]
		if !ok {
			return errorf(codeInvalidCursorName, "portal %q does not exist", m.Name)
		}
		sh, formats = pt.shape, pt.formats
	default:
		return protocolViolation("invalid DESCRIBE message subtype %d", m.ObjectType)
	}
	if sh.cols == nil {
		c.be.Send(&pgproto3.NoData{})
	} else {
		c.be.Send(rowDescription(sh.cols, formats))
	}
	return nil
}

func (c *conn) executeMsg(m *pgproto3.Execute) error {
	pt, ok := c.portals[m.Portal]
	if !ok {
		return errorf(codeInvalidCursorName, "portal %q does not exist", m.Portal)
	}
	if pt.stmt.kind == stmtEmpty {
		c.be.Send(&pgproto3.EmptyQueryResponse{})
		return nil
	}
	if !pt.ran {
		ctx, done := c.startRequest()
		start := time.Now()
		err := c.run(ctx, pt)
		done()
		c.srv.metrics.observe(pt.stmt.kind.label(), err, time.Since(start))
		if err != nil {
			return err
		}
	}
	c.sendRows(pt, int(m.MaxRows))
	return nil
}

// sendRows sends up to limit (0: all) of the portal's remaining rows, then
// PortalSuspended if some remain, else CommandComplete.
func (c *conn) sendRows(pt *portal, limit int) {
	enc := rowEncoder{cols: pt.shape.cols, formats: pt.formats}
	row := make([]any, len(pt.shape.idx))
	n := 0
	for ; pt.sent < len(pt.rows) && (limit == 0 || n < limit); pt.sent, n = pt.sent+1, n+1 {
		for i, j := range pt.shape.idx {
			row[i] = pt.rows[pt.sent][j]
		}
		c.be.Send(enc.encode(row))
	}
	if pt.sent < len(pt.rows) {
		c.be.Send(&pgproto3.PortalSuspended{})
		return
	}
	tag := pt.tag
	if tag == "" {
		tag = "SELECT " + strconv.Itoa(n)
	}
	c.be.Send(&pgproto3.CommandComplete{CommandTag: []byte(tag)})
}

func (c *conn) closeMsg(m *pgproto3.Close) error {
	switch m.ObjectType {
	case 'S':
		delete(c.statements, m.Name)
	case 'P':
		delete(c.portals, m.Name)
	default:
		return protocolViolation("invalid CLOSE message subtype %d", m.ObjectType)
	}
	c.be.Send(&pgproto3.CloseComplete{})
	return nil
}

// syncMsg ends an extended-protocol exchange. Outside a transaction block
// it also ends the implicit transaction, which drops the portals.
func (c *conn) syncMsg() error {
	c.skipToSync = false
	if c.tx != txOpen {
		clear(c.portals)
	}
	return c.ready()
}
