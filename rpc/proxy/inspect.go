//go:build cgo

package proxy

// What the proxy parses is bounded, by construction. PostgreSQL's parse
// tree of a statement costs the proxy about 200 bytes for each element
// of its text, literal or name, whatever the element's length: a
// statement of a MiB of short literals becomes 24 MiB of Go structures,
// and more in C while it is parsed. So the bound is on a statement's
// code, its bytes outside string literals (a vector literal is one
// element however long), scanned before anything is parsed.
const (
	// maxCode is the most code a statement may have to be parsed
	// (a filter of about 2,000 literals); past it, it passes through
	// unparsed.
	maxCode = 16 << 10
	// maxParsingCode bounds the code of the statements being parsed or
	// answered at once, over all sessions; past it a statement passes
	// through.
	maxParsingCode = 512 << 10
	// maxRememberedCode bounds the code of the prepared statements a
	// session keeps parsed, to answer them when bound; past it a new
	// one is not kept, and passes through when run.
	maxRememberedCode = 16 << 10
)

// recognize is recognize within the bounds above: done gives back what
// the statement took of maxParsingCode, once its tree is no longer in
// use or is kept (remember).
func (s *session) recognize(sql string) (q *query, reason string, done func()) {
	code := codeBytes(sql)
	if code > maxCode {
		return nil, "statement size", func() {}
	}
	if s.p.parsing.Add(int64(code)) > maxParsingCode {
		s.p.parsing.Add(-int64(code))
		return nil, "parsing budget", func() {}
	}
	done = func() { s.p.parsing.Add(-int64(code)) }
	q, reason = recognize(sql)
	if q != nil {
		q.code = code
	}
	return q, reason, done
}

// codeBytes counts the bytes of sql outside its string literals
// ('…', E'…', $tag$…$tag$), quoted names and comments. Where it cannot
// tell, it counts a byte as code: what it leaves out is never more than
// PostgreSQL would read as one literal, name or comment.
func codeBytes(sql string) int {
	code := 0
	for i := 0; i < len(sql); {
		c := sql[i]
		switch {
		case c == '\'':
			backslash := i > 0 && (sql[i-1] == 'E' || sql[i-1] == 'e') && (i < 2 || !identChar(sql[i-2]))
			i = quoted(sql, i, '\'', backslash)
		case c == '"':
			i = quoted(sql, i, '"', false)
		case c == '-' && i+1 < len(sql) && sql[i+1] == '-':
			for i < len(sql) && sql[i] != '\n' {
				i++
			}
		case c == '/' && i+1 < len(sql) && sql[i+1] == '*':
			i = blockComment(sql, i)
		case c == '$' && (i == 0 || !identChar(sql[i-1])):
			if end, ok := dollarQuoted(sql, i); ok {
				i = end
				continue
			}
			code++
			i++
		default:
			code++
			i++
		}
	}
	return code
}

// quoted returns the index past the quote-delimited run starting at i,
// its delimiter doubled inside it, and with backslash escaping the next
// byte (E'…'); an unterminated run ends sql.
func quoted(sql string, i int, quote byte, backslash bool) int {
	for i++; i < len(sql); i++ {
		switch {
		case backslash && sql[i] == '\\':
			i++
		case sql[i] == quote:
			if i+1 < len(sql) && sql[i+1] == quote {
				i++
				continue
			}
			return i + 1
		}
	}
	return len(sql)
}

// blockComment returns the index past the comment starting at i; they
// nest.
func blockComment(sql string, i int) int {
	depth := 0
	for i < len(sql) {
		switch {
		case sql[i] == '/' && i+1 < len(sql) && sql[i+1] == '*':
			depth++
			i += 2
		case sql[i] == '*' && i+1 < len(sql) && sql[i+1] == '/':
			depth--
			i += 2
			if depth == 0 {
				return i
			}
		default:
			i++
		}
	}
	return len(sql)
}

// dollarQuoted returns the index past the dollar-quoted string starting
// at i ($$…$$ or $tag$…$tag$), or false if none starts there ($1 is a
// parameter).
func dollarQuoted(sql string, i int) (int, bool) {
	j := i + 1
	for j < len(sql) && sql[j] != '$' {
		if c := sql[j]; !identChar(c) || j == i+1 && '0' <= c && c <= '9' {
			return 0, false
		}
		j++
	}
	if j >= len(sql) {
		return 0, false
	}
	tag := sql[i : j+1]
	for k := j + 1; k+len(tag) <= len(sql); k++ {
		if sql[k:k+len(tag)] == tag {
			return k + len(tag), true
		}
	}
	return len(sql), true
}

// identChar reports whether c may continue a name (PostgreSQL's
// ident_cont, bytes past ASCII included).
func identChar(c byte) bool {
	return c == '_' || c == '$' || '0' <= c && c <= '9' || 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || c >= 0x80
}
