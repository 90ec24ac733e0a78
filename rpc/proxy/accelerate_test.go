//go:build cgo

package proxy

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"net/url"
	"os/exec"
	"reflect"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/vecside/vecside/cmd/vecside/sidecar"
	"github.com/vecside/vecside/deploy"
	"github.com/vecside/vecside/indexer"
	"github.com/vecside/vecside/internal/pgtest"
)

const dims = 32

// fixture is a database with items(id, tenant, embedding real[]) of
// random vectors, pgvector's operators for real[], a sidecar indexing the
// column for l2 and cosine, and a proxy asking it.
type fixture struct {
	dsn, via string
	side     string    // the sidecar's URL
	db       *pgx.Conn // direct, as the superuser
	sc       *sidecar.Sidecar
	p        *Proxy
	rng      *rand.Rand
}

func newFixture(t testing.TB, rows int) *fixture {
	t.Helper()
	return newFixtureOf(t, rows, "items_l2=public.items(embedding) key=id metric=l2 kind=hnsw recall=0.99",
		"items_cosine=public.items(embedding) key=id metric=cosine kind=hnsw recall=0.99")
}

// newFixtureOf is newFixture with the sidecar's index definitions defs
// (an l2 and a cosine index on items(embedding)).
func newFixtureOf(t testing.TB, rows int, defs ...string) *fixture {
	t.Helper()
	f := &fixture{dsn: pgtest.Shared(t).NewDatabase(t), rng: rand.New(rand.NewPCG(1, 2))}
	f.db = connect(t, f.dsn)
	mustExec(t, f.db, deploy.DistanceSQL)
	mustExec(t, f.db, deploy.RealOperatorsSQL)
	mustExec(t, f.db, fmt.Sprintf(`CREATE TABLE items (id bigint PRIMARY KEY, tenant int, embedding real[]);
		INSERT INTO items SELECT g, g %% 10, (SELECT array_agg(random()::real * 2 - 1) FROM generate_series(1, %d) WHERE g > 0)
		FROM generate_series(1, %d) g`, dims, rows))
	f.sc, f.side = startSidecar(t, f.dsn, defs...)
	f.waitApplied(t)
	f.p, f.via = startProxy(t, f.dsn, f.side)
	waitIndexed(t, f.p, "items", "l2", "cosine")
	return f
}

// askInProcess gives the fixture a proxy that asks its sidecar's indexes
// in process, as vecside serve --proxy does, instead of over pgwire.
func (f *fixture) askInProcess(t testing.TB) {
	t.Helper()
	f.p, f.via = startProxyWith(t, f.dsn, "", Config{Sidecar: InProcess(f.sc.Indexer, nil)})
	waitIndexed(t, f.p, "items", "l2", "cosine")
}

// waitApplied waits until every index is ready and has applied what is
// committed now.
func (f *fixture) waitApplied(t testing.TB) {
	t.Helper()
	var lsn string
	if err := f.db.QueryRow(context.Background(), "SELECT pg_current_wal_lsn()::text").Scan(&lsn); err != nil {
		t.Fatal(err)
	}
	target, _ := indexer.ParseLSN(lsn)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	for _, e := range f.sc.Indexer.Entries() {
		for {
			state, msg := e.State()
			if state == indexer.StateReady {
				break
			}
			if state == indexer.StateError || ctx.Err() != nil {
				t.Fatalf("index %s: %s %s", e.Spec().Name, state, msg)
			}
			time.Sleep(20 * time.Millisecond)
		}
		if err := e.WaitApplied(ctx, target); err != nil {
			t.Fatal(err)
		}
	}
}

func (f *fixture) vector() string {
	parts := make([]string, dims)
	for i := range parts {
		parts[i] = strconv.FormatFloat(f.rng.Float64()*2-1, 'g', 6, 32)
	}
	return "{" + strings.Join(parts, ",") + "}"
}

// run runs sql with the simple protocol and returns its one result.
func run(t testing.TB, c *pgx.Conn, sql string) *pgconn.Result {
	t.Helper()
	rs, err := c.PgConn().Exec(context.Background(), sql).ReadAll()
	if err != nil {
		t.Fatalf("%s: %v", sql, err)
	}
	if len(rs) != 1 {
		t.Fatalf("%s: %d results", sql, len(rs))
	}
	return rs[0]
}

// TestAccelerated: pgvector's statements, with and without a filter and
// an offset, are answered through the sidecar with PostgreSQL's own
// rows: exact distances, in order, only rows that match the filter, the
// same RowDescription, and recall@10 ≥ 0.95 against the exact statement.
func TestAccelerated(t *testing.T) { eachWay(t, testAccelerated) }

func testAccelerated(t *testing.T, ask func(*fixture, *testing.T)) {
	const queries, k = 30, 10
	f := newFixture(t, 3000)
	ask(f, t)
	ctx := context.Background()
	proxied := connect(t, f.via)
	for _, c := range []struct{ op, filter, offset string }{
		{"<->", "", ""},
		{"<=>", "", ""},
		{"<->", "WHERE tenant = 3", ""},
		{"<=>", "WHERE tenant IN (1, 2) AND id > 100", " OFFSET 5"},
	} {
		before := f.p.Stats().Accelerated
		var found, total int
		for range queries {
			v := f.vector()
			sql := fmt.Sprintf("SELECT id, tenant, embedding %s '%s' AS distance FROM items %s ORDER BY embedding %s '%s'::real[] LIMIT %d%s",
				c.op, v, c.filter, c.op, v, k, c.offset)
			want := run(t, f.db, sql)
			got := run(t, proxied, sql)
			if fmt.Sprint(got.FieldDescriptions) != fmt.Sprint(want.FieldDescriptions) || got.CommandTag.String() != want.CommandTag.String() {
				t.Fatalf("%s:\n got %v %s\nwant %v %s", sql, got.FieldDescriptions, got.CommandTag, want.FieldDescriptions, want.CommandTag)
			}
			exact := map[string]string{}
			for _, r := range want.Rows {
				exact[string(r[0])] = string(r[2])
			}
			last := -1.0
			for _, r := range got.Rows {
				d, _ := strconv.ParseFloat(string(r[2]), 64)
				if d < last {
					t.Errorf("%s: not in order: %v after %v", sql, d, last)
				}
				last = d
				if want, ok := exact[string(r[0])]; ok {
					found++
					if want != string(r[2]) {
						t.Errorf("%s: id %s distance %s, want %s", sql, r[0], r[2], want)
					}
				}
				if c.filter == "WHERE tenant = 3" && string(r[1]) != "3" {
					t.Errorf("%s: row of tenant %s", sql, r[1])
				}
			}
			total += len(want.Rows)
		}
		recall := float64(found) / float64(total)
		accelerated := f.p.Stats().Accelerated - before
		t.Logf("%s %s%s: recall@%d %.3f, %d of %d accelerated", c.op, c.filter, c.offset, k, recall, accelerated, queries)
		if recall < 0.95 {
			t.Errorf("%s %s: recall@%d %.3f, want ≥ 0.95", c.op, c.filter, k, recall)
		}
		if accelerated != queries {
			t.Errorf("%s %s: %d of %d accelerated; fallbacks %v", c.op, c.filter, accelerated, queries, f.p.Stats().Fallbacks)
		}
	}
	// psql, as it is.
	if psql, err := exec.LookPath("psql"); err == nil {
		v := f.vector()
		sql := "SELECT id FROM items WHERE tenant < 5 ORDER BY embedding <=> '" + v + "' LIMIT 10"
		before := f.p.Stats().Accelerated
		out, err := exec.Command(psql, "-X", "-A", "-t", "-d", f.via, "-c", sql).CombinedOutput()
		if err != nil {
			t.Fatalf("psql: %v: %s", err, out)
		}
		exact := map[string]bool{}
		for _, r := range run(t, f.db, sql).Rows {
			exact[string(r[0])] = true
		}
		ids := strings.Fields(string(out))
		var found int
		for _, id := range ids {
			if exact[id] {
				found++
			}
		}
		if len(ids) != 10 || found < 9 || f.p.Stats().Accelerated != before+1 {
			t.Errorf("psql: %q, %d of them exact, %d accelerated", ids, found, f.p.Stats().Accelerated-before)
		}
	}

	// A vector the sidecar refuses passes through to PostgreSQL's own
	// answer, and costs the next statements nothing.
	bad := "SELECT id FROM items ORDER BY embedding <-> '{1,2}' LIMIT 3"
	if got, want := outcomes(proxied.PgConn().Exec(ctx, bad).ReadAll()), outcomes(f.db.PgConn().Exec(ctx, bad).ReadAll()); fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("%s: got %v, want %v", bad, got, want)
	}
	before := f.p.Stats().Accelerated
	run(t, proxied, "SELECT id FROM items ORDER BY embedding <-> '"+f.vector()+"' LIMIT 3")
	if f.p.Stats().Accelerated != before+1 {
		t.Errorf("after a refused vector: not accelerated: %+v", f.p.Stats())
	}

	// With standard_conforming_strings off, string literals read
	// otherwise than the parser reads them: passed through.
	run(t, proxied, "SET standard_conforming_strings = off")
	run(t, proxied, "SELECT id FROM items ORDER BY embedding <-> '"+f.vector()+"' LIMIT 3")
	run(t, proxied, "RESET standard_conforming_strings")
	if f.p.Stats().Fallbacks["encoding"] != 1 {
		t.Errorf("standard_conforming_strings off: fallbacks %v", f.p.Stats().Fallbacks)
	}

	// What the sidecar does not index passes through.
	before = f.p.Stats().Accelerated
	run(t, proxied, "SELECT id FROM items ORDER BY embedding <#> '"+f.vector()+"' LIMIT 3")
	if f.p.Stats().Accelerated != before || f.p.Stats().Fallbacks["not indexed"] == 0 {
		t.Errorf("an unindexed metric was accelerated: %+v", f.p.Stats())
	}

	// SHOW vecside.last_plan says what became of the last one.
	show := func() string {
		r := run(t, proxied, "SHOW vecside.last_plan")
		if len(r.Rows) != 1 || r.FieldDescriptions[0].Name != "vecside.last_plan" {
			t.Fatalf("SHOW vecside.last_plan: %+v", r)
		}
		return string(r.Rows[0][0])
	}
	if got := show(); got != "passed through: not indexed" {
		t.Errorf("last plan %q, want passed through: not indexed", got)
	}
	run(t, proxied, "SELECT id FROM items WHERE tenant = 7 ORDER BY embedding <-> '"+f.vector()+"' LIMIT 10")
	if got := show(); !strings.HasPrefix(got, "accelerated: index items_l2; rounds (candidates asked→rows) 10→") {
		t.Errorf("last plan %q", got)
	} else {
		t.Logf("last plan: %s", got)
	}

	// pgvector's settings and vecside's reach the sidecar.
	run(t, proxied, "SET hnsw.ef_search = 200")
	run(t, proxied, "SET vecside.oversample = 2")
	run(t, proxied, "SELECT id FROM items ORDER BY embedding <-> '"+f.vector()+"' LIMIT 10")
	if got := show(); !strings.Contains(got, "; options ef_search=200 oversample=2;") {
		t.Errorf("last plan %q, want the options ef_search=200 oversample=2", got)
	}
	run(t, proxied, "SET vecside.oversample = 'lots'")
	run(t, proxied, "SELECT id FROM items ORDER BY embedding <-> '"+f.vector()+"' LIMIT 10")
	if got := show(); got != "passed through: setting" {
		t.Errorf("last plan %q, want passed through: setting", got)
	}
	run(t, proxied, "RESET ALL")

	// SHOW vecside.last_plan in every exec mode of pgx's, each twice (a
	// statement prepared once, then bound again), as drivers that always
	// use the extended protocol send it; and a statement of the client's
	// in between, passed through.
	for _, mode := range []pgx.QueryExecMode{pgx.QueryExecModeCacheStatement, pgx.QueryExecModeCacheDescribe,
		pgx.QueryExecModeDescribeExec, pgx.QueryExecModeExec, pgx.QueryExecModeSimpleProtocol} {
		for i := range 2 {
			filter := fmt.Sprintf("WHERE tenant = %d", i+1)
			run(t, proxied, "SELECT id FROM items "+filter+" ORDER BY embedding <-> '"+f.vector()+"' LIMIT 10")
			var plan string
			if err := proxied.QueryRow(ctx, "SHOW vecside.last_plan", mode).Scan(&plan); err != nil || plan != show() {
				t.Errorf("SHOW vecside.last_plan, %v, #%d: %q, %v; want %q", mode, i+1, plan, err, show())
			}
			var one int
			if err := proxied.QueryRow(ctx, "SELECT 1", mode).Scan(&one); err != nil || one != 1 {
				t.Errorf("SELECT 1 after it, %v: %d, %v", mode, one, err)
			}
		}
	}
}

// TestReadYourWrites: each of 100 rows inserted and committed through the
// proxy is found by the session's next accelerated statement; inside a
// transaction block that inserted one, the statement passes through and
// sees it.
func TestReadYourWrites(t *testing.T) { eachWay(t, testReadYourWrites) }

func testReadYourWrites(t *testing.T, ask func(*fixture, *testing.T)) {
	f := newFixture(t, 1000)
	ask(f, t)
	proxied := connect(t, f.via)
	before := f.p.Stats().Accelerated
	var found int
	for i := range 100 {
		v := f.vector()
		id := 100000 + i
		run(t, proxied, fmt.Sprintf("INSERT INTO items VALUES (%d, 0, '%s')", id, v))
		r := run(t, proxied, fmt.Sprintf("SELECT id FROM items ORDER BY embedding <-> '%s' LIMIT 1", v))
		if len(r.Rows) == 1 && string(r.Rows[0][0]) == strconv.Itoa(id) {
			found++
		}
	}
	if found != 100 || f.p.Stats().Accelerated-before != 100 {
		t.Errorf("found %d of 100 rows, %d statements accelerated; fallbacks %v", found, f.p.Stats().Accelerated-before, f.p.Stats().Fallbacks)
	}
	// With synchronous_commit off, a commit returns before its record is
	// written: the row is found all the same.
	run(t, proxied, "SET synchronous_commit = off")
	for i := range 20 {
		v := f.vector()
		id := 150000 + i
		run(t, proxied, fmt.Sprintf("INSERT INTO items VALUES (%d, 0, '%s')", id, v))
		r := run(t, proxied, fmt.Sprintf("SELECT id FROM items ORDER BY embedding <-> '%s' LIMIT 1", v))
		if len(r.Rows) != 1 || string(r.Rows[0][0]) != strconv.Itoa(id) {
			t.Errorf("synchronous_commit off: row %d not found: %q", id, r.Rows)
		}
	}
	// The same where the WAL then ends at a page's end (see below).
	v := f.vector()
	run(t, proxied, fmt.Sprintf("INSERT INTO items VALUES (150100, 0, '%s')", v))
	walToPageEnd(t, f.db)
	before = f.p.Stats().Accelerated
	if r := run(t, proxied, fmt.Sprintf("SELECT id FROM items ORDER BY embedding <-> '%s' LIMIT 1", v)); len(r.Rows) != 1 || string(r.Rows[0][0]) != "150100" || f.p.Stats().Accelerated-before != 1 {
		t.Errorf("synchronous_commit off, WAL at a page's end: %q, %d accelerated; fallbacks %v", r.Rows, f.p.Stats().Accelerated-before, f.p.Stats().Fallbacks)
	}
	run(t, proxied, "RESET synchronous_commit")

	// A write, then WAL that ends at a page's end: the insert position is
	// then past the next page's header, which no record ends at until
	// the next is written. The wait is for the session's commit.
	v = f.vector()
	run(t, proxied, fmt.Sprintf("INSERT INTO items VALUES (160000, 0, '%s')", v))
	walToPageEnd(t, f.db)
	before = f.p.Stats().Accelerated
	start := time.Now()
	r := run(t, proxied, fmt.Sprintf("SELECT id FROM items ORDER BY embedding <-> '%s' LIMIT 1", v))
	if len(r.Rows) != 1 || string(r.Rows[0][0]) != "160000" || f.p.Stats().Accelerated-before != 1 {
		t.Errorf("with WAL at a page's end: %q, %d accelerated in %v; fallbacks %v", r.Rows, f.p.Stats().Accelerated-before, time.Since(start), f.p.Stats().Fallbacks)
	}

	// A write elsewhere: the wait for its LSN is short.
	mustExec(t, f.db, "CREATE TABLE other (x int)")
	before = f.p.Stats().Accelerated
	for i := range 5 {
		run(t, proxied, fmt.Sprintf("INSERT INTO other VALUES (%d)", i))
		start := time.Now()
		run(t, proxied, "SELECT id FROM items ORDER BY embedding <-> '"+f.vector()+"' LIMIT 1")
		t.Logf("after a write to another table: %v", time.Since(start))
	}
	if f.p.Stats().Accelerated-before != 5 {
		t.Errorf("after writes to another table: %d of 5 accelerated; fallbacks %v", f.p.Stats().Accelerated-before, f.p.Stats().Fallbacks)
	}
	// The same with pgx's default exec mode, in a transaction of pgx's.
	ctx := context.Background()
	tx, err := proxied.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	vec := make([]float32, dims)
	vec[0] = 7
	mustExec(t, proxied, "INSERT INTO items VALUES (300000, 0, $1)", vec)
	var id int64
	if err := tx.QueryRow(ctx, "SELECT id FROM items ORDER BY embedding <-> $1 LIMIT 1", vec).Scan(&id); err != nil || id != 300000 {
		t.Errorf("inside a pgx transaction: %d, %v", id, err)
	}
	tx.Rollback(ctx)

	v = f.vector()
	run(t, proxied, "BEGIN")
	run(t, proxied, fmt.Sprintf("INSERT INTO items VALUES (200000, 0, '%s')", v))
	r = run(t, proxied, fmt.Sprintf("SELECT id FROM items ORDER BY embedding <-> '%s' LIMIT 1", v))
	run(t, proxied, "ROLLBACK")
	if len(r.Rows) != 1 || string(r.Rows[0][0]) != "200000" || f.p.Stats().Fallbacks["wrote in transaction"] != 2 {
		t.Errorf("inside the transaction: %q; fallbacks %v", r.Rows, f.p.Stats().Fallbacks)
	}
}

// walToPageEnd writes WAL (messages outside a transaction) until the
// last record ends at the end of a page.
func walToPageEnd(t *testing.T, db *pgx.Conn) {
	t.Helper()
	const page = 8192 // wal_block_size's default
	ctx := context.Background()
	insert := func() indexer.LSN {
		var s string
		if err := db.QueryRow(ctx, "SELECT pg_current_wal_insert_lsn()::text").Scan(&s); err != nil {
			t.Fatal(err)
		}
		lsn, err := indexer.ParseLSN(s)
		if err != nil {
			t.Fatal(err)
		}
		return lsn
	}
	emit := func(n int) {
		mustExec(t, db, "SELECT pg_logical_emit_message(false, 'vecside_test', repeat('x', $1))", n)
	}
	// Contents of 256 bytes and more, whose length takes a record the same
	// bytes beyond them.
	const probe = 512
	for range 20 {
		start := insert()
		emit(probe)
		end := insert()
		if start/page != end/page {
			continue // past a page header: measure again
		}
		// A record's bytes beyond its content, aligned (probe is), and the
		// content that makes the next one end at the page's end.
		overhead := int(end-start) - probe
		left := page - int(end%page)
		if left-overhead < 256 {
			emit(left) // into the next page
			continue
		}
		emit(left - overhead)
		if at := insert() % page; at == 24 || at == 40 { // a page header's end (a segment's first is longer)
			return
		}
	}
	t.Fatal("the WAL did not end at a page's end")
}

// TestPrivileges: a role that may not read the key column, which the
// restricted statement names, is passed through and gets PostgreSQL's
// permission error; the restricted statement runs as the client's role:
// under row-level security a role gets only its rows, as its own exact
// statement would.
func TestPrivileges(t *testing.T) { eachWay(t, testPrivileges) }

func testPrivileges(t *testing.T, ask func(*fixture, *testing.T)) {
	f := newFixture(t, 2000)
	ask(f, t)
	ctx := context.Background()
	for _, sql := range []string{
		"DO $$ BEGIN CREATE ROLE proxy_nobody LOGIN; EXCEPTION WHEN duplicate_object THEN NULL; END $$",
		"DO $$ BEGIN CREATE ROLE proxy_tenant LOGIN; EXCEPTION WHEN duplicate_object THEN NULL; END $$",
		"GRANT SELECT ON items TO proxy_tenant",
		"ALTER TABLE items ENABLE ROW LEVEL SECURITY",
		"CREATE POLICY tenant3 ON items TO proxy_tenant USING (tenant = 3)",
		"GRANT USAGE ON SCHEMA vecside TO proxy_tenant",
	} {
		mustExec(t, f.db, sql)
	}
	as := func(dsn, role string) *pgx.Conn { return connect(t, strings.Replace(dsn, "postgres@", role+"@", 1)) }
	sql := "SELECT id, tenant FROM items ORDER BY embedding <-> '" + f.vector() + "' LIMIT 10"

	_, werr := as(f.dsn, "proxy_nobody").Exec(ctx, sql, pgx.QueryExecModeSimpleProtocol)
	before := f.p.Stats().Fallbacks["key privilege"]
	_, gerr := as(f.via, "proxy_nobody").Exec(ctx, sql, pgx.QueryExecModeSimpleProtocol)
	var want, got *pgconn.PgError
	if !errors.As(werr, &want) || !errors.As(gerr, &got) || got.Code != "42501" || got.Message != want.Message {
		t.Errorf("without SELECT: got %v, want %v", gerr, werr)
	}
	if f.p.Stats().Fallbacks["key privilege"] != before+1 {
		t.Errorf("the statement without SELECT was not passed through for its key: %+v", f.p.Stats())
	}
	// The same through the extended protocol, the vector a parameter.
	psql := "SELECT id FROM items ORDER BY embedding <-> $1 LIMIT 10"
	vec := []float32{}
	for range dims {
		vec = append(vec, 0.5)
	}
	_, werr = as(f.dsn, "proxy_nobody").Exec(ctx, psql, vec)
	_, gerr = as(f.via, "proxy_nobody").Exec(ctx, psql, vec)
	if !errors.As(werr, &want) || !errors.As(gerr, &got) || got.Code != "42501" || got.Message != want.Message {
		t.Errorf("without SELECT, extended protocol: got %v, want %v", gerr, werr)
	}

	// Under RLS, over ten query vectors: every row the role's own, and
	// recall@10 against the role's exact statement (one query alone
	// varies too much on the fixture's uniform vectors to judge).
	direct, tenant := as(f.dsn, "proxy_tenant"), as(f.via, "proxy_tenant")
	const queries = 10
	found := 0
	for range queries {
		sql := "SELECT id, tenant FROM items ORDER BY embedding <-> '" + f.vector() + "' LIMIT 10"
		exact, got := run(t, direct, sql), run(t, tenant, sql)
		if len(got.Rows) != 10 {
			t.Fatalf("under RLS: %d rows, want 10", len(got.Rows))
		}
		in := map[string]bool{}
		for _, r := range exact.Rows {
			in[string(r[0])] = true
		}
		for _, r := range got.Rows {
			if string(r[1]) != "3" {
				t.Errorf("under RLS: a row of tenant %s", r[1])
			}
			if in[string(r[0])] {
				found++
			}
		}
	}
	if found < 9*queries {
		t.Errorf("under RLS: %d of the role's exact %d found", found, 10*queries)
	}
}

// TestSidecarDown: with the sidecar stopped in the middle of a load,
// every statement keeps succeeding, passed through; once a sidecar serves
// again at its address, statements are accelerated again.
func TestSidecarDown(t *testing.T) {
	f := newFixture(t, 1000)
	var wg sync.WaitGroup
	errs := make(chan error, 4)
	stopAt := make(chan struct{})
	var once sync.Once
	for w := range 4 {
		c := connect(t, f.via)
		v := f.vector()
		wg.Go(func() {
			for i := range 150 {
				if w == 0 && i == 50 {
					once.Do(func() { close(stopAt) })
				}
				sql := fmt.Sprintf("SELECT id FROM items WHERE tenant <> %d ORDER BY embedding <-> '%s' LIMIT 5", i%10, v)
				rs, err := c.PgConn().Exec(context.Background(), sql).ReadAll()
				if err == nil && len(rs[0].Rows) != 5 {
					err = fmt.Errorf("%d rows", len(rs[0].Rows))
				}
				if err != nil {
					errs <- err
					return
				}
			}
		})
	}
	<-stopAt
	if err := f.sc.Stop(); err != nil {
		t.Logf("sidecar stop: %v", err)
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	st := f.p.Stats()
	t.Logf("accelerated %d, fallbacks %v", st.Accelerated, st.Fallbacks)
	if st.Accelerated == 0 || st.Fallbacks["sidecar"]+st.Fallbacks["sidecar down"] == 0 {
		t.Errorf("want statements both accelerated and passed through: %+v", st)
	}

	// Another sidecar at the same address, with a slot of its own.
	f.sc, _ = startNamedSidecar(t, f.dsn, fmt.Sprintf("proxy_test_%d", slots.Add(1)), f.sc.Addr.String(),
		"items_l2=public.items(embedding) key=id metric=l2 kind=hnsw recall=0.99")
	deadline := time.Now().Add(time.Minute)
	c := connect(t, f.via)
	before := f.p.Stats().Accelerated
	for f.p.Stats().Accelerated == before {
		if time.Now().After(deadline) {
			t.Fatalf("not accelerated again: %+v", f.p.Stats())
		}
		run(t, c, "SELECT id FROM items ORDER BY embedding <-> '"+f.vector()+"' LIMIT 5")
		time.Sleep(50 * time.Millisecond)
	}
}

// TestExtendedProtocol: the same statement with the vector as a
// parameter, through every pgx exec mode (prepared and cached, described
// each time, unprepared, and interpolated into a simple Query), binary
// parameters and results included, is answered through the sidecar with
// PostgreSQL's rows.
func TestExtendedProtocol(t *testing.T) {
	const queries, k = 20, 10
	f := newFixture(t, 3000)
	ctx := context.Background()
	proxied := connect(t, f.via)
	type row struct {
		ID       int64
		Tenant   int32
		Distance float64
	}
	sql := fmt.Sprintf("SELECT id, tenant, embedding <-> $1 AS distance FROM items WHERE tenant <> $2 ORDER BY embedding <-> $1 LIMIT %d", k)
	for _, mode := range execModes {
		before := f.p.Stats().Accelerated
		var found, total int
		for i := range queries {
			v := make([]float32, dims)
			for j := range v {
				v[j] = f.rng.Float32()*2 - 1
			}
			want, err := pgx.CollectRows(must(f.db.Query(ctx, sql, mode, v, i%10)), pgx.RowToStructByPos[row])
			if err != nil {
				t.Fatal(err)
			}
			got, err := pgx.CollectRows(must(proxied.Query(ctx, sql, mode, v, i%10)), pgx.RowToStructByPos[row])
			if err != nil {
				t.Fatalf("%v: %v", mode, err)
			}
			exact := map[int64]float64{}
			for _, r := range want {
				exact[r.ID] = r.Distance
			}
			for j, r := range got {
				if r.Tenant == int32(i%10) || j > 0 && r.Distance < got[j-1].Distance {
					t.Errorf("%v: row %d %+v: filtered out or out of order", mode, j, r)
				}
				if d, ok := exact[r.ID]; ok {
					found++
					if d != r.Distance {
						t.Errorf("%v: id %d distance %v, want %v", mode, r.ID, r.Distance, d)
					}
				}
			}
			total += len(want)
		}
		accelerated := f.p.Stats().Accelerated - before
		t.Logf("%v: recall@%d %.3f, %d of %d accelerated", mode, k, float64(found)/float64(total), accelerated, queries)
		if float64(found)/float64(total) < 0.95 || accelerated != queries {
			t.Errorf("%v: recall@%d %.3f, %d of %d accelerated; fallbacks %v", mode, k, float64(found)/float64(total), accelerated, queries, f.p.Stats().Fallbacks)
		}
	}
	// A literal vector beside parameters, LIMIT and OFFSET among them, as
	// ORMs write them (SQLAlchemy's .limit()).
	before := f.p.Stats().Accelerated
	lit := "SELECT items.id FROM items WHERE tenant = $1 ORDER BY items.embedding <=> '" + f.vector() + "' LIMIT $2 OFFSET $3"
	for _, mode := range execModes {
		want, err := pgx.CollectRows(must(f.db.Query(ctx, lit, mode, 4, 5, 2)), pgx.RowTo[int64])
		if err != nil {
			t.Fatal(err)
		}
		got, err := pgx.CollectRows(must(proxied.Query(ctx, lit, mode, 4, 5, 2)), pgx.RowTo[int64])
		if err != nil || len(got) != 5 {
			t.Errorf("%v: a literal vector, LIMIT $2 OFFSET $3: %v, %v (want %v)", mode, got, err, want)
		}
	}
	// The simple protocol has no parameters: pgx puts the values in the
	// text, and the statement is answered as well.
	if n := f.p.Stats().Accelerated - before; n != uint64(len(execModes)) {
		t.Errorf("LIMIT $2 OFFSET $3: %d of %d accelerated; fallbacks %v", n, len(execModes), f.p.Stats().Fallbacks)
	}

	// The client's statements still work after the proxy's answers.
	var n int
	if err := proxied.QueryRow(ctx, "SELECT count(*) FROM items WHERE tenant = $1", 3).Scan(&n); err != nil || n != 300 {
		t.Errorf("count: %d, %v", n, err)
	}
}

// TestLargeRows: a reply larger than the proxy holds whole makes it pass
// the statement through: the client gets its rows all the same.
func TestLargeRows(t *testing.T) {
	f := newFixture(t, 500)
	mustExec(t, f.db, "ALTER TABLE items ADD COLUMN note text; UPDATE items SET note = repeat('x', 10000) WHERE id % 2 = 0")
	p, via := startProxyWith(t, f.dsn, f.side, Config{Limits: Limits{MaxMessage: 4096}})
	waitIndexed(t, p, "items", "l2")
	sql := "SELECT id, note FROM items ORDER BY embedding <-> '" + f.vector() + "' LIMIT 10"
	want := run(t, f.db, sql)
	got := run(t, connect(t, via), sql)
	if fmt.Sprint(got.Rows) != fmt.Sprint(want.Rows) || p.Stats().Fallbacks["result too large"] != 1 {
		t.Errorf("large rows: %d rows, fallbacks %v", len(got.Rows), p.Stats().Fallbacks)
	}
}

// TestPreparedDescribedOnce: a statement the client prepared once is
// described once; each execution after is one round trip upstream (a
// Sync), answered with PostgreSQL's rows: with the session's probe and
// its read of the system identifier, runs + 3 round trips for runs
// answers. Deallocated where the proxy cannot see it (by a function),
// the statement gets PostgreSQL's own error.
func TestPreparedDescribedOnce(t *testing.T) {
	const runs, k = 10, 10
	f := newFixture(t, 1000)
	up := countUpstream(t)
	p, via := startProxyWith(t, f.dsn, f.side, Config{Upstream: up.addr})
	waitIndexed(t, p, "items", "l2")
	ctx := context.Background()
	proxied, direct := connect(t, via).PgConn(), f.db.PgConn()
	sql := fmt.Sprintf("SELECT id, embedding <-> $1 AS distance FROM items WHERE tenant <> $2 ORDER BY embedding <-> $1 LIMIT %d", k)
	for _, c := range []*pgconn.PgConn{proxied, direct} {
		if _, err := c.Prepare(ctx, "knn", sql, nil); err != nil {
			t.Fatal(err)
		}
	}
	trips := func() int { return up.count("H") + up.count("S") }
	before, accelerated := trips(), p.Stats().Accelerated
	var found int
	for i := range runs {
		// Every row matches: one round each.
		params := [][]byte{[]byte(f.vector()), []byte("-1")}
		want := direct.ExecPrepared(ctx, "knn", params, nil, nil).Read()
		got := proxied.ExecPrepared(ctx, "knn", params, nil, nil).Read()
		if want.Err != nil || got.Err != nil || len(got.Rows) != k {
			t.Fatalf("run %d: %d rows, %v (direct: %v)", i, len(got.Rows), got.Err, want.Err)
		}
		exact := map[string]string{}
		for _, r := range want.Rows {
			exact[string(r[0])] = string(r[1])
		}
		for _, r := range got.Rows {
			if d, ok := exact[string(r[0])]; ok {
				found++
				if d != string(r[1]) {
					t.Errorf("run %d: id %s distance %s, want %s", i, r[0], r[1], d)
				}
			}
		}
	}
	roundTrips, accelerated := trips()-before, p.Stats().Accelerated-accelerated
	if roundTrips != runs+3 || accelerated != runs || float64(found) < 0.95*runs*k {
		t.Errorf("%d runs: %d accelerated in %d round trips (want %d), %d of %d rows exact",
			runs, accelerated, roundTrips, runs+3, found, runs*k)
	}

	mustExec(t, f.db, "CREATE FUNCTION forget(name text) RETURNS void LANGUAGE plpgsql AS $$ BEGIN EXECUTE 'DEALLOCATE ' || quote_ident(name); END $$")
	params := [][]byte{[]byte(f.vector()), []byte("1")}
	var want, got []outcome
	for _, c := range []struct {
		conn *pgconn.PgConn
		out  *[]outcome
	}{{direct, &want}, {proxied, &got}} {
		if err := c.conn.Exec(ctx, "SELECT forget('knn')").Close(); err != nil {
			t.Fatal(err)
		}
		*c.out = outcomes([]*pgconn.Result{c.conn.ExecPrepared(ctx, "knn", params, nil, nil).Read()}, nil)
	}
	if !reflect.DeepEqual(got, want) || !strings.Contains(fmt.Sprint(got), "26000") {
		t.Errorf("a statement deallocated by a function: got %+v, want %+v", got, want)
	}
	var n int
	if err := connect(t, via).QueryRow(ctx, "SELECT count(*) FROM items").Scan(&n); err != nil || n != 1000 {
		t.Errorf("after: %d, %v", n, err)
	}
}

// TestNoTrace: the proxy's own statements are prepared and closed in
// the round trip that runs them: a session that executes a prepared
// statement again and again sees none of them in pg_prepared_statements,
// may PREPARE any name, and a DEALLOCATE ALL, even where the proxy cannot
// see it (in a DO block), leaves the next answer as it was. After the
// client's DEALLOCATE ALL its new statement of the same name is the one
// answered, and a statement dropped where the proxy cannot see it gets
// PostgreSQL's error, as it would direct.
func TestNoTrace(t *testing.T) {
	f := newFixture(t, 1000)
	ctx := context.Background()
	proxied := connect(t, f.via)
	pc := proxied.PgConn()
	execute := func(stmt string) ([][][]byte, error) {
		res := pc.ExecPrepared(ctx, stmt, [][]byte{[]byte(f.vector())}, nil, nil).Read()
		return res.Rows, res.Err
	}
	if _, err := pc.Prepare(ctx, "s1", "SELECT id FROM items ORDER BY embedding <-> $1 LIMIT 5", nil); err != nil {
		t.Fatal(err)
	}
	before := f.p.Stats().Accelerated
	const runs = 10
	for range runs {
		if rows, err := execute("s1"); err != nil || len(rows) != 5 {
			t.Fatalf("s1: %d rows, %v", len(rows), err)
		}
	}
	if n := f.p.Stats().Accelerated - before; n != runs {
		t.Fatalf("%d of %d accelerated; fallbacks %v", n, runs, f.p.Stats().Fallbacks)
	}
	names := func() []string {
		t.Helper()
		got, err := pgx.CollectRows(must(proxied.Query(ctx, `SELECT name FROM pg_prepared_statements ORDER BY name`,
			pgx.QueryExecModeSimpleProtocol)), pgx.RowTo[string])
		if err != nil {
			t.Fatal(err)
		}
		return got
	}
	if got := names(); !reflect.DeepEqual(got, []string{"s1"}) {
		t.Errorf("prepared statements after %d answers: %q, want only the client's s1", runs, got)
	}
	// Names the proxy once used are the client's to take.
	mustExec(t, proxied, "PREPARE vecside_proxy_1 AS SELECT 1")
	mustExec(t, proxied, "PREPARE vecside_proxy_2 AS SELECT 2")
	mustExec(t, proxied, `DO $$ BEGIN EXECUTE 'DEALLOCATE ALL'; END $$`)
	if _, err := pc.Prepare(ctx, "s1", "SELECT id FROM items ORDER BY embedding <-> $1 LIMIT 4", nil); err != nil {
		t.Fatal(err)
	}
	if rows, err := execute("s1"); err != nil || len(rows) != 4 {
		t.Fatalf("s1 after a DEALLOCATE ALL in a DO block: %d rows, %v", len(rows), err)
	}

	// DEALLOCATE ALL: the client's new s1 is answered, with its own LIMIT.
	mustExec(t, proxied, "DEALLOCATE ALL")
	if _, err := pc.Prepare(ctx, "s1", "SELECT id FROM items ORDER BY embedding <-> $1 LIMIT 3", nil); err != nil {
		t.Fatal(err)
	}
	before = f.p.Stats().Accelerated
	if rows, err := execute("s1"); err != nil || len(rows) != 3 {
		t.Fatalf("s1 prepared again: %d rows, %v", len(rows), err)
	}
	if n := f.p.Stats().Accelerated - before; n != 1 {
		t.Errorf("s1 prepared again: not accelerated; fallbacks %v", f.p.Stats().Fallbacks)
	}

	// Dropped by SQL whose text does not say so: the answer's Describe
	// finds it gone, and the client gets PostgreSQL's own error.
	mustExec(t, proxied, `DO $$ BEGIN EXECUTE 'DEALL' || 'OCATE s1'; END $$`)
	_, err := execute("s1")
	var pe *pgconn.PgError
	if !errors.As(err, &pe) || pe.Code != "26000" {
		t.Fatalf("s1 dropped: %v, want PostgreSQL's 26000", err)
	}
	if _, err := pc.Prepare(ctx, "s1", "SELECT id FROM items ORDER BY embedding <-> $1 LIMIT 4", nil); err != nil {
		t.Fatal(err)
	}
	if rows, err := execute("s1"); err != nil || len(rows) != 4 {
		t.Fatalf("s1 prepared a third time: %d rows, %v", len(rows), err)
	}
	if got := names(); !reflect.DeepEqual(got, []string{"s1"}) {
		t.Errorf("prepared statements at the end: %q, want only the client's s1", got)
	}
}

// throughStandby starts a hot standby of the test cluster and a proxy in
// front of it asking f's sidecar, and returns the proxy, the URL through
// it and the standby's own.
func (f *fixture) throughStandby(t *testing.T) (p *Proxy, via, direct string) {
	t.Helper()
	standby := pgtest.Shared(t).NewStandby(t)
	u, err := url.Parse(f.dsn)
	if err != nil {
		t.Fatal(err)
	}
	u.Host = fmt.Sprintf("127.0.0.1:%d", standby.Port)
	p, via = startProxyWith(t, u.String(), f.side, Config{Upstream: u.Host})
	return p, via, u.String()
}

// TestStandbyUpstream: through a hot standby, a statement asks the
// sidecar (which follows the primary) to have applied what the standby
// has replayed: every row the standby shows can be a candidate.
func TestStandbyUpstream(t *testing.T) {
	f := newFixture(t, 1000)
	_, via, _ := f.throughStandby(t)
	replica := connect(t, via)
	before := f.p.Stats().Accelerated
	for i := range 20 {
		v := f.vector()
		id := 200000 + i
		mustExec(t, f.db, fmt.Sprintf("INSERT INTO items VALUES (%d, 0, '%s')", id, v))
		var lsn string
		if err := f.db.QueryRow(context.Background(), "SELECT pg_current_wal_lsn()::text").Scan(&lsn); err != nil {
			t.Fatal(err)
		}
		for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(5 * time.Millisecond) {
			var replayed bool
			if err := replica.QueryRow(context.Background(), "SELECT pg_last_wal_replay_lsn() >= $1::pg_lsn", lsn).Scan(&replayed); err != nil {
				t.Fatal(err)
			}
			if replayed {
				break
			}
			if time.Now().After(deadline) {
				t.Fatal("the standby does not replay")
			}
		}
		r := run(t, replica, fmt.Sprintf("SELECT id FROM items ORDER BY embedding <-> '%s' LIMIT 1", v))
		if len(r.Rows) != 1 || string(r.Rows[0][0]) != strconv.Itoa(id) {
			t.Errorf("row %d, replayed by the standby, not found: %q", id, r.Rows)
		}
		plan := run(t, replica, "SHOW vecside.last_plan")
		if !strings.Contains(string(plan.Rows[0][0]), "waited for") {
			t.Errorf("through the standby: %s; want a wait for its replay position", plan.Rows[0][0])
		}
	}
	if n := f.p.Stats().Accelerated - before; n != 0 {
		t.Errorf("the primary's proxy answered %d statements", n)
	}
}

// TestLiteralVector: statements with their vector written in the text,
// as psql and ORMs that quote values send them, are answered with the
// literal bound as the restricted statement's parameter, and leave no
// statement behind.
func TestLiteralVector(t *testing.T) {
	f := newFixture(t, 1000)
	proxied := connect(t, f.via)
	before := f.p.Stats().Accelerated
	const runs = 5
	for range runs {
		v := f.vector()
		sql := fmt.Sprintf("SELECT id, embedding <-> '%s' AS d FROM items ORDER BY embedding <-> '%s' LIMIT 5", v, v)
		want, got := run(t, f.db, sql), run(t, proxied, sql)
		if len(got.Rows) != 5 || len(want.Rows) != 5 {
			t.Fatalf("%d rows through the proxy, %d direct", len(got.Rows), len(want.Rows))
		}
		exact := map[string]string{}
		for _, r := range want.Rows {
			exact[string(r[0])] = string(r[1])
		}
		for _, r := range got.Rows {
			if d, ok := exact[string(r[0])]; ok && d != string(r[1]) {
				t.Errorf("id %s: distance %s, want %s", r[0], r[1], d)
			}
		}
	}
	if n := f.p.Stats().Accelerated - before; n != runs {
		t.Fatalf("%d of %d accelerated; fallbacks %v", n, runs, f.p.Stats().Fallbacks)
	}
	if r := run(t, proxied, `SELECT name FROM pg_prepared_statements`); len(r.Rows) != 0 {
		t.Errorf("prepared statements left: %q", r.Rows)
	}
}
