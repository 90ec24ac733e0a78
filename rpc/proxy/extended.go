//go:build cgo

package proxy

import (
	"encoding/binary"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5/pgproto3"
	"github.com/jackc/pgx/v5/pgtype"

	"github.com/vecside/vecside/internal/pgvalue"
)

const (
	// maxStatements bounds the prepared statements a session remembers
	// as accelerable; past it, new ones pass through unaccelerated.
	maxStatements = 1000
	// maxBatch bounds the messages of an extended-protocol batch held
	// back until its Sync, to see whether the proxy can answer it.
	maxBatch = 6
)

// mentionsDistance reports whether sql may hold a distance operator: a
// statement without one is never recognised, so it need not be parsed.
func mentionsDistance(sql string) bool {
	return strings.Contains(sql, "<->") || strings.Contains(sql, "<=>") || strings.Contains(sql, "<#>")
}

// noteParse remembers whether the statement a Parse prepares is one the
// proxy could answer.
func (s *session) noteParse(p *pgproto3.Parse) {
	s.book.forgetIfDeallocating(p.Query)
	var q *query
	if mentionsDistance(p.Query) {
		var done func()
		q, _, done = s.recognize(p.Query)
		defer done()
	}
	s.book.remember(p.Name, q)
}

// containsFold reports whether s holds lower, a lower-case ASCII word, in
// any case, without copying s: it is asked of every Query passed on.
func containsFold(s, lower string) bool {
next:
	for i := 0; i+len(lower) <= len(s); i++ {
		for j := range len(lower) {
			c := s[i+j]
			if 'A' <= c && c <= 'Z' {
				c += 'a' - 'A'
			}
			if c != lower[j] {
				continue next
			}
		}
		return true
	}
	return false
}

// heldBatch is an extended-protocol batch the proxy may answer: an optional
// Parse, a Bind of an accelerable statement to the unnamed portal, an
// optional Describe of that portal, an Execute of all its rows, and a
// Sync.
type heldBatch struct {
	msgs     []message
	parse    *pgproto3.Parse
	bind     *pgproto3.Bind
	describe bool
}

// hold reads the rest of the batch that first starts, up to its Sync.
// It returns the batch when the proxy may answer it through the sidecar,
// else nil, the messages having been answered (SHOW vecside.last_plan)
// or sent on as they came.
func (s *session) hold(first message) (*heldBatch, error) {
	b := &heldBatch{}
	m := first
	for {
		b.msgs = append(b.msgs, message{m.typ, append([]byte(nil), m.body...)})
		if m.typ == 'S' || m.typ == 'H' || m.typ == 'X' || len(b.msgs) == maxBatch {
			break
		}
		typ, n, err := s.c.header()
		if err != nil {
			return nil, err
		}
		if n > s.c.held {
			s.release(b.msgs)
			s.unread(typ)
			return nil, stream(s.u.w, s.c.r, typ, n)
		}
		if m, err = s.c.body(typ, n); err != nil {
			return nil, err
		}
	}
	if out := lastPlanBatch(b.msgs, &s.book, s.lastPlan, byte(s.flow.status.Load())); out != nil {
		return nil, s.replyOwn(out...)
	}
	if !b.parseShape() {
		owed := describesFirst(b.msgs)
		s.flow.expectDescribe(owed) // before the replies can come
		s.release(b.msgs)
		s.flow.describing = owed > 0
		return nil, nil
	}
	return b, nil
}

// describesFirst is how many replies a batch owes that only prepares a
// statement, describes it and flushes, [Parse, Describe, Flush] (its
// ParseComplete, ParameterDescription, and RowDescription or NoData); 0
// for any other.
func describesFirst(msgs []message) int32 {
	if len(msgs) != 3 || msgs[0].typ != 'P' || msgs[1].typ != 'D' || msgs[2].typ != 'H' {
		return 0
	}
	var p pgproto3.Parse
	var d pgproto3.Describe
	if p.Decode(msgs[0].body) != nil || d.Decode(msgs[1].body) != nil || d.ObjectType != 'S' || d.Name != p.Name {
		return 0
	}
	return 3
}

// release sends held messages on unchanged.
func (s *session) release(msgs []message) {
	for _, m := range msgs {
		s.pass(m)
	}
}

// pass sends one client message upstream, noting what it changes.
func (s *session) pass(m message) {
	switch m.typ {
	case 'P':
		var p pgproto3.Parse
		if p.Decode(m.body) == nil {
			s.noteParse(&p)
		}
	case 'C':
		var c pgproto3.Close
		if c.Decode(m.body) == nil && c.ObjectType == 'S' {
			s.book.forget(c.Name)
		}
	}
	s.track(m.typ)
	s.u.send(m)
}

// parseShape decodes the batch and reports whether it has the one shape
// the proxy answers.
func (b *heldBatch) parseShape() bool {
	msgs := b.msgs
	if len(msgs) > 0 && msgs[0].typ == 'P' {
		b.parse = &pgproto3.Parse{}
		if b.parse.Decode(msgs[0].body) != nil {
			return false
		}
		msgs = msgs[1:]
	}
	if len(msgs) < 3 || msgs[0].typ != 'B' || msgs[len(msgs)-1].typ != 'S' || msgs[len(msgs)-2].typ != 'E' {
		return false
	}
	b.bind = &pgproto3.Bind{}
	if b.bind.Decode(msgs[0].body) != nil || b.bind.DestinationPortal != "" {
		return false
	}
	if b.parse != nil && b.parse.Name != b.bind.PreparedStatement {
		return false
	}
	var ex pgproto3.Execute
	if ex.Decode(msgs[len(msgs)-2].body) != nil || ex.Portal != "" || ex.MaxRows != 0 {
		return false
	}
	switch len(msgs) {
	case 3:
	case 4:
		var d pgproto3.Describe
		if d.Decode(msgs[1].body) != nil || d.ObjectType != 'P' || d.Name != "" {
			return false
		}
		b.describe = true
	default:
		return false
	}
	return true
}

// accelerateBatch answers a held batch through the sidecar when it can;
// otherwise it passes the batch through, with what was done of it.
func (s *session) accelerateBatch(b *heldBatch) error {
	var q *query
	reason := ""
	if st := s.book.get(b.bind.PreparedStatement); st != nil {
		q = st.q
	}
	if b.parse != nil {
		q = nil
		if mentionsDistance(b.parse.Query) {
			var done func()
			q, reason, done = s.recognize(b.parse.Query)
			defer done()
		}
	}
	switch {
	case q == nil:
		if reason != "" {
			s.passed(reason)
		}
		s.release(b.msgs)
		return nil
	case !s.encoding.plain.Load():
		reason = "encoding"
	case q.vector.param > len(b.bind.Parameters):
		reason = "vector"
	case q.params != len(b.bind.Parameters):
		reason = "parameter"
	case s.flow.status.Load() == 'E':
		reason = "failed transaction"
	case b.parse == nil && q.literals:
		// Its literals were read when the client prepared it (a 'now',
		// a timestamp in the time zone of then), which the proxy's
		// statement, parsed now, would read anew.
		reason = "prepared literal"
	case sidecarResting(s.p):
		reason = "sidecar down"
	}
	ix, ok := s.p.cat.lookup(q.schema, q.table, q.column, q.metric, s.probe.schemas)
	if reason == "" && !ok {
		reason = "not indexed"
	}
	if reason != "" {
		s.passed(reason)
		s.release(b.msgs)
		return nil
	}
	s.taken.Store(true)
	defer s.taken.Store(false)
	return s.answerBatch(b, q, ix)
}

// answerBatch prepares the client's statement if the batch does, learns
// its parameter types, decodes the query vector, and answers as answer
// does with the client's parameters, formats and statement. Given up
// after the prelude, the rest of the batch is sent through and its
// replies go to the client.
//
// The types of a statement the client prepared once are described once:
// a later Bind of it costs no round trip before the sidecar is asked,
// and the Describe that checks the statement still exists goes with the
// answer's first round (see binding.check).
func (s *session) answerBatch(b *heldBatch, q *query, ix Index) error {
	rest := b.msgs
	st := s.book.get(b.bind.PreparedStatement)
	if b.parse == nil && st != nil && st.types != nil {
		return s.answerBound(b, q, ix, st.types, nil, true, rest)
	}
	if b.parse != nil {
		s.book.remember(b.parse.Name, q)
		s.ex.send(b.parse)
		rest = rest[1:]
	}
	s.ex.send(&pgproto3.Describe{ObjectType: 'S', Name: b.bind.PreparedStatement})
	s.ex.send(&pgproto3.Flush{})
	if err := s.u.flush(); err != nil {
		return err
	}
	var owed []message // replies the client is owed: its ParseComplete
	var types []uint32
	for types == nil {
		m, err := s.ex.reply()
		if err != nil {
			return err
		}
		switch m.typ {
		case '1':
			owed = append(owed, m)
		case 't':
			var pd pgproto3.ParameterDescription
			if err := pd.Decode(m.body); err != nil {
				return err
			}
			types = append([]uint32{}, pd.ParameterOIDs...)
		case 'E':
			// The client's Parse failed, or its statement does not
			// exist: PostgreSQL's error, as it would have come.
			z, err := s.ex.sync()
			if err != nil {
				return err
			}
			return s.toClient(append(owed, m, z)...)
		}
	}
	for done := false; !done; { // the statement's RowDescription, or NoData
		m, err := s.ex.reply()
		if err != nil {
			return err
		}
		done = m.typ == 'T' || m.typ == 'n'
	}
	if st := s.book.get(b.bind.PreparedStatement); st != nil {
		st.types = types
	}
	return s.answerBound(b, q, ix, types, owed, false, rest)
}

// answerBound answers a batch whose statement's parameter types are
// known; check: its existence is to be checked with the first round.
func (s *session) answerBound(b *heldBatch, q *query, ix Index, types []uint32, owed []message, check bool, rest []message) error {
	reason := ""
	if len(types) != q.params {
		reason = "parameter"
	}
	if reason == "" {
		q, reason = boundCounts(q, b.bind, types)
	}
	vector := func() ([]float32, string) {
		return bindVector(b.bind, types, q.vector.param, q.vector.literal, s.probe.pgvector)
	}
	var err error
	if reason == "" {
		err = s.answer(q, ix, vector, &binding{bind: b.bind, types: types, describe: b.describe, owed: owed, check: check})
		if pt, ok := err.(passThrough); ok {
			reason = pt.reason
		}
	}
	if reason == "" {
		return err
	}
	s.passed(reason)
	if err := s.toClient(owed...); err != nil {
		return err
	}
	s.taken.Store(false)
	s.release(rest)
	return nil
}

// binding is how the client bound its statement, for answer to bind the
// restricted one alike.
type binding struct {
	bind     *pgproto3.Bind
	types    []uint32
	describe bool
	owed     []message // replies due to the client before the answer's
	// check: the client's statement was described by an earlier answer;
	// its Describe goes first in this one's first round, so that a
	// statement dropped since gets PostgreSQL's error as before.
	check bool
}

// bindVector decodes the query vector: parameter param of bind, or the
// literal when param is 0. A parameter in binary is real[], double
// precision[], or pgvector's vector or halfvec, whose OIDs (the
// extension's, different ones in each database) are in pgvector.
func bindVector(bind *pgproto3.Bind, types []uint32, param int, literal string, pgvector pgvectorTypes) ([]float32, string) {
	if param == 0 {
		v, err := pgvalue.ParseVector(literal)
		if err != nil {
			return nil, "vector"
		}
		return v, ""
	}
	i := param - 1
	raw := bind.Parameters[i]
	if raw == nil || i >= len(types) {
		return nil, "vector"
	}
	if paramFormat(bind.ParameterFormatCodes, i) == 0 {
		v, err := pgvalue.ParseVector(string(raw))
		if err != nil {
			return nil, "vector"
		}
		return v, ""
	}
	vt, err := pgvalue.VectorTypeFor(types[i], pgvector.name(types[i]))
	if err != nil {
		return nil, "vector type"
	}
	v, err := vt.DecodeBinary(raw)
	if err != nil {
		return nil, "vector"
	}
	return v, ""
}

// boundCounts is q with LIMIT and OFFSET set from the parameters they
// are, if they are: integers, not NULL, LIMIT at least 1.
func boundCounts(q *query, bind *pgproto3.Bind, types []uint32) (*query, string) {
	if q.limitParam == 0 && q.offsetParam == 0 {
		return q, ""
	}
	bound := *q
	for _, c := range []struct {
		param int
		v     *int64
		least int64
	}{{q.limitParam, &bound.limit, 1}, {q.offsetParam, &bound.offset, 0}} {
		if c.param == 0 {
			continue
		}
		i := c.param - 1
		raw := bind.Parameters[i]
		var err error
		switch {
		case raw == nil:
			return nil, "limit"
		case paramFormat(bind.ParameterFormatCodes, i) == 0:
			*c.v, err = strconv.ParseInt(string(raw), 10, 64)
		case types[i] == pgtype.Int8OID && len(raw) == 8:
			*c.v = int64(binary.BigEndian.Uint64(raw))
		case types[i] == pgtype.Int4OID && len(raw) == 4:
			*c.v = int64(int32(binary.BigEndian.Uint32(raw)))
		case types[i] == pgtype.Int2OID && len(raw) == 2:
			*c.v = int64(int16(binary.BigEndian.Uint16(raw)))
		default:
			return nil, "limit"
		}
		if err != nil || *c.v < c.least {
			return nil, "limit"
		}
	}
	return &bound, ""
}

// paramFormat is parameter i's format under Bind's format codes: none
// (all text), one for all, or one each.
func paramFormat(codes []int16, i int) int16 {
	switch len(codes) {
	case 0:
		return 0
	case 1:
		return codes[0]
	}
	return codes[i]
}

// restrictedBind binds the restricted statement, prepared as name, as
// the client bound its own, with more parameters after the client's
// (the candidates, and a literal vector's text), in text.
func (bd *binding) restrictedBind(name string, more [][]byte) *pgproto3.Bind {
	c := bd.bind
	formats := make([]int16, len(c.Parameters)+len(more))
	for i := range c.Parameters {
		formats[i] = paramFormat(c.ParameterFormatCodes, i)
	}
	return &pgproto3.Bind{PreparedStatement: name, ParameterFormatCodes: formats,
		Parameters: append(append([][]byte{}, c.Parameters...), more...), ResultFormatCodes: c.ResultFormatCodes}
}

// sidecarResting: the sidecar failed a moment ago; statements pass
// through without asking it.
func sidecarResting(p *Proxy) bool { return time.Now().UnixNano() < p.sidecarDown.Load() }

// toClient sends the client replies and flushes.
func (s *session) toClient(msgs ...message) error {
	s.cmu.Lock()
	defer s.cmu.Unlock()
	for _, m := range msgs {
		s.c.send(m)
	}
	return s.c.flush()
}
