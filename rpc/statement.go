package rpc

import (
	"regexp"
	"strconv"
	"strings"

	"github.com/vecside/vecside/indexer"
)

// stmtKind is what a statement does.
type stmtKind uint8

const (
	stmtEmpty      stmtKind = iota // nothing but comments or white space
	stmtSelectFunc                 // SELECT cols FROM fn(args)
	stmtSelectInt                  // SELECT 1
	stmtVersion                    // SELECT version()
	stmtSet                        // SET name = value
	stmtShow                       // SHOW name
	stmtReset                      // RESET name, or RESET ALL when name is ""
	stmtBegin                      // BEGIN, START TRANSACTION
	stmtCommit                     // COMMIT, END
	stmtRollback                   // ROLLBACK, ABORT
	stmtDiscardAll                 // DISCARD ALL
	stmtDeallocate                 // DEALLOCATE name, or ALL when name is ""
)

// label names the kind in metrics.
func (k stmtKind) label() string {
	switch k {
	case stmtEmpty:
		return "empty"
	case stmtSelectFunc:
		return "select_function"
	case stmtSelectInt, stmtVersion:
		return "select_constant"
	case stmtSet, stmtShow, stmtReset:
		return "setting"
	case stmtBegin, stmtCommit, stmtRollback:
		return "transaction"
	}
	return "session"
}

// The table functions a statement may select from.
const (
	fnKNN    = "knn"
	fnStatus = "vecside_status"
)

// statement is one parsed SQL statement. Parsing it from its String gives
// it back unchanged.
type statement struct {
	kind  stmtKind
	fn    string   // stmtSelectFunc: fnKNN or fnStatus
	cols  []string // stmtSelectFunc: the projection, nil for *
	agg   bool     // stmtSelectFunc: each of cols is array_agg(col)
	args  []arg    // stmtSelectFunc: the function's arguments
	name  string   // setting name (lower case unless quoted), or prepared statement name
	value string   // stmtSet: the value; stmtSelectInt: the integer
	tag   string   // command tag of transaction statements
	// stmtSelectFunc: WHERE, ORDER BY, LIMIT and OFFSET.
	clauses clauses
}

// arg is a function argument: a $n parameter or a literal, perhaps cast.
type arg struct {
	param int    // n of $n, 0 for a literal
	lit   string // a literal's text: string contents or a number
	num   bool   // the literal is a number, not a quoted string
	cast  string // canonical type name of a ::cast, "" if none
}

// String renders the statement as SQL that parses back to it.
func (s statement) String() string {
	var b strings.Builder
	switch s.kind {
	case stmtEmpty:
	case stmtSelectFunc:
		b.WriteString("SELECT ")
		if s.cols == nil {
			b.WriteString("*")
		}
		for i, c := range s.cols {
			if i > 0 {
				b.WriteString(", ")
			}
			if s.agg {
				b.WriteString(aggArray + "(" + quoteIdentIfNeeded(c) + ")")
			} else {
				b.WriteString(quoteIdentIfNeeded(c))
			}
		}
		b.WriteString(" FROM " + s.fn + "(")
		for i, a := range s.args {
			if i > 0 {
				b.WriteString(", ")
			}
			b.WriteString(a.String())
		}
		b.WriteString(")" + s.clauses.String())
	case stmtSelectInt:
		b.WriteString("SELECT " + s.value)
	case stmtVersion:
		b.WriteString("SELECT version()")
	case stmtSet:
		b.WriteString("SET " + quoteName(s.name) + " = " + quoteLiteral(s.value))
	case stmtShow:
		b.WriteString("SHOW " + quoteName(s.name))
	case stmtReset:
		b.WriteString("RESET " + orAll(quoteName(s.name), s.name))
	case stmtBegin, stmtCommit, stmtRollback:
		b.WriteString(s.tag)
	case stmtDiscardAll:
		b.WriteString("DISCARD ALL")
	case stmtDeallocate:
		b.WriteString("DEALLOCATE " + orAll(quoteIdentIfNeeded(s.name), s.name))
	}
	return b.String()
}

func orAll(quoted, name string) string {
	if name == "" {
		return "ALL"
	}
	return quoted
}

func (a arg) String() string {
	var s string
	switch {
	case a.param > 0:
		s = "$" + strconv.Itoa(a.param)
	case a.num:
		s = a.lit
	default:
		s = quoteLiteral(a.lit)
	}
	if a.cast != "" {
		s += "::" + a.cast
	}
	return s
}

func quoteLiteral(s string) string { return "'" + strings.ReplaceAll(s, "'", "''") + "'" }

var plainIdent = regexp.MustCompile(`^[a-z_][a-z0-9_$]*$`)

// keywords are the words the grammar gives a meaning where an identifier
// may also stand: an identifier spelled like one must be quoted.
var keywords = map[string]bool{
	"all": true, "and": true, "as": true, "asc": true, "by": true, "default": true, "desc": true,
	"false": true, "from": true, "is": true, "limit": true, "local": true, "not": true, "null": true,
	"offset": true, "order": true, "prepare": true, "session": true, "to": true, "true": true, "where": true,
}

func quoteIdentIfNeeded(s string) string {
	if plainIdent.MatchString(s) && !keywords[s] {
		return s
	}
	return indexer.QuoteIdent(s)
}

// quoteName renders a dotted setting name: plain if every part is a plain
// identifier, else quoted whole (which names the same setting).
func quoteName(name string) string {
	for _, part := range strings.Split(name, ".") {
		if quoteIdentIfNeeded(part) != part {
			return indexer.QuoteIdent(name)
		}
	}
	return name
}
