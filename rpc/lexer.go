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
	tokString                // 'string', with '' unescaped
	tokNumber                // 12, 1.5, 1e3, or a number with a unit such as 500ms
	tokParam                 // $1
	tokPunct                 // ( ) , ; * = . [ ] - + or ::
)

type token struct {
	kind tokenKind
	text string // identifier, string contents, number or punctuation
	pos  int    // byte offsets of the token's source text in the query
	end  int
}

// maxParams is the protocol's limit: Bind counts parameters in an int16.
const maxParams = 65535

// lex splits sql into tokens, ending with a tokEOF. Comments and white
// space are dropped. Strings follow standard_conforming_strings=on: a
// backslash is an ordinary character.
func lex(sql string) ([]token, error) {
	var toks []token
	i := 0
	for i < len(sql) {
		c := sql[i]
		start := i
		switch {
		case c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v':
			i++
		case strings.HasPrefix(sql[i:], "--"):
			if end := strings.IndexByte(sql[i:], '\n'); end >= 0 {
				i += end + 1
			} else {
				i = len(sql)
			}
		case strings.HasPrefix(sql[i:], "/*"):
			end, err := skipBlockComment(sql, i)
			if err != nil {
				return nil, err
			}
			i = end
		case c == '\'':
			s, end, err := scanQuoted(sql, i, '\'')
			if err != nil {
				return nil, err
			}
			toks = append(toks, token{tokString, s, start, end})
			i = end
		case c == '"':
			s, end, err := scanQuoted(sql, i, '"')
			if err != nil {
				return nil, err
			}
			if s == "" {
				return nil, syntaxErrorAt(sql, start, "zero-length delimited identifier")
			}
			toks = append(toks, token{tokQuotedIdent, s, start, end})
			i = end
		case isIdentStart(c):
			for i < len(sql) && isIdentChar(sql[i]) {
				i++
			}
			toks = append(toks, token{tokIdent, strings.ToLower(sql[start:i]), start, i})
		case isDigit(c) || c == '.' && i+1 < len(sql) && isDigit(sql[i+1]):
			i = scanNumber(sql, i)
			toks = append(toks, token{tokNumber, sql[start:i], start, i})
		case c == '$':
			i++
			for i < len(sql) && isDigit(sql[i]) {
				i++
			}
			n, err := strconv.Atoi(sql[start+1 : i])
			if err != nil || n < 1 || n > maxParams {
				return nil, syntaxErrorAt(sql, start, "parameters are $1 to $%d", maxParams)
			}
			toks = append(toks, token{tokParam, strconv.Itoa(n), start, i})
		case strings.HasPrefix(sql[i:], "::"):
			i += 2
			toks = append(toks, token{tokPunct, "::", start, i})
		case strings.IndexByte("(),;*=.[]-+", c) >= 0:
			i++
			toks = append(toks, token{tokPunct, sql[start:i], start, i})
		default:
			_, n := utf8.DecodeRuneInString(sql[i:])
			return nil, syntaxErrorAt(sql, start, "syntax error at or near %q", sql[i:i+n])
		}
	}
	return append(toks, token{tokEOF, "", len(sql), len(sql)}), nil
}

// skipBlockComment returns the offset after the /* comment */ at i;
// comments nest, as in PostgreSQL.
func skipBlockComment(sql string, i int) (int, error) {
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
// i, where a doubled quote stands for one.
func scanQuoted(sql string, i int, quote byte) (string, int, error) {
	var b strings.Builder
	for j := i + 1; j < len(sql); j++ {
		if sql[j] != quote {
			b.WriteByte(sql[j])
			continue
		}
		if j+1 < len(sql) && sql[j+1] == quote {
			b.WriteByte(quote)
			j++
			continue
		}
		return b.String(), j + 1, nil
	}
	if quote == '"' {
		return "", 0, syntaxErrorAt(sql, i, "unterminated quoted identifier")
	}
	return "", 0, syntaxErrorAt(sql, i, "unterminated quoted string")
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
func isIdentStart(c byte) bool { return c == '_' || 'a' <= c|0x20 && c|0x20 <= 'z' || c >= 0x80 }
func isIdentChar(c byte) bool  { return isIdentStart(c) || isDigit(c) || c == '$' }

// syntaxErrorAt is a 42601 error pointing at byte offset pos of sql.
func syntaxErrorAt(sql string, pos int, format string, args ...any) *pgError {
	e := errorf(codeSyntaxError, format, args...)
	e.position = utf8.RuneCountInString(sql[:pos]) + 1
	return e
}
