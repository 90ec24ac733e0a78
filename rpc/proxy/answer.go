//go:build cgo

package proxy

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5/pgproto3"

	"github.com/vecside/vecside/heapfetch"
)

// answering is one statement a session answers itself: q restricted to
// the sidecar's candidates, run in rounds, each one round trip ending
// with a Sync (outside a transaction block a statement of its own, as
// the client's would have been), widening while fewer than its LIMIT
// rows come back and the sidecar has more. When even then fewer rows
// come back than LIMIT, rows the sidecar does not have (a NULL vector, a
// row it has not applied yet) may belong to the answer, and the
// statement passes through.
type answering struct {
	q        *query
	ix       Index
	bd       *binding // the client's Bind, nil for a simple Query
	facts    sessionFacts
	vec      []float32
	options  string // knn options from the session's settings
	systemID int64  // the session's server, whose xids the fast path takes
	fast     bool   // the fast path may be taken (until the first round's candidates say)
	ex       *exchange
	ask      func(heapfetch.Request, time.Duration) ([]heapfetch.Candidate, heapfetch.Source, error)

	// The restricted statement's parameter types (the client's, then the
	// candidates, a literal vector's text and the fast path's three) and
	// the literal vector's text, if any.
	types   []uint32
	literal [][]byte
	sql     string
	res     result
	asked   []string // per round, candidates asked for→rows that came back
}

// plan is what became of a statement answered, for SHOW
// vecside.last_plan.
type plan struct {
	index          string
	failed         bool
	rounds         []string
	fast           bool
	options, after string // knn options; the LSN the sidecar waited for
}

func (p *plan) String() string {
	s := "accelerated: index " + p.index
	if p.failed {
		// What the rounds found is not said: the client's statement
		// failed.
		return s + "; the statement failed"
	}
	s += "; rounds (candidates asked→rows) " + strings.Join(p.rounds, ", ")
	if p.fast {
		s += "; ordered by the sidecar's distances where xmin is its xid"
	}
	if p.options != "" {
		s += "; options " + p.options
	}
	if p.after != "" {
		s += "; waited for " + p.after
	}
	return s
}

// run runs the rounds and returns the replies the client gets and the
// plan; no plan where the client's statement turned out dropped (its
// error is the reply), a passThrough where the proxy cannot answer.
func (a *answering) run() ([]message, *plan, error) {
	q := a.q
	k, reason := wants(q)
	if q.params+5 > maxParameters { // the candidates, a literal vector, the fast path's three
		reason = "parameters"
	}
	if reason != "" {
		return nil, nil, passThrough{reason}
	}
	if a.bd != nil {
		a.types = append(a.types, a.bd.types...)
	}
	a.types = append(a.types, 0) // of types PostgreSQL infers, as are the rest
	if q.vectorParam() != 0 {
		a.types = append(a.types, 0)
		a.literal = [][]byte{[]byte(q.vector.literal)}
	}
	for round := 0; ; round++ {
		cands, gone, err := a.round(round, k)
		if err != nil || gone != nil {
			return gone, nil, err
		}
		rows := int64(a.res.rows())
		a.asked = append(a.asked, fmt.Sprintf("%d→%d", k, rows))
		exhausted := len(cands) < k // see heapfetch's widening
		if a.res.err != nil || a.res.tooLarge || rows >= q.limit || exhausted || round+1 == maxRounds || k >= maxCandidates {
			break
		}
		// Twice as many as the rows that passed so far say are needed, at
		// least twice as many as before.
		matched := 0.5
		if rows > 0 {
			matched = float64(rows + q.offset)
		}
		k = int(min(float64(maxCandidates), max(float64(2*k), 2*float64(q.limit+q.offset)*float64(k)/matched)))
	}
	switch {
	case a.res.tooLarge:
		return nil, nil, passThrough{"result too large"}
	case a.res.err == nil && int64(a.res.rows()) < q.limit:
		return nil, nil, passThrough{"too few rows"}
	}
	return a.replies(), &plan{index: a.ix.Name, failed: a.res.err != nil, rounds: a.asked, fast: a.fast && a.res.err == nil,
		options: a.options, after: a.facts.minLSN}, nil
}

// round asks for k candidates and runs the restricted statement over
// them, its replies in a.res; gone is what the client is owed instead if
// its statement, checked with the first round, is gone.
func (a *answering) round(round, k int) (cands []heapfetch.Candidate, gone []message, err error) {
	bd := a.bd
	cands, src, err := a.ask(heapfetch.Request{Index: a.ix.Name, Vector: a.vec, K: k, MinLSN: a.facts.minLSN, Options: a.options, AlwaysFetch: !a.fast}, a.facts.timeout)
	if err != nil {
		return nil, nil, err
	}
	if round == 0 {
		if err := a.restrict(cands, src); err != nil {
			return nil, nil, err
		}
		if bd != nil && bd.check {
			a.ex.send(&pgproto3.Describe{ObjectType: 'S', Name: bd.bind.PreparedStatement})
		}
	}
	params := append([][]byte{keyArray(cands)}, a.literal...)
	if a.fast {
		params = append(params, xidArray(cands), distanceArray(cands), strconv.AppendInt(nil, src.Timeline, 10))
	}
	// The session's own statement, prepared and closed in this round
	// trip: nothing of it is left for the client to see, and PostgreSQL
	// analyses the statement again, as it would the client's (its
	// search_path, its constants, its tables' columns now).
	a.ex.send(&pgproto3.Parse{Name: a.ex.ownName, Query: a.sql, ParameterOIDs: a.types})
	if bd != nil {
		a.ex.send(bd.restrictedBind(a.ex.ownName, params))
	} else {
		a.ex.send(&pgproto3.Bind{PreparedStatement: a.ex.ownName, ParameterFormatCodes: []int16{0}, Parameters: params})
	}
	a.ex.send(&pgproto3.Describe{ObjectType: 'P'}, &pgproto3.Execute{}, &pgproto3.Close{ObjectType: 'S', Name: a.ex.ownName}, &pgproto3.Sync{})
	if err := a.ex.u.flush(); err != nil {
		return nil, nil, err
	}
	if round == 0 && bd != nil && bd.check {
		if gone, err := a.ex.checked(); err != nil || gone != nil {
			return nil, gone, err
		}
	}
	if err := a.ex.collect(&a.res); err != nil {
		return nil, nil, err
	}
	if a.res.err != nil {
		// Its Close was skipped with the rest of the round.
		if err := a.ex.closeOwn(&a.res); err != nil {
			return nil, nil, err
		}
	}
	return cands, nil, nil
}

// restrict chooses, with the first round's candidates, the restricted
// statement: the fast one where the sidecar's xids count (they are only
// of its source; later rounds run the same statement, with no xid where
// none came), else the plain one.
func (a *answering) restrict(cands []heapfetch.Candidate, src heapfetch.Source) error {
	a.fast = a.fast && src.SystemID == a.systemID &&
		slices.ContainsFunc(cands, func(c heapfetch.Candidate) bool { return c.Xid != 0 })
	var err error
	if a.fast {
		a.sql, err = a.q.fastRestricted(a.ix.Key, a.ix.TableOID)
		a.types = append(a.types, 0, 0, 0)
	} else {
		a.sql, err = a.q.restricted(a.ix.Key, a.ix.TableOID)
	}
	if err != nil {
		return passThrough{"deparse"}
	}
	return nil
}

// replies are the last round's replies as the client gets them: the
// ones it was owed first, no BindComplete for a simple Query and no
// RowDescription for a Bind it did not describe, and PostgreSQL's error
// for the restricted statement without its position, which would point
// at the wrong place in the client's text.
func (a *answering) replies() []message {
	var out []message
	if a.bd != nil {
		out = append(out, a.bd.owed...)
	}
	for _, m := range a.res.msgs {
		if a.bd == nil && m.typ == '2' || a.bd != nil && !a.bd.describe && m.typ == 'T' {
			continue
		}
		out = append(out, m)
	}
	if e := a.res.err; e != nil {
		e.Position = 0
		b, _ := e.Encode(nil)
		out = append(out, message{b[0], b[5:]})
	}
	return append(out, a.res.ready)
}
