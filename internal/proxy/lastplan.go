//go:build cgo

package proxy

import (
	"bytes"

	"github.com/jackc/pgx/v5/pgproto3"
	pg_query "github.com/pganalyze/pg_query_go/v6"
)

// lastPlanName is the setting a session SHOWs to learn what the proxy
// did with its last nearest-neighbour statement.
const lastPlanName = "vecside.last_plan"

// passed counts a recognised statement passed through, and why, and
// keeps the reason for SHOW vecside.last_plan.
func (s *session) passed(reason string) {
	s.p.stats.fallback(reason)
	s.lastPlan = "passed through: " + reason
}

// showLastPlan answers a simple Query that is exactly SHOW
// vecside.last_plan, a setting PostgreSQL does not have, as SHOW would:
// what the proxy did with the session's last nearest-neighbour statement
// (accelerated: the index, and per round the candidates asked for, given
// and the rows that came back; or why it passed through).
func (s *session) showLastPlan(m message) (bool, error) {
	sql := string(bytes.TrimSuffix(m.body, []byte{0}))
	if !containsFold(sql, lastPlanName) || s.pending.Load() != 0 || s.batch {
		return false, nil
	}
	tree, err := pg_query.Parse(sql)
	if err != nil || len(tree.Stmts) != 1 || tree.Stmts[0].Stmt.GetVariableShowStmt().GetName() != lastPlanName {
		return false, nil
	}
	plan := s.lastPlan
	if plan == "" {
		plan = "none: no nearest-neighbour statement yet"
	}
	var out []message
	for _, msg := range []pgproto3.BackendMessage{
		&pgproto3.RowDescription{Fields: []pgproto3.FieldDescription{{Name: []byte(lastPlanName), DataTypeOID: 25, DataTypeSize: -1, TypeModifier: -1}}},
		&pgproto3.DataRow{Values: [][]byte{[]byte(plan)}},
		&pgproto3.CommandComplete{CommandTag: []byte("SHOW")},
		&pgproto3.ReadyForQuery{TxStatus: byte(s.status.Load())},
	} {
		b, _ := msg.Encode(nil)
		out = append(out, message{b[0], b[5:]})
	}
	return true, s.toClient(out...)
}
