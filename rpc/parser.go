package rpc

import (
	"strconv"
	"strings"

	"github.com/vecside/vecside/internal/pgvalue"
)

// parser reads the SQL subset vecside answers: a recursive descent over
// the tokens of one query string, lexed as it goes with two tokens of
// lookahead. Its memory is what the statements it returns hold, and its
// work is linear in the query's length; it stops at the first error.
type parser struct {
	sql   string
	lex   lexer
	ahead [2]token
	n     int // tokens in ahead
}

func newParser(sql string) *parser { return &parser{sql: sql, lex: lexer{sql: sql}} }

// parseQuery parses the text of a simple Query: statements separated by
// semicolons, empty ones dropped, at most maxStatements of them (54000
// past that). Nothing runs unless all of it parses.
func parseQuery(sql string, maxStatements int) ([]statement, error) {
	p := newParser(sql)
	var out []statement
	for {
		for p.accept(";") {
		}
		if p.peek().kind == tokEOF {
			return out, nil
		}
		if len(out) == maxStatements {
			return nil, errorf(codeProgramLimitExceeded, "too many statements in one query: at most %d", maxStatements).
				withHint("send them as separate queries")
		}
		s, err := p.statement()
		if err != nil {
			return nil, err
		}
		out = append(out, s)
		if t := p.next(); t.kind != tokEOF && !t.is(";") {
			return nil, p.syntaxError(t)
		}
	}
}

// parseOne parses the text of a Parse message: at most one statement.
func parseOne(sql string) (statement, error) {
	stmts, err := parseQuery(sql, 1)
	switch {
	case err != nil && toPgError(err).code == codeProgramLimitExceeded:
		return statement{}, errorf(codeSyntaxError, "cannot insert multiple commands into a prepared statement")
	case err != nil:
		return statement{}, err
	case len(stmts) == 0:
		return statement{kind: stmtEmpty}, nil
	}
	return stmts[0], nil
}

// peekAt returns the token i places ahead (0 or 1) without taking it.
func (p *parser) peekAt(i int) token {
	for p.n <= i {
		p.ahead[p.n] = p.lex.next()
		p.n++
	}
	return p.ahead[i]
}

func (p *parser) peek() token { return p.peekAt(0) }

func (p *parser) next() token {
	t := p.peek()
	if t.kind != tokEOF && t.kind != tokInvalid {
		p.ahead[0], p.ahead[1] = p.ahead[1], token{}
		p.n--
	}
	return t
}

func (t token) is(punct string) bool { return t.kind == tokPunct && t.text == punct }
func (t token) isWord(w string) bool { return t.kind == tokIdent && t.text == w }
func (p *parser) accept(punct string) bool {
	if p.peek().is(punct) {
		p.next()
		return true
	}
	return false
}

func (p *parser) acceptWord(w string) bool {
	if p.peek().isWord(w) {
		p.next()
		return true
	}
	return false
}

func (p *parser) expect(punct string) error {
	if !p.accept(punct) {
		return p.syntaxError(p.peek())
	}
	return nil
}

func (p *parser) expectWord(w string) error {
	if !p.acceptWord(w) {
		return p.syntaxError(p.peek())
	}
	return nil
}

func (p *parser) syntaxError(t token) *pgError {
	if t.kind == tokInvalid {
		return p.lex.err
	}
	if t.kind == tokEOF {
		return syntaxErrorAt(p.sql, t.pos, "syntax error at end of input")
	}
	return syntaxErrorAt(p.sql, t.pos, "syntax error at or near %q", p.sql[t.pos:t.end])
}

// unsupportedCommands are SQL commands vecside recognises and refuses.
var unsupportedCommands = map[string]bool{
	"alter": true, "analyze": true, "call": true, "checkpoint": true, "close": true,
	"cluster": true, "comment": true, "copy": true, "create": true, "declare": true,
	"delete": true, "do": true, "drop": true, "execute": true, "explain": true,
	"fetch": true, "grant": true, "import": true, "insert": true, "listen": true,
	"load": true, "lock": true, "merge": true, "move": true, "notify": true,
	"prepare": true, "reassign": true, "refresh": true, "reindex": true,
	"release": true, "revoke": true, "savepoint": true, "security": true,
	"table": true, "truncate": true, "unlisten": true, "update": true,
	"vacuum": true, "values": true, "with": true,
}

func (p *parser) statement() (statement, error) {
	t := p.next()
	if t.kind != tokIdent {
		return statement{}, p.syntaxError(t)
	}
	switch t.text {
	case "select":
		return p.selectStmt()
	case "set":
		return p.setStmt()
	case "show":
		name, err := p.name()
		return statement{kind: stmtShow, name: name}, err
	case "reset":
		if p.acceptWord("all") {
			return statement{kind: stmtReset}, nil
		}
		name, err := p.name()
		return statement{kind: stmtReset, name: name}, err
	case "begin":
		_ = p.acceptWord("work") || p.acceptWord("transaction")
		return statement{kind: stmtBegin, tag: "BEGIN"}, p.transactionModes()
	case "start":
		if err := p.expectWord("transaction"); err != nil {
			return statement{}, err
		}
		return statement{kind: stmtBegin, tag: "START TRANSACTION"}, p.transactionModes()
	case "commit", "end":
		_ = p.acceptWord("work") || p.acceptWord("transaction")
		return statement{kind: stmtCommit, tag: "COMMIT"}, nil
	case "rollback", "abort":
		_ = p.acceptWord("work") || p.acceptWord("transaction")
		return statement{kind: stmtRollback, tag: "ROLLBACK"}, nil
	case "discard":
		return statement{kind: stmtDiscardAll}, p.expectWord("all")
	case "deallocate":
		p.acceptWord("prepare")
		if p.acceptWord("all") {
			return statement{kind: stmtDeallocate}, nil
		}
		name, err := p.ident()
		return statement{kind: stmtDeallocate, name: name}, err
	}
	if unsupportedCommands[t.text] {
		return statement{}, errorf(codeFeatureNotSupported, "%s is not supported by vecside", strings.ToUpper(t.text)).
			withHint("vecside answers SELECT ... FROM knn(index, vector, k[, options[, allow]]), SELECT ... FROM vecside_status(), SET/SHOW/RESET vecside.<option> and no-op transaction commands")
	}
	return statement{}, p.syntaxError(t)
}

// transactionModes skips BEGIN's isolation level and access mode: with no
// data to isolate, every mode is honoured.
func (p *parser) transactionModes() error {
	modeWords := map[string]bool{
		"isolation": true, "level": true, "serializable": true, "repeatable": true,
		"read": true, "committed": true, "uncommitted": true, "write": true,
		"only": true, "not": true, "deferrable": true,
	}
	for {
		t := p.peek()
		switch {
		case t.is(","), t.kind == tokIdent && modeWords[t.text]:
			p.next()
		case t.kind == tokEOF, t.is(";"):
			return nil
		default:
			return p.syntaxError(t)
		}
	}
}

func (p *parser) selectStmt() (statement, error) {
	if t := p.peek(); t.kind == tokNumber || t.is("-") {
		return p.selectInt()
	}
	if p.peek().isWord("version") && p.peekAt(1).is("(") {
		p.next()
		return statement{kind: stmtVersion}, p.emptyArgs()
	}
	s := statement{kind: stmtSelectFunc}
	if !p.accept("*") {
		for {
			col, agg, err := p.target()
			if err != nil {
				return s, err
			}
			if len(s.cols) == 0 {
				s.agg = agg
			}
			if agg != s.agg { // no GROUP BY: aggregates and columns do not mix
				if agg {
					col = s.cols[0]
				}
				return s, notGrouped(col)
			}
			if len(s.cols) == maxColumns {
				return s, errorf(codeTooManyColumns, "target lists can have at most %d entries", maxColumns)
			}
			s.cols = append(s.cols, col)
			if !p.accept(",") {
				break
			}
		}
	}
	if err := p.expectWord("from"); err != nil {
		return s, err
	}
	fn := p.peek()
	if fn.kind != tokIdent {
		return s, p.syntaxError(fn)
	}
	p.next()
	s.fn = fn.text
	if !p.accept("(") {
		return s, errorf(codeFeatureNotSupported, "vecside has no tables: %q cannot be selected from", fn.text).
			withHint("select from knn(index, vector, k[, options]) or vecside_status()")
	}
	if !p.accept(")") {
		for {
			a, err := p.arg()
			if err != nil {
				return s, err
			}
			if len(s.args) == len(knnParams) {
				return s, errorf(codeUndefinedFunction, "function %s with more than %d arguments does not exist", s.fn, len(s.args)).
					withHint(functionsHint)
			}
			s.args = append(s.args, a)
			if !p.accept(",") {
				break
			}
		}
		if err := p.expect(")"); err != nil {
			return s, err
		}
	}
	switch {
	case s.fn == fnKNN && len(s.args) >= 3, s.fn == fnStatus && len(s.args) == 0:
		var err error
		if s.clauses, err = p.clauses(); err == nil && s.agg && len(s.clauses.order) > 0 {
			err = notGrouped(s.clauses.order[0].col)
		}
		return s, err
	}
	return s, errorf(codeUndefinedFunction, "function %s with %d arguments does not exist", s.fn, len(s.args)).
		withHint(functionsHint)
}

const functionsHint = "vecside has knn(index text, vector real[], k integer[, options text[, allow key[]]]) and vecside_status()"

// maxSettingList bounds the text of SET name = a, b, ...: a list is
// rebuilt as it is read, and no parameter takes a long one.
const maxSettingList = 64 << 10

// maxColumns is PostgreSQL's limit on a select list.
const maxColumns = 1664

func (p *parser) emptyArgs() error {
	if err := p.expect("("); err != nil {
		return err
	}
	return p.expect(")")
}

// selectInt parses the integer of SELECT 1, which pools use as a ping.
func (p *parser) selectInt() (statement, error) {
	neg := p.accept("-")
	t := p.next()
	if t.kind != tokNumber {
		return statement{}, p.syntaxError(t)
	}
	text := t.text
	if neg {
		text = "-" + text
	}
	n, err := strconv.ParseInt(text, 10, 64)
	if err != nil {
		return statement{}, errorf(codeFeatureNotSupported, "SELECT %s: only integer constants can be selected", text)
	}
	return statement{kind: stmtSelectInt, value: strconv.FormatInt(n, 10)}, nil
}

// arg parses a function argument: $n, 'string' or a number, with an
// optional ::type cast.
func (p *parser) arg() (arg, error) {
	var a arg
	t := p.next()
	if t.kind == tokParam {
		a.param, _ = strconv.Atoi(t.text)
	} else if lit, num, ok := p.literal(t); ok {
		a.lit, a.num = lit, num
	} else {
		return a, p.syntaxError(t)
	}
	if p.accept("::") {
		var err error
		a.cast, err = p.typeName()
		return a, err
	}
	return a, nil
}

// literal reads the string or (perhaps negative) number that starts with
// t, which the caller took.
func (p *parser) literal(t token) (lit string, num, ok bool) {
	switch {
	case t.kind == tokString:
		return t.text, false, true
	case t.kind == tokNumber:
		return t.text, true, true
	case t.is("-") && p.peek().kind == tokNumber:
		return "-" + p.next().text, true, true
	}
	return "", false, false
}

// typeAliases maps type names to the canonical names casts are kept under:
// these, and pgvector's types of pgvalue's table (the arrays are their
// elements' names and []).
var typeAliases = pgvectorTypeNames(map[string]string{
	"real": "real", "float4": "real",
	"double precision": "double precision", "float8": "double precision",
	"int": "integer", "integer": "integer", "int4": "integer",
	"bigint": "bigint", "int8": "bigint",
	"smallint": "smallint", "int2": "smallint",
	"text": "text", "varchar": "varchar", "character varying": "varchar",
	"uuid": "uuid", "bytea": "bytea",
})

func pgvectorTypeNames(aliases map[string]string) map[string]string {
	for _, t := range pgvalue.VectorTypes() {
		if t.OID() == 0 {
			aliases[t.String()] = t.String()
		}
	}
	return aliases
}

// typeName parses a cast's type: a name, an optional (typmod), optional [].
func (p *parser) typeName() (string, error) {
	t := p.next()
	if t.kind != tokIdent {
		return "", p.syntaxError(t)
	}
	name := t.text
	if (name == "double" || name == "character") && p.peek().kind == tokIdent {
		name += " " + p.next().text
	}
	canon, ok := typeAliases[name]
	if !ok {
		return "", syntaxErrorAt(p.sql, t.pos, "type %q is not known to vecside", name)
	}
	if p.accept("(") {
		if n := p.next(); n.kind != tokNumber {
			return "", p.syntaxError(n)
		}
		if err := p.expect(")"); err != nil {
			return "", err
		}
	}
	if p.accept("[") {
		if err := p.expect("]"); err != nil {
			return "", err
		}
		canon += "[]"
	}
	return canon, nil
}

func (p *parser) setStmt() (statement, error) {
	if p.acceptWord("local") {
		return statement{}, errorf(codeFeatureNotSupported, "SET LOCAL is not supported").
			withHint("use SET for the session, or knn's options argument for one query")
	}
	p.acceptWord("session")
	name, err := p.name()
	if err != nil {
		return statement{}, err
	}
	if !p.accept("=") && !p.acceptWord("to") {
		return statement{}, p.syntaxError(p.peek())
	}
	if p.acceptWord("default") {
		return statement{kind: stmtReset, name: name}, nil
	}
	var value strings.Builder
	for {
		v, err := p.settingValue()
		if err != nil {
			return statement{}, err
		}
		value.WriteString(v)
		if !p.accept(",") {
			break
		}
		if value.Len() > maxSettingList {
			return statement{}, errorf(codeProgramLimitExceeded, "the value list of SET %s is longer than %d bytes", name, maxSettingList)
		}
		value.WriteString(", ")
	}
	return statement{kind: stmtSet, name: name, value: value.String()}, nil
}

// settingValue is one value of SET: a string, a number or a word.
func (p *parser) settingValue() (string, error) {
	switch t := p.next(); {
	case t.kind == tokString, t.kind == tokNumber, t.kind == tokIdent, t.kind == tokQuotedIdent:
		return t.text, nil
	case t.is("-") && p.peek().kind == tokNumber:
		return "-" + p.next().text, nil
	default:
		return "", p.syntaxError(t)
	}
}

// name parses a setting name such as vecside.timeout.
func (p *parser) name() (string, error) {
	var name strings.Builder
	for {
		id, err := p.ident()
		if err != nil {
			return "", err
		}
		name.WriteString(id)
		if !p.accept(".") {
			return name.String(), nil
		}
		name.WriteByte('.')
	}
}

// aggArray is the one aggregate vecside has: array_agg(column) collects a
// column of the function's rows, in their order, into one array, NULL if
// there are none. A target list of aggregates selects one row.
const aggArray = "array_agg"

// target is an entry of a target list: a column, or array_agg(column).
func (p *parser) target() (col string, agg bool, err error) {
	if !p.peek().isWord(aggArray) || !p.peekAt(1).is("(") {
		col, err = p.ident()
		return col, false, err
	}
	p.next()
	p.next()
	if col, err = p.ident(); err != nil {
		return "", true, err
	}
	return col, true, p.expect(")")
}

// notGrouped is PostgreSQL's error for a column beside an aggregate.
func notGrouped(col string) error {
	return errorf(codeGroupingError, "column %q must appear in the GROUP BY clause or be used in an aggregate function", col).
		withHint("vecside has no GROUP BY: aggregate every column with %s(column), or none", aggArray)
}

func (p *parser) ident() (string, error) {
	t := p.next()
	if t.kind != tokIdent && t.kind != tokQuotedIdent {
		return "", p.syntaxError(t)
	}
	return t.text, nil
}
