package rpc

import (
	"errors"
	"fmt"
	"math"
	"strconv"

	"github.com/jackc/pgx/v5/pgtype"

	"github.com/vecside/vecside/indexer"
	"github.com/vecside/vecside/internal/knnlimits"
	"github.com/vecside/vecside/internal/pgvalue"
)

// prepared is a parsed statement with its parameter types: what Parse
// creates, named or not.
type prepared struct {
	stmt   statement
	params []uint32
	// described is the id column's type as Describe reported it, so that a
	// portal of an index with another key type is refused instead of
	// decoded wrongly by a client that cached the description.
	described pgvalue.KeyType
}

// knnCall is knn's arguments, evaluated.
type knnCall struct {
	index   string
	vec     []float32
	k       int64
	options string
	// allowArg is the allow argument as bound (a string or a keyArray),
	// allow its keys once decoded against the index's key type: nil
	// means no allow-set, an empty one allows nothing.
	allowArg any
	allow    []string
}

// MaxAllowKeys bounds knn's allow-set (see knnlimits).
const MaxAllowKeys = knnlimits.MaxAllowKeys

// statusColumns are vecside_status()'s columns. Columns are only ever
// appended: clients select them by position.
var statusColumns = []column{
	textColumn("index_name"),
	textColumn("table_name"),
	textColumn("column_name"),
	textColumn("kind"),
	textColumn("metric"),
	{name: "dims", oid: pgtype.Int4OID, size: 4},
	{name: "rows", oid: pgtype.Int8OID, size: 8},
	{name: "skipped_rows", oid: pgtype.Int8OID, size: 8},
	textColumn("state"),
	{name: "applied_lsn", oid: oidPgLSN, size: 8},
	textColumn("error"),
	{name: "zero_vectors", oid: pgtype.Int8OID, size: 8},
	textColumn("key_column"),
	textColumn("slot_state"),
	{name: "lag_bytes", oid: pgtype.Int8OID, size: 8},
	{name: "covered_lsn", oid: oidPgLSN, size: 8},
	{name: "copied_rows", oid: pgtype.Int8OID, size: 8},
	{name: "index_bytes", oid: pgtype.Int8OID, size: 8},
	{name: "bytes_per_row", oid: pgtype.Float8OID, size: 8},
	{name: "lists", oid: pgtype.Int8OID, size: 8},
	{name: "list_max", oid: pgtype.Int8OID, size: 8},
	{name: "rebuilds", oid: pgtype.Int8OID, size: 8},
	{name: "rebuilding", oid: pgtype.BoolOID, size: 1},
	textColumn("rebuild_error"),
	// The source's, as pg_control_system() and the timeline of its WAL
	// report them: a client trusts knn's xids only from a heap server
	// with the same two.
	{name: "system_identifier", oid: pgtype.Int8OID, size: 8},
	{name: "timeline", oid: pgtype.Int8OID, size: 8},
	// The kind's own figures (kind.Figure), as name=value pairs in the
	// order the kind declares them; NULL for a kind without any.
	textColumn("figures"),
	// The recall calibration (indexer.RecallStatus), for the kinds that
	// tune a setting: the index's target, and, once calibrated, the setting its searches get (such as
	// ef_search=27), the recall@10 measured there, and the offset of the
	// queries it was read for; NULL before.
	{name: "recall_target", oid: pgtype.Float8OID, size: 8},
	textColumn("recall_setting"),
	{name: "recall_estimate", oid: pgtype.Float8OID, size: 8},
	{name: "query_offset", oid: pgtype.Float8OID, size: 8},
	// Whether knn's distances are exact (store=float), and so come with
	// xids.
	{name: "exact_distances", oid: pgtype.BoolOID, size: 1},
	// The table the index follows, as the replicator resolved it: its
	// pg_class OID (a drop and re-create changes it, a rename keeps it),
	// and the source database's name (current_database() there); NULL
	// until known. With system_identifier they say which table of which
	// server the candidates are rows of.
	{name: "table_oid", oid: pgtype.OIDOID, size: 4},
	textColumn("database_name"),
}

// nullIfEmpty is NULL for an empty string.
func nullIfEmpty(s string) any {
	if s == "" {
		return nil
	}
	return s
}

func statusRow(s indexer.Status) []any {
	failure := nullIfEmpty(s.Error)
	x := s.IndexStats
	// lists and list_max came before the figures column: they show the
	// figures of those names (ivf's), 0 for a kind without.
	lists, _ := x.Value("lists")
	listMax, _ := x.Value("list_max")
	slot := nullIfEmpty(s.SlotState)
	r := s.Recall
	var target, setting, estimate, offset any
	if r.Target > 0 {
		target = r.Target
	}
	if r.Setting != "" {
		setting, estimate, offset = fmt.Sprintf("%s=%.4g", r.Setting, math.Round(r.Value*10)/10), r.Estimate, r.Offset
	}
	return []any{s.Name, s.Table, s.Column, s.Kind, s.Metric.String(), int64(s.Dims),
		int64(s.Rows), int64(s.Skipped), string(s.State), s.Applied, failure, int64(s.ZeroVectors),
		s.KeyColumn, slot, s.LagBytes, s.Covered, s.CopiedRows,
		x.Bytes(), x.BytesPerRow(), int64(lists), int64(listMax), s.Rebuilds, s.Rebuilding, nullIfEmpty(s.RebuildError),
		nullIfZero(int64(s.SystemID)), nullIfZero(int64(s.Timeline)), nullIfEmpty(x.FigurePairs()),
		target, setting, estimate, offset, s.ExactDistances,
		nullIfZero(int64(s.TableOID)), nullIfEmpty(s.Database)}
}

// nullIfZero is NULL for 0: not known yet.
func nullIfZero(v int64) any {
	if v == 0 {
		return nil
	}
	return v
}

// knnColumns are knn()'s columns. xid is selected by * only when
// with_xid=true is known from the statement itself (see starWithXID).
func knnColumns(kt pgvalue.KeyType) []column {
	return []column{keyColumn("id", kt), {name: "distance", oid: pgtype.Float8OID, size: 8}, {name: "xid", oid: pgtype.Int8OID, size: 8}}
}

// knnStar is what SELECT * from knn() selects without with_xid.
var knnStar = []string{"id", "distance"}

// knnRow is one candidate as knn() returns it: the xid only where asked
// for, known, and paired with an exact distance.
func knnRow(h indexer.Hit, withXID bool) []any {
	var xid any
	if withXID && h.Exact && h.XID != 0 {
		xid = int64(h.XID)
	}
	return []any{h.Key, h.Distance, xid}
}

// starWithXID reports whether SELECT * from the knn statement s includes
// the xid column: with_xid=true in the session or in a literal options
// argument. Describe must answer before parameters are bound, so an
// option passed as a parameter does not widen *: select xid by name.
func (c *conn) starWithXID(s statement) bool {
	if s.cols != nil { // no *: nothing to widen, no options to parse
		return false
	}
	opts := c.sess.search
	if len(s.args) > 3 && s.args[3].param == 0 {
		o, err := indexer.ParseOptions(s.args[3].lit)
		if err != nil || opts.Apply(o) != nil {
			return false
		}
	}
	return opts.WithXID
}

// project picks the selected columns of a table function's columns by
// name; nil selects all. It returns the columns and their positions.
func project(all []column, names []string) ([]column, []int, error) {
	if names == nil {
		idx := make([]int, len(all))
		for i := range idx {
			idx[i] = i
		}
		return all, idx, nil
	}
	cols := make([]column, len(names))
	idx := make([]int, len(names))
	for i, name := range names {
		idx[i] = -1
		for j, c := range all {
			if c.name == name {
				cols[i], idx[i] = c, j
				break
			}
		}
		if idx[i] < 0 {
			return nil, nil, errorf(codeUndefinedColumn, "column %q does not exist", name).
				withHint("the columns are %s", columnNames(all))
		}
	}
	return cols, idx, nil
}

func columnNames(cols []column) string {
	s := ""
	for i, c := range cols {
		if i > 0 {
			s += ", "
		}
		s += c.name
	}
	return s
}

// argValue is argument i of s: a literal's text or a bound parameter.
func argValue(s statement, i int, params []any) any {
	a := s.args[i]
	if a.param > 0 {
		return params[a.param-1]
	}
	return a.lit
}

// evalKNN evaluates knn's arguments against the bound parameters.
func evalKNN(s statement, params []any) (knnCall, error) {
	var c knnCall
	for i := range s.args {
		v := argValue(s, i, params)
		if v == nil {
			return c, errorf(codeNullValueNotAllowed, "knn's %s argument must not be NULL", knnParams[i].name)
		}
		var err error
		switch i {
		case 0:
			c.index = v.(string)
		case 1:
			switch v := v.(type) {
			case []float32:
				c.vec = v
			case string:
				vt, typed := pgvalue.VectorTypeNamed(s.args[i].cast)
				switch {
				case s.args[i].cast == "bytea":
					c.vec, err = decodeByteaVector(v)
				case typed:
					c.vec, err = vt.DecodeText(v)
				default:
					c.vec, err = pgvalue.ParseVector(v)
				}
			}
		case 2:
			var ok bool
			if c.k, ok = v.(int64); !ok {
				c.k, err = parseInt(v.(string), "integer")
			}
		case 3:
			c.options = v.(string)
		case 4:
			c.allowArg = v
		}
		if err != nil {
			return c, err
		}
	}
	return c, nil
}

// decodeAllow decodes the allow argument, if any, into keys of type kt.
func (c *knnCall) decodeAllow(kt pgvalue.KeyType) error {
	var err error
	switch a := c.allowArg.(type) {
	case nil:
		return nil
	case string:
		c.allow, err = kt.ParseArray(a)
	case keyArray:
		if a.binary {
			c.allow, err = kt.DecodeBinaryArray(a.data)
		} else {
			c.allow, err = kt.ParseArray(string(a.data))
		}
	}
	switch {
	case errors.Is(err, pgvalue.ErrNullKey):
		return errorf(codeNullValueNotAllowed, "knn's allow argument: %v", err)
	case err != nil:
		return errorf(codeInvalidTextRepresent, "knn's allow argument: %v", err).
			withHint("send the index's keys (%s) as an array of their type or of text", kt)
	case len(c.allow) > MaxAllowKeys:
		return errorf(codeProgramLimitExceeded, "knn's allow argument has %d keys, at most %d are allowed", len(c.allow), MaxAllowKeys).
			withHint("split the keys over several calls and merge their answers, or filter the rows after the search")
	}
	return nil
}

// searchOptions are the session's search options with the call's options
// applied on top.
func (c knnCall) searchOptions(session indexer.SearchOptions) (indexer.SearchOptions, error) {
	opts, err := indexer.ParseOptions(c.options)
	if err != nil {
		return session, fmt.Errorf("knn options: %w", err)
	}
	if err := session.Apply(opts); err != nil {
		return session, err
	}
	session.Allow = c.allow
	return session, nil
}

// keyTypeOf is the key type of the named index.
func keyTypeOf(cat Catalog, name string) (pgvalue.KeyType, error) {
	kt, err := cat.KeyType(name)
	if err == nil && kt == 0 {
		return 0, fmt.Errorf("%w: index %s does not know its key type yet", indexer.ErrNotReady, name)
	}
	return kt, err
}

// commonKeyType is the key type every index shares, or 0 if they differ:
// what Describe can promise when the index is a parameter.
func commonKeyType(cat Catalog) pgvalue.KeyType {
	var kt pgvalue.KeyType
	for _, s := range cat.Status() {
		switch {
		case s.KeyType == 0: // not configured yet: Bind checks it
		case kt == 0:
			kt = s.KeyType
		case s.KeyType != kt:
			return 0
		}
	}
	return kt
}

// shape is what a statement returns: its columns (nil for none) and where
// each comes from in the underlying row.
type shape struct {
	cols []column
	idx  []int
}

// describeStatement is the result shape of a prepared statement, for
// Describe S. A knn whose index is a parameter has a known shape only if
// all indexes share a key type; otherwise it has none (NoData) and the
// client describes the portal instead.
func (c *conn) describeStatement(p *prepared) (shape, error) {
	s := p.stmt
	if s.kind == stmtSelectFunc && s.fn == fnKNN {
		var kt pgvalue.KeyType
		if s.args[0].param > 0 {
			kt = commonKeyType(c.srv.cfg.Catalog)
		} else {
			var err error
			if kt, err = keyTypeOf(c.srv.cfg.Catalog, s.args[0].lit); err != nil {
				return shape{}, err
			}
		}
		if kt == 0 {
			return shape{}, nil
		}
		p.described = kt
		return knnShape(kt, s, c.starWithXID(s))
	}
	return c.fixedShape(s)
}

func knnShape(kt pgvalue.KeyType, s statement, starXID bool) (shape, error) {
	names := s.cols
	if names == nil && !starXID {
		names = knnStar
	}
	return selectShape(knnColumns(kt), names, s.agg)
}

// selectShape is the shape of a SELECT of names (nil: all) from a
// function with columns all, each aggregated with array_agg where agg.
func selectShape(all []column, names []string, agg bool) (shape, error) {
	cols, idx, err := project(all, names)
	if agg {
		for i := range cols {
			cols[i] = arrayOf(cols[i])
		}
	}
	return shape{cols, idx}, err
}

// fixedShape is the shape of statements whose columns do not depend on
// their arguments.
func (c *conn) fixedShape(s statement) (shape, error) {
	switch s.kind {
	case stmtSelectFunc: // vecside_status()
		return selectShape(statusColumns, s.cols, s.agg)
	case stmtSelectInt:
		col := column{name: "?column?", oid: pgtype.Int4OID, size: 4}
		if n, _ := strconv.ParseInt(s.value, 10, 64); int64(int32(n)) != n {
			col.oid, col.size = pgtype.Int8OID, 8
		}
		return shape{[]column{col}, []int{0}}, nil
	case stmtVersion:
		return shape{[]column{textColumn("version")}, []int{0}}, nil
	case stmtShow:
		title, _, err := c.sess.show(s.name)
		return shape{[]column{textColumn(title)}, []int{0}}, err
	}
	return shape{}, nil
}

// portal is a bound statement: what Bind creates, and Execute runs.
type portal struct {
	stmt    statement
	call    knnCall         // for knn
	keyType pgvalue.KeyType // for knn: the type the id column was bound with
	shape   shape
	formats []int16 // per result column
	rows    [][]any // the full rows, computed by the first Execute
	sent    int     // rows sent so far, for Execute with a row limit
	size    int     // bytes of the Bind message it holds
	// rowsSize estimates the memory of rows, once a row limit left some.
	rowsSize int
	ran      bool
	tag      string
}

// bind evaluates a prepared statement's arguments and fixes its result
// shape and formats.
func (c *conn) bind(p *prepared, params []any, formatCodes []int16) (*portal, error) {
	pt := &portal{stmt: p.stmt}
	var err error
	if p.stmt.kind == stmtSelectFunc && p.stmt.fn == fnKNN {
		if pt.call, err = evalKNN(p.stmt, params); err != nil {
			return nil, err
		}
		if pt.keyType, err = keyTypeOf(c.srv.cfg.Catalog, pt.call.index); err != nil {
			return nil, err
		}
		if err = pt.call.decodeAllow(pt.keyType); err != nil {
			return nil, err
		}
		if p.described != 0 && pt.keyType != p.described {
			return nil, errorf(codeFeatureNotSupported, "cached plan must not change result type").
				withHint("index %s has %s keys, the statement was described with %s keys: prepare it again", pt.call.index, pt.keyType, p.described)
		}
		pt.shape, err = knnShape(pt.keyType, p.stmt, c.starWithXID(p.stmt))
	} else {
		pt.shape, err = c.fixedShape(p.stmt)
	}
	if err != nil {
		return nil, err
	}
	pt.formats, err = expandFormats(formatCodes, len(pt.shape.cols), "result")
	return pt, err
}
