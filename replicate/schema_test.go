package replicate

import (
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/vecside/vecside/indexer"
	"github.com/vecside/vecside/internal/pgtest"
	"github.com/vecside/vecside/internal/workload"
)

// waitFailed waits, bounded by d, until e is in the error state, and
// returns why.
func waitFailed(t testing.TB, e *indexer.Entry, d time.Duration) string {
	t.Helper()
	for deadline := time.Now().Add(d); ; time.Sleep(20 * time.Millisecond) {
		state, msg := e.State()
		if state == indexer.StateError {
			return msg
		}
		if time.Now().After(deadline) {
			t.Fatalf("index %s still %s after %s, want error", e.Spec().Name, state, d)
		}
	}
}

// waitCopied waits, bounded, until e is ready after a copy of rows rows:
// an index restored from a checkpoint is ready for a moment before it is
// found stale.
func waitCopied(t testing.TB, e *indexer.Entry, rows int64) {
	t.Helper()
	for deadline := time.Now().Add(15 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		st := e.Status()
		if st.State == indexer.StateReady && st.CopiedRows == rows {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("index %s: %s with %d rows copied, want ready after copying %d", e.Spec().Name, st.State, st.CopiedRows, rows)
		}
	}
}

// waitCheckpointed waits, bounded, for e's first checkpoint.
func waitCheckpointed(t testing.TB, e *indexer.Entry) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); e.Durable().Covered() == 0; time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("index %s: no checkpoint after 10s", e.Spec().Name)
		}
	}
}

// assertMentions checks that an error message says each of words.
func assertMentions(t testing.TB, msg string, words ...string) {
	t.Helper()
	for _, w := range words {
		if !strings.Contains(msg, w) {
			t.Errorf("error %q does not say %q", msg, w)
		}
	}
}

// twoTables creates a and b with rows each, and unrelated, indexes both,
// and starts a replicator that checkpoints after every change.
func twoTables(t *testing.T, rows int, cfg Config) (h *harness, ea, eb *indexer.Entry) {
	t.Helper()
	h = newHarness(t, fmt.Sprintf(`CREATE TABLE a (id int PRIMARY KEY, v real[]);
		CREATE TABLE b (id int PRIMARY KEY, v real[]);
		CREATE TABLE unrelated (x int);
		INSERT INTO a SELECT g, ARRAY[g, 1]::real[] FROM generate_series(1, %[1]d) g;
		INSERT INTO b SELECT g, ARRAY[g, 2]::real[] FROM generate_series(1, %[1]d) g`, rows))
	ea = h.add("a_v=a(v) key=id metric=l2")
	eb = h.add("b_v=b(v) key=id metric=l2")
	h.checkpointChanges = 1
	h.start(cfg)
	waitReady(t, ea)
	waitReady(t, eb)
	return h, ea, eb
}

// TestChangedKeyIsCopiedAgain: a Relation message in which the key
// column has another type, or is missing, empties the index on that
// table and copies the table again as it is now, with no restart: the
// new type is read, the column is published again; the other table's
// index streams on, and a restart resumes both from their checkpoints.
func TestChangedKeyIsCopiedAgain(t *testing.T) {
	for _, tc := range []struct {
		name, ddl string
		says      []string
		keyType   uint32 // the OID of the type it reads keys as after
	}{
		// The column list refuses ALTER COLUMN … TYPE: done by hand, the
		// table leaves the publication for the change.
		{"type changed", `BEGIN; ALTER PUBLICATION vecside DROP TABLE a;
			ALTER TABLE a ALTER COLUMN id TYPE bigint;
			ALTER PUBLICATION vecside ADD TABLE a (id, v); COMMIT`, []string{"key column", "changed type", "OID 20", "was int4", "copying the table again"}, 20},
		// Inserts still work; the application's updates would not.
		{"unpublished", `ALTER PUBLICATION vecside SET TABLE a (v), b (id, v)`, []string{"key column", "no longer published", "publishing it again"}, 23},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var logged strings.Builder
			var mu sync.Mutex
			// The health check never runs: the stream's Relation message
			// is what tells.
			cfg := Config{DataDir: t.TempDir(), StatusInterval: time.Hour, HealthInterval: time.Hour,
				Logger: slog.New(slog.NewTextHandler(io.MultiWriter(testWriter{t}, lockedWriter{&mu, &logged}), nil))}
			h, ea, eb := twoTables(t, 10, cfg)
			waitCheckpointed(t, ea)
			h.exec(tc.ddl)
			h.exec(`INSERT INTO a VALUES (11, ARRAY[11, 1]::real[])`)
			h.exec(`INSERT INTO b VALUES (11, ARRAY[11, 2]::real[])`)
			waitCopied(t, ea, 11)
			mu.Lock()
			assertMentions(t, logged.String(), append([]string{"index waiting"}, tc.says...)...)
			mu.Unlock()
			if got := ea.KeyType().OID(); got != tc.keyType {
				t.Errorf("the index reads its key as type OID %d, want %d", got, tc.keyType)
			}
			h.exec(`UPDATE a SET v = ARRAY[0, 0]::real[] WHERE id <= 3`)
			h.exec(`UPDATE b SET v = ARRAY[0, 0]::real[] WHERE id <= 3`)
			h.exec(`DELETE FROM b WHERE id = 4`)
			h.catchUpWithin(15 * time.Second)
			h.assertConverged(ea, 2)
			h.assertConverged(eb, 2)
			if n := eb.Status().CopiedRows; n != 10 {
				t.Errorf("b copied %d rows; it should have streamed on from its first copy of 10", n)
			}
			select {
			case err := <-h.done:
				t.Fatalf("the replicator stopped: %v", err)
			default:
			}

			h.restart(cfg)
			ea, eb = h.ix.Entries()[0], h.ix.Entries()[1]
			waitReady(t, ea)
			waitReady(t, eb)
			h.assertConverged(ea, 2)
			h.assertConverged(eb, 2)
			if n := ea.Status().CopiedRows + eb.Status().CopiedRows; n != 0 {
				t.Errorf("after the restart %d rows were copied; both should resume from their checkpoints", n)
			}
		})
	}
}

// TestChangedVectorColumnIsCopiedAgain: the vector column rewritten to
// another dimension (by hand, the table out of the publication for it,
// as its column list requires) is copied again with no restart: the
// index holds the new vectors, of the new dimension. Put back in the
// same transaction, the stream says the type changed; left out, the
// health check finds the table gone from the publication, which also
// catches a rewrite to the same type, of which the stream says nothing.
func TestChangedVectorColumnIsCopiedAgain(t *testing.T) {
	for _, tc := range []struct {
		name, alter, typ string
		health           time.Duration
	}{
		{"another type, put back at once", `ALTER TABLE a ALTER COLUMN v TYPE double precision[] USING v || 7::real;
			ALTER PUBLICATION vecside ADD TABLE a (id, v)`, "double precision[]", time.Hour},
		{"the same type, put back by the health check", `ALTER TABLE a ALTER COLUMN v TYPE real[] USING v || 7::real`, "real[]", 100 * time.Millisecond},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h, ea, eb := twoTables(t, 10, Config{DataDir: t.TempDir(), StatusInterval: time.Hour, HealthInterval: tc.health, Logger: testLogger(t)})
			waitCheckpointed(t, ea)
			h.exec(`BEGIN; ALTER PUBLICATION vecside DROP TABLE a; ` + tc.alter + `; COMMIT`)
			h.exec(`INSERT INTO a VALUES (11, ARRAY[11, 1, 7])`)
			waitCopied(t, ea, 11)
			if st := ea.Status(); st.Dims != 3 {
				t.Errorf("the index copied again has %d dimensions, want 3", st.Dims)
			}
			if got := ea.VectorType().String(); got != tc.typ {
				t.Errorf("the index reads its vectors as %s, want %s", got, tc.typ)
			}
			h.exec(`UPDATE a SET v = ARRAY[0, 0, 7] WHERE id <= 3`)
			h.exec(`INSERT INTO b VALUES (11, ARRAY[11, 2]::real[])`)
			h.catchUpWithin(15 * time.Second)
			h.assertConverged(ea, 3)
			h.assertConverged(eb, 2)
			select {
			case err := <-h.done:
				t.Fatalf("the replicator stopped: %v", err)
			default:
			}
		})
	}
}

// TestDimsContradictingTypmodFailsOnlyItsIndex: dims=4 on a vector(3)
// column fails that index with both dimensions and the fix; the other
// index is served, and the slot follows the WAL.
func TestDimsContradictingTypmodFailsOnlyItsIndex(t *testing.T) {
	h := newHarness(t, pgtest.StandInVector+`CREATE TABLE a (id int PRIMARY KEY, embedding vector(3));
		INSERT INTO a VALUES (1, '\x000300003f800000c02000003e000000');
		CREATE TABLE b (id int PRIMARY KEY, v real[]);
		CREATE TABLE unrelated (x int);
		INSERT INTO b SELECT g, ARRAY[g, 1]::real[] FROM generate_series(1, 20) g`)
	ea := h.add("a_e=a(embedding) key=id metric=l2 dims=4")
	eb := h.add("b_v=b(v) key=id metric=l2")
	h.checkpointChanges = 1
	h.start(Config{DataDir: t.TempDir(), StatusInterval: 100 * time.Millisecond})
	assertMentions(t, waitFailed(t, ea, 10*time.Second), "dims=4", "vector(3)", "dims=3")
	waitReady(t, eb)
	h.exec(`UPDATE b SET v = ARRAY[0, 0]::real[] WHERE id <= 5`)
	h.exec(`DELETE FROM b WHERE id > 15`)
	h.assertConverged(eb, 2)
	h.assertSlotFollowsIdleWAL(15 * time.Second)
}

// TestRenamedColumnsAreFollowed renames the vector column and then the
// key column while rows are inserted: the index stays ready, and the
// changes after each rename arrive, a row read back by key (under the new
// names) included. A restart from the checkpoint, with the definition
// still naming the old columns, follows the renames too.
func TestRenamedColumnsAreFollowed(t *testing.T) {
	const dims, rows = 768, 50
	h := newHarness(t, workload.CreateTable(rows, dims))
	e := h.add("items_embedding=items(embedding) key=id metric=l2")
	cfg := Config{DataDir: t.TempDir(), StatusInterval: 100 * time.Millisecond, HealthInterval: 100 * time.Millisecond}
	h.start(cfg)
	waitReady(t, e)

	writer, err := pgx.Connect(h.ctx, h.dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer writer.Close(h.ctx)
	var wg sync.WaitGroup
	wg.Add(1)
	go func() { // names no column: it goes on through the renames
		defer wg.Done()
		rng := rand.New(rand.NewPCG(5, 6))
		for id := 1000; id < 1100; id++ {
			if _, err := writer.Exec(h.ctx, `INSERT INTO items VALUES ($1, 'w', $2)`, id, workload.Vector(rng, dims)); err != nil {
				t.Errorf("insert %d: %v", id, err)
				return
			}
		}
	}()
	rng := rand.New(rand.NewPCG(3, 4))
	v := func() string { return workload.Vector(rng, dims) }
	h.exec(`ALTER TABLE items RENAME COLUMN embedding TO emb_old`)
	h.exec(`UPDATE items SET emb_old = $1 WHERE id = 1`, v())
	h.exec(`DELETE FROM items WHERE id = 2`)
	h.exec(`ALTER TABLE items RENAME COLUMN id TO item_id`)
	h.exec(`UPDATE items SET emb_old = $1 WHERE item_id = 3`, v())
	h.exec(`UPDATE items SET item_id = 20004 WHERE item_id = 4`)
	h.exec(`DELETE FROM items WHERE item_id = 5`)
	h.catchUp()
	e.Stream().Delete(mustKey(t, e, "6")) // as if the index had lost the row: it is read back
	h.exec(`UPDATE items SET note = 'only the note' WHERE item_id = 6`)
	wg.Wait()
	h.assertConvergedAs(e, dims, "item_id", "emb_old")
	if state, msg := e.State(); state != indexer.StateReady {
		t.Fatalf("after the renames the index is %s: %s", state, msg)
	}
	if n := h.rep.Stats().Repairs.Load(); n != 1 {
		t.Errorf("%d repair reads, want 1", n)
	}

	h.restart(cfg)
	e = h.ix.Entries()[0]
	waitReady(t, e)
	h.exec(`INSERT INTO items VALUES (30001, 'after', $1)`, v())
	h.exec(`UPDATE items SET emb_old = $1 WHERE item_id = 7`, v())
	h.exec(`DELETE FROM items WHERE item_id = 8`)
	h.assertConvergedAs(e, dims, "item_id", "emb_old")
	if n := h.rep.Stats().CopiedRows.Load(); n != 0 {
		t.Errorf("the restart copied %d rows; it should resume from the checkpoint", n)
	}
}

// TestIndexInErrorDoesNotHoldTheSlot: with one index in error, the slot
// follows the other's checkpoints and the idle WAL; with every index in
// error, it still follows the WAL.
func TestIndexInErrorDoesNotHoldTheSlot(t *testing.T) {
	h, ea, eb := twoTables(t, 10, Config{DataDir: t.TempDir(), StatusInterval: 100 * time.Millisecond, HealthInterval: 100 * time.Millisecond})
	h.exec(`ALTER TABLE a DROP COLUMN v CASCADE`)
	waitFailed(t, ea, 10*time.Second)
	h.exec(`INSERT INTO b VALUES (11, ARRAY[11, 2]::real[])`)
	h.exec(`UPDATE b SET v = ARRAY[0, 0]::real[] WHERE id <= 3`)
	h.assertConverged(eb, 2)
	h.assertSlotFollowsIdleWAL(15 * time.Second)

	h.exec(`ALTER TABLE b DROP COLUMN v CASCADE`)
	waitFailed(t, eb, 10*time.Second)
	h.assertSlotFollowsIdleWAL(15 * time.Second)
}

// TestStaleCheckpointCopiesOnlyItsTable: an index restored from a
// checkpoint that the slot has confirmed past (here an older copy of its
// file) has lost the changes between: only its table is copied again,
// while the other index resumes streaming, and both converge.
func TestStaleCheckpointCopiesOnlyItsTable(t *testing.T) {
	const rows = 300
	dir := t.TempDir()
	cfg := Config{DataDir: dir, StatusInterval: 100 * time.Millisecond}
	h, ea, eb := twoTables(t, rows, cfg)
	waitCheckpointed(t, ea)
	waitCheckpointed(t, eb)
	stale, staleLSN := eb.Durable().CheckpointPath(dir), eb.Durable().Covered()
	old, err := os.ReadFile(stale)
	if err != nil {
		t.Fatal(err)
	}
	h.exec(`INSERT INTO a VALUES (301, ARRAY[301, 1]::real[])`)
	h.exec(`UPDATE b SET v = ARRAY[0, 0]::real[] WHERE id <= 10`)
	h.exec(`DELETE FROM b WHERE id BETWEEN 11 AND 20`)
	h.catchUp()
	h.assertSlotFollowsIdleWAL(15 * time.Second)
	if h.confirmed() <= staleLSN {
		t.Fatalf("the slot is at %s, not past the stale checkpoint's %s", h.confirmed(), staleLSN)
	}
	h.stop()
	if err := os.WriteFile(stale, old, 0o600); err != nil {
		t.Fatal(err)
	}

	h.restart(cfg)
	ea, eb = h.ix.Entries()[0], h.ix.Entries()[1]
	waitReady(t, ea)
	waitCopied(t, eb, rows-10)
	h.exec(`UPDATE a SET v = ARRAY[-1, -1]::real[] WHERE id <= 5`)
	h.exec(`INSERT INTO b VALUES (301, ARRAY[301, 2]::real[])`)
	h.exec(`DELETE FROM b WHERE id BETWEEN 21 AND 30`)
	h.assertConverged(ea, 2)
	h.assertConverged(eb, 2)
	if a, b := ea.Status().CopiedRows, eb.Status().CopiedRows; a != 0 || b != rows-10 {
		t.Errorf("copied_rows a=%d b=%d, want 0 (resumed) and %d (copied again)", a, b, rows-10)
	}
	if n := h.rep.Stats().CopiedRows.Load(); n != rows-10 {
		t.Errorf("copied %d rows, want only b's %d", n, rows-10)
	}
}
