//go:build cgo

package proxy

import (
	"encoding/json"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"
)

// sessionProbe is what the session's probes found: what its earlier
// statements may have changed (its database, search_path, settings,
// statement_timeout, the indexed tables as its role sees them), read
// again after any statement passed through (dirty). An answer asks
// check first.
type sessionProbe struct {
	// dirty: a statement passed through since the last probe, so the
	// session may have written or changed its settings.
	dirty    bool
	tables   map[uint32]tableFacts // what the last probes found of the indexed tables, by OID
	options  string                // knn options from the session's settings, as the last probe read them
	timeout  time.Duration         // statement_timeout, as the last probe read it
	database string                // the session's database, as the probes read it
	schemas  []string              // the schemas its search_path finds, as the last probe read them
	// pgvector is pgvector's types in the session's database, as the last
	// probe read them (0: not installed, or not probed yet).
	pgvector pgvectorTypes
	// systemID is the server's system identifier, read once a probe
	// found the session's role may read the control file (0 until then):
	// the fast path takes xids of that server only (accelerate.go).
	// controlOK: the last probe found it may.
	systemID  int64
	controlOK bool
}

// pgvectorTypes are the OIDs of pgvector's types in a database, which
// the extension's installation chose.
type pgvectorTypes struct {
	Vector  uint32 `json:"vector"`
	Halfvec uint32 `json:"halfvec"`
}

// name is the pgvector type of OID oid, or "".
func (p pgvectorTypes) name(oid uint32) string {
	switch {
	case oid == 0:
		return ""
	case oid == p.Vector:
		return "vector"
	case oid == p.Halfvec:
		return "halfvec"
	}
	return ""
}

// rowRunner runs one of the session's own statements that return one
// row of n columns (exchange.ownRow).
type rowRunner func(sql string, types []uint32, params [][]byte, n int) (row [][]byte, status byte, err error)

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
//   - the OIDs of pgvector's vector and halfvec types in this database
//     (none without it): a vector parameter in binary comes with one;
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
coalesce((SELECT pg_catalog.json_object_agg(t.typname, t.oid::int8) FROM pg_catalog.pg_type t JOIN pg_catalog.pg_extension e ON e.extnamespace = t.typnamespace
  WHERE e.extname = 'vector' AND t.typname IN ('vector', 'halfvec')), '{}'),
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

// check runs the probe when the session has passed a statement
// through since the last one, or has not probed this index's table yet,
// and says whether the statement may be answered for this session.
func (sp *sessionProbe) check(q *query, ix Index, cat *catalog, run rowRunner) (sessionFacts, error) {
	var f sessionFacts
	facts, known := sp.tables[ix.TableOID]
	if sp.dirty || !known {
		var err error
		if facts, f.minLSN, err = sp.read(ix, run); err != nil {
			return f, err
		}
		if better, ok := cat.lookup(q.schema, q.table, q.column, q.metric, sp.schemas); ok && better.TableOID != ix.TableOID {
			return f, repick{better}
		}
	}
	switch {
	case ix.TableOID == 0 || ix.Database == "":
		return f, passThrough{"sidecar too old"}
	case sp.database != ix.Database:
		return f, passThrough{"another database"}
	case sp.systemID != 0 && ix.SystemID != 0 && sp.systemID != ix.SystemID:
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
	f.fast = facts.xmins && sp.controlOK && sp.systemID != 0
	f.timeout = sp.timeout
	return f, nil
}

// read runs probeSQL for ix's table and notes what it found; minLSN is
// the LSN the sidecar must have applied.
func (sp *sessionProbe) read(ix Index, run rowRunner) (tableFacts, string, error) {
	var t tableFacts
	oid := strconv.FormatUint(uint64(ix.TableOID), 10)
	row, z, err := run(probeSQL, []uint32{25, 25, 25}, [][]byte{[]byte(oid), []byte(ix.Column), []byte(ix.Key)}, probeColumns)
	if err != nil {
		return t, "", err
	}
	if row == nil {
		return t, "", passThrough{"probe failed"}
	}
	wrote, isolation, lsn := string(row[0]) == "t", string(row[1]), string(row[2])
	sp.database = string(row[3])
	sp.schemas = nil
	json.Unmarshal(row[4], &sp.schemas)
	sp.pgvector = pgvectorTypes{}
	json.Unmarshal(row[5], &sp.pgvector)
	options, ok := knnOptions(setValues(settingNames, row[6:]))
	last := row[6+len(settingNames)+1:]
	sp.timeout, _ = parseDuration(string(last[0]))
	colType, _ := strconv.ParseUint(string(last[1]), 10, 32)
	t.xmins = (colType == float4ArrayOID || colType != 0 && uint32(colType) == sp.pgvector.Vector) && string(last[2]) == "t"
	t.key = string(last[3]) == "t"
	sp.controlOK = string(last[4]) == "t"
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
	sp.options = options
	sp.dirty = false
	if sp.tables == nil || len(sp.tables) > 64 {
		sp.tables = map[uint32]tableFacts{}
	}
	sp.tables[ix.TableOID] = t
	if sp.controlOK && sp.systemID == 0 {
		id, _, err := run(systemIDSQL, nil, nil, 1)
		if err != nil {
			return t, "", err
		}
		if id != nil {
			sp.systemID, _ = strconv.ParseInt(string(id[0]), 10, 64)
		}
	}
	return t, lsn, nil
}
