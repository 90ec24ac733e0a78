//go:build cgo

package proxy

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"

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
	// maxResult bounds the bytes of one round's replies the session
	// holds; a larger result passes the statement through.
	maxResult = 16 << 20
	// sidecarBackoff is how long statements pass through without asking
	// after the sidecar failed or stalled, so that a dead sidecar costs
	// one attempt, not one per statement.
	sidecarBackoff = time.Second
	// maxQueryComponent bounds the query vector's components: past it a
	// distance may overflow single precision (pgvector's) to infinity,
	// and rows that tie at infinity come in PostgreSQL's order, not the
	// sidecar's.
	maxQueryComponent = 1e15
	// maxParameters is the most parameters a statement may have, as a
	// Bind message counts them.
	maxParameters = 65535
)

// probeSQL tells, in one round trip, what the session's earlier
// statements may have changed, for the table of OID $1, its indexed
// column $2 and key $3. It is built of functions and catalog reads that
// cannot fail whatever the role, the search_path or the table's fate (an
// OID of a table dropped since reads as nothing), so that running it
// inside the client's transaction block changes nothing there. In order:
//
//   - whether the transaction block has written (then the sidecar cannot
//     see its rows), its isolation (a snapshot older than the sidecar's
//     would be answered with newer candidates);
//   - the WAL position its commits so far are below (read-your-writes:
//     the sidecar waits for it; the flush position, which a commit waits
//     for; with synchronous_commit off, the insert position, past a
//     commit not yet written, which the WAL writer flushes within
//     wal_writer_delay, less a page header: at a page's start it is past
//     the header, which no record ends at until the next is written, so
//     a wait for it would last until then; on a hot standby, what it has
//     replayed, so that no row the standby shows is missing from the
//     candidates, as heapfetch asks);
//   - the database, which an answer must be of the sidecar's, and the
//     schemas the search_path finds, which choose among indexes of
//     tables of one name in several schemas;
//   - the OID of pgvector's vector type in this database, 0 without it: a
//     vector parameter in binary comes with that OID;
//   - the settings the sidecar's search takes (settingOptions), each only
//     if something set it (a session's SET, ALTER ROLE or DATABASE, the
//     configuration file): pgvector's defaults, which appear once its
//     library is loaded, are not the session's choice, and the index's
//     calibrated settings stand (settingsSQLFor);
//   - statement_timeout, which bounds the wait for candidates;
//   - for the fast path, the indexed column's type and whether the role
//     may read the table's xmin (SELECT on the table, where the
//     statement itself may need it on some columns only); whether the
//     role may read the key column, which the restricted statement
//     names; whether it may read the control file (pg_control_system and
//     pg_control_checkpoint, which the fast statement names);
//   - whether other tables inherit from this one (not partitions, which
//     the sidecar follows through their root): their rows are the
//     statement's too, and not the sidecar's;
//   - the table's column names, system columns included: a qualified
//     name that is not one of them calls a function of the row.
var probeSQL = `SELECT pg_catalog.pg_current_xact_id_if_assigned() IS NOT NULL, pg_catalog.current_setting('transaction_isolation'),
CASE WHEN pg_catalog.pg_is_in_recovery() THEN coalesce(pg_catalog.pg_last_wal_replay_lsn()::text, '')
  WHEN pg_catalog.current_setting('synchronous_commit') = 'off' THEN (SELECT (l - CASE WHEN o.file_offset = 40 THEN 40
    WHEN o.file_offset % pg_catalog.current_setting('wal_block_size')::int = 24 THEN 24 ELSE 0 END)::text
    FROM pg_catalog.pg_current_wal_insert_lsn() l, pg_catalog.pg_walfile_name_offset(l) o)
  ELSE pg_catalog.pg_current_wal_flush_lsn()::text END,
pg_catalog.current_database(), pg_catalog.to_json(pg_catalog.current_schemas(true)),
coalesce((SELECT t.oid FROM pg_catalog.pg_type t JOIN pg_catalog.pg_extension e ON e.extnamespace = t.typnamespace
  WHERE e.extname = 'vector' AND t.typname = 'vector'), 0),
` + settingsSQL + `,
pg_catalog.current_setting('statement_timeout'),
coalesce((SELECT a.atttypid FROM pg_catalog.pg_attribute a WHERE a.attrelid = $1::oid AND a.attname = $2 AND NOT a.attisdropped), 0),
coalesce(pg_catalog.has_table_privilege($1::oid, 'SELECT'), false),
coalesce(pg_catalog.has_column_privilege($1::oid,
  (SELECT a.attnum FROM pg_catalog.pg_attribute a WHERE a.attrelid = $1::oid AND a.attname = $3 AND NOT a.attisdropped), 'SELECT'), false),
pg_catalog.has_function_privilege('pg_catalog.pg_control_system()', 'EXECUTE') AND pg_catalog.has_function_privilege('pg_catalog.pg_control_checkpoint()', 'EXECUTE'),
coalesce((SELECT c.relhassubclass AND c.relkind <> 'p' FROM pg_catalog.pg_class c WHERE c.oid = $1::oid), false),
(SELECT pg_catalog.json_agg(a.attname) FROM pg_catalog.pg_attribute a WHERE a.attrelid = $1::oid AND NOT a.attisdropped)`

// probeColumns is how many columns probeSQL has.
var probeColumns = 6 + len(settingOptions) + 8

// settingNames are the settings the probe reads, in settingOptions'
// order: pgvector's, then vecside's, which take precedence.
var settingNames = []string{"hnsw.ef_search", "ivfflat.probes", "vecside.ef_search", "vecside.probes", "vecside.oversample"}

// settingOptions are the knn options settingNames become.
var settingOptions = []string{"ef_search", "probes", "ef_search", "probes", "oversample"}

// settingsSQL reads each of settingNames where something set it.
var settingsSQL = settingsSQLFor(settingNames)

// settingsSQLFor is the probe's columns reading names: each one's value,
// then the JSON list of those at their default. A setting of a library
// not loaded is a placeholder, absent from pg_settings, and only has a
// value if something set it; a loaded one may be at its default, which
// only pg_settings tells. Reading it builds every setting's row: it is
// read once, and only when one of names has a value, through its
// function, as the view costs more to plan than the function to run.
func settingsSQLFor(names []string) string {
	var values, quoted []string
	for _, name := range names {
		values = append(values, fmt.Sprintf("pg_catalog.current_setting('%s', true)", name))
		quoted = append(quoted, "'"+name+"'")
	}
	return strings.Join(values, ", ") + fmt.Sprintf(`,
CASE WHEN pg_catalog.num_nonnulls(%s) > 0 THEN (SELECT pg_catalog.json_agg(name) FROM pg_catalog.pg_show_all_settings()
  WHERE name IN (%s) AND source = 'default') END`, strings.Join(values, ", "), strings.Join(quoted, ", "))
}

// setValues is the values settingsSQLFor read for names, nil for each
// at its default.
func setValues(names []string, row [][]byte) [][]byte {
	var defaults []string
	json.Unmarshal(row[len(names)], &defaults) // NULL: none has a value
	values := slices.Clone(row[:len(names)])
	for i, name := range names {
		if slices.Contains(defaults, name) {
			values[i] = nil
		}
	}
	return values
}

// parseDuration reads a time setting as SHOW shows it: a number of
// milliseconds, or with one of PostgreSQL's units.
func parseDuration(v string) (time.Duration, bool) {
	units := []struct {
		suffix string
		unit   time.Duration
	}{{"ms", time.Millisecond}, {"min", time.Minute}, {"s", time.Second}, {"h", time.Hour}, {"d", 24 * time.Hour}}
	unit := time.Millisecond
	for _, u := range units {
		if strings.HasSuffix(v, u.suffix) {
			v, unit = strings.TrimSpace(strings.TrimSuffix(v, u.suffix)), u.unit
			break
		}
	}
	n, err := strconv.ParseInt(v, 10, 64)
	if err != nil || n < 0 || n > int64(math.MaxInt64/unit) {
		return 0, false
	}
	return time.Duration(n) * unit, true
}

// systemIDSQL reads the server's system identifier, once per session,
// where the probe found the role may.
const systemIDSQL = `SELECT system_identifier FROM pg_catalog.pg_control_system()`

// float4ArrayOID is real[]'s type: with pgvector's vector, the column
// types whose values the sidecar holds exactly (store=float), so that its
// distances are the ones PostgreSQL computes.
const float4ArrayOID = 1021

// tableFacts is what a probe found of the indexed table, for the role.
type tableFacts struct {
	// xmins: the column holds single-precision floats (vector or
	// real[]) and the role may read the table's xmin, as the fast path
	// needs.
	xmins bool
	key   bool // the role may read the key column
	// inherited: other tables inherit from it, whose rows the statement
	// reads and the sidecar does not have.
	inherited bool
	columns   map[string]bool // the table's columns' names, system columns included
}

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
	q, reason, done := s.recognize(sql)
	defer done()
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
	ix, ok := s.p.cat.lookup(q.schema, q.table, q.column, q.metric, s.schemas)
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

// wants is how many candidates a statement asks for first: LIMIT +
// OFFSET, and with an OFFSET as many again, so that a candidate the
// index misses among the rows skipped does not shift the page; "" or why
// the sidecar cannot cover it.
func wants(q *query) (int, string) {
	if q.limit > maxCandidates || q.offset > maxCandidates {
		return 0, "limit"
	}
	want := q.limit + q.offset
	if q.offset > 0 {
		want *= 2
	}
	if want > maxCandidates {
		return 0, "offset"
	}
	return int(want), ""
}

// vectorFault says why the sidecar's order of distances to vec cannot be
// PostgreSQL's, "" if it can: a component not finite or so large that a
// distance may overflow, or, for cosine, a zero vector, to which every
// distance is NaN.
func vectorFault(vec []float32, metric string) string {
	zero := true
	for _, x := range vec {
		if math.IsNaN(float64(x)) || math.Abs(float64(x)) > maxQueryComponent {
			return "vector value"
		}
		zero = zero && x == 0
	}
	if zero && metric == "cosine" {
		return "zero vector"
	}
	return ""
}

// answer runs q restricted to the sidecar's candidates, widening while
// fewer than its LIMIT rows come back and the sidecar has more, and sends
// the client the last round's replies as PostgreSQL sent them; when even
// then fewer rows come back than LIMIT, rows the sidecar does not have
// (a NULL vector, a row it has not applied yet) may belong to the
// answer, and the statement passes through. bd is the client's Bind of
// an extended-protocol statement, nil for a simple Query (whose replies
// are in text, with no BindComplete). Each round is one round trip
// ending with a Sync: outside a transaction block it is a statement of
// its own, as the client's would have been.
func (s *session) answer(q *query, ix Index, vector func() ([]float32, string), bd *binding) error {
	sess, err := s.checkSession(q, ix)
	if again, ok := err.(repick); ok {
		ix = again.ix
		sess, err = s.checkSession(q, ix)
	}
	if err != nil {
		return err
	}
	fast := sess.fast && ix.Exact && !q.byTarget && !q.readsVector()
	// Decoded once the probe has run: it knows pgvector's type OID.
	vec, reason := vector()
	if reason == "" {
		reason = vectorFault(vec, q.metric)
	}
	if reason != "" {
		return passThrough{reason}
	}
	k, reason := wants(q)
	if q.params+5 > maxParameters { // the candidates, a literal vector, the fast path's three
		reason = "parameters"
	}
	if reason != "" {
		return passThrough{reason}
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
	var res result
	var asked []string
	var sql string
	for round := 0; ; round++ {
		cands, src, err := s.candidates(heapfetch.Request{Index: ix.Name, Vector: vec, K: k, MinLSN: sess.minLSN, Options: s.options, AlwaysFetch: !fast}, sess.timeout)
		if err != nil {
			return err
		}
		if round == 0 {
			// The sidecar's xids count only on its source: later rounds
			// run the same statement, with no xid where none came.
			fast = fast && src.SystemID == s.systemID &&
				slices.ContainsFunc(cands, func(c heapfetch.Candidate) bool { return c.Xid != 0 })
			if fast {
				sql, err = q.fastRestricted(ix.Key, ix.TableOID)
				types = append(types, 0, 0, 0)
			} else {
				sql, err = q.restricted(ix.Key, ix.TableOID)
			}
			if err != nil {
				return passThrough{"deparse"}
			}
			if bd != nil && bd.check {
				s.sendUp(&pgproto3.Describe{ObjectType: 'S', Name: bd.bind.PreparedStatement})
			}
		}
		params := append([][]byte{keyArray(cands)}, literal...)
		if fast {
			params = append(params, xidArray(cands), distanceArray(cands), strconv.AppendInt(nil, src.Timeline, 10))
		}
		// The session's own statement, prepared and closed in this round
		// trip: nothing of it is left for the client to see, and
		// PostgreSQL analyses the statement again, as it would the
		// client's (its search_path, its constants, its tables' columns
		// now).
		s.sendUp(&pgproto3.Parse{Name: s.ownName, Query: sql, ParameterOIDs: types})
		if bd != nil {
			s.sendUp(bd.restrictedBind(s.ownName, params))
		} else {
			s.sendUp(&pgproto3.Bind{PreparedStatement: s.ownName, ParameterFormatCodes: []int16{0}, Parameters: params})
		}
		s.sendUp(&pgproto3.Describe{ObjectType: 'P'}, &pgproto3.Execute{}, &pgproto3.Close{ObjectType: 'S', Name: s.ownName}, &pgproto3.Sync{})
		if err := s.u.flush(); err != nil {
			return err
		}
		if round == 0 && bd != nil && bd.check {
			if gone, err := s.checked(); err != nil || gone != nil {
				if err != nil {
					return err
				}
				return s.toClient(gone...)
			}
		}
		if err := s.collect(&res); err != nil {
			return err
		}
		if res.err != nil {
			// Its Close was skipped with the rest of the round.
			if err := s.closeOwn(&res); err != nil {
				return err
			}
		}
		rows := int64(res.rows())
		asked = append(asked, fmt.Sprintf("%d→%d", k, rows))
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
		k = int(min(float64(maxCandidates), max(float64(2*k), 2*float64(q.limit+q.offset)*float64(k)/matched)))
	}
	switch {
	case res.tooLarge:
		return passThrough{"result too large"}
	case res.err == nil && int64(res.rows()) < q.limit:
		return passThrough{"too few rows"}
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
	s.p.stats.accelerated.Add(1)
	s.lastPlan = "accelerated: index " + ix.Name
	if res.err != nil {
		// PostgreSQL's error for the restricted statement: a position
		// in its text would point at the wrong place in the client's.
		// What the rounds found is not said: the client's statement
		// failed.
		res.err.Position = 0
		b, _ := res.err.Encode(nil)
		out = append(out, message{b[0], b[5:]})
		s.lastPlan += "; the statement failed"
		return s.toClient(append(out, res.ready)...)
	}
	s.lastPlan += "; rounds (candidates asked→rows) " + strings.Join(asked, ", ")
	if fast {
		s.p.stats.fastPath.Add(1)
		s.lastPlan += "; ordered by the sidecar's distances where xmin is its xid"
	}
	if s.options != "" {
		s.lastPlan += "; options " + s.options
	}
	if sess.minLSN != "" {
		s.lastPlan += "; waited for " + sess.minLSN
	}
	return s.toClient(append(out, res.ready)...)
}

// closeOwn closes the session's own statement after a round that failed
// (its Close skipped with the rest), in a round trip of its own; the
// ReadyForQuery the client gets is that one's.
func (s *session) closeOwn(res *result) error {
	z, err := s.sync(&pgproto3.Close{ObjectType: 'S', Name: s.ownName})
	res.ready = z
	return err
}

// sync sends msgs and a Sync and reads the replies up to its
// ReadyForQuery, which it returns.
func (s *session) sync(msgs ...pgproto3.FrontendMessage) (message, error) {
	s.sendUp(append(msgs, &pgproto3.Sync{})...)
	if err := s.u.flush(); err != nil {
		return message{}, err
	}
	z, err := s.until('Z')
	if err != nil {
		return message{}, err
	}
	s.status.Store(uint32(z.body[0]))
	return z, nil
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

// repick: the probe read a search_path on which another index's table
// comes first under the statement's name.
type repick struct{ ix Index }

func (r repick) Error() string { return "another index: " + r.ix.Name }

// sessionFacts is what an answer takes from the session's probe.
type sessionFacts struct {
	minLSN string // the LSN the sidecar must have applied
	// fast: the fast path may be taken: the indexed column holds
	// single-precision floats, the role may read xmin, and the session
	// knows its server's system identifier.
	fast    bool
	timeout time.Duration // statement_timeout, 0 if none
}

// checkSession runs the probe when the session has passed a statement
// through since the last one, or has not probed this index's table yet,
// and says whether the statement may be answered for this session.
func (s *session) checkSession(q *query, ix Index) (sessionFacts, error) {
	var f sessionFacts
	facts, known := s.tables[ix.TableOID]
	if s.dirty || !known {
		var err error
		if facts, f.minLSN, err = s.probe(ix); err != nil {
			return f, err
		}
		if better, ok := s.p.cat.lookup(q.schema, q.table, q.column, q.metric, s.schemas); ok && better.TableOID != ix.TableOID {
			return f, repick{better}
		}
	}
	switch {
	case ix.TableOID == 0 || ix.Database == "":
		return f, passThrough{"sidecar too old"}
	case s.database != ix.Database:
		return f, passThrough{"another database"}
	case s.systemID != 0 && ix.SystemID != 0 && s.systemID != ix.SystemID:
		return f, passThrough{"another server"}
	case !facts.key:
		return f, passThrough{"key privilege"}
	case facts.inherited && !q.only:
		return f, passThrough{"inheritance"}
	}
	for _, name := range q.qualified {
		if !facts.columns[name] {
			return f, passThrough{"attribute notation"}
		}
	}
	f.fast = facts.xmins && s.controlOK && s.systemID != 0
	f.timeout = s.timeout
	return f, nil
}

// probe runs probeSQL for ix's table and notes what it found; minLSN is
// the LSN the sidecar must have applied.
func (s *session) probe(ix Index) (tableFacts, string, error) {
	var t tableFacts
	oid := strconv.FormatUint(uint64(ix.TableOID), 10)
	row, z, err := s.ownRow(probeSQL, []uint32{25, 25, 25}, [][]byte{[]byte(oid), []byte(ix.Column), []byte(ix.Key)}, probeColumns)
	if err != nil {
		return t, "", err
	}
	if row == nil {
		return t, "", passThrough{"probe failed"}
	}
	wrote, isolation, lsn := string(row[0]) == "t", string(row[1]), string(row[2])
	s.database = string(row[3])
	s.schemas = nil
	json.Unmarshal(row[4], &s.schemas)
	if oid, err := strconv.ParseUint(string(row[5]), 10, 32); err == nil {
		s.vectorOID = uint32(oid)
	}
	options, ok := knnOptions(setValues(settingNames, row[6:]))
	last := row[6+len(settingNames)+1:]
	s.timeout, _ = parseDuration(string(last[0]))
	colType, _ := strconv.ParseUint(string(last[1]), 10, 32)
	t.xmins = (colType == float4ArrayOID || colType != 0 && uint32(colType) == s.vectorOID) && string(last[2]) == "t"
	t.key = string(last[3]) == "t"
	s.controlOK = string(last[4]) == "t"
	t.inherited = string(last[5]) == "t"
	t.columns = map[string]bool{}
	var names []string
	json.Unmarshal(last[6], &names) // NULL: the table is gone, and has no columns
	for _, n := range names {
		t.columns[n] = true
	}
	inBlock := z != 'I'
	switch {
	case inBlock && wrote:
		return t, "", passThrough{"wrote in transaction"}
	case inBlock && isolation != "read committed":
		return t, "", passThrough{"isolation"}
	case !ok:
		return t, "", passThrough{"setting"}
	}
	s.options = options
	s.dirty = false
	if s.tables == nil || len(s.tables) > 64 {
		s.tables = map[uint32]tableFacts{}
	}
	s.tables[ix.TableOID] = t
	if s.controlOK && s.systemID == 0 {
		id, _, err := s.ownRow(systemIDSQL, nil, nil, 1)
		if err != nil {
			return t, "", err
		}
		if id != nil {
			s.systemID, _ = strconv.ParseInt(string(id[0]), 10, 64)
		}
	}
	return t, lsn, nil
}

// ownRow runs one of the session's own statements, which return one row
// of n columns and cannot fail, in a round trip of its own, prepared and
// closed there, and returns the row (nil if it failed after all) and the
// ReadyForQuery's status.
func (s *session) ownRow(sql string, types []uint32, params [][]byte, n int) (row [][]byte, status byte, err error) {
	s.sendUp(&pgproto3.Parse{Name: s.ownName, Query: sql, ParameterOIDs: types},
		&pgproto3.Bind{PreparedStatement: s.ownName, Parameters: params}, &pgproto3.Execute{},
		&pgproto3.Close{ObjectType: 'S', Name: s.ownName}, &pgproto3.Sync{})
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
			if failed {
				var res result
				if err := s.closeOwn(&res); err != nil {
					return nil, 0, err
				}
				return nil, res.ready.body[0], nil
			}
			return row, m.body[0], nil
		}
	}
}

// candidates asks the sidecar, waiting at most Config.CandidateWait,
// less if the session's statement_timeout is shorter, and no longer than
// until the client cancels (a CancelRequest for the session); then, or
// when the sidecar fails, the statement passes through. Only the
// sidecar's own trouble (it is unreachable, or stalled past the wait)
// keeps other statements from asking for a while; a statement's fault (a
// wrong dimension) or its session's (a cancel, a short
// statement_timeout, a read-your-writes wait for WAL not yet written,
// as with synchronous_commit off) does not.
func (s *session) candidates(req heapfetch.Request, statementTimeout time.Duration) ([]heapfetch.Candidate, heapfetch.Source, error) {
	wait := s.p.wait
	own := statementTimeout > 0 && statementTimeout < wait
	if own {
		wait = statementTimeout
	}
	ctx, cancel := context.WithTimeout(context.Background(), wait)
	defer cancel()
	s.waiting.Store(&cancel)
	defer s.waiting.Store(nil)
	cands, src, err := s.p.cfg.Sidecar.Candidates(ctx, req)
	if err != nil {
		cancelled, fault := errors.Is(ctx.Err(), context.Canceled), statementFault(err)
		trouble := !fault && !cancelled && !own
		if trouble && req.MinLSN == "" {
			s.p.sidecarDown.Store(time.Now().Add(sidecarBackoff).UnixNano())
		}
		if trouble && !s.p.sidecarTrouble.Swap(true) {
			s.p.log.Warn("proxy: the sidecar did not answer; statements pass through", "index", req.Index, "err", err)
		}
		s.p.log.Debug("proxy: the sidecar did not answer; passing through", "index", req.Index, "err", err)
		switch {
		case cancelled:
			return nil, heapfetch.Source{}, passThrough{"cancelled"}
		case fault:
			// The statement's own fault: a vector of another dimension, one
			// the index cannot measure.
			return nil, heapfetch.Source{}, passThrough{"refused by the sidecar"}
		case own:
			return nil, heapfetch.Source{}, passThrough{"statement_timeout"}
		}
		return nil, heapfetch.Source{}, passThrough{"sidecar"}
	}
	if s.p.sidecarTrouble.Load() && s.p.sidecarTrouble.Swap(false) {
		s.p.log.Info("proxy: the sidecar answers again", "index", req.Index)
	}
	return cands, src, nil
}

// interrupt ends the session's wait for candidates, if it waits: its
// client cancelled the statement.
func (s *session) interrupt() {
	if c := s.waiting.Load(); c != nil {
		(*c)()
	}
}

// result is one round's replies to the client's eyes: BindComplete,
// RowDescription (each round describes its own statement), DataRows and
// CommandComplete, or PostgreSQL's error; and the Sync's ReadyForQuery.
type result struct {
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
		case '2', 'T', 'D', 'C':
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
