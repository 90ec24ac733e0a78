package declared

import (
	"context"
	"fmt"
	"path"
	"regexp"
	"strings"

	"github.com/jackc/pgx/v5"
	"github.com/vecside/vecside/indexer"
)

// Declaration is an index the database declares, and where it says so.
type Declaration struct {
	Spec indexer.Spec
	From string // "pgvector index public.items_embedding_idx", "comment on public.items.embedding"
	// TableOID is the table's pg_class OID: a declaration of a table
	// renamed since is the same table's.
	TableOID uint32
}

// Skipped is a declaration that cannot be served, and why.
type Skipped struct {
	From, Why string
}

// Filter limits which tables' declarations are served: schema.table
// globs (path.Match), those starting with "!" excluding. With no
// including pattern every table is included.
type Filter struct {
	include, exclude []string
}

// ParseFilter checks patterns, each "schema.table" with * and ?, or
// "!schema.table".
func ParseFilter(patterns []string) (Filter, error) {
	var f Filter
	for _, p := range patterns {
		p = strings.TrimSpace(p)
		exclude := strings.HasPrefix(p, "!")
		p = strings.TrimPrefix(p, "!")
		if !strings.Contains(p, ".") {
			return f, fmt.Errorf("table pattern %q: want schema.table, with * and ? (public.*)", p)
		}
		if _, err := path.Match(p, ""); err != nil {
			return f, fmt.Errorf("table pattern %q: %w", p, err)
		}
		if exclude {
			f.exclude = append(f.exclude, p)
		} else {
			f.include = append(f.include, p)
		}
	}
	return f, nil
}

func (f Filter) admits(schema, table string) bool {
	name := schema + "." + table
	match := func(patterns []string) bool {
		for _, p := range patterns {
			if ok, _ := path.Match(p, name); ok {
				return true
			}
		}
		return false
	}
	return (len(f.include) == 0 || match(f.include)) && !match(f.exclude)
}

// CommentPrefix starts a column comment that declares an index.
const CommentPrefix = "vecside:"

// DefaultKind is the kind of a declared index that names none.
const DefaultKind = "hnsw"

// replicaKey is, for table ct, its replica identity's column when it has
// one column: the key of every index declared on the table.
const replicaKey = `LEFT JOIN LATERAL (
	SELECT ka.attname FROM pg_index r JOIN pg_attribute ka ON ka.attrelid = r.indrelid AND ka.attnum = r.indkey[0]
	WHERE r.indrelid = ct.oid AND r.indnatts = 1 AND (r.indisreplident OR (r.indisprimary AND ct.relreplident = 'd'))
	LIMIT 1) k ON true`

const pgvectorSQL = `
SELECT ct.oid, n.nspname, ct.relname, ci.relname, am.amname, oc.opcname, coalesce(a.attname, ''),
	CASE WHEN x.indkey[0] = 0 THEN pg_get_indexdef(x.indexrelid, 1, false) ELSE '' END,
	coalesce(ci.reloptions, '{}'), coalesce(k.attname, ''), x.indisvalid
FROM pg_index x
JOIN pg_class ci ON ci.oid = x.indexrelid
JOIN pg_am am ON am.oid = ci.relam
JOIN pg_class ct ON ct.oid = x.indrelid
JOIN pg_namespace n ON n.oid = ct.relnamespace
JOIN pg_opclass oc ON oc.oid = x.indclass[0]
LEFT JOIN pg_attribute a ON a.attrelid = ct.oid AND a.attnum = x.indkey[0] AND x.indkey[0] <> 0
` + replicaKey + `
WHERE am.amname IN ('hnsw', 'ivfflat') AND ct.relkind IN ('r', 'p') AND NOT ct.relispartition
ORDER BY n.nspname, ci.relname`

const commentSQL = `
SELECT ct.oid, n.nspname, ct.relname, a.attname, d.description, coalesce(k.attname, '')
FROM pg_description d
JOIN pg_class ct ON ct.oid = d.objoid AND d.classoid = 'pg_catalog.pg_class'::regclass
JOIN pg_namespace n ON n.oid = ct.relnamespace
JOIN pg_attribute a ON a.attrelid = ct.oid AND a.attnum = d.objsubid AND NOT a.attisdropped
` + replicaKey + `
WHERE d.objsubid > 0 AND d.description LIKE 'vecside:%' AND ct.relkind IN ('r', 'p') AND NOT ct.relispartition
ORDER BY n.nspname, ct.relname, a.attnum`

// metrics maps pgvector's operator classes to metrics.
var metrics = map[string]string{
	"vector_l2_ops": "l2", "vector_cosine_ops": "cosine", "vector_ip_ops": "ip",
	"halfvec_l2_ops": "l2", "halfvec_cosine_ops": "cosine", "halfvec_ip_ops": "ip",
}

// Find lists the indexes the database declares on the tables f admits:
// a comment's first, then pgvector's, each column and metric once (a
// comment's declaration wins over a pgvector index of the same column
// and metric).
func Find(ctx context.Context, conn *pgx.Conn, f Filter) ([]Declaration, []Skipped, error) {
	var found []Declaration
	var skipped []Skipped
	names := map[string]bool{}
	seen := map[string]bool{} // schema.table(column) metric
	add := func(from string, oid uint32, def string) {
		spec, err := indexer.ParseSpec(def)
		if err != nil {
			skipped = append(skipped, Skipped{from, err.Error()})
			return
		}
		target := spec.QualifiedTable() + "(" + indexer.QuoteIdent(spec.Column) + ") " + spec.Metric.String()
		if seen[target] {
			skipped = append(skipped, Skipped{from, "another declaration serves " + target})
			return
		}
		seen[target], names[spec.Name] = true, true
		found = append(found, Declaration{spec, from, oid})
	}
	rows, err := conn.Query(ctx, commentSQL)
	if err != nil {
		return nil, nil, fmt.Errorf("reading column comments: %w", err)
	}
	var oid uint32
	var schema, table, column, comment, key string
	_, err = pgx.ForEachRow(rows, []any{&oid, &schema, &table, &column, &comment, &key}, func() error {
		if !f.admits(schema, table) {
			return nil
		}
		from := "comment on " + schema + "." + table + "." + column
		if why := noKey(key); why != "" {
			skipped = append(skipped, Skipped{from, why})
			return nil
		}
		opts := strings.TrimSpace(strings.TrimPrefix(comment, CommentPrefix))
		if !strings.Contains(" "+opts, " kind=") {
			opts += " kind=" + DefaultKind
		}
		add(from, oid, definition(unique(names, schema, table+"_"+column), schema, table, column, key, opts))
		return nil
	})
	if err != nil {
		return nil, nil, fmt.Errorf("reading column comments: %w", err)
	}
	rows, err = conn.Query(ctx, pgvectorSQL)
	if err != nil {
		return nil, nil, fmt.Errorf("reading pgvector indexes: %w", err)
	}
	var index, method, opclass, expression string
	var reloptions []string
	var valid bool
	_, err = pgx.ForEachRow(rows, []any{&oid, &schema, &table, &index, &method, &opclass, &column, &expression, &reloptions, &key, &valid}, func() error {
		if !f.admits(schema, table) {
			return nil
		}
		from := "pgvector index " + schema + "." + index
		if column == "" {
			column = halfvecOf(expression)
		}
		metric, known := metrics[opclass]
		why := noKey(key)
		switch {
		case !valid:
			why = "not valid yet (being built, or a CREATE INDEX CONCURRENTLY failed)"
		case column == "":
			why = "an index on an expression other than column::halfvec(n): declare its column with COMMENT ON COLUMN … IS 'vecside: …' instead"
		case !known:
			why = "operator class " + opclass + " has no metric here (l2, cosine and ip do)"
		}
		if why != "" {
			skipped = append(skipped, Skipped{from, why})
			return nil
		}
		opts := "metric=" + metric + " kind=" + DefaultKind + hnswOptions(method, reloptions)
		add(from, oid, definition(unique(names, schema, index), schema, table, column, key, opts))
		return nil
	})
	if err != nil {
		return nil, nil, fmt.Errorf("reading pgvector indexes: %w", err)
	}
	return found, skipped, nil
}

// halfvecCast is an index expression casting a column to halfvec, as
// pg_get_indexdef writes it: ((embedding)::halfvec(768)).
var halfvecCast = regexp.MustCompile(`^\(\(([a-z_][a-z0-9_$]*|"(?:[^"]|"")+")\)::(?:[a-z_][a-z0-9_$]*\.)?halfvec(?:\(\d+\))?\)$`)

// halfvecOf is the column an index expression casts to halfvec, or ""
// for any other expression. The sidecar serves such an index from the
// column's vectors: PostgreSQL ranks its candidates by the halfvec
// distance the statement computes.
func halfvecOf(expression string) string {
	m := halfvecCast.FindStringSubmatch(expression)
	if m == nil {
		return ""
	}
	if name, quoted := strings.CutPrefix(m[1], `"`); quoted {
		return strings.ReplaceAll(strings.TrimSuffix(name, `"`), `""`, `"`)
	}
	return m[1]
}

// noKey says why a table with replica-identity column key (empty: none
// of one column) cannot be served, or "".
func noKey(key string) string {
	if key != "" {
		return ""
	}
	return "the table has no single-column primary key or replica identity to key its rows by"
}

// hnswOptions carries a pgvector HNSW index's m and ef_construction over.
func hnswOptions(method string, reloptions []string) string {
	if method != "hnsw" {
		return ""
	}
	var out string
	for _, o := range reloptions {
		if k, v, _ := strings.Cut(o, "="); k == "m" || k == "ef_construction" {
			out += " " + k + "=" + v
		}
	}
	return out
}

func definition(name, schema, table, column, key, opts string) string {
	return fmt.Sprintf("%s=%s.%s(%s) key=%s %s", name, indexer.QuoteIdent(schema), indexer.QuoteIdent(table),
		indexer.QuoteIdent(column), indexer.QuoteIdent(key), opts)
}

var notInName = regexp.MustCompile(`[^a-z0-9_]+`)

// unique makes an index name of base (schema-qualified outside public)
// that --index accepts and that names has not taken.
func unique(names map[string]bool, schema, base string) string {
	if schema != "public" {
		base = schema + "_" + base
	}
	base = notInName.ReplaceAllString(strings.ToLower(base), "_")
	if base == "" || base[0] >= '0' && base[0] <= '9' {
		base = "i_" + base
	}
	base = base[:min(len(base), 58)]
	name := base
	for n := 2; names[name]; n++ {
		name = fmt.Sprintf("%s_%d", base, n)
	}
	return name
}
