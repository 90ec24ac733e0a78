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
	if _, exists := c.statements.get(m.Name); exists && m.Name != "" {
		return errorf(codeDuplicatePreparedStmt, "prepared statement %q already exists", m.Name)
	}
	s, err := parseOne(m.Query)
	if err == nil {
		var p *prepared
		if p, err = prepare(s, m.ParameterOIDs); err == nil {
			// The statement's strings are slices of the query.
			if err = c.statements.put(m.Name, p, len(m.Name)+len(m.Query)+4*len(p.params)); err == nil {
				c.out.send(&pgproto3.ParseComplete{})
				return nil
			}
		}
	}
	c.srv.metrics.observe("invalid", err, 0)
	return err
}

func (c *conn) bindMsg(m *pgproto3.Bind) error {
	p, ok := c.statements.get(m.PreparedStatement)
	if !ok {
		return errorf(codeInvalidSQLStatementName, "prepared statement %q does not exist", m.PreparedStatement)
	}
	if _, exists := c.portals.get(m.DestinationPortal); exists && m.DestinationPortal != "" {
		return errorf(codeDuplicateCursor, "portal %q already exists", m.DestinationPortal)
	}
	params, err := decodeParams(p.params, m.ParameterFormatCodes, m.Parameters)
	if err == nil {
		var pt *portal
		if pt, err = c.bind(p, params, m.ResultFormatCodes); err == nil {
			pt.size = len(m.DestinationPortal) + 2*len(m.ResultFormatCodes)
			for _, v := range m.Parameters {
				pt.size += len(v) // decoded values take no more than their wire form
			}
			if err = c.portals.put(m.DestinationPortal, pt, pt.size); err == nil {
				c.out.send(&pgproto3.BindComplete{})
				return nil
			}
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
		p, ok := c.statements.get(m.Name)
		if !ok {
			return errorf(codeInvalidSQLStatementName, "prepared statement %q does not exist", m.Name)
		}
		var err error
		if sh, err = c.describeStatement(p); err != nil {
			return err
		}
		c.out.send(&pgproto3.ParameterDescription{ParameterOIDs: p.params})
	case 'P':
		pt, ok := c.portals.get(m.Name)
		if !ok {
			return errorf(codeInvalidCursorName, "portal %q does not exist", m.Name)
		}
		sh, formats = pt.shape, pt.formats
	default:
		return protocolViolation("invalid DESCRIBE message subtype %d", m.ObjectType)
	}
	if sh.cols == nil {
		c.out.send(&pgproto3.NoData{})
	} else {
		c.out.send(rowDescription(sh.cols, formats))
	}
	return nil
}

func (c *conn) executeMsg(m *pgproto3.Execute) error {
	pt, ok := c.portals.get(m.Portal)
	if !ok {
		return errorf(codeInvalidCursorName, "portal %q does not exist", m.Portal)
	}
	if pt.stmt.kind == stmtEmpty {
		c.out.send(&pgproto3.EmptyQueryResponse{})
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
	if pt.rows == nil {
		return c.portals.resize(m.Portal, pt.size)
	}
	// Suspended: the rows wait for the next Execute, and count against
	// the connection's limits.
	if pt.rowsSize == 0 {
		pt.rowsSize = rowsSize(pt.rows)
	}
	if err := c.portals.resize(m.Portal, pt.size+pt.rowsSize); err != nil {
		c.portals.drop(m.Portal)
		return err
	}
	return nil
}

// rowsSize estimates the memory rows hold: slices, boxed values, keys,
// arrays of them.
func rowsSize(rows [][]any) int {
	n := 0
	for _, r := range rows {
		n += 24 + valuesSize(r)
	}
	return n
}

func valuesSize(vs []any) int {
	n := 24 * len(vs)
	for _, v := range vs {
		switch v := v.(type) {
		case string:
			n += len(v)
		case []any:
			n += 24 + valuesSize(v)
		}
	}
	return n
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
		c.out.send(enc.encode(row))
	}
	if pt.sent < len(pt.rows) {
		c.out.send(&pgproto3.PortalSuspended{})
		return
	}
	pt.rows, pt.sent = nil, 0 // all sent: Execute again gets none
	tag := pt.tag
	if tag == "" {
		tag = "SELECT " + strconv.Itoa(n)
	}
	c.out.send(&pgproto3.CommandComplete{CommandTag: []byte(tag)})
}

func (c *conn) closeMsg(m *pgproto3.Close) error {
	switch m.ObjectType {
	case 'S':
		c.statements.drop(m.Name)
	case 'P':
		c.portals.drop(m.Name)
	default:
		return protocolViolation("invalid CLOSE message subtype %d", m.ObjectType)
	}
	c.out.send(&pgproto3.CloseComplete{})
	return nil
}

// syncMsg ends an extended-protocol exchange. Outside a transaction block
// it also ends the implicit transaction, which drops the portals.
func (c *conn) syncMsg() error {
	c.skipToSync = false
	if c.tx != txOpen {
		c.portals.clear()
	}
	return c.ready()
}
