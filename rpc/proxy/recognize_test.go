//go:build cgo

package proxy

import (
	"fmt"
	"strings"
	"testing"

	pg_query "github.com/pganalyze/pg_query_go/v6"
)

func TestRecognize(t *testing.T) {
	accepted := []struct {
		sql, schema, table, column, metric string
		vector                             vectorArg
		limit, offset                      int64
	}{
		{"SELECT id FROM items ORDER BY embedding <-> '[1,2]' LIMIT 10", "", "items", "embedding", "l2", vectorArg{literal: "[1,2]"}, 10, 0},
		{"select * from public.items i where i.tenant = 3 and note like 'a%' order by i.embedding <=> $1::vector limit 5 offset 2", "public", "items", "embedding", "cosine", vectorArg{param: 1}, 5, 2},
		{"SELECT id, embedding <#> $2 AS d FROM items WHERE tenant IN (1, 2) AND deleted IS NULL ORDER BY embedding <#> $2 ASC LIMIT 3", "", "items", "embedding", "ip", vectorArg{param: 2}, 3, 0},
		{"SELECT id FROM items AS x ORDER BY embedding <-> '{1,2}'::real[] LIMIT 1", "", "items", "embedding", "l2", vectorArg{literal: "{1,2}"}, 1, 0},
		{"SELECT id FROM items ORDER BY embedding <-> '[1]' LIMIT '4' OFFSET '1'", "", "items", "embedding", "l2", vectorArg{literal: "[1]"}, 4, 1},
		{"SELECT items.id FROM items ORDER BY items.embedding <-> $1 LIMIT $2 OFFSET $3", "", "items", "embedding", "l2", vectorArg{param: 1}, 0, 0},
		{`SELECT "Id" FROM "Items" WHERE price BETWEEN 1 AND 2 ORDER BY "Emb" <-> '[1]'::vector(1) LIMIT 1`, "", "Items", "Emb", "l2", vectorArg{literal: "[1]"}, 1, 0},
		// LangChain's PGVectorStore: ORDER BY the distance's alias.
		{`SELECT *, "embedding" <=> $1 as "_distance" FROM langchain_pg_embedding WHERE collection_id = $3 ORDER BY "_distance" ASC LIMIT $2`, "", "langchain_pg_embedding", "embedding", "cosine", vectorArg{param: 1}, 0, 0},
		{"SELECT id, embedding <-> '[1]' AS d FROM items ORDER BY 2 LIMIT 3", "", "items", "embedding", "l2", vectorArg{literal: "[1]"}, 3, 0},
		{"SELECT id FROM items ORDER BY embedding <-> '[1]' FETCH FIRST 4 ROWS ONLY", "", "items", "embedding", "l2", vectorArg{literal: "[1]"}, 4, 0},
		{"SELECT id FROM items ORDER BY embedding <-> '[1]' OFFSET 2 ROWS FETCH NEXT 3 ROWS ONLY", "", "items", "embedding", "l2", vectorArg{literal: "[1]"}, 3, 2},
		// The vector first: the metrics are symmetric.
		{"SELECT id FROM items ORDER BY '[1]' <=> embedding LIMIT 3", "", "items", "embedding", "cosine", vectorArg{literal: "[1]"}, 3, 0},
		{"SELECT id, $1 <#> i.embedding AS d FROM items i ORDER BY d LIMIT $2", "", "items", "embedding", "ip", vectorArg{param: 1}, 0, 0},
		// pgvector's halfvec expression index, as its README queries it.
		{"SELECT id FROM items ORDER BY embedding::halfvec(3) <-> '[1,2,3]'::halfvec(3) LIMIT 5", "", "items", "embedding", "l2", vectorArg{literal: "[1,2,3]"}, 5, 0},
		{"SELECT id, embedding::halfvec(3) <=> $1 AS d FROM items ORDER BY d LIMIT 5", "", "items", "embedding", "cosine", vectorArg{param: 1}, 5, 0},
		// Further keys order the rows of equal distances.
		{"SELECT id FROM items ORDER BY embedding <-> '[1]', id DESC, 2 LIMIT 3", "", "items", "embedding", "l2", vectorArg{literal: "[1]"}, 3, 0},
	}
	for _, c := range accepted {
		q, reason := recognize(c.sql)
		if q == nil {
			t.Errorf("%s: passed through (%q), want accepted", c.sql, reason)
			continue
		}
		if q.half != strings.Contains(c.sql, "::halfvec") || q.tieBreak != strings.Contains(c.sql, ", id") {
			t.Errorf("%s: half %v, tie break %v", c.sql, q.half, q.tieBreak)
		}
		if q.schema != c.schema || q.table != c.table || q.column != c.column || q.metric != c.metric || q.vector != c.vector || q.limit != c.limit || q.offset != c.offset {
			t.Errorf("%s: got %s.%s(%s) %s %+v limit %d offset %d", c.sql, q.schema, q.table, q.column, q.metric, q.vector, q.limit, q.offset)
		}
	}
	passed := []struct{ sql, reason string }{
		{"SELECT 1", ""},
		{"SELECT id FROM items ORDER BY id LIMIT 10", ""},
		{"SELECT id FROM items ORDER BY embedding <-> '[1]' LIMIT 1; SELECT 1", ""},
		{"INSERT INTO items VALUES (1)", ""},
		{"SELECT id FROM items ORDER BY embedding <-> '[1]'", "limit"},
		{"SELECT id FROM items ORDER BY embedding <-> '[1]' DESC LIMIT 1", "order"},
		{"SELECT id, embedding <-> '[1]' AS d, note AS d FROM items ORDER BY d LIMIT 1", ""},
		{"SELECT *, embedding <-> '[1]' AS d FROM items ORDER BY 2 LIMIT 1", ""},
		{"SELECT id, embedding <-> '[1]' AS d FROM items ORDER BY 3 LIMIT 1", ""},
		{"SELECT id, embedding <-> '[1]' AS d FROM items ORDER BY e LIMIT 1", ""},
		{"SELECT id FROM items ORDER BY embedding <-> '[1]' LIMIT 0", "limit"},
		{"SELECT id FROM items ORDER BY embedding <-> '[1]' LIMIT 1 + 1", "limit"},
		{"SELECT id FROM items ORDER BY embedding <-> '[1]' LIMIT 'ten'", "limit"},
		{"SELECT id FROM items ORDER BY embedding <-> '[1]' FETCH FIRST 1 ROWS WITH TIES", "limit"},
		{"SELECT id FROM items, other ORDER BY embedding <-> '[1]' LIMIT 1", "from"},
		{"SELECT id FROM items JOIN other USING (id) ORDER BY embedding <-> '[1]' LIMIT 1", "from"},
		{"WITH c AS (SELECT 1) SELECT id FROM items ORDER BY embedding <-> '[1]' LIMIT 1", "shape"},
		{"SELECT DISTINCT id FROM items ORDER BY embedding <-> '[1]' LIMIT 1", "shape"},
		{"SELECT id FROM items ORDER BY embedding <-> '[1]' LIMIT 1 FOR UPDATE", "shape"},
		{"SELECT id, row_number() OVER () FROM items ORDER BY embedding <-> '[1]' LIMIT 1", "target"},
		{"SELECT nextval('s') FROM items ORDER BY embedding <-> '[1]' LIMIT 1", "target"},
		{"SELECT id FROM items WHERE f(id) ORDER BY embedding <-> '[1]' LIMIT 1", "filter"},
		{"SELECT id FROM items WHERE id IN (SELECT 1) ORDER BY embedding <-> '[1]' LIMIT 1", "filter"},
		{"SELECT id FROM items WHERE id @@ 'x' ORDER BY embedding <-> '[1]' LIMIT 1", "filter"},
		{"SELECT id FROM items ORDER BY '[1]' <-> '[2]' LIMIT 1", "order"},
		{"SELECT id FROM items ORDER BY (SELECT embedding FROM items WHERE id = 1) <-> embedding LIMIT 1", "vector sub-select"},
		{"SELECT id FROM items i ORDER BY items.embedding <-> '[1]' LIMIT 1", "order"},
		{"SELECT id FROM items ORDER BY embedding <-> '[1]'::halfvec LIMIT 1", "vector expression"},
		{"SELECT id FROM items ORDER BY embedding::halfvec <-> '[1]'::vector LIMIT 1", "vector expression"},
		{"SELECT id FROM items ORDER BY embedding::bit(3) <-> '[1]' LIMIT 1", "order"},
		{"SELECT id FROM items ORDER BY embedding <-> '[1]', random() LIMIT 1", "order"},
		{"SELECT id FROM items ORDER BY embedding <-> '[1]', id USING > LIMIT 1", "order"},
		{"SELECT id FROM items ORDER BY id, embedding <-> '[1]' LIMIT 1", ""},
		{"SELECT id FROM items ORDER BY embedding <-> other_column LIMIT 1", "vector expression"},
		{"SELECT id FROM items ORDER BY embedding <-> (SELECT embedding FROM items WHERE id = 1) LIMIT 1", "vector sub-select"},
		{"SELECT id FROM items ORDER BY embedding OPERATOR(public.<->) '[1]' LIMIT 1", ""},
	}
	for _, c := range passed {
		if q, reason := recognize(c.sql); q != nil || reason != c.reason {
			t.Errorf("%s: got accepted=%v reason %q, want passed through with reason %q", c.sql, q != nil, reason, c.reason)
		}
	}
}

// TestRestricted: the restricted statement reads the candidates' rows
// only where the name finds the table of the OID followed, its name
// quoted as written; the client's vector literal becomes a parameter.
func TestRestricted(t *testing.T) {
	bound := func(name string, n int) string {
		return fmt.Sprintf("CASE WHEN '%s'::pg_catalog.regclass OPERATOR(pg_catalog.=) '16389'::pg_catalog.oid THEN id = ANY($%d) ELSE false END", name, n)
	}
	for _, c := range []struct{ sql, want string }{
		{"SELECT id FROM items ORDER BY embedding <-> '[1]' LIMIT 10",
			"SELECT id FROM items WHERE " + bound(`"items"`, 1) + " ORDER BY embedding <-> $2 LIMIT 10"},
		{`SELECT id FROM "it's"."My Items" ORDER BY embedding <-> $1 LIMIT 10`,
			`SELECT id FROM "it's"."My Items" WHERE ` + bound(`"it''s"."My Items"`, 2) + " ORDER BY embedding <-> $1 LIMIT 10"},
		// A literal vector becomes one parameter wherever it is a
		// distance's operand; the same text elsewhere stays as it is.
		{"SELECT id, 1 - (embedding <=> '[1,2]'::vector) AS s, '[1,2]' AS t FROM items WHERE note <> '[1,2]' ORDER BY embedding <=> '[1,2]'::vector LIMIT 5",
			"SELECT id, 1 - (embedding <=> $2::vector) AS s, '[1,2]' AS t FROM items WHERE note <> '[1,2]' AND " + bound(`"items"`, 1) + " ORDER BY embedding <=> $2::vector LIMIT 5"},
		{"SELECT id, '[1,2]' <-> embedding AS d FROM items ORDER BY '[1,2]' <-> embedding LIMIT 5",
			"SELECT id, $2 <-> embedding AS d FROM items WHERE " + bound(`"items"`, 1) + " ORDER BY $2 <-> embedding LIMIT 5"},
		{"SELECT * FROM items i WHERE a = $1 OR b ORDER BY i.embedding <=> $2 LIMIT 3 OFFSET 1",
			"SELECT * FROM items i WHERE (a = $1 OR b) AND " + bound(`"items"`, 3) + " ORDER BY i.embedding <=> $2 LIMIT 3 OFFSET 1"},
	} {
		q, reason := recognize(c.sql)
		if q == nil {
			t.Fatalf("%s: not accepted (%s)", c.sql, reason)
		}
		got, err := q.restricted("id", 16389)
		if err != nil || got != c.want {
			t.Errorf("%s: got %q, %v; want %q", c.sql, got, err, c.want)
		}
		// The client's own statement is left as it was.
		fresh, _ := recognize(c.sql)
		after, err1 := pg_query.Deparse(q.tree)
		before, err2 := pg_query.Deparse(fresh.tree)
		if err1 != nil || err2 != nil || after != before {
			t.Errorf("%s: the statement deparses as %q after, %q before (%v, %v)", c.sql, after, before, err1, err2)
		}
	}
}

// TestReadsVector: the fast path is for statements whose targets cannot
// show the vector column.
func TestReadsVector(t *testing.T) {
	for sql, want := range map[string]bool{
		"SELECT id FROM items ORDER BY embedding <-> '[1]' LIMIT 1":                                                   false,
		"SELECT id, note || 'x', tenant + 1 FROM items WHERE embedding IS NOT NULL ORDER BY embedding <-> $1 LIMIT 1": false,
		"SELECT * FROM items ORDER BY embedding <-> $1 LIMIT 1":                                                       true,
		"SELECT i.* FROM items i ORDER BY i.embedding <-> $1 LIMIT 1":                                                 true,
		"SELECT id, embedding <-> $1 AS d FROM items ORDER BY embedding <-> $1 LIMIT 1":                               true,
		"SELECT id, i.embedding IS NULL FROM items i ORDER BY embedding <-> $1 LIMIT 1":                               true,
		"SELECT ARRAY[id, (embedding <#> $1)::int8] FROM items ORDER BY embedding <#> $1 LIMIT 1":                     true,
	} {
		q, reason := recognize(sql)
		if q == nil {
			t.Fatalf("%s: not accepted (%s)", sql, reason)
		}
		if got := q.readsVector(); got != want {
			t.Errorf("%s: readsVector %v, want %v", sql, got, want)
		}
	}
}

// TestCodeBytes: what the parse bound counts of a statement, its bytes
// outside literals, names and comments, never less than PostgreSQL's
// parser would take for code.
func TestCodeBytes(t *testing.T) {
	for sql, want := range map[string]int{
		"SELECT 1":                       8,
		"SELECT '{1,2,3}'":               7,
		"SELECT 'it''s', 1":              10,
		`SELECT E'a\'b', 1`:              11, // E'…' escapes; E counts as code
		`SELECT 'a\', 1`:                 10, // backslash is no escape in '…'
		`SELECT "a""b" FROM t`:           14,
		"SELECT $$a'b$$, $1":             11,
		"SELECT $tag$x$y$tag$ + 1":       11,
		"SELECT a$b$c FROM t":            19, // a name, not a dollar quote
		"SELECT 1 -- '\nFROM t":          16,
		"SELECT /* a /* b */ ' */ 1":     9,
		"SELECT 'unterminated, 1, 2, 3":  7,
		"SELECT $$unterminated, 1, 2, 3": 7,
		"SELECT 1, 2 /* unterminated, 3": 12,
	} {
		if got := codeBytes(sql); got != want {
			t.Errorf("codeBytes(%q) = %d, want %d", sql, got, want)
		}
	}
	big := largeStatement("{1,2}")
	if got := codeBytes(big); got < len(big)-10 {
		t.Errorf("a MiB of literals: %d bytes of code, want nearly all of %d", got, len(big))
	}
}
