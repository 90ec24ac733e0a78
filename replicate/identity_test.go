package replicate

import (
	"context"
	"io"
	"log/slog"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/vecside/vecside/indexer"
)

// tableIdentity is what the catalog says of a table: its OID, and the
// database's name.
func (h *harness) tableIdentity(table string) (oid uint32, db string) {
	h.t.Helper()
	if err := h.conn.QueryRow(h.ctx, "SELECT $1::regclass::oid, current_database()", table).Scan(&oid, &db); err != nil {
		h.t.Fatal(err)
	}
	return oid, db
}

// assertIdentity checks that the status of the harness's only index
// names the table OID and the database the catalog gives for table.
func (h *harness) assertIdentity(table string) {
	h.t.Helper()
	oid, db := h.tableIdentity(table)
	if st := h.ix.Status()[0]; st.TableOID != oid || st.Database != db {
		h.t.Errorf("status: table OID %d, database %q; the catalog says %d, %q", st.TableOID, st.Database, oid, db)
	}
}

// assertOnlyKeysAbove checks that a search of e returns rows, every one
// with an integer key above min.
func assertOnlyKeysAbove(t *testing.T, ix *indexer.Indexer, e *indexer.Entry, min int64) {
	t.Helper()
	res, err := ix.Search(context.Background(), e.Spec().Name, []float32{2500, 1}, 10, indexer.DefaultSearchOptions())
	if err != nil || len(res.Hits) == 0 {
		t.Fatalf("knn: %d hits, %v", len(res.Hits), err)
	}
	for _, hit := range res.Hits {
		if id, err := strconv.ParseInt(res.KeyType.FormatKey(hit.Key), 10, 64); err != nil || id <= min {
			t.Errorf("knn returned key %s, which the table does not hold (its keys are above %d)", res.KeyType.FormatKey(hit.Key), min)
		}
	}
}

// TestCheckpointOfDroppedTableIsNotLoaded: a table dropped while the
// sidecar was stopped and created again under its name (another OID, other
// rows, published again as the sidecar publishes it) is copied again at
// the next start: its index's checkpoint, of the old table, is refused
// with a warning that says so, and the index holds exactly the new rows.
func TestCheckpointOfDroppedTableIsNotLoaded(t *testing.T) {
	h := newHarness(t, `CREATE TABLE docs (id int PRIMARY KEY, v real[]);
		INSERT INTO docs SELECT g, ARRAY[g, 1]::real[] FROM generate_series(1, 5000) g`)
	e := h.add("docs_v=docs(v) key=id metric=l2")
	var logs logBuffer
	cfg := Config{DataDir: t.TempDir(), StatusInterval: 100 * time.Millisecond,
		ReportSource: func(src indexer.Source) { h.ix.SetSource(src) },
		Logger:       slog.New(slog.NewTextHandler(io.MultiWriter(testWriter{t}, &logs), nil))}
	h.start(cfg)
	waitReady(t, e)
	waitCheckpointed(t, e)
	h.assertIdentity("docs")
	oldOID, _ := h.tableIdentity("docs")
	h.stop()

	h.exec(`DROP TABLE docs;
		CREATE TABLE docs (id int PRIMARY KEY, v real[]);
		ALTER PUBLICATION vecside ADD TABLE docs (id, v);
		INSERT INTO docs SELECT g, ARRAY[g - 100000, 2]::real[] FROM generate_series(100001, 104000) g`)
	h.restart(cfg)
	e = h.ix.Entries()[0]
	// A refused checkpoint leaves the index building until its copy ends.
	waitReady(t, e)
	h.catchUp()
	if st := e.Status(); st.Rows != 4000 || st.CopiedRows != 4000 {
		t.Errorf("after the restart the index holds %d rows, %d copied; want the new table's 4000, copied", st.Rows, st.CopiedRows)
	}
	assertOnlyKeysAbove(t, h.ix, e, 100000)
	h.assertConverged(e, 2)
	h.assertIdentity("docs")
	newOID, _ := h.tableIdentity("docs")
	if want := "checkpoint is of table OID " + strconv.FormatUint(uint64(oldOID), 10); !strings.Contains(logs.String(), want) ||
		!strings.Contains(logs.String(), "now OID "+strconv.FormatUint(uint64(newOID), 10)) {
		t.Errorf("the restart did not say why the checkpoint was refused (%q, now OID %d):\n%s", want, newOID, logs.String())
	}
}

// TestReconnectFindsTableRecreated: a table dropped and created again
// while the replication connection was down (the health check, which
// would have failed its index, did not run meanwhile) is found under its
// new OID by the reconnect, and copied again: the rows the index held
// were the old table's.
func TestReconnectFindsTableRecreated(t *testing.T) {
	h := newHarness(t, `CREATE TABLE docs (id int PRIMARY KEY, v real[]);
		INSERT INTO docs SELECT g, ARRAY[g, 1]::real[] FROM generate_series(1, 50) g`)
	e := h.add("docs_v=docs(v) key=id metric=l2")
	h.start(Config{HealthInterval: time.Hour, ReportSource: func(src indexer.Source) { h.ix.SetSource(src) }})
	waitReady(t, e)
	h.waitPublicationChecked()
	h.exec(`DROP TABLE docs;
		CREATE TABLE docs (id int PRIMARY KEY, v real[]);
		ALTER PUBLICATION vecside ADD TABLE docs (id, v);
		INSERT INTO docs SELECT g, ARRAY[g - 100000, 2]::real[] FROM generate_series(100001, 100040) g`)
	h.catchUp()
	h.killWalsender()
	waitCopied(t, e, 40)
	h.assertConverged(e, 2)
	h.assertReconnected()
	h.assertIdentity("docs")
}

// waitPublicationChecked waits, bounded, until the health monitor has
// checked the publication once: its connection is idle after reading the
// table's current name (the last query of a check that finds the table
// published), and the next check is HealthInterval away.
func (h *harness) waitPublicationChecked() {
	h.t.Helper()
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		var checked bool
		if err := h.conn.QueryRow(h.ctx, `SELECT EXISTS (SELECT FROM pg_stat_activity WHERE datname = current_database()
			AND pid <> pg_backend_pid() AND state = 'idle' AND query LIKE 'SELECT n.nspname, c.relname FROM pg_class c%')`).Scan(&checked); err != nil {
			h.t.Fatal(err)
		}
		if checked {
			return
		}
		if time.Now().After(deadline) {
			h.t.Fatal("the health monitor did not check the publication within 10 s")
		}
	}
}

// TestStatusFollowsRenamedTable: a Relation message that names the table
// anew (same OID) is followed: the status reports its current schema and
// name, and the same OID, also after a reconnect when a table has been
// created under the old name.
func TestStatusFollowsRenamedTable(t *testing.T) {
	h := newHarness(t, `CREATE SCHEMA archive; CREATE TABLE docs (id int PRIMARY KEY, v real[]);
		INSERT INTO docs SELECT g, ARRAY[g, 1]::real[] FROM generate_series(1, 10) g`)
	e := h.add("docs_v=docs(v) key=id metric=l2")
	h.start(Config{ReportSource: func(src indexer.Source) { h.ix.SetSource(src) }, HealthInterval: 100 * time.Millisecond})
	waitReady(t, e)
	if st := e.Status(); st.Table != "public.docs" {
		t.Errorf("status names table %q, want public.docs", st.Table)
	}
	h.assertIdentity("docs")
	h.exec(`ALTER TABLE docs RENAME TO old_docs; ALTER TABLE old_docs SET SCHEMA archive`)
	// Before any change to it, a health check shows the new name.
	for deadline := time.Now().Add(10 * time.Second); e.Status().Table != "archive.old_docs"; time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("status still names table %q 10 s after the rename", e.Status().Table)
		}
	}
	h.exec(`INSERT INTO archive.old_docs VALUES (11, ARRAY[11, 1]::real[])`)
	h.catchUp()
	if st := e.Status(); st.Table != "archive.old_docs" || st.Rows != 11 {
		t.Errorf("after the rename: table %q with %d rows, want archive.old_docs with 11", st.Table, st.Rows)
	}
	h.assertIdentity("archive.old_docs")
	// A table created under the old name is not the index's: a reconnect,
	// which resolves the tables again, keeps following the renamed one.
	h.exec(`CREATE TABLE docs (id int PRIMARY KEY, v real[]); INSERT INTO docs VALUES (500, '{500,9}')`)
	h.killWalsender()
	h.exec(`INSERT INTO archive.old_docs VALUES (12, ARRAY[12, 1]::real[])`)
	h.catchUp()
	h.assertReconnected()
	if st := e.Status(); st.Table != "archive.old_docs" || st.Rows != 12 || st.CopiedRows != 10 {
		t.Errorf("after a reconnect: table %q with %d rows, %d copied; want archive.old_docs with 12, none copied again", st.Table, st.Rows, st.CopiedRows)
	}
	h.assertIdentity("archive.old_docs")
	// An index defined on that name now reads the new table, beside the
	// one that follows the old.
	added := h.add("docs_cosine=docs(v) key=id metric=cosine")
	h.rep.Add(added)
	waitCopied(t, added, 1)
	h.exec(`INSERT INTO docs VALUES (501, '{501,9}'); INSERT INTO archive.old_docs VALUES (13, ARRAY[13, 1]::real[])`)
	h.catchUp()
	if st := added.Status(); st.Table != "public.docs" || st.Rows != 2 {
		t.Errorf("the index added reads table %q with %d rows, want public.docs with 2", st.Table, st.Rows)
	}
	if st := e.Status(); st.Table != "archive.old_docs" || st.Rows != 13 {
		t.Errorf("the renamed table's index reads %q with %d rows, want archive.old_docs with 13", st.Table, st.Rows)
	}
}
