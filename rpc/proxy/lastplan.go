//go:build cgo

package proxy

import (
	"bytes"
	"strings"

	"github.com/jackc/pgx/v5/pgproto3"
	pg_query "github.com/pganalyze/pg_query_go/v6"
)

// lastPlanName is the setting a session SHOWs to learn what the proxy
// did with its last nearest-neighbour statement.
const lastPlanName = "vecside.last_plan"

// passed counts a recognised statement passed through, and why, and
// keeps the reason for SHOW vecside.last_plan. A reason may go on after
// ": " with what was said (the sidecar's refusal), which the plan shows
// and the count leaves out.
func (s *session) passed(reason string) {
	label, _, _ := strings.Cut(reason, ": ")
	s.p.stats.fallback(label)
	s.lastPlan = "passed through: " + reason
}

// showLastPlan answers a simple Query that is exactly SHOW
// vecside.last_plan, a setting PostgreSQL does not have, as SHOW would:
// what the proxy did with the session's last nearest-neighbour statement
// (accelerated: the index, and per round the candidates asked for, given
// and the rows that came back; or why it passed through).
func (s *session) showLastPlan(m message) (bool, error) {
	sql := string(bytes.TrimSuffix(m.body, []byte{0}))
	if !s.flow.idle() || !showsLastPlan(sql) {
		return false, nil
	}
	msgs := append([]pgproto3.BackendMessage{planDescription(0)}, planRow(s.lastPlan)...)
	return true, s.replyOwn(append(msgs, readyForQuery(byte(s.flow.status.Load())))...)
}

// showsLastPlan reports whether sql is exactly SHOW vecside.last_plan.
func showsLastPlan(sql string) bool {
	if !containsFold(sql, lastPlanName) {
		return false
	}
	tree, err := pg_query.Parse(sql)
	return err == nil && len(tree.Stmts) == 1 && tree.Stmts[0].Stmt.GetVariableShowStmt().GetName() == lastPlanName
}

// lastPlanBatch is the answer to an extended-protocol batch that only
// prepares, describes and runs SHOW vecside.last_plan, as drivers that
// always use the extended protocol send it (pgx, JDBC, asyncpg): the
// replies PostgreSQL would give a SHOW that shows plan, in a session
// whose transaction status is status. The statements it prepares are
// the proxy's, remembered by name in book; PostgreSQL never sees them,
// so a batch that mixes them with others passes through and fails
// there. Any other batch gets no answer: nil.
func lastPlanBatch(msgs []message, book *statementBook, plan string, status byte) []pgproto3.BackendMessage {
	shows := func(name string) bool { st := book.get(name); return st != nil && st.showsPlan }
	// Told at its first message, without decoding the batch: every other
	// batch held is one the sidecar may answer.
	switch first := msgs[0]; {
	case msgs[len(msgs)-1].typ != 'S':
		return nil
	case first.typ == 'P' && !containsFold(string(first.body), lastPlanName),
		first.typ == 'B' && !shows(boundStatement(first.body)):
		return nil
	}
	prepared := map[string]bool{} // by this batch
	var out []pgproto3.BackendMessage
	bound, format := false, int16(0)
	for _, m := range msgs {
		switch m.typ {
		case 'P':
			var p pgproto3.Parse
			if p.Decode(m.body) != nil || !showsLastPlan(p.Query) {
				return nil
			}
			prepared[p.Name] = true
			out = append(out, &pgproto3.ParseComplete{})
		case 'D':
			var d pgproto3.Describe
			switch {
			case d.Decode(m.body) != nil:
				return nil
			case d.ObjectType == 'S' && (prepared[d.Name] || shows(d.Name)):
				out = append(out, &pgproto3.ParameterDescription{}, planDescription(0))
			case d.ObjectType == 'P' && d.Name == "" && bound:
				out = append(out, planDescription(format))
			default:
				return nil
			}
		case 'B':
			var b pgproto3.Bind
			if b.Decode(m.body) != nil || b.DestinationPortal != "" || len(b.Parameters) != 0 || len(b.ResultFormatCodes) > 1 ||
				!prepared[b.PreparedStatement] && !shows(b.PreparedStatement) {
				return nil
			}
			bound, format = true, 0
			if len(b.ResultFormatCodes) == 1 {
				format = b.ResultFormatCodes[0] // text's binary form is its bytes
			}
			out = append(out, &pgproto3.BindComplete{})
		case 'E':
			var e pgproto3.Execute
			if e.Decode(m.body) != nil || e.Portal != "" || e.MaxRows != 0 || !bound {
				return nil
			}
			out = append(out, planRow(plan)...)
		case 'S':
			out = append(out, readyForQuery(status))
		default:
			return nil
		}
	}
	for name := range prepared {
		book.rememberPlan(name)
	}
	return out
}

// planDescription describes SHOW vecside.last_plan's one text column.
func planDescription(format int16) *pgproto3.RowDescription {
	return &pgproto3.RowDescription{Fields: []pgproto3.FieldDescription{{Name: []byte(lastPlanName), DataTypeOID: 25, DataTypeSize: -1, TypeModifier: -1, Format: format}}}
}

// planRow is SHOW vecside.last_plan's row and command tag, for the
// session's last plan.
func planRow(plan string) []pgproto3.BackendMessage {
	if plan == "" {
		plan = "none: no nearest-neighbour statement yet"
	}
	return []pgproto3.BackendMessage{&pgproto3.DataRow{Values: [][]byte{[]byte(plan)}}, &pgproto3.CommandComplete{CommandTag: []byte("SHOW")}}
}

func readyForQuery(status byte) *pgproto3.ReadyForQuery {
	return &pgproto3.ReadyForQuery{TxStatus: status}
}

// replyOwn sends the proxy's own replies to the client.
func (s *session) replyOwn(msgs ...pgproto3.BackendMessage) error {
	out := make([]message, 0, len(msgs))
	for _, msg := range msgs {
		b, _ := msg.Encode(nil)
		out = append(out, message{b[0], b[5:]})
	}
	return s.toClient(out...)
}
