package replicate

import (
	"context"
	"errors"
	"flag"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/vecside/vecside/indexer"
	"github.com/vecside/vecside/internal/pgtest"
)

// TestRefusesWhatIsNotItsOwn: a slot or publication of the sidecar's
// name that another database, plugin or tool made is refused by serve,
// teardown and check alike, with the owner and the fix, and left as it
// was.
func TestRefusesWhatIsNotItsOwn(t *testing.T) {
	h := newHarness(t, `CREATE TABLE r (id int PRIMARY KEY, v real[], note text);
		INSERT INTO r VALUES (1, '{1,2}', 'a')`)
	other := pgtest.Connect(t, pgtest.Shared(t).NewDatabase(t))
	var otherDB string
	if err := other.QueryRow(h.ctx, `SELECT current_database()`).Scan(&otherDB); err != nil {
		t.Fatal(err)
	}
	def := "r_v=r(v) key=id metric=l2"
	for _, c := range []struct {
		name  string
		setup func(name string) // makes the foreign object
		slot  bool              // it is a slot (else a publication)
		words []string          // the refusal names them
	}{
		{"other_db", func(n string) {
			if _, err := other.Exec(h.ctx, `SELECT pg_create_logical_replication_slot($1, 'pgoutput')`, n); err != nil {
				t.Fatal(err)
			}
		}, true,
			[]string{"slot other_db", "belongs to database " + otherDB, "--name"}},
		{"other_plugin", func(n string) { h.exec(`SELECT pg_create_logical_replication_slot($1, 'test_decoding')`, n) }, true,
			[]string{"slot other_plugin", "plugin test_decoding", "--name"}},
		{"physical", func(n string) { h.exec(`SELECT pg_create_physical_replication_slot($1)`, n) }, true,
			[]string{"slot physical", "physical slot", "--name"}},
		// A subscription's slot: logical, pgoutput, this database, but no
		// publication of vecside's beside it.
		{"subscriber", func(n string) { h.exec(`SELECT pg_create_logical_replication_slot($1, 'pgoutput')`, n) }, true,
			[]string{"slot subscriber", "no publication subscriber", "--name"}},
		{"other_tool", func(n string) {
			h.exec(`CREATE PUBLICATION ` + n + ` FOR TABLE r`)
			h.exec(`COMMENT ON PUBLICATION ` + n + ` IS 'cdc'`)
		}, false,
			[]string{"publication other_tool", "not made by vecside", `"cdc"`, "--name"}},
		// Shaped as vecside's, but listing the note too.
		{"wider", func(n string) {
			h.exec(`CREATE PUBLICATION ` + n + ` FOR TABLE r (id, v, note) WITH (publish_via_partition_root = true)`)
		}, false,
			[]string{"publication wider", "not made by vecside", "COMMENT ON PUBLICATION"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			c.setup(c.name)
			t.Cleanup(func() {
				h.conn.Exec(h.ctx, `SELECT pg_drop_replication_slot(slot_name) FROM pg_replication_slots WHERE slot_name = $1`, c.name)
				h.conn.Exec(h.ctx, `DROP PUBLICATION IF EXISTS `+indexer.QuoteIdent(c.name))
			})
			before := h.describe(c.name)
			ix := indexer.New()
			spec := mustSpec(t, def)
			e, err := ix.Add(spec)
			if err != nil {
				t.Fatal(err)
			}
			r, err := New(Config{Source: h.dsn, Name: c.name, Entries: []*indexer.Entry{e}, Logger: testLogger(t)})
			if err != nil {
				t.Fatal(err)
			}
			ctx, cancel := context.WithTimeout(h.ctx, 30*time.Second)
			defer cancel()
			assertRefused(t, "serve", r.Run(ctx), c.words)
			_, err = Teardown(h.ctx, h.dsn, c.name, time.Second)
			assertRefused(t, "teardown", err, c.words)
			fs, err := Check(h.ctx, h.dsn, c.name, []indexer.Spec{spec})
			if err != nil {
				t.Fatal(err)
			}
			object := map[bool]string{true: "slot ", false: "publication "}[c.slot] + c.name
			found := false
			for _, f := range fs {
				if f.Check == object {
					found = true
					if f.Level != Fail || !strings.Contains(f.Fix, "--name") {
						t.Errorf("check: %+v, want a failure whose fix is another --name", f)
					}
				}
			}
			if !found {
				t.Errorf("check reported nothing on %s: %+v", object, fs)
			}
			if after := h.describe(c.name); after != before {
				t.Errorf("%s changed:\nbefore %s\nafter  %s", c.name, before, after)
			}
		})
	}
}

func assertRefused(t *testing.T, who string, err error, words []string) {
	t.Helper()
	if !errors.Is(err, ErrNotVecside) {
		t.Errorf("%s: %v, want ErrNotVecside", who, err)
		return
	}
	assertMentions(t, err.Error(), words...)
}

// describe is what the catalogs say of the slot and the publication
// called name, where they are and whose.
func (h *harness) describe(name string) string {
	h.t.Helper()
	var s string
	err := h.conn.QueryRow(h.ctx, `SELECT format('slot %s, publication %s', (SELECT row(slot_type, database, plugin)::text FROM pg_replication_slots WHERE slot_name = $1),
		(SELECT row(obj_description(p.oid, 'pg_publication'), (SELECT string_agg(row(schemaname, tablename, attnames)::text, ',') FROM pg_publication_tables WHERE pubname = $1))::text
			FROM pg_publication p WHERE pubname = $1))`, name).Scan(&s)
	if err != nil {
		h.t.Fatal(err)
	}
	return s
}

// TestAdoptsAnOlderVecsidesPublication: a publication made before vecside
// marked its own, listing exactly what the sidecar publishes, is taken
// over and marked, so that teardown drops it later.
func TestAdoptsAnOlderVecsidesPublication(t *testing.T) {
	h := newHarness(t, `CREATE TABLE r (id int PRIMARY KEY, v real[], note text);
		INSERT INTO r VALUES (1, '{1,2}', 'a');
		CREATE PUBLICATION vecside FOR TABLE r (id, v) WITH (publish_via_partition_root = true)`)
	e := h.add("r_v=r(v) key=id metric=l2")
	if _, err := Teardown(h.ctx, h.dsn, "vecside", time.Second); !errors.Is(err, ErrNotVecside) || !strings.Contains(err.Error(), "COMMENT ON PUBLICATION") {
		t.Errorf("teardown of an unmarked publication: %v, want a refusal that says how to mark it", err)
	}
	h.start(Config{})
	waitReady(t, e)
	h.stop()
	var comment string
	if err := h.conn.QueryRow(h.ctx, `SELECT obj_description(oid, 'pg_publication') FROM pg_publication WHERE pubname = 'vecside'`).Scan(&comment); err != nil || comment != Mark {
		t.Errorf("the adopted publication's comment: %q (%v), want %q", comment, err, Mark)
	}
	if done, err := Teardown(h.ctx, h.dsn, "vecside", 10*time.Second); err != nil || len(done) != 2 {
		t.Errorf("teardown: %v, %v", done, err)
	}
}

// teardownRepeat is small by default; CI's race stage runs 50 (scripts/test).
var teardownRepeat = flag.Int("teardown-repeat", 5, "how many times TestTeardownDropsOnlyItsSlotAndPublication stops a sidecar and tears down at once")

// TestTeardownDropsOnlyItsSlotAndPublication tears down right after a
// sidecar stopped, while its walsender may still hold the slot, with every
// CPU kept busy, as on a loaded machine: -teardown-repeat times in a row.
func TestTeardownDropsOnlyItsSlotAndPublication(t *testing.T) {
	h := newHarness(t, `CREATE TABLE r (id int PRIMARY KEY, v real[]);
		INSERT INTO r VALUES (1, '{1,2}');
		CREATE PUBLICATION other FOR TABLE r`)
	loadCPUs(t)
	for i := range *teardownRepeat {
		h.ix = indexer.New()
		e := h.add("r_v=r(v) key=id metric=l2")
		h.start(Config{})
		waitReady(t, e)
		// Ready comes when the copy is in; the stream starts just after.
		for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(10 * time.Millisecond) {
			var streaming bool
			if err := h.conn.QueryRow(h.ctx, `SELECT EXISTS (SELECT FROM pg_replication_slots WHERE slot_name = 'vecside' AND active)`).Scan(&streaming); err != nil {
				t.Fatal(err)
			}
			if streaming {
				break
			}
			if time.Now().After(deadline) {
				t.Fatal("the slot never came into use")
			}
		}
		if i == 0 {
			if _, err := Teardown(h.ctx, h.dsn, "vecside", 0); err == nil || !strings.Contains(err.Error(), "in use") {
				t.Errorf("teardown of a slot in use: %v", err)
			}
		}
		h.stop()
		done, err := Teardown(h.ctx, h.dsn, "vecside", 10*time.Second)
		if err != nil || len(done) != 2 {
			t.Fatalf("run %d: teardown: %v, %v", i, done, err)
		}
		var slots, pubs, rows int
		h.conn.QueryRow(h.ctx, `SELECT count(*) FROM pg_replication_slots WHERE database = current_database()`).Scan(&slots)
		h.conn.QueryRow(h.ctx, `SELECT count(*) FROM pg_publication`).Scan(&pubs)
		h.conn.QueryRow(h.ctx, `SELECT count(*) FROM r`).Scan(&rows)
		if slots != 0 || pubs != 1 || rows != 1 {
			t.Fatalf("run %d: after teardown: %d slots, %d publications (want the other one), %d rows", i, slots, pubs, rows)
		}
	}
}

// loadCPUs keeps every CPU busy until the test ends.
func loadCPUs(t *testing.T) {
	var stop atomic.Bool
	var wg sync.WaitGroup
	for range runtime.NumCPU() {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for x := 1; !stop.Load(); x = x*31 + 7 {
			}
		}()
	}
	t.Cleanup(func() {
		stop.Store(true)
		wg.Wait()
	})
}
