package sidecar

import (
	"context"
	"errors"
	"io"
	"io/fs"
	"log/slog"
	"os"
	"testing"
	"time"

	"github.com/vecside/vecside/indexer"
	"github.com/vecside/vecside/internal/pgtest"
)

// TestServesDeclaredIndexes: a sidecar started with no --index serves the
// database's pgvector index and its commented column, and follows them
// while it runs, with no restart: an index created is served within
// seconds, one dropped is let go (its checkpoint removed) while the
// others serve on, a comment changed is a new index, and an --index of
// the same column takes a declaration's place.
func TestServesDeclaredIndexes(t *testing.T) {
	ctx := context.Background()
	dsn, exec := declaringDatabase(t)
	exec(`
		CREATE TABLE items (id int PRIMARY KEY, embedding real[], other real[]);
		INSERT INTO items SELECT g, ARRAY[g, 1]::real[], ARRAY[1, g]::real[] FROM generate_series(1, 50) g;
		CREATE TABLE docs (id int PRIMARY KEY, v real[]);
		INSERT INTO docs SELECT g, ARRAY[g, 2]::real[] FROM generate_series(1, 30) g;
		CREATE INDEX items_embedding_idx ON items USING hnsw (embedding vector_cosine_ops);
		COMMENT ON COLUMN items.other IS 'vecside: metric=l2 kind=flat'`)
	dir := t.TempDir()
	cfg := Config{Source: dsn, Name: "vecside", Listen: "127.0.0.1:0", Auth: "trust", DataDir: dir, CheckpointInterval: 50 * time.Millisecond,
		Discovery: Discovery{Interval: 100 * time.Millisecond}, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))}
	sc, err := Start(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer sc.Stop()
	served := func(name string, rows int, metric string) func() bool {
		return func() bool {
			e, err := sc.Indexer.Get(name)
			if err != nil {
				return false
			}
			st := e.Status()
			return st.State == indexer.StateReady && st.Rows == rows && st.Metric.String() == metric
		}
	}
	waitFor(t, "the pgvector index to be served", served("items_embedding_idx", 50, "cosine"))
	waitFor(t, "the commented column to be served", served("items_other", 50, "l2"))
	if e, _ := sc.Indexer.Get("items_embedding_idx"); e.Spec().Kind != "hnsw" || e.Spec().Key != "id" {
		t.Errorf("the pgvector index is served as %s", e.Spec())
	}

	created := time.Now()
	exec(`CREATE INDEX docs_v_idx ON docs USING ivfflat (v vector_l2_ops)`)
	waitFor(t, "a pgvector index created while serving to be served", served("docs_v_idx", 30, "l2"))
	t.Logf("served %v after CREATE INDEX", time.Since(created).Round(time.Millisecond))

	// A table renamed keeps its index, which follows it with no copy; the
	// declaration names the new table from now on.
	before, _ := sc.Indexer.Get("docs_v_idx")
	exec(`ALTER TABLE docs RENAME TO documents`)
	waitFor(t, "the index to show the renamed table", func() bool { return before.Status().Table == "public.documents" })
	time.Sleep(300 * time.Millisecond) // three syncs of the declarations
	if after, err := sc.Indexer.Get("docs_v_idx"); err != nil || after != before || after.Status().CopiedRows != 30 || after.Status().State != indexer.StateReady {
		t.Errorf("after the rename the index is %v (%v), want the same one, ready, never copied again", after, err)
	}
	exec(`ALTER TABLE documents RENAME TO docs`)

	waitFor(t, "a checkpoint of items_embedding_idx", func() bool {
		_, err := os.Stat(checkpointOf(t, sc, dir, "items_embedding_idx"))
		return err == nil
	})
	checkpoint := checkpointOf(t, sc, dir, "items_embedding_idx")
	exec(`DROP INDEX items_embedding_idx`)
	waitFor(t, "a dropped pgvector index to be let go", func() bool { _, err := sc.Indexer.Get("items_embedding_idx"); return err != nil })
	if _, err := os.Stat(checkpoint); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("the checkpoint of the index let go is still there: %v", err)
	}
	exec(`INSERT INTO items VALUES (51, '{51,1}', '{1,51}'); INSERT INTO docs VALUES (31, '{31,2}')`)
	waitFor(t, "the others to serve on", func() bool { return served("items_other", 51, "l2")() && served("docs_v_idx", 31, "l2")() })

	exec(`COMMENT ON COLUMN items.other IS 'vecside: metric=cosine kind=flat'`)
	waitFor(t, "a changed comment to be a new index", served("items_other", 51, "cosine"))
	exec(`COMMENT ON COLUMN items.other IS NULL`)
	waitFor(t, "a removed comment to let its index go", func() bool { _, err := sc.Indexer.Get("items_other"); return err != nil })
	if n := len(sc.Indexer.Entries()); n != 1 {
		t.Errorf("%d indexes served, want docs_v_idx alone", n)
	}
}

// TestIndexFlagTakesADeclarationsPlace: with --discover on beside an
// --index of the same column and metric, the flag's definition is
// served, not the declaration.
func TestIndexFlagTakesADeclarationsPlace(t *testing.T) {
	ctx := context.Background()
	dsn, exec := declaringDatabase(t)
	exec(`CREATE TABLE items (id int PRIMARY KEY, embedding real[]);
		INSERT INTO items SELECT g, ARRAY[g, 1]::real[] FROM generate_series(1, 20) g;
		CREATE INDEX items_embedding_idx ON items USING hnsw (embedding vector_cosine_ops);
		CREATE INDEX items_l2 ON items USING hnsw (embedding vector_l2_ops)`)
	sc, err := Start(ctx, Config{Source: dsn, Name: "vecside", Listen: "127.0.0.1:0", Auth: "trust",
		Indexes:   []string{"mine=items(embedding) key=id metric=cosine kind=flat"},
		Discovery: Discovery{Mode: "on", Interval: 100 * time.Millisecond}, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	defer sc.Stop()
	waitFor(t, "both indexes to be ready", func() bool {
		return stateOf(sc, "mine") == indexer.StateReady && stateOf(sc, "items_l2") == indexer.StateReady
	})
	if _, err := sc.Indexer.Get("items_embedding_idx"); err == nil {
		t.Error("the declaration that --index replaces is served too")
	}
}

// declaringDatabase is a new database with pgvector's access methods and
// operator classes stood in for, and a function that runs SQL there.
func declaringDatabase(t *testing.T) (dsn string, exec func(sql string)) {
	t.Helper()
	dsn = pgtest.Shared(t).NewDatabase(t)
	db := pgtest.Connect(t, dsn)
	exec = func(sql string) {
		t.Helper()
		if _, err := db.Exec(context.Background(), sql); err != nil {
			t.Fatalf("%s: %v", sql, err)
		}
	}
	exec(pgtest.StandInPgvectorIndexes)
	return dsn, exec
}

func checkpointOf(t *testing.T, sc *Sidecar, dir, name string) string {
	t.Helper()
	e, err := sc.Indexer.Get(name)
	if err != nil {
		t.Fatal(err)
	}
	return e.Durable().CheckpointPath(dir)
}

// TestServesAPartitionedTablesIndex: a pgvector index on a partitioned
// table's parent is served as one index of the parent, fed by every
// partition, one attached while it runs too.
func TestServesAPartitionedTablesIndex(t *testing.T) {
	dsn, exec := declaringDatabase(t)
	exec(`CREATE TABLE parts (id int PRIMARY KEY, embedding real[]) PARTITION BY RANGE (id);
		CREATE TABLE parts_low PARTITION OF parts FOR VALUES FROM (0) TO (100);
		CREATE TABLE parts_high PARTITION OF parts FOR VALUES FROM (100) TO (200);
		INSERT INTO parts SELECT g, ARRAY[g, 1]::real[] FROM generate_series(1, 150) g;
		CREATE INDEX parts_idx ON parts USING hnsw (embedding vector_l2_ops)`)
	sc, err := Start(context.Background(), Config{Source: dsn, Name: "vecside", Listen: "127.0.0.1:0", Auth: "trust",
		Discovery: Discovery{Interval: 100 * time.Millisecond}, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	defer sc.Stop()
	rows := func(n int) func() bool {
		return func() bool {
			e, err := sc.Indexer.Get("parts_idx")
			return err == nil && e.Status().State == indexer.StateReady && e.Status().Rows == n
		}
	}
	waitFor(t, "the parent's index to hold every partition's rows", rows(150))
	exec(`CREATE TABLE parts_more PARTITION OF parts FOR VALUES FROM (200) TO (300);
		INSERT INTO parts VALUES (250, '{250,1}'), (50, '{50,2}') ON CONFLICT (id) DO UPDATE SET embedding = excluded.embedding`)
	waitFor(t, "a row of a partition attached since", rows(151))
	if n := len(sc.Indexer.Entries()); n != 1 {
		t.Errorf("%d indexes served, want the parent's alone", n)
	}
}
