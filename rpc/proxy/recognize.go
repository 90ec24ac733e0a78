//go:build cgo

package proxy

import (
	"fmt"
	"slices"
	"strconv"

	"github.com/jackc/pgx/v5"
	pg_query "github.com/pganalyze/pg_query_go/v6"
)

// The accepted grammar, in PostgreSQL's own parse tree (pg_query), is
//
//	SELECT target [, ...]
//	FROM [ONLY] [schema.]table [[AS] alias]
//	[WHERE condition]
//	ORDER BY column[::halfvec[(n)]] {<-> | <=> | <#>} vector [ASC] [, key ...]
//	LIMIT count [OFFSET skip]
//
// one statement, where
//
//   - column is the indexed vector column, bare or qualified by the alias
//     (or by the table's name when there is none), on either side of the
//     operator; cast to halfvec, as a query of pgvector's halfvec
//     expression index is written, the vector is then halfvec too;
//   - the operator is pgvector's for the index's metric: <-> l2, <=>
//     cosine, <#> ip (negative inner product);
//   - vector is a string literal ('[1,2,3]' or '{1,2,3}'), or a parameter
//     $n (extended protocol), either one optionally cast to vector,
//     vector(n), real[] or float4[] (halfvec or halfvec(n) where the
//     column is);
//   - count and skip are integer literals (or strings of digits), or
//     parameters (extended protocol);
//   - further sort keys, which order rows of equal distances (", id"),
//     are expressions as targets are, in either direction;
//   - targets and condition are made only of column references (a bare
//     name, *, qualifier.* or qualifier.name, where the answer checks that
//     name is a column of the table: else it calls a function of the row),
//     literals, parameters, casts to built-in types, the operators in
//     harmlessOps, AND/OR/NOT, IS [NOT] NULL, IS [NOT] TRUE/FALSE,
//     [NOT] IN lists, BETWEEN, [NOT] LIKE/ILIKE, ARRAY[...] and
//     op ANY/ALL (array): expressions without side effects, whose
//     value for a row does not depend on how many rows are looked at.
//
// Anything else — DISTINCT, GROUP BY, HAVING, window functions, WITH,
// UNION, joins and several FROM items, sub-selects, FOR UPDATE/SHARE,
// LIMIT WITH TIES, function calls, other operators, a descending
// distance — passes through. What is accepted is then checked
// against the sidecar: a ready index on that table and column with that
// metric; the session's probe (accelerate.go); and, in the answering
// statement itself, that the name finds the indexed table (restricted).

// harmlessOps are the operators allowed in targets and conditions: the
// built-in comparisons, arithmetic and concatenation, and pgvector's
// distances.
var harmlessOps = map[string]bool{
	"=": true, "<>": true, "!=": true, "<": true, ">": true, "<=": true, ">=": true,
	"+": true, "-": true, "*": true, "/": true, "%": true, "||": true,
	"~~": true, "!~~": true, "~~*": true, "!~~*": true,
	"<->": true, "<=>": true, "<#>": true,
}

// metrics maps pgvector's distance operators to the sidecar's metrics.
var metrics = map[string]string{"<->": "l2", "<=>": "cosine", "<#>": "ip"}

// builtinTypes are the types a cast may name (the last part of its name,
// as the parser spells it).
var builtinTypes = map[string]bool{
	"bool": true, "int2": true, "int4": true, "int8": true, "float4": true, "float8": true,
	"numeric": true, "text": true, "varchar": true, "bpchar": true, "uuid": true,
	"date": true, "timestamp": true, "timestamptz": true, "interval": true,
	"json": true, "jsonb": true, "bytea": true, "vector": true, "halfvec": true,
}

// query is a recognised statement.
type query struct {
	code int // codeBytes of its text
	// byTarget: ORDER BY names a target by alias or position, whose
	// distance the rows' targets compute (so the fast path, which
	// orders by another expression, does not apply).
	byTarget bool
	// tieBreak: further sort keys order rows of equal distances, which
	// the fast path's distances may not be to the bit.
	tieBreak bool
	tree     *pg_query.ParseResult
	sel      *pg_query.SelectStmt
	schema   string // as written; empty if unqualified
	table    string
	only     bool // FROM ONLY: the rows of no inheriting table
	column   string
	// half: the column is cast to halfvec, so PostgreSQL orders by
	// half-precision distances, which the sidecar's are not.
	half   bool
	metric string
	vector vectorArg
	limit  int64
	offset int64
	// limitParam and offsetParam are the parameters LIMIT and OFFSET
	// are, if they are ($n, extended protocol): limit and offset are then
	// set from the Bind.
	limitParam, offsetParam int
	params                  int // the highest $n in the statement
	// qualified are the names the statement writes as qualifier.name:
	// columns of the table, or, where the table has no such column, calls
	// of a function of its row type (attribute notation), which the
	// answer checks against the table's columns.
	qualified []string
	// literals: the statement holds string literals besides the query
	// vector, whose values a prepared statement fixes when it is parsed
	// ('now', a time zone's reading of a timestamp).
	literals bool
	// restrictedBy and restrictedSQL remember the last restricted
	// statement, fastBy and fastSQL the last fast one, by key column and
	// table OID: a prepared statement is answered many times.
	restrictedBy  restriction
	restrictedSQL string
	fastBy        restriction
	fastSQL       string
}

// restriction is what a restricted statement is bound to: the table's
// key column and its OID, and the name the statement gives it.
type restriction struct {
	key string
	oid uint32
}

// vectorArg is the query vector: a literal, or the parameter $param.
type vectorArg struct {
	param   int
	literal string
}

// recognize parses sql and returns it as a query the proxy may
// accelerate, or why not. A statement that is not a nearest-neighbour
// query at all gives an empty reason: it is not counted as a fallback.
func recognize(sql string) (*query, string) {
	tree, err := pg_query.Parse(sql)
	if err != nil || len(tree.Stmts) != 1 {
		return nil, ""
	}
	sel := tree.Stmts[0].Stmt.GetSelectStmt()
	if sel == nil || len(sel.SortClause) == 0 {
		return nil, ""
	}
	sort := sel.SortClause[0].GetSortBy()
	if sort == nil {
		return nil, ""
	}
	key := sortKey(sel.TargetList, sort.Node)
	dist := key.GetAExpr()
	if dist == nil || dist.Kind != pg_query.A_Expr_Kind_AEXPR_OP || len(dist.Name) != 1 || metrics[dist.Name[0].GetString_().GetSval()] == "" {
		return nil, ""
	}
	q := &query{tree: tree, sel: sel, metric: metrics[dist.Name[0].GetString_().GetSval()], byTarget: key != sort.Node, tieBreak: len(sel.SortClause) > 1}
	switch {
	case sel.Op != pg_query.SetOperation_SETOP_NONE, sel.WithClause != nil, sel.IntoClause != nil,
		len(sel.DistinctClause) > 0, len(sel.GroupClause) > 0, sel.HavingClause != nil,
		len(sel.WindowClause) > 0, len(sel.ValuesLists) > 0, len(sel.LockingClause) > 0:
		return nil, "shape"
	case sort.SortbyDir == pg_query.SortByDir_SORTBY_DESC || sort.SortbyDir == pg_query.SortByDir_SORTBY_USING,
		sort.SortbyNulls != pg_query.SortByNulls_SORTBY_NULLS_DEFAULT:
		return nil, "order"
	case sel.LimitOption != pg_query.LimitOption_LIMIT_OPTION_COUNT:
		return nil, "limit"
	}
	if len(sel.FromClause) != 1 || sel.FromClause[0].GetRangeVar() == nil {
		return nil, "from"
	}
	rv := sel.FromClause[0].GetRangeVar()
	if rv.Catalogname != "" {
		return nil, "from"
	}
	q.schema, q.table, q.only = rv.Schemaname, rv.Relname, !rv.Inh
	qualifier := rv.Relname
	if rv.Alias != nil {
		if len(rv.Alias.Colnames) > 0 {
			return nil, "from"
		}
		qualifier = rv.Alias.Aliasname
	}
	vectorSide, reason := q.operands(dist, qualifier)
	if reason != "" {
		return nil, reason
	}
	var ok bool
	w := walker{}
	if q.limit, q.limitParam, ok = w.count(sel.LimitCount); !ok || q.limitParam == 0 && q.limit < 1 {
		return nil, "limit"
	}
	if sel.LimitOffset != nil {
		if q.offset, q.offsetParam, ok = w.count(sel.LimitOffset); !ok || q.offset < 0 {
			return nil, "limit"
		}
	}
	for _, t := range sel.TargetList {
		rt := t.GetResTarget()
		if rt == nil || !w.harmless(rt.Val) {
			return nil, "target"
		}
	}
	if sel.WhereClause != nil && !w.harmless(sel.WhereClause) {
		return nil, "filter"
	}
	for _, k := range sel.SortClause[1:] {
		if by := k.GetSortBy(); by == nil || by.SortbyDir == pg_query.SortByDir_SORTBY_USING || !w.harmless(by.Node) {
			return nil, "order"
		}
	}
	w.harmless(vectorSide) // counts its parameter
	q.params = w.params
	q.qualified = w.qualified
	q.literals = slices.ContainsFunc(w.literals, func(v string) bool { return v != q.vector.literal })
	return q, ""
}

// operands reads the distance's column into q.column and its query
// vector into q.vector, and returns the vector's side of the operator;
// or why it cannot. The column may be on either side: pgvector's
// distances are symmetric, to the bit, and PostgreSQL computes them as
// the client wrote them.
func (q *query) operands(dist *pg_query.A_Expr, qualifier string) (*pg_query.Node, string) {
	vectorSide := dist.Rexpr
	var ok bool
	if q.column, q.half, ok = indexedColumn(dist.Lexpr, qualifier); !ok {
		if q.column, q.half, ok = indexedColumn(dist.Rexpr, qualifier); !ok {
			return nil, "order"
		}
		vectorSide = dist.Lexpr
	}
	if q.vector, ok = vectorOperand(vectorSide, q.half); !ok {
		if vectorSide.GetSubLink() != nil {
			return nil, "vector sub-select"
		}
		return nil, "vector expression"
	}
	return vectorSide, ""
}

// sortKey is the expression a sort key stands for: a target's, where it
// names one by its alias or its position, as PostgreSQL reads ORDER BY
// (an output column's name before an input column's), else itself. An
// alias two targets have, or a position past a *, whose columns only
// the table knows, stands for nothing the proxy can tell.
func sortKey(targets []*pg_query.Node, key *pg_query.Node) *pg_query.Node {
	if f := key.GetColumnRef().GetFields(); len(f) == 1 && f[0].GetString_() != nil {
		var named *pg_query.Node
		for _, t := range targets {
			if rt := t.GetResTarget(); rt != nil && rt.Name == f[0].GetString_().Sval {
				if named != nil {
					return nil
				}
				named = rt.Val
			}
		}
		if named != nil {
			return named
		}
	}
	if c := key.GetAConst(); c != nil && c.GetIval() != nil {
		n := int(c.GetIval().Ival)
		if n < 1 || n > len(targets) {
			return nil
		}
		for _, t := range targets[:n] {
			if f := t.GetResTarget().GetVal().GetColumnRef().GetFields(); len(f) > 0 && f[len(f)-1].GetAStar() != nil {
				return nil
			}
		}
		return targets[n-1].GetResTarget().GetVal()
	}
	return key
}

// columnName is the column a ColumnRef names, bare or qualified by
// qualifier.
func columnName(n *pg_query.Node, qualifier string) (string, bool) {
	cr := n.GetColumnRef()
	if cr == nil {
		return "", false
	}
	f := cr.Fields
	switch {
	case len(f) == 1 && f[0].GetString_() != nil:
		return f[0].GetString_().Sval, true
	case len(f) == 2 && f[0].GetString_().GetSval() == qualifier && f[1].GetString_() != nil:
		return f[1].GetString_().Sval, true
	}
	return "", false
}

// indexedColumn is the column a distance's operand names, bare or cast
// to halfvec (half).
func indexedColumn(n *pg_query.Node, qualifier string) (name string, half, ok bool) {
	if tc := n.GetTypeCast(); tc != nil {
		if castTo(tc) != "halfvec" {
			return "", false, false
		}
		name, ok = columnName(tc.Arg, qualifier)
		return name, true, ok
	}
	name, ok = columnName(n, qualifier)
	return name, false, ok
}

// castTo is the type a cast names, its last name with [] for an
// array: "vector", "halfvec", "float4[]"; empty for SETOF.
func castTo(tc *pg_query.TypeCast) string {
	names := tc.TypeName.GetNames()
	if len(names) == 0 || tc.TypeName.Setof || len(tc.TypeName.ArrayBounds) > 1 {
		return ""
	}
	typ := names[len(names)-1].GetString_().GetSval()
	if len(tc.TypeName.ArrayBounds) == 1 {
		typ += "[]"
	}
	return typ
}

// vectorOperand recognises the query vector: a string literal or a
// parameter, optionally cast to vector or real[], or to halfvec where
// the column is (half).
func vectorOperand(n *pg_query.Node, half bool) (vectorArg, bool) {
	if tc := n.GetTypeCast(); tc != nil {
		switch typ := castTo(tc); {
		case half && typ != "halfvec", !half && typ != "vector" && typ != "float4[]":
			return vectorArg{}, false
		}
		n = tc.Arg
	}
	if p := n.GetParamRef(); p != nil && p.Number > 0 {
		return vectorArg{param: int(p.Number)}, true
	}
	if c := n.GetAConst(); c != nil && c.GetSval() != nil {
		return vectorArg{literal: c.GetSval().Sval}, true
	}
	return vectorArg{}, false
}

// count is LIMIT's or OFFSET's value: an integer literal, or the
// parameter $param.
func (w *walker) count(n *pg_query.Node) (value int64, param int, ok bool) {
	if p := n.GetParamRef(); p != nil && p.Number > 0 {
		w.params = max(w.params, int(p.Number))
		return 0, int(p.Number), true
	}
	c := n.GetAConst()
	switch {
	case c == nil:
		return 0, 0, false
	case c.GetIval() != nil:
		return int64(c.GetIval().Ival), 0, true
	case c.GetSval() != nil:
		// '10', as pgx's simple protocol writes its arguments: a string
		// PostgreSQL reads as bigint.
		v, err := strconv.ParseInt(c.GetSval().Sval, 10, 64)
		return v, 0, err == nil
	}
	return 0, 0, false
}

// walker checks expressions and notes the highest parameter number, the
// qualified names and how many string literals there are.
type walker struct {
	params    int
	qualified []string
	literals  []string
}

// harmless reports whether n is built only of what the grammar allows.
func (w *walker) harmless(n *pg_query.Node) bool {
	if n == nil {
		return true
	}
	switch {
	case n.GetColumnRef() != nil:
		// A bare name is a column or the row itself; qualifier.name may be
		// a function of the row (noted, checked by the answer); longer
		// names may select a field through a function.
		f := n.GetColumnRef().Fields
		switch {
		case len(f) == 1 && (f[0].GetString_() != nil || f[0].GetAStar() != nil):
			return true
		case len(f) == 2 && f[0].GetString_() != nil && f[1].GetAStar() != nil:
			return true
		case len(f) == 2 && f[0].GetString_() != nil && f[1].GetString_() != nil:
			w.qualified = append(w.qualified, f[1].GetString_().Sval)
			return true
		}
		return false
	case n.GetAConst() != nil:
		if c := n.GetAConst().GetSval(); c != nil {
			w.literals = append(w.literals, c.Sval)
		}
		return true
	case n.GetParamRef() != nil:
		w.params = max(w.params, int(n.GetParamRef().Number))
		return true
	case n.GetTypeCast() != nil:
		tc := n.GetTypeCast()
		names := tc.TypeName.GetNames()
		return len(names) > 0 && !tc.TypeName.Setof && builtinTypes[names[len(names)-1].GetString_().GetSval()] && w.harmless(tc.Arg)
	case n.GetAExpr() != nil:
		e := n.GetAExpr()
		switch e.Kind {
		case pg_query.A_Expr_Kind_AEXPR_OP, pg_query.A_Expr_Kind_AEXPR_OP_ANY, pg_query.A_Expr_Kind_AEXPR_OP_ALL,
			pg_query.A_Expr_Kind_AEXPR_DISTINCT, pg_query.A_Expr_Kind_AEXPR_NOT_DISTINCT, pg_query.A_Expr_Kind_AEXPR_IN,
			pg_query.A_Expr_Kind_AEXPR_LIKE, pg_query.A_Expr_Kind_AEXPR_ILIKE,
			pg_query.A_Expr_Kind_AEXPR_BETWEEN, pg_query.A_Expr_Kind_AEXPR_NOT_BETWEEN:
		default:
			return false
		}
		if len(e.Name) != 1 {
			return false
		}
		op := e.Name[0].GetString_().GetSval()
		if !harmlessOps[op] && !(op == "BETWEEN" || op == "NOT BETWEEN") {
			return false
		}
		return w.harmless(e.Lexpr) && w.harmless(e.Rexpr)
	case n.GetBoolExpr() != nil:
		return w.all(n.GetBoolExpr().Args)
	case n.GetNullTest() != nil:
		return w.harmless(n.GetNullTest().Arg)
	case n.GetBooleanTest() != nil:
		return w.harmless(n.GetBooleanTest().Arg)
	case n.GetAArrayExpr() != nil:
		return w.all(n.GetAArrayExpr().Elements)
	case n.GetList() != nil:
		return w.all(n.GetList().Items)
	}
	return false
}

func (w *walker) all(ns []*pg_query.Node) bool {
	for _, n := range ns {
		if !w.harmless(n) {
			return false
		}
	}
	return true
}

// restricted is q's statement with its rows restricted to the
// candidates, bound to the table the index follows:
//
//	AND CASE WHEN '<the table's name as written>'::regclass = <oid> THEN key = ANY($n) ELSE false END
//
// $n one past its own parameters, deparsed by PostgreSQL's own deparser.
// The name is resolved when PostgreSQL parses the statement, as the FROM
// clause's is, with the same search_path and privileges; the planner
// folds the comparison to a constant, so the statement reads the
// candidates' rows where the name finds the followed table and no row
// where it finds another (a table shadowing it on the search_path, one
// created under its name after a rename or a drop, another database's):
// too few rows, which passes the client's statement through. A vector
// written as a literal becomes parameter $n+1 (vectorParam) where it is
// a distance's operand, in the targets and in ORDER BY, so that one
// restricted text serves every vector: the answer binds the literal's
// text there, which PostgreSQL reads as it would have read the literal
// (both are of unknown type until the operator decides).
func (q *query) restricted(key string, oid uint32) (string, error) {
	by := restriction{key, oid}
	if q.restrictedSQL != "" && q.restrictedBy == by {
		return q.restrictedSQL, nil
	}
	sql, err := q.deparseRestricted(by, nil)
	if err == nil {
		q.restrictedBy, q.restrictedSQL = by, sql
	}
	return sql, err
}

// fastRestricted is restricted, ordered by the sidecar's exact distance
// of each row that is the version it measured, so that PostgreSQL reads
// no other row's vector (accelerate.go, the fast path):
//
//	ORDER BY CASE WHEN xmin::text::int8 = ($x::int8[])[array_position($n, key)]
//	                   AND tableoid = <oid>
//	                   AND <this server's timeline> = $t
//	              THEN ($d::float8[])[array_position($n, key)]
//	              ELSE <the statement's distance> END
//
// with the candidates' xids bound as $x and their distances as $d, the
// three parameters following restricted's (fastParam). A row of another
// table (an inheriting table's, which shares the key and may share the
// xid) is measured by PostgreSQL. The timeline is read once per
// statement: a standby's last restartpoint's, a primary's that of its WAL
// insert position, as heapfetch's fast path reads it.
func (q *query) fastRestricted(key string, oid uint32) (string, error) {
	by := restriction{key, oid}
	if q.fastSQL != "" && q.fastBy == by {
		return q.fastSQL, nil
	}
	n, x := q.params+1, q.fastParam()
	tmpl, err := pg_query.Parse(fmt.Sprintf(`SELECT CASE WHEN xmin::text::int8 = ($%[2]d::int8[])[array_position($%[1]d, %[5]s)]
		AND tableoid OPERATOR(pg_catalog.=) '%[6]d'::pg_catalog.oid
		AND (SELECT CASE WHEN pg_catalog.pg_is_in_recovery() THEN (SELECT timeline_id FROM pg_catalog.pg_control_checkpoint())
			ELSE ('x' || substr(pg_catalog.pg_walfile_name(pg_catalog.pg_current_wal_lsn()), 1, 8))::bit(32)::int8 END = $%[4]d::int8)
		THEN ($%[3]d::float8[])[array_position($%[1]d, %[5]s)] END`, n, x, x+1, x+2, pgx.Identifier{key}.Sanitize(), oid))
	if err != nil {
		return "", err
	}
	order := tmpl.Stmts[0].Stmt.GetSelectStmt().TargetList[0].GetResTarget().Val
	sql, err := q.deparseRestricted(by, order)
	if err == nil {
		q.fastBy, q.fastSQL = by, sql
	}
	return sql, err
}

// fastParam is the first of fastRestricted's parameters (xids, distances,
// timeline).
func (q *query) fastParam() int {
	if p := q.vectorParam(); p != 0 {
		return p + 1
	}
	return q.params + 2
}

// boundCondition is restricted's condition on the rows: the candidates'
// keys, where the statement's table name finds the table of OID oid.
func (q *query) boundCondition(by restriction) (*pg_query.Node, error) {
	name := pgx.Identifier{q.table}
	if q.schema != "" {
		name = pgx.Identifier{q.schema, q.table}
	}
	tmpl, err := pg_query.Parse(fmt.Sprintf(`SELECT CASE WHEN ''::pg_catalog.regclass OPERATOR(pg_catalog.=) '%d'::pg_catalog.oid
		THEN %s = ANY($%d) ELSE false END`, by.oid, pgx.Identifier{by.key}.Sanitize(), q.params+1))
	if err != nil {
		return nil, err
	}
	cond := tmpl.Stmts[0].Stmt.GetSelectStmt().TargetList[0].GetResTarget().Val
	// The name goes in as the literal's value: the deparser quotes it.
	literal := cond.GetCaseExpr().Args[0].GetCaseWhen().Expr.GetAExpr().Lexpr.GetTypeCast().Arg.GetAConst().GetSval()
	literal.Sval = name.Sanitize()
	return cond, nil
}

// deparseRestricted deparses q with boundCondition added, and, if order
// is a CASE expression, that as its sort key, the statement's distance
// its ELSE.
func (q *query) deparseRestricted(by restriction, order *pg_query.Node) (string, error) {
	cond, err := q.boundCondition(by)
	if err != nil {
		return "", err
	}
	orig := q.sel.WhereClause
	if orig != nil {
		cond = pg_query.MakeBoolExprNode(pg_query.BoolExprType_AND_EXPR, []*pg_query.Node{orig, cond}, -1)
	}
	q.sel.WhereClause = cond
	restore := q.parameterizeVector()
	sort := q.sel.SortClause[0].GetSortBy()
	dist := sort.Node
	if order != nil {
		order.GetCaseExpr().Defresult = dist
		sort.Node = order
	}
	sql, err := pg_query.Deparse(q.tree)
	sort.Node = dist
	restore()
	q.sel.WhereClause = orig
	return sql, err
}

// readsVector reports whether q's targets may show the vector column
// (a reference to it, or a *): then every row's vector is read whatever
// ORDER BY does, and the fast path spares nothing.
func (q *query) readsVector() bool {
	var reads func(n *pg_query.Node) bool
	reads = func(n *pg_query.Node) bool {
		switch {
		case n == nil:
			return false
		case n.GetColumnRef() != nil:
			f := n.GetColumnRef().Fields
			last := f[len(f)-1]
			return last.GetAStar() != nil || last.GetString_().GetSval() == q.column
		case n.GetTypeCast() != nil:
			return reads(n.GetTypeCast().Arg)
		case n.GetAExpr() != nil:
			return reads(n.GetAExpr().Lexpr) || reads(n.GetAExpr().Rexpr)
		case n.GetBoolExpr() != nil:
			return slices.ContainsFunc(n.GetBoolExpr().Args, reads)
		case n.GetNullTest() != nil:
			return reads(n.GetNullTest().Arg)
		case n.GetBooleanTest() != nil:
			return reads(n.GetBooleanTest().Arg)
		case n.GetAArrayExpr() != nil:
			return slices.ContainsFunc(n.GetAArrayExpr().Elements, reads)
		case n.GetList() != nil:
			return slices.ContainsFunc(n.GetList().Items, reads)
		}
		return false
	}
	return slices.ContainsFunc(q.sel.TargetList, func(t *pg_query.Node) bool { return reads(t.GetResTarget().Val) })
}

// vectorParam is the restricted statement's parameter that a literal
// vector becomes; 0 when the vector is a parameter already.
func (q *query) vectorParam() int {
	if q.vector.param != 0 {
		return 0
	}
	return q.params + 2
}

// parameterizeVector puts parameter vectorParam in place of the literal
// vector where it is a distance's operand (see restricted), and returns
// what puts the literal back.
func (q *query) parameterizeVector() (restore func()) {
	if q.vector.param != 0 {
		return func() {}
	}
	type swap struct {
		n   *pg_query.Node
		was *pg_query.A_Const
	}
	var swaps []swap
	param := pg_query.MakeParamRefNode(int32(q.vectorParam()), -1).Node
	var walk func(n *pg_query.Node)
	walk = func(n *pg_query.Node) {
		e := n.GetAExpr()
		if e == nil {
			return
		}
		walk(e.Lexpr)
		walk(e.Rexpr)
		if e.Kind != pg_query.A_Expr_Kind_AEXPR_OP || len(e.Name) != 1 || metrics[e.Name[0].GetString_().GetSval()] == "" {
			return
		}
		for _, operand := range []*pg_query.Node{e.Lexpr, e.Rexpr} {
			if tc := operand.GetTypeCast(); tc != nil {
				operand = tc.Arg
			}
			if c := operand.GetAConst(); c != nil && c.GetSval() != nil && c.GetSval().Sval == q.vector.literal {
				swaps = append(swaps, swap{operand, c})
				operand.Node = param
			}
		}
	}
	for _, t := range q.sel.TargetList {
		if rt := t.GetResTarget(); rt != nil && rt.Val != nil {
			walk(rt.Val)
		}
	}
	walk(q.sel.SortClause[0].GetSortBy().Node)
	return func() {
		for _, s := range swaps {
			s.n.Node = &pg_query.Node_AConst{AConst: s.was}
		}
	}
}
