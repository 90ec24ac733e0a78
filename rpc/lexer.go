package rpc

import (
	"strconv"
	"strings"
	"unicode/utf8"
)

// tokenKind classifies a token of the SQL subset.
type tokenKind uint8

const (
	tokEOF         tokenKind = iota
	tokIdent                 // unquoted identifier or keyword, folded to lower case
	tokQuotedIdent           // "identifier", case kept
	tokString                // 'string' or E'string', unescaped
	tokNumber                // 12, 1.5, 1e3, or a number with a unit such as 500ms
	tokParam                 // $1
	tokPunct                 // ( ) , ; * = . [ ] - + :: < > <= >= <> !=
	tokInvalid               // text that is no token: the lexer's error says why
)

type token struct {
	kind tokenKind
	text string // identifier, string contents, number or punctuation
	pos  int    // byte offsets of the token's source text in the query
	end  int
}

// maxParams is the protocol's limit: Bind counts parameters in an int16.
const maxParams = 65535

// lexer splits a query into tokens one at a time, so that parsing a query
// takes memory for the statements it holds, not for every token: a
// megabyte of semicolons costs nothing. Comments and white space are
// skipped. Strings follow standard_conforming_strings=on (a backslash is
// an ordinary character) unless written E'…', where backslash escapes
// work as in PostgreSQL: format('%L') writes such strings for values
// that hold a backslash.
type lexer struct {
	sql string
	i   int
	err *pgError // why the last token is tokInvalid
}

// next returns the next token; at the end, and after an invalid token,
// it returns the same token again.
func (l *lexer) next() token {
	sql := l.sql
	if l.err != nil {
		return token{kind: tokInvalid, pos: l.i, end: l.i}
	}
	for l.i < len(sql) {
		i, c := l.i, sql[l.i]
		switch {
		case c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v':
			l.i++
		case strings.HasPrefix(sql[i:], "--"):
			if end := strings.IndexByte(sql[i:], '\n'); end >= 0 {
				l.i += end + 1
			} else {
				l.i = len(sql)
			}
		case strings.HasPrefix(sql[i:], "/*"):
			end, err := skipBlockComment(sql, i)
			if err != nil {
				return l.fail(err)
			}
			l.i = end
		case c == '\'':
			s, end, err := scanQuoted(sql, i, '\'')
			return l.emit(tokString, s, end, err)
		case (c == 'e' || c == 'E') && i+1 < len(sql) && sql[i+1] == '\'':
			s, end, err := scanEscaped(sql, i+1)
			return l.emit(tokString, s, end, err)
		case c == '"':
			s, end, err := scanQuoted(sql, i, '"')
			if err == nil && s == "" {
				err = syntaxErrorAt(sql, i, "zero-length delimited identifier")
			}
			return l.emit(tokQuotedIdent, s, end, err)
		case isIdentStart(c):
			end := i
			for end < len(sql) && isIdentChar(sql[end]) {
				end++
			}
			return l.emit(tokIdent, strings.ToLower(sql[i:end]), end, nil)
		case isDigit(c) || c == '.' && i+1 < len(sql) && isDigit(sql[i+1]):
			end := scanNumber(sql, i)
			return l.emit(tokNumber, sql[i:end], end, nil)
		case c == '$':
			end := i + 1
			for end < len(sql) && isDigit(sql[end]) {
				end++
			}
			n, err := strconv.Atoi(sql[i+1 : end])
			if err != nil || n < 1 || n > maxParams {
				return l.fail(syntaxErrorAt(sql, i, "parameters are $1 to $%d", maxParams))
			}
			return l.emit(tokParam, strconv.Itoa(n), end, nil)
		case strings.HasPrefix(sql[i:], "::"):
			return l.emit(tokPunct, "::", i+2, nil)
		case c == '<' || c == '>' || c == '!':
			if i+1 < len(sql) && (sql[i+1] == '=' || c == '<' && sql[i+1] == '>') {
				return l.emit(tokPunct, sql[i:i+2], i+2, nil)
			}
			if c == '!' {
				return l.fail(syntaxErrorAt(sql, i, "syntax error at or near \"!\""))
			}
			return l.emit(tokPunct, sql[i:i+1], i+1, nil)
		case strings.IndexByte("(),;*=.[]-+", c) >= 0:
			return l.emit(tokPunct, sql[i:i+1], i+1, nil)
		default:
			_, n := utf8.DecodeRuneInString(sql[i:])
			return l.fail(syntaxErrorAt(sql, i, "syntax error at or near %q", sql[i:i+n]))
		}
	}
	return token{kind: tokEOF, pos: len(sql), end: len(sql)}
}

// emit returns the token from l.i to end and moves past it, or fails.
func (l *lexer) emit(kind tokenKind, text string, end int, err *pgError) token {
	if err != nil {
		return l.fail(err)
	}
	t := token{kind, text, l.i, end}
	l.i = end
	return t
}

func (l *lexer) fail(err *pgError) token {
	l.err = err
	return token{kind: tokInvalid, pos: l.i, end: l.i}
}

// skipBlockComment returns the offset after the /* comment */ at i;
// comments nest, as in PostgreSQL.
func skipBlockComment(sql string, i int) (int, *pgError) {
	depth := 0
	for j := i; j+1 < len(sql); {
		switch sql[j : j+2] {
		case "/*":
			depth++
			j += 2
		case "*/":
			depth--
			j += 2
			if depth == 0 {
				return j, nil
			}
		default:
			j++
		}
	}
	return 0, syntaxErrorAt(sql, i, "unterminated /* comment")
}

// scanQuoted reads a string or quoted identifier starting at the quote at
// i, where a doubled quote stands for one. Without doubled quotes the
// result is a slice of sql; with them, one string of its exact length.
func scanQuoted(sql string, i int, quote byte) (string, int, *pgError) {
	doubled := 0
	for j := i + 1; j < len(sql); j++ {
		// Skip to the next quote whole: a vector sent as a bytea literal
		// is thousands of hex digits.
		n := strings.IndexByte(sql[j:], quote)
		if n < 0 {
			break
		}
		j += n
		if j+1 < len(sql) && sql[j+1] == quote {
			doubled++
			j++
			continue
		}
		if doubled == 0 {
			return sql[i+1 : j], j + 1, nil
		}
		var b strings.Builder
		b.Grow(j - i - 1 - doubled)
		for k := i + 1; k < j; k++ {
			b.WriteByte(sql[k])
			if sql[k] == quote {
				k++
			}
		}
		return b.String(), j + 1, nil
	}
	if quote == '"' {
		return "", 0, syntaxErrorAt(sql, i, "unterminated quoted identifier")
	}
	return "", 0, syntaxErrorAt(sql, i, "unterminated quoted string")
}

// scanEscaped reads the E'…' string whose quote is at i: a doubled quote
// or \' is a quote, and \b \f \n \r \t, \ooo (octal), \xhh (hex), \uXXXX
// and \UXXXXXXXX escapes work as in PostgreSQL; any other escaped
// character stands for itself. The bytes must make valid UTF-8 without
// a zero byte. No escape is shorter than what it stands for, so the
// string is built in one allocation of the source's length.
func scanEscaped(sql string, i int) (string, int, *pgError) {
	// Runs without quotes or backslashes are skipped and copied whole:
	// a vector sent as bytea is thousands of hex digits.
	end := -1 // the closing quote
	for j := i + 1; j < len(sql) && end < 0; j++ {
		n := strings.IndexAny(sql[j:], `\'`)
		if n < 0 {
			break
		}
		j += n
		switch {
		case sql[j] == '\\':
			j++
		case j+1 < len(sql) && sql[j+1] == '\'':
			j++
		default:
			end = j
		}
	}
	if end < 0 {
		return "", 0, syntaxErrorAt(sql, i-1, "unterminated quoted string")
	}
	var b strings.Builder
	b.Grow(end - i - 1)
	for j := i + 1; j < end; {
		switch c := sql[j]; {
		case c == '\'': // doubled
			b.WriteByte('\'')
			j += 2
		case c == '\\':
			var err *pgError
			if j, err = unescape(sql, j, &b); err != nil {
				return "", 0, err
			}
		default:
			n := strings.IndexAny(sql[j:end], `\'`)
			if n < 0 {
				n = end - j
			}
			b.WriteString(sql[j : j+n])
			j += n
		}
	}
	s := b.String()
	if !utf8.ValidString(s) || strings.IndexByte(s, 0) >= 0 {
		return "", 0, &pgError{code: codeCharacterNotInRepertoire, msg: `invalid byte sequence for encoding "UTF8" in E'' string`, position: utf8.RuneCountInString(sql[:i])}
	}
	return s, end + 1, nil
}

// unescape writes the character of the backslash escape at j to b, and
// returns the offset after the escape.
func unescape(sql string, j int, b *strings.Builder) (int, *pgError) {
	c := sql[j+1]
	switch c {
	case 'b':
		b.WriteByte('\b')
	case 'f':
		b.WriteByte('\f')
	case 'n':
		b.WriteByte('\n')
	case 'r':
		b.WriteByte('\r')
	case 't':
		b.WriteByte('\t')
	case 'x', 'u', 'U':
		return unescapeHex(sql, j, b)
	default:
		if '0' <= c && c <= '7' {
			end, n := j+1, 0
			for ; end < len(sql) && end < j+4 && '0' <= sql[end] && sql[end] <= '7'; end++ {
				n = n*8 + int(sql[end]-'0')
			}
			b.WriteByte(byte(n))
			return end, nil
		}
		b.WriteByte(c)
	}
	return j + 2, nil
}

// hexEscapeDigits is how many hex digits each escape takes, at most.
var hexEscapeDigits = map[byte]int{'x': 2, 'u': 4, 'U': 8}

// unescapeHex writes the character of a \x, \u or \U escape at j.
func unescapeHex(sql string, j int, b *strings.Builder) (int, *pgError) {
	c := sql[j+1]
	width := hexEscapeDigits[c]
	end := j + 2
	for end < len(sql) && end < j+2+width && isHex(sql[end]) {
		end++
	}
	if c == 'x' && end == j+2 { // \x without digits is an x
		b.WriteByte(c)
		return end, nil
	}
	if c != 'x' && end != j+2+width {
		return 0, syntaxErrorAt(sql, j, "invalid Unicode escape").withHint(`Unicode escapes must be \uXXXX or \UXXXXXXXX.`)
	}
	n, _ := strconv.ParseUint(sql[j+2:end], 16, 32)
	if c == 'x' {
		b.WriteByte(byte(n))
		return end, nil
	}
	if !utf8.ValidRune(rune(n)) {
		return 0, syntaxErrorAt(sql, j, "invalid Unicode escape value")
	}
	b.WriteRune(rune(n))
	return end, nil
}

// scanNumber reads digits, a fraction and an exponent, and then any letters
// glued to them, so that unquoted SET values such as 500ms stay one token.
func scanNumber(sql string, i int) int {
	for i < len(sql) && isDigit(sql[i]) {
		i++
	}
	if i < len(sql) && sql[i] == '.' {
		i++
		for i < len(sql) && isDigit(sql[i]) {
			i++
		}
	}
	if i+1 < len(sql) && (sql[i] == 'e' || sql[i] == 'E') {
		j := i + 1
		if sql[j] == '+' || sql[j] == '-' {
			j++
		}
		if j < len(sql) && isDigit(sql[j]) {
			for i = j; i < len(sql) && isDigit(sql[i]); i++ {
			}
		}
	}
	for i < len(sql) && isIdentChar(sql[i]) {
		i++
	}
	return i
}

func isDigit(c byte) bool      { return '0' <= c && c <= '9' }
func isHex(c byte) bool        { return isDigit(c) || 'a' <= c|0x20 && c|0x20 <= 'f' }
func isIdentStart(c byte) bool { return c == '_' || 'a' <= c|0x20 && c|0x20 <= 'z' || c >= 0x80 }
func isIdentChar(c byte) bool  { return isIdentStart(c) || isDigit(c) || c == '$' }

// syntaxErrorAt is a 42601 error pointing at byte offset pos of sql.
func syntaxErrorAt(sql string, pos int, format string, args ...any) *pgError {
	e := errorf(codeSyntaxError, format, args...)
	e.position = utf8.RuneCountInString(sql[:pos]) + 1
	return e
}
