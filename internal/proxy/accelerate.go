//go:build cgo

package proxy

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgproto3"

	"github.com/vecside/vecside/heapfetch"
	"github.com/vecside/vecside/internal/knnlimits"
	"github.com/vecside/vecside/internal/pgvalue"
)

const (
	// maxRounds bounds how often a statement is run again with more
	// candidates, as heapfetch bounds its widening.
	maxRounds = 4
	// maxCandidates is the most candidates asked for (the sidecar's cap
	// on k × oversample, over its largest default oversampling, 3).
	maxCandidates = knnlimits.MaxCandidates / 3
	// sidecarTimeout bounds a candidates request, read-your-writes wait
	// included; past it the statement passes through.
	sidecarTimeout = 5 * time.Second
	// maxResult bounds the bytes of one round's replies the session
	// holds; a larger result passes the statement through.
	maxResult = 16 << 20
	// sidecarBackoff is how long statements pass through without asking
	// after the sidecar failed, so that a dead sidecar costs one attempt,
	// not one per statement.
	sidecarBackoff = time.Second
)

// probeSQL tells, in one round trip, what a session's earlier statements
// may have changed: whether its transaction block has written (then the
// sidecar cannot see its rows), its isolation (a snapshot older than the
// sidecar's would be answered with newer candidates), the WAL position
// its commits so far are below (read-your-writes: the sidecar waits for
// it; the flush position, which a commit waits for; with
// synchronous_commit off, the insert position, past a commit not yet
// written, which the WAL writer flushes within wal_writer_delay, less a
// page header: at a page's start it is past the header, which no record
// ends at until the next is written, so a wait for it would last until
// then; on a hot standby, what it has replayed, so that no row the
// standby shows is missing from the candidates, as heapfetch asks), and
// whether its search_path finds the indexed table under the name the
// statement uses; then the settings the sidecar's search takes
// (settingOptions). Between the two, the OID of pgvector's vector type
// in this database, 0 without it: a vector parameter in binary comes with
// that OID. Last, for the fast path: the indexed column's type, whether
// the role has SELECT on the table (xmin takes it, where the statement
// itself may need SELECT on some columns only), and whether it may read
// the control file (pg_control_system and pg_control_checkpoint, which
// the fast statement names). It is built so that it cannot fail.
const probeSQL = `SELECT pg_current_xact_id_if_assigned() IS NOT NULL, current_setting('transaction_isolation'),
CASE WHEN pg_is_in_recovery() THEN coalesce(pg_last_wal_replay_lsn()::text, '')
  WHEN current_setting('synchronous_commit') = 'off' THEN (SELECT (l - CASE WHEN o.file_offset = 40 THEN 40
    WHEN o.file_offset % current_setting('wal_block_size')::int = 24 THEN 24 ELSE 0 END)::text FROM pg_current_wal_insert_lsn() l, pg_walfile_name_offset(l) o)
  ELSE pg_current_wal_flush_lsn()::text END, coalesce(to_regclass($1) = to_regclass($2), false),
coalesce((SELECT t.oid FROM pg_catalog.pg_type t JOIN pg_catalog.pg_extension e ON e.extnamespace = t.typnamespace
  WHERE e.extname = 'vector' AND t.typname = 'vector'), 0),
current_setting('hnsw.ef_search', true), current_setting('ivfflat.probes', true),
current_setting('vecside.ef_search', true), current_setting('vecside.probes', true), current_setting('vecside.oversample', true),
coalesce((SELECT a.atttypid FROM pg_catalog.pg_attribute a WHERE a.attrelid = to_regclass($2) AND a.attname = $3 AND NOT a.attisdropped), 0),
coalesce(has_table_privilege(to_regclass($2), 'SELECT'), false),
has_function_privilege('pg_catalog.pg_control_system()', 'EXECUTE') AND has_function_privilege('pg_catalog.pg_control_checkpoint()', 'EXECUTE')`

// probeTypes are probeSQL's parameter types: text.
var probeTypes = []uint32{25, 25, 25}

// systemIDSQL reads the server's system identifier, once per session,
// where the probe found the role may.
const systemIDSQL = `SELECT system_identifier FROM pg_catalog.pg_control_system()`

// float4ArrayOID is real[]'s type: with pgvector's vector, the column
// types whose values the sidecar holds exactly (store=float), so that its
// distances are the ones PostgreSQL computes.
const float4ArrayOID = 1021

// resolution is what a probe found of a table name and indexed column.
type resolution struct {
	found bool // the name finds the indexed table
	// xmins: the column holds single-precision floats (vector or
	// real[]) and the role may read the table's xmin, as the fast path
	// needs.
	xmins bool
}

// settingOptions are the knn options the probe's last columns become:
// pgvector's settings, and vecside.* over them.
var settingOptions = []string{"ef_search", "probes", "ef_search", "probes", "oversample"}

// knnOptions turns the probe's settings into knn options; a value that
// is not a number is not the sidecar's to judge: the statement passes
// through.
func knnOptions(values [][]byte) (string, bool) {
	opts := map[string]string{}
	for i, v := range values {
		if len(v) == 0 {
			continue
		}
		if _, err := strconv.ParseFloat(string(v), 64); err != nil {
			return "", false
		}
		opts[settingOptions[i]] = string(v)
	}
	var out []string
	for _, k := range []string{"ef_search", "probes", "oversample"} {
		if v, ok := opts[k]; ok {
			out = append(out, k+"="+v)
		}
	}
	return strings.Join(out, " "), true
}

// accelerateQuery answers a simple Query through the sidecar when it can
// prove the answer is PostgreSQL's own; handled is false when the
// message is to be passed through.
func (s *session) accelerateQuery(m message) (handled bool, err error) {
	if s.p.cfg.Sidecar == nil {
		return false, nil
	}
	sql := string(bytes.TrimSuffix(m.body, []byte{0}))
	if !mentionsDistance(sql) {
		return false, nil
	}
	q, reason := recognize(sql)
	switch {
	case q == nil && reason == "":
		return false, nil
	case q == nil:
	case !s.plain.Load():
		reason = "encoding"
	case q.params > 0 || q.vector.param > 0:
		reason = "parameter"
	case s.pending.Load() != 0 || s.batch:
		reason = "pipelined"
	case s.status.Load() == 'E':
		reason = "failed transaction"
	case sidecarResting(s.p):
		reason = "sidecar down"
	}
	if reason != "" {
		s.passed(reason)
		return false, nil
	}
	vec, err := pgvalue.ParseVector(q.vector.literal)
	if err != nil {
		s.passed("vector")
		return false, nil
	}
	ix, ok := s.p.cat.lookup(q.schema, q.table, q.column, q.metric)
	if !ok {
		s.passed("not indexed")
		return false, nil
	}
	// Nothing is owed (pending 0, no batch): every reply from now on
	// answers what the session sends.
	s.taken.Store(true)
	defer s.taken.Store(false)
	err = s.answer(q, ix, func() ([]float32, string) { return vec, "" }, nil)
	var pt passThrough
	if errors.As(err, &pt) {
		s.passed(pt.reason)
		return false, nil
	}
	if err != nil {
		return false, err
	}
	return true, nil
}

// passThrough is an answer given up before anything reached the client.
type passThrough struct{ reason string }

func (p passThrough) Error() string { return "pass through: " + p.reason }

// answer runs q restricted to the sidecar's candidates, widening while
// fewer than its LIMIT rows come back and the sidecar has more, and sends
// the client the last round's replies as PostgreSQL sent them. bd is the
// client's Bind of an extended-protocol statement, nil for a simple
// Query (whose replies are in text, with no BindComplete). Each round is
// one round trip ending with a Sync: outside a transaction block it is a
// statement of its own, as the client's would have been.
func (s *session) answer(q *query, ix Index, vector func() ([]float32, string), bd *binding) error {
	minLSN, fast, err := s.checkSession(q, ix)
	if err != nil {
		return err
	}
	fast = fast && ix.Exact && !q.readsVector()
	// Decoded once the probe has run: it knows pgvector's type OID.
	vec, reason := vector()
	if reason != "" {
		return passThrough{reason}
	}
	want := q.limit + q.offset
	if want > maxCandidates {
		return passThrough{"limit"}
	}
	// The client's parameters, then the candidates, then a literal
	// vector's text (recognize.go's restricted), then the fast path's
	// xids, distances and timeline, all but the client's of types
	// PostgreSQL infers.
	var types []uint32
	var literal [][]byte
	if bd != nil {
		types = append(types, bd.types...)
	}
	types = append(types, 0)
	if q.vectorParam() != 0 {
		types = append(types, 0)
		literal = [][]byte{[]byte(q.vector.literal)}
	}
	k := int(want)
	var res result
	var asked []string
	var sql, name string
	var parse *pgproto3.Parse // sent in the first round, if this session has not parsed sql yet
	for round := 0; ; round++ {
		cands, src, err := s.candidates(heapfetch.Request{Index: ix.Name, Vector: vec, K: k, MinLSN: minLSN, Options: s.options, AlwaysFetch: !fast})
		if err != nil {
			return err
		}
		if round == 0 {
			// The sidecar's xids count only on its source: later rounds
			// bind the same statement, with no xid where none came.
			fast = fast && src.SystemID == s.systemID &&
				slices.ContainsFunc(cands, func(c heapfetch.Candidate) bool { return c.Xid != 0 })
			if fast {
				sql, err = q.fastRestricted(ix.Key)
				types = append(types, 0, 0, 0)
			} else {
				sql, err = q.restricted(ix.Key)
			}
			if err != nil {
				return passThrough{"deparse"}
			}
			name, parse = s.own.prepare(sql, types)
			s.sendUp(s.own.closes()...)
			if bd != nil && bd.check {
				s.sendUp(&pgproto3.Describe{ObjectType: 'S', Name: bd.bind.PreparedStatement})
			}
			if parse != nil {
				s.sendUp(parse)
			}
		}
		params := append([][]byte{keyArray(cands)}, literal...)
		if fast {
			params = append(params, xidArray(cands), distanceArray(cands), strconv.AppendInt(nil, src.Timeline, 10))
		}
		if bd != nil {
			s.sendUp(bd.restrictedBind(name, params))
		} else {
			s.sendUp(&pgproto3.Bind{PreparedStatement: name, ParameterFormatCodes: []int16{0}, Parameters: params})
		}
		if round == 0 {
			s.sendUp(&pgproto3.Describe{ObjectType: 'P'})
		}
		s.sendUp(&pgproto3.Execute{}, &pgproto3.Sync{})
		if err := s.u.flush(); err != nil {
			return err
		}
		if round == 0 && bd != nil && bd.check {
			if gone, err := s.checked(); err != nil || gone != nil {
				if parse != nil {
					s.own.drop(statementKey(sql, types)) // skipped with the rest
				}
				if err != nil {
					return err
				}
				return s.toClient(gone...)
			}
		}
		if err := s.collect(&res); err != nil {
			return err
		}
		if round == 0 && res.err != nil && parse != nil {
			s.own.drop(statementKey(sql, types)) // its Parse may be what failed
		}
		rows := int64(res.rows())
		asked = append(asked, fmt.Sprintf("%d→%d→%d", k, len(cands), rows))
		exhausted := len(cands) < k // see heapfetch's widening
		if res.err != nil || res.tooLarge || rows >= q.limit || exhausted || round+1 == maxRounds || k >= maxCandidates {
			break
		}
		// Twice as many as the rows that passed so far say are needed, at
		// least twice as many as before.
		matched := 0.5
		if rows > 0 {
			matched = float64(rows + q.offset)
		}
		k = int(min(float64(maxCandidates), max(float64(2*k), 2*float64(want)*float64(k)/matched)))
	}
	if res.tooLarge {
		return passThrough{"result too large"}
	}
	var out []message
	if bd != nil {
		out = append(out, bd.owed...)
	}
	for _, m := range res.msgs {
		if bd == nil && m.typ == '2' || bd != nil && !bd.describe && m.typ == 'T' {
			continue
		}
		out = append(out, m)
	}
	if res.err != nil {
		// PostgreSQL's error for the restricted statement: a position
		// in its text would point at the wrong place in the client's.
		res.err.Position = 0
		b, _ := res.err.Encode(nil)
		out = append(out, message{b[0], b[5:]})
	}
	s.p.stats.accelerated.Add(1)
	s.lastPlan = fmt.Sprintf("accelerated: index %s; rounds (candidates asked→given→rows) %s", ix.Name, strings.Join(asked, ", "))
	if fast {
		s.p.stats.fastPath.Add(1)
		s.lastPlan += "; ordered by the sidecar's distances where xmin is its xid"
	}
	if s.options != "" {
		s.lastPlan += "; options " + s.options
	}
	if minLSN != "" {
		s.lastPlan += "; waited for " + minLSN
	}
	return s.toClient(append(out, res.ready)...)
}

// checked reads the replies to the Describe of the client's statement
// that went first in an answer's round: nil when it exists, else what
// the client is owed, PostgreSQL's error and the ReadyForQuery (the rest
// of the round was skipped).
func (s *session) checked() ([]message, error) {
	for {
		m, err := s.reply()
		if err != nil {
			return nil, err
		}
		switch m.typ {
		case 'T', 'n':
			return nil, nil
		case 'E':
			z, err := s.until('Z')
			if err != nil {
				return nil, err
			}
			s.status.Store(uint32(z.body[0]))
			return []message{m, z}, nil
		}
	}
}

// checkSession runs the probe when the session has passed a statement
// through since the last one, or names the table in a way not checked
// yet, and returns the LSN the sidecar must have applied and whether
// the fast path may be taken: the indexed column holds single-precision
// floats, the role may read xmin, and the session knows its server's
// system identifier.
func (s *session) checkSession(q *query, ix Index) (minLSN string, fast bool, err error) {
	tables := [3]string{pgx.Identifier{q.schema, q.table}.Sanitize(), pgx.Identifier{ix.Schema, ix.Table}.Sanitize(), ix.Column}
	if q.schema == "" {
		tables[0] = pgx.Identifier{q.table}.Sanitize()
	}
	if r, known := s.resolved[tables]; !s.dirty && known {
		if !r.found {
			return "", false, passThrough{"search_path"}
		}
		return "", r.xmins && s.controlOK && s.systemID != 0, nil
	}
	// Named, not to drop the client's unnamed statement.
	row, z, err := s.ownRow(probeSQL, probeTypes, [][]byte{[]byte(tables[0]), []byte(tables[1]), []byte(tables[2])}, 8+len(settingOptions))
	if err != nil {
		return "", false, err
	}
	if row == nil {
		return "", false, passThrough{"probe failed"}
	}
	wrote, isolation, lsn := string(row[0]) == "t", string(row[1]), string(row[2])
	r := resolution{found: string(row[3]) == "t"}
	if oid, err := strconv.ParseUint(string(row[4]), 10, 32); err == nil {
		s.vectorOID = uint32(oid)
	}
	options, ok := knnOptions(row[5 : 5+len(settingOptions)])
	last := row[5+len(settingOptions):]
	colType, _ := strconv.ParseUint(string(last[0]), 10, 32)
	r.xmins = (colType == float4ArrayOID || colType != 0 && uint32(colType) == s.vectorOID) && string(last[1]) == "t"
	s.controlOK = string(last[2]) == "t"
	inBlock := z != 'I'
	switch {
	case inBlock && wrote:
		return "", false, passThrough{"wrote in transaction"}
	case inBlock && isolation != "read committed":
		return "", false, passThrough{"isolation"}
	case !ok:
		return "", false, passThrough{"setting"}
	}
	s.options = options
	s.dirty = false
	if s.resolved == nil || len(s.resolved) > 64 {
		s.resolved = map[[3]string]resolution{}
	}
	s.resolved[tables] = r
	if !r.found {
		return "", false, passThrough{"search_path"}
	}
	if s.controlOK && s.systemID == 0 && r.xmins && ix.Exact {
		id, _, err := s.ownRow(systemIDSQL, nil, nil, 1)
		if err != nil {
			return "", false, err
		}
		if id != nil {
			s.systemID, _ = strconv.ParseInt(string(id[0]), 10, 64)
		}
	}
	return lsn, r.xmins && s.controlOK && s.systemID != 0, nil
}

// ownRow runs one of the session's own statements, which return one row
// of n columns and cannot fail, in a round trip of its own, and returns
// the row (nil if it failed after all) and the ReadyForQuery's status.
func (s *session) ownRow(sql string, types []uint32, params [][]byte, n int) (row [][]byte, status byte, err error) {
	name, parse := s.own.prepare(sql, types)
	s.sendUp(s.own.closes()...)
	if parse != nil {
		s.sendUp(parse)
	}
	s.sendUp(&pgproto3.Bind{PreparedStatement: name, Parameters: params}, &pgproto3.Execute{}, &pgproto3.Sync{})
	if err := s.u.flush(); err != nil {
		return nil, 0, err
	}
	failed := false
	for {
		m, err := s.reply()
		if err != nil {
			return nil, 0, err
		}
		switch m.typ {
		case 'D':
			var dr pgproto3.DataRow
			if err := dr.Decode(m.body); err != nil || len(dr.Values) != n {
				return nil, 0, fmt.Errorf("proxy: unexpected row from the session's own statement")
			}
			for _, v := range dr.Values {
				row = append(row, bytes.Clone(v))
			}
		case 'E':
			failed = true
		case 'Z':
			s.status.Store(uint32(m.body[0]))
			if failed || row == nil {
				s.own.drop(statementKey(sql, types))
				return nil, m.body[0], nil
			}
			return row, m.body[0], nil
		}
	}
}

// candidates asks the sidecar; its failure passes the statement through
// and, unless the statement caused it, keeps the next ones from asking
// for a while.
func (s *session) candidates(req heapfetch.Request) ([]heapfetch.Candidate, heapfetch.Source, error) {
	ctx, cancel := context.WithTimeout(context.Background(), sidecarTimeout)
	defer cancel()
	cands, src, err := s.p.cfg.Sidecar.Candidates(ctx, req)
	if err != nil {
		if !statementFault(err) {
			s.p.sidecarDown.Store(time.Now().Add(sidecarBackoff).UnixNano())
		}
		s.p.log.Debug("proxy: the sidecar did not answer; passing through", "index", req.Index, "err", err)
		return nil, heapfetch.Source{}, passThrough{"sidecar"}
	}
	return cands, src, nil
}

// result is one round's replies to the client's eyes: RowDescription,
// DataRows and CommandComplete, or PostgreSQL's error; and the Sync's
// ReadyForQuery.
type result struct {
	desc     message
	msgs     []message
	err      *pgproto3.ErrorResponse
	tooLarge bool
	ready    message
}

func (r *result) rows() (n int) {
	for _, m := range r.msgs {
		if m.typ == 'D' {
			n++
		}
	}
	return n
}

// collect reads one round's replies, up to its ReadyForQuery.
func (s *session) collect(r *result) error {
	r.msgs = r.msgs[:0]
	if r.desc.typ != 0 {
		r.msgs = append(r.msgs, r.desc)
	}
	held := 0
	for {
		m, err := s.reply()
		if err != nil {
			return err
		}
		if held += len(m.body); held > maxResult {
			r.tooLarge = true
			r.msgs = r.msgs[:0]
		}
		switch m.typ {
		case 'T':
			r.desc = m
			r.msgs = append(r.msgs, m)
		case '2', 'D', 'C':
			if !r.tooLarge {
				r.msgs = append(r.msgs, m)
			}
		case 'E':
			r.err = &pgproto3.ErrorResponse{}
			if err := r.err.Decode(m.body); err != nil {
				return err
			}
		case tooLarge:
			r.tooLarge = true
		case 'Z':
			r.ready = m
			s.status.Store(uint32(m.body[0]))
			return nil
		}
	}
}

// until reads replies up to one of type typ.
func (s *session) until(typ byte) (message, error) {
	for {
		m, err := s.reply()
		if err != nil || m.typ == typ {
			return m, err
		}
	}
}

// reply is PostgreSQL's next reply while the session has taken them.
func (s *session) reply() (message, error) {
	if s.replies == nil {
		return s.readReply()
	}
	m, ok := <-s.replies
	if !ok {
		return message{}, errors.New("proxy: the server closed the connection")
	}
	return m, nil
}

// readReply reads PostgreSQL's next reply for a session the loop handed
// over, which reads its replies itself; the asynchronous ones go on to
// the client as they come.
func (s *session) readReply() (message, error) {
	for {
		typ, n, err := s.u.header()
		if err != nil {
			return message{}, err
		}
		if !asynchronous(typ) {
			return s.takeReply(typ, n)
		}
		if err := s.relayReply(typ, n); err != nil {
			return message{}, err
		}
	}
}

// sendUp buffers messages of the session's own for PostgreSQL.
func (s *session) sendUp(msgs ...pgproto3.FrontendMessage) {
	for _, m := range msgs {
		b, _ := m.Encode(nil)
		s.u.w.Write(b)
	}
}

// Array literals of the candidates' keys (each element quoted), xids
// (NULL where none came) and distances (each the shortest form that
// reads back the same double), bound as the restricted statement's
// parameters.
func keyArray(cands []heapfetch.Candidate) []byte {
	return arrayOf(cands, func(b []byte, c heapfetch.Candidate) []byte {
		b = append(b, '"')
		for _, c := range []byte(c.Key) {
			if c == '"' || c == '\\' {
				b = append(b, '\\')
			}
			b = append(b, c)
		}
		return append(b, '"')
	})
}

func xidArray(cands []heapfetch.Candidate) []byte {
	return arrayOf(cands, func(b []byte, c heapfetch.Candidate) []byte {
		if c.Xid == 0 {
			return append(b, "NULL"...)
		}
		return strconv.AppendInt(b, c.Xid, 10)
	})
}

func distanceArray(cands []heapfetch.Candidate) []byte {
	return arrayOf(cands, func(b []byte, c heapfetch.Candidate) []byte {
		return strconv.AppendFloat(b, c.Distance, 'g', -1, 64)
	})
}

// arrayOf is an array literal of an element per candidate, as elem
// appends it.
func arrayOf(cands []heapfetch.Candidate, elem func([]byte, heapfetch.Candidate) []byte) []byte {
	b := []byte{'{'}
	for i, c := range cands {
		if i > 0 {
			b = append(b, ',')
		}
		b = elem(b, c)
	}
	return append(b, '}')
}
