package declared

import (
	"context"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/vecside/vecside/internal/pgtest"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

func connect(t *testing.T, setup string) *pgx.Conn {
	t.Helper()
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, pgtest.Shared(t).NewDatabase(t))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close(ctx) })
	if _, err := conn.Exec(ctx, setup); err != nil {
		t.Fatal(err)
	}
	return conn
}

// TestFind: the pgvector indexes and the commented columns of a database
// become index definitions, with the metric of the operator class, the
// table's replica-identity key and an HNSW index's build options (a
// partitioned table's on its parent); what
// cannot be served is skipped with why, and the filter leaves tables out.
func TestFind(t *testing.T) {
	conn := connect(t, pgtest.StandInPgvectorIndexes+`
		CREATE SCHEMA app;
		CREATE TABLE items (id bigint PRIMARY KEY, embedding real[], other real[], "Other" real[], body text);
		CREATE TABLE app.docs (code text NOT NULL, v real[]);
		CREATE UNIQUE INDEX docs_code ON app.docs (code);
		ALTER TABLE app.docs REPLICA IDENTITY USING INDEX docs_code;
		CREATE TABLE nokey (id int, v real[]);
		CREATE TABLE scratch (id int PRIMARY KEY, v real[]);
		CREATE INDEX items_embedding_idx ON items USING hnsw (embedding vector_cosine_ops);
		CREATE INDEX items_l2 ON items USING ivfflat (embedding vector_l2_ops);
		CREATE INDEX items_l1 ON items USING hnsw (embedding vector_l1_ops);
		CREATE INDEX items_expr ON items USING hnsw ((embedding || ARRAY[1::real]) vector_cosine_ops);
		CREATE DOMAIN halfvec AS real[];
		CREATE OPERATOR CLASS halfvec_ip_ops FOR TYPE halfvec USING hnsw AS OPERATOR 1 = (anyarray, anyarray), FUNCTION 1 hash_array(anyarray);
		CREATE INDEX items_half ON items USING hnsw ((other::halfvec) halfvec_ip_ops);
		CREATE INDEX items_half_quoted ON items USING hnsw (("Other"::halfvec) halfvec_ip_ops);
		CREATE INDEX ON app.docs USING ivfflat (v vector_ip_ops);
		CREATE INDEX ON nokey USING hnsw (v vector_l2_ops);
		CREATE INDEX ON scratch USING hnsw (v vector_l2_ops);
		CREATE TABLE parts (id int PRIMARY KEY, embedding real[]) PARTITION BY RANGE (id);
		CREATE TABLE parts_1 PARTITION OF parts FOR VALUES FROM (0) TO (100);
		CREATE INDEX parts_idx ON parts USING hnsw (embedding vector_l2_ops);
		COMMENT ON COLUMN items.other IS 'vecside: metric=ip kind=ivf store=ext8';
		COMMENT ON COLUMN items.embedding IS 'vecside: metric=cosine kind=flat';
		COMMENT ON COLUMN items.body IS 'vecside: metric=manhattan';
		COMMENT ON COLUMN items.id IS 'the key'`)
	f, err := ParseFilter([]string{"!public.scratch"})
	if err != nil {
		t.Fatal(err)
	}
	found, skipped, err := Find(context.Background(), conn, f)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, d := range found {
		got = append(got, d.Spec.String()+" <- "+d.From)
	}
	want := []string{
		`items_embedding="public"."items"("embedding") key="id" metric=cosine kind=flat <- comment on public.items.embedding`,
		`items_other="public"."items"("other") key="id" metric=ip kind=ivf store=ext8 <- comment on public.items.other`,
		`app_docs_v_idx="app"."docs"("v") key="code" metric=ip kind=hnsw <- pgvector index app.docs_v_idx`,
		`items_half_quoted="public"."items"("Other") key="id" metric=ip kind=hnsw <- pgvector index public.items_half_quoted`,
		`items_l2="public"."items"("embedding") key="id" metric=l2 kind=hnsw <- pgvector index public.items_l2`,
		// The parent's index, not each partition's: the publication
		// publishes a partitioned table's changes as its root's.
		`parts_idx="public"."parts"("embedding") key="id" metric=l2 kind=hnsw <- pgvector index public.parts_idx`,
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("found:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	why := map[string]string{}
	for _, s := range skipped {
		why[s.From] = s.Why
	}
	for from, says := range map[string]string{
		"comment on public.items.body":              "manhattan",
		"pgvector index public.items_l1":            "vector_l1_ops has no metric",
		"pgvector index public.items_expr":          "expression",
		"pgvector index public.nokey_v_idx":         "no single-column primary key",
		"pgvector index public.items_embedding_idx": "another declaration serves",
		"pgvector index public.items_half":          "another declaration serves",
	} {
		if !strings.Contains(why[from], says) {
			t.Errorf("%s: skipped for %q, want a reason saying %q", from, why[from], says)
		}
	}
	if len(skipped) != 6 {
		t.Errorf("%d skipped, want 6 (the filtered-out table is not reported): %+v", len(skipped), skipped)
	}
}

// TestHalfvecExpressions: pgvector's halfvec expression index is served
// from the column it casts, wherever the extension's schema is; any
// other expression is not.
func TestHalfvecExpressions(t *testing.T) {
	for expression, column := range map[string]string{
		"((embedding)::halfvec(768))":             "embedding",
		"((embedding)::extensions.halfvec(3))":    "embedding",
		`(("My ""Emb""")::halfvec)`:               `My "Emb"`,
		"((embedding)::halfvec(768)[])":           "",
		"(((embedding)::halfvec(768))::vector)":   "",
		"(l2_normalize(embedding)::halfvec(768))": "",
		"((a || b)::halfvec)":                     "",
	} {
		if got := halfvecOf(expression); got != column {
			t.Errorf("%s: column %q, want %q", expression, got, column)
		}
	}
}

// TestHNSWOptionsCarryOver: a pgvector HNSW index's m and
// ef_construction become the declared index's; other reloptions, and an
// IVFFlat index's lists, do not translate.
func TestHNSWOptionsCarryOver(t *testing.T) {
	if got := hnswOptions("hnsw", []string{"m=24", "ef_construction=100", "fillfactor=90"}); got != " m=24 ef_construction=100" {
		t.Errorf("hnsw: %q", got)
	}
	if got := hnswOptions("ivfflat", []string{"lists=100"}); got != "" {
		t.Errorf("ivfflat: %q", got)
	}
}

// TestNamesAreUniqueAndValid: names made from SQL names are ones --index
// accepts, and never taken twice.
func TestNamesAreUniqueAndValid(t *testing.T) {
	names := map[string]bool{"items_v": true}
	for _, c := range []struct{ schema, base, want string }{
		{"public", "items_v", "items_v_2"},
		{"public", "Items-V2", "items_v2"},
		{"App", "9lives", "app_9lives"},
		{"public", "9lives", "i_9lives"},
		{"public", strings.Repeat("x", 80), strings.Repeat("x", 58)},
	} {
		got := unique(names, c.schema, c.base)
		names[got] = true
		if got != c.want {
			t.Errorf("unique(%s, %s) = %s, want %s", c.schema, c.base, got, c.want)
		}
	}
	if _, err := ParseFilter([]string{"items"}); err == nil {
		t.Error("a pattern without a schema was accepted")
	}
}
