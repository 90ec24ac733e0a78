//go:build cgo

package proxy

// statementBook is what the proxy knows of the client's prepared
// statements: those it could answer, by name, with the code of their
// texts (inspect.go), and the SHOW vecside.last_plan statements it
// prepared itself (lastplan.go). A statement it does not know passes
// through; so the book errs on the side of forgetting.
type statementBook struct {
	stmts map[string]*clientStatement
	code  int
}

// clientStatement is a prepared statement of the client's that the
// proxy could answer: its recognised form, and its parameter types once
// an answer has described it; or, showsPlan, a SHOW vecside.last_plan
// the proxy prepared itself (lastplan.go).
type clientStatement struct {
	q         *query
	types     []uint32
	showsPlan bool
}

// get is statement name, nil if the proxy does not know it.
func (b *statementBook) get(name string) *clientStatement { return b.stmts[name] }

// remember notes statement name as q, nil if the proxy cannot answer it
// (or keep it: maxStatements, maxRememberedCode).
func (b *statementBook) remember(name string, q *query) {
	b.forget(name)
	if q == nil || len(b.stmts) >= maxStatements || b.code+q.code > maxRememberedCode {
		return
	}
	b.add(name, &clientStatement{q: q})
	b.code += q.code
}

// rememberPlan notes statement name as one the proxy prepared itself for
// SHOW vecside.last_plan.
func (b *statementBook) rememberPlan(name string) {
	b.forget(name)
	if len(b.stmts) < maxStatements {
		b.add(name, &clientStatement{showsPlan: true})
	}
}

func (b *statementBook) add(name string, st *clientStatement) {
	if b.stmts == nil {
		b.stmts = map[string]*clientStatement{}
	}
	b.stmts[name] = st
}

// forget forgets statement name.
func (b *statementBook) forget(name string) {
	if st := b.stmts[name]; st != nil && st.q != nil {
		b.code -= st.q.code
	}
	delete(b.stmts, name)
}

// passedQuery forgets what a simple Query passed through may have
// dropped: the unnamed statement always, and the others as
// forgetIfDeallocating says.
func (b *statementBook) passedQuery(sql string) {
	b.forget("")
	b.forgetIfDeallocating(sql)
}

// forgetIfDeallocating forgets every statement if sql could deallocate
// one: SQL's PREPARE could then give the name to another statement. The
// test is over-cautious (at worst a statement is no longer accelerated,
// or prepared again); a statement merely dropped fails the Describe that
// each answer sends with its first round.
func (b *statementBook) forgetIfDeallocating(sql string) {
	if containsFold(sql, "dealloc") || containsFold(sql, "discard") {
		b.forgetAll()
	}
}

// forgetAll forgets the client's statements: a message the proxy did not
// read, or SQL that may deallocate, may have dropped any of them.
func (b *statementBook) forgetAll() {
	clear(b.stmts)
	b.code = 0
}
