package replicate

import (
	"strings"
	"testing"
	"time"

	"github.com/vecside/vecside/indexer"
	"github.com/vecside/vecside/internal/pgtest"
	"github.com/vecside/vecside/internal/readme"
)

// asRole is h's DSN for role instead of the superuser, and drops the
// role, and what it owns in h's database, when the test ends.
func asRole(t *testing.T, h *harness, role string) string {
	t.Cleanup(func() {
		h.conn.Exec(h.ctx, "DROP OWNED BY "+role)
		h.conn.Exec(h.ctx, "DROP ROLE IF EXISTS "+role)
	})
	return strings.Replace(h.dsn, "postgres://postgres@", "postgres://"+role+"@", 1)
}

// noFailures checks that a check as dsn finds nothing to fix but the
// server's WAL retention, which is the DBA's choice.
func noFailures(t *testing.T, dsn string, defs ...string) {
	t.Helper()
	for _, f := range findings(t, dsn, defs...) {
		if f.Level != OK && f.Check != "max_slot_wal_keep_size" {
			t.Errorf("%s: %s %s; fix: %s", f.Check, f.Level, f.Detail, f.Fix)
		}
	}
}

// TestREADMERoleSetup runs the README's role setup as written and shows
// that check then finds nothing to fix and that serve follows the table
// as that role, which is neither a superuser nor the table's owner.
func TestREADMERoleSetup(t *testing.T) {
	block := readme.Named(t, "../README.md", "sql", "role-setup")
	const def = "items_embedding=public.items(embedding) key=id metric=cosine"
	h := newHarness(t, `CREATE TABLE items (id bigint PRIMARY KEY, embedding real[], body text);
		INSERT INTO items SELECT i, ARRAY[i, 1, 2], 'doc' FROM generate_series(1, 100) i`)
	dsn := asRole(t, h, "vecside")
	h.exec(strings.ReplaceAll(block, "'...'", "'secret'"))
	var super, owner bool
	if err := h.conn.QueryRow(h.ctx, `SELECT rolsuper, pg_has_role('vecside', 'postgres', 'USAGE') FROM pg_roles WHERE rolname = 'vecside'`).Scan(&super, &owner); err != nil || super || owner {
		t.Fatalf("the README's role: superuser %v, member of the owner %v (%v)", super, owner, err)
	}
	noFailures(t, dsn, def)
	e := h.add(def)
	h.start(Config{Source: dsn})
	waitReady(t, e)
	h.exec(`INSERT INTO items VALUES (101, '{7,8,9}', 'new'); UPDATE items SET embedding = '{0,0,1}' WHERE id = 5; DELETE FROM items WHERE id = 6`)
	h.assertConverged(e, 3)
	h.stop()
	if done, err := Teardown(h.ctx, dsn, "vecside", 10*time.Second); err != nil || len(done) != 2 {
		t.Errorf("teardown as the README's role: %v, %v", done, err)
	}
}

// TestUnpublishedTableWaitsForTheDBA: with the README's least-privilege
// setup, an index of a table the DBA has not put into the publication
// (the role does not own it, so only the DBA may) waits, with the
// statement to run in its status; the other index serves meanwhile, and
// once the DBA runs that statement the table is copied and followed, with
// no restart. The same holds for a table dropped and created again.
func TestUnpublishedTableWaitsForTheDBA(t *testing.T) {
	block := readme.Named(t, "../README.md", "sql", "role-setup")
	h := newHarness(t, `CREATE TABLE items (id bigint PRIMARY KEY, embedding real[]);
		CREATE TABLE other (id int PRIMARY KEY, v real[]);
		INSERT INTO items SELECT i, ARRAY[i, 1] FROM generate_series(1, 20) i;
		INSERT INTO other SELECT i, ARRAY[i, 2] FROM generate_series(1, 30) i`)
	dsn := asRole(t, h, "vecside")
	h.exec(strings.ReplaceAll(block, "'...'", "'secret'"))
	h.exec(`GRANT SELECT ON other TO vecside`)
	items := h.add("items_embedding=public.items(embedding) key=id metric=cosine")
	other := h.add("other_v=other(v) key=id metric=l2")
	h.start(Config{Source: dsn, HealthInterval: 100 * time.Millisecond})
	waitReady(t, items)
	why := waitState(t, other, indexer.StateWaiting, "run: ")
	_, fix, ok := strings.Cut(why, "run: ")
	if !ok || !strings.HasPrefix(fix, `ALTER PUBLICATION "vecside" ADD TABLE "public"."other" ("id", "v")`) {
		t.Fatalf("the waiting index says %q, want the statement that adds other", why)
	}
	h.exec(`INSERT INTO items VALUES (21, '{21,1}')`)
	h.assertConverged(items, 2)
	h.exec(fix)
	waitCopied(t, other, 30)
	h.exec(`INSERT INTO other VALUES (31, '{31,2}')`)
	h.assertConverged(other, 2)

	h.exec(`DROP TABLE other; CREATE TABLE other (id int PRIMARY KEY, v real[]); GRANT SELECT ON other TO vecside;
		INSERT INTO other SELECT i, ARRAY[i, 3] FROM generate_series(101, 110) i`)
	why = waitState(t, other, indexer.StateWaiting, "run: ")
	if _, again, _ := strings.Cut(why, "run: "); again != fix {
		t.Fatalf("after DROP and CREATE the waiting index says %q, want %q", why, fix)
	}
	h.exec(fix)
	waitCopied(t, other, 10)
	h.assertConverged(other, 2)
	h.assertConverged(items, 2)
}

// TestCheckSaysWhatIsWrongAtOnce: a misspelled column or key, or dims=
// contradicting vector(n), fails check even when the table is in the
// publication already (where a renamed column would be found), and serve
// refuses them alike; the slot held by the running sidecar is not a
// warning about another consumer.
func TestCheckSaysWhatIsWrongAtOnce(t *testing.T) {
	h := newHarness(t, pgtest.StandInVector+`CREATE TABLE items (id bigint PRIMARY KEY, embedding vector(3), body text);
		INSERT INTO items VALUES (1, '\x000300003f800000c02000003e000000', 'doc')`)
	const good = "items_embedding=public.items(embedding) key=id metric=cosine"
	e := h.add(good)
	h.start(Config{})
	waitReady(t, e)
	fs := findings(t, h.dsn, good)
	if f := fs["slot vecside"]; f.Level != OK || !strings.Contains(f.Detail, "running vecside") {
		t.Errorf("the running sidecar's slot: %+v, want ok, in use by a running vecside", f)
	}
	for _, tc := range []struct{ def, says string }{
		{"items_embedding=public.items(embeding) key=id metric=cosine", `column "embeding" of "public"."items" does not exist; its vector columns: "embedding"`},
		{"items_embedding=public.items(embedding) key=idd metric=cosine", `is (id), not (idd)`},
		{"items_embedding=public.items(embedding) key=id metric=cosine dims=128", "dims=128, but column"},
	} {
		f := findings(t, h.dsn, tc.def)["index items_embedding"]
		if f.Level != Fail || !strings.Contains(f.Detail, tc.says) {
			t.Errorf("check %s: %+v, want a failure saying %q", tc.def, f, tc.says)
		}
		ix := indexer.New()
		bad, err := ix.Add(mustSpec(t, tc.def))
		if err != nil {
			t.Fatal(err)
		}
		rep, err := New(Config{Source: h.dsn, Name: "vecside_other", Entries: []*indexer.Entry{bad}, Logger: testLogger(t)})
		if err != nil {
			t.Fatal(err)
		}
		if err := rep.Run(h.ctx); err == nil || !strings.Contains(err.Error(), tc.says) {
			t.Errorf("serve %s: %v, want an error saying %q", tc.def, err, tc.says)
		}
	}
}

// TestCheckFixesInOneRound: a role with REPLICATION and nothing else gets
// fixes that, run once as they are printed, leave nothing to fix.
func TestCheckFixesInOneRound(t *testing.T) {
	h := newHarness(t, `CREATE TABLE items (id bigint PRIMARY KEY, embedding real[]);
		CREATE ROLE bare LOGIN REPLICATION`)
	dsn := asRole(t, h, "bare")
	const def = "items_embedding=public.items(embedding) key=id metric=cosine"
	fixes := 0
	for _, f := range findings(t, dsn, def) {
		if f.Level != Fail {
			continue
		}
		fixes++
		h.exec(strings.TrimPrefix(f.Fix, "as a superuser: "))
	}
	if fixes != 2 {
		t.Errorf("%d failures, want 2: no SELECT, and no publication the role may create", fixes)
	}
	noFailures(t, dsn, def)
	// An index of another table: a superuser adds it to the publication.
	h.exec(`CREATE TABLE other (id int PRIMARY KEY, v real[]); GRANT SELECT ON other TO bare`)
	f := findings(t, dsn, def, "other_v=other(v) key=id metric=l2")["index other_v"]
	if add, ok := strings.CutPrefix(f.Fix, "as a superuser: "); f.Level != Fail || !ok || !strings.HasPrefix(add, "ALTER PUBLICATION") {
		t.Errorf("another table's finding: %+v, want the superuser's ALTER PUBLICATION", f)
	} else {
		h.exec(add)
	}
	noFailures(t, dsn, def, "other_v=other(v) key=id metric=l2")
	// A role that owns its table needs only CREATE on the database, named.
	h.exec(`DROP PUBLICATION vecside; CREATE TABLE own (id int PRIMARY KEY, v real[]); ALTER TABLE own OWNER TO bare`)
	var db string
	if err := h.conn.QueryRow(h.ctx, `SELECT current_database()`).Scan(&db); err != nil {
		t.Fatal(err)
	}
	f = findings(t, dsn, "own_v=own(v) key=id metric=l2")["publication vecside"]
	grant, _, _ := strings.Cut(f.Fix, ", or ")
	if f.Level != Fail || grant != `GRANT CREATE ON DATABASE "`+db+`" TO "bare"` {
		t.Fatalf("publication finding: %+v, want the grant on database %s", f, db)
	}
	h.exec(grant)
	noFailures(t, dsn, "own_v=own(v) key=id metric=l2")
}

// TestShardPublicationMadeForTheRole: a shard's sidecar (where=) serves as
// a role that does not own its table, from the publication a superuser
// made for it as check prints it: the row filter Postgres shows,
// deparsed, is recognised as the one given, so the table is not added
// anew, which only its owner may do.
func TestShardPublicationMadeForTheRole(t *testing.T) {
	h := newHarness(t, `CREATE TABLE items (id bigint PRIMARY KEY, embedding real[]);
		INSERT INTO items SELECT i, ARRAY[i, 1] FROM generate_series(1, 10) i;
		CREATE ROLE shard LOGIN REPLICATION;
		GRANT SELECT ON items TO shard`)
	dsn := asRole(t, h, "shard")
	e := h.add("even=public.items(embedding) key=id metric=l2 where='id % 2 = 0'")
	h.exec(publicationSQL("vecside", `"shard"`, []indexer.Spec{e.Spec()}))
	h.start(Config{Source: dsn})
	waitReady(t, e)
	h.exec(`INSERT INTO items VALUES (11, '{11,1}'), (12, '{12,1}')`)
	h.catchUp()
	if rows := e.Status().Rows; rows != 6 {
		t.Errorf("the shard holds %d rows, want the 6 even ones", rows)
	}
	// Another filter is not taken for the same: the table's owner gets
	// it into the publication.
	h.stop()
	h.ix = indexer.New()
	e = h.add("odd=public.items(embedding) key=id metric=l2 where='id % 2 = 1'")
	h.start(Config{})
	waitReady(t, e)
	var filter string
	if err := h.conn.QueryRow(h.ctx, `SELECT rowfilter FROM pg_publication_tables WHERE pubname = 'vecside'`).Scan(&filter); err != nil || !strings.HasSuffix(filter, " = 1)") || e.Status().Rows != 6 {
		t.Errorf("after changing the filter: %q (%v), %d rows, want the 6 odd ones", filter, err, e.Status().Rows)
	}
}
