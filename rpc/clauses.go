package rpc

import (
	"cmp"
	"slices"
	"strconv"
	"strings"

	"github.com/vecside/vecside/indexer"
	"github.com/vecside/vecside/internal/pgvalue"
)

// The clauses a SELECT from knn() or vecside_status() may have:
//
//	[WHERE col op literal [AND ...]] [ORDER BY col [ASC|DESC] [, ...]]
//	[LIMIT n|ALL] [OFFSET n]
//
// op is =, <>, !=, <, <=, >, >= or IS [NOT] NULL; literals are strings,
// numbers, true or false. They are applied to the function's rows after
// it ran, in that order, on any of its columns, selected or not.

// pred is one comparison of a WHERE clause.
type pred struct {
	col string
	op  string // = <> < <= > >= "is null" "is not null"
	lit string // the literal's text
	num bool   // the literal is a number
}

// orderKey is one key of an ORDER BY.
type orderKey struct {
	col  string
	desc bool
}

// clauses are a statement's WHERE, ORDER BY, LIMIT and OFFSET.
type clauses struct {
	where  []pred
	order  []orderKey
	limit  int64 // -1: none
	offset int64
}

var noClauses = clauses{limit: -1}

var comparisons = map[string]string{"=": "=", "<>": "<>", "!=": "<>", "<": "<", "<=": "<=", ">": ">", ">=": ">="}

// clauses parses what may follow a table function.
func (p *parser) clauses() (clauses, error) {
	c := noClauses
	if p.acceptWord("where") {
		for {
			pr, err := p.pred()
			if err != nil {
				return c, err
			}
			c.where = append(c.where, pr)
			if len(c.where) > maxColumns {
				return c, errorf(codeProgramLimitExceeded, "WHERE has more than %d conditions", maxColumns)
			}
			if !p.acceptWord("and") {
				break
			}
		}
	}
	if p.acceptWord("order") {
		if err := p.expectWord("by"); err != nil {
			return c, err
		}
		for {
			col, err := p.ident()
			if err != nil {
				return c, err
			}
			k := orderKey{col: col}
			if p.acceptWord("desc") {
				k.desc = true
			} else {
				p.acceptWord("asc")
			}
			c.order = append(c.order, k)
			if len(c.order) > maxColumns {
				return c, errorf(codeProgramLimitExceeded, "ORDER BY has more than %d keys", maxColumns)
			}
			if !p.accept(",") {
				break
			}
		}
	}
	if p.acceptWord("limit") && !p.acceptWord("all") {
		n, err := p.count("LIMIT")
		if err != nil {
			return c, err
		}
		c.limit = n
	}
	if p.acceptWord("offset") {
		n, err := p.count("OFFSET")
		if err != nil {
			return c, err
		}
		c.offset = n
	}
	return c, nil
}

func (p *parser) pred() (pred, error) {
	col, err := p.ident()
	if err != nil {
		return pred{}, err
	}
	if p.acceptWord("is") {
		op := "is null"
		if p.acceptWord("not") {
			op = "is not null"
		}
		return pred{col: col, op: op}, p.expectWord("null")
	}
	t := p.next()
	op, ok := comparisons[t.text]
	if t.kind != tokPunct || !ok {
		return pred{}, p.syntaxError(t)
	}
	pr := pred{col: col, op: op}
	v := p.next()
	var isLit bool
	if pr.lit, pr.num, isLit = p.literal(v); !isLit {
		if !v.isWord("true") && !v.isWord("false") {
			return pred{}, p.syntaxError(v)
		}
		pr.lit = v.text
	}
	return pr, nil
}

// count parses LIMIT's or OFFSET's number.
func (p *parser) count(what string) (int64, error) {
	t := p.next()
	if t.kind != tokNumber {
		return 0, p.syntaxError(t)
	}
	n, err := strconv.ParseInt(t.text, 10, 64)
	if err != nil || n < 0 {
		return 0, errorf(codeInvalidParameterValue, "%s must be a non-negative integer, not %s", what, t.text)
	}
	return n, nil
}

// String renders the clauses as SQL, with a leading space if any.
func (c clauses) String() string {
	var b strings.Builder
	for i, pr := range c.where {
		b.WriteString(map[bool]string{true: " WHERE ", false: " AND "}[i == 0])
		b.WriteString(quoteIdentIfNeeded(pr.col) + " ")
		switch {
		case pr.op == "is null" || pr.op == "is not null":
			b.WriteString(strings.ToUpper(pr.op))
		case pr.num || pr.lit == "true" || pr.lit == "false":
			b.WriteString(pr.op + " " + pr.lit)
		default:
			b.WriteString(pr.op + " " + quoteLiteral(pr.lit))
		}
	}
	for i, k := range c.order {
		b.WriteString(map[bool]string{true: " ORDER BY ", false: ", "}[i == 0])
		b.WriteString(quoteIdentIfNeeded(k.col))
		if k.desc {
			b.WriteString(" DESC")
		}
	}
	if c.limit >= 0 {
		b.WriteString(" LIMIT " + strconv.FormatInt(c.limit, 10))
	}
	if c.offset > 0 {
		b.WriteString(" OFFSET " + strconv.FormatInt(c.offset, 10))
	}
	return b.String()
}

// apply filters, sorts and cuts rows, whose columns are cols; where agg,
// it filters them, then makes one row of arrays of their values (of NULLs
// for no rows, as array_agg gives), and cuts that. The parser refuses
// ORDER BY with agg.
func (c clauses) apply(rows [][]any, cols []column, agg bool) ([][]any, error) {
	index := func(name string) (int, error) {
		i := slices.IndexFunc(cols, func(c column) bool { return c.name == name })
		if i < 0 {
			return 0, errorf(codeUndefinedColumn, "column %q does not exist", name).withHint("the columns are %s", columnNames(cols))
		}
		return i, nil
	}
	for _, pr := range c.where {
		i, err := index(pr.col)
		if err != nil {
			return nil, err
		}
		lit, err := literalValue(cols[i], pr)
		if err != nil {
			return nil, err
		}
		rows = slices.DeleteFunc(rows, func(r []any) bool { return !pr.holds(cols[i], r[i], lit) })
	}
	if len(c.order) > 0 {
		keys := make([]int, len(c.order))
		for j, k := range c.order {
			var err error
			if keys[j], err = index(k.col); err != nil {
				return nil, err
			}
		}
		slices.SortStableFunc(rows, func(a, b []any) int {
			for j, k := range c.order {
				i := keys[j]
				if n := compareNullsLast(cols[i], a[i], b[i]); n != 0 {
					if k.desc {
						return -n
					}
					return n
				}
			}
			return 0
		})
	}
	if agg {
		rows = aggregate(rows, len(cols))
	}
	rows = rows[min(int64(len(rows)), c.offset):]
	if c.limit >= 0 && c.limit < int64(len(rows)) {
		rows = rows[:c.limit]
	}
	return rows, nil
}

// aggregate is array_agg of every one of n columns over rows, as one row.
func aggregate(rows [][]any, n int) [][]any {
	row := make([]any, n)
	if len(rows) == 0 {
		return [][]any{row}
	}
	for i := range row {
		values := make([]any, len(rows))
		for j, r := range rows {
			values[j] = r[i]
		}
		row[i] = values
	}
	return [][]any{row}
}

// literalValue converts a predicate's literal to a value of col's kind.
func literalValue(col column, pr pred) (any, error) {
	if pr.op == "is null" || pr.op == "is not null" {
		return nil, nil
	}
	bad := func() error {
		return errorf(codeInvalidTextRepresent, "invalid input syntax for the type of column %s: %q", col.name, pr.lit)
	}
	switch {
	case col.keyType != 0:
		key, err := col.keyType.DecodeText(pr.lit)
		if err != nil {
			return nil, bad()
		}
		return key, nil
	case col.oid == oidPgLSN:
		l, err := indexer.ParseLSN(pr.lit)
		if err != nil {
			return nil, bad()
		}
		return l, nil
	case col.size == 1: // bool
		switch strings.ToLower(pr.lit) {
		case "true", "t", "on", "yes", "1":
			return true, nil
		case "false", "f", "off", "no", "0":
			return false, nil
		}
		return nil, bad()
	case col.size == 8 && col.oid == 701: // float8
		f, err := strconv.ParseFloat(pr.lit, 64)
		if err != nil {
			return nil, bad()
		}
		return f, nil
	case col.size > 0: // integers
		n, err := strconv.ParseInt(pr.lit, 10, 64)
		if err != nil {
			return nil, bad()
		}
		return n, nil
	}
	return pr.lit, nil
}

// holds evaluates the predicate on value v of col: false for NULL but
// with IS NULL.
func (pr pred) holds(col column, v, lit any) bool {
	switch pr.op {
	case "is null":
		return v == nil
	case "is not null":
		return v != nil
	}
	if v == nil {
		return false
	}
	n := compareValues(col, v, lit)
	switch pr.op {
	case "=":
		return n == 0
	case "<>":
		return n != 0
	case "<":
		return n < 0
	case "<=":
		return n <= 0
	case ">":
		return n > 0
	}
	return n >= 0
}

// compareNullsLast orders values of col, NULL after all others.
func compareNullsLast(col column, a, b any) int {
	switch {
	case a == nil && b == nil:
		return 0
	case a == nil:
		return 1
	case b == nil:
		return -1
	}
	return compareValues(col, a, b)
}

// compareValues orders two non-NULL values of col: keys by their type's
// order, the rest by their Go value.
func compareValues(col column, a, b any) int {
	switch a := a.(type) {
	case int64:
		return cmp.Compare(a, b.(int64))
	case float64:
		return cmp.Compare(a, b.(float64))
	case indexer.LSN:
		return cmp.Compare(a, b.(indexer.LSN))
	case bool:
		return boolCompare(a, b.(bool))
	case string:
		if col.keyType == pgvalue.KeyInt2 || col.keyType == pgvalue.KeyInt4 || col.keyType == pgvalue.KeyInt8 {
			x, _ := strconv.ParseInt(col.keyType.FormatKey(a), 10, 64)
			y, _ := strconv.ParseInt(col.keyType.FormatKey(b.(string)), 10, 64)
			return cmp.Compare(x, y)
		}
		if col.keyType != 0 {
			return strings.Compare(col.keyType.FormatKey(a), col.keyType.FormatKey(b.(string)))
		}
		return strings.Compare(a, b.(string))
	}
	return 0
}

// boolCompare orders false before true, as PostgreSQL does.
func boolCompare(a, b bool) int {
	switch {
	case a == b:
		return 0
	case b:
		return -1
	}
	return 1
}
