//go:build cgo

package proxy

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/vecside/vecside/heapfetch"
	"github.com/vecside/vecside/internal/pgtest"
)

// TestSessionSettingsOnly: the probe reads a setting only where
// something set it, so that a library's defaults (pgvector's, once its
// library is loaded in the backend) never reach the sidecar as the
// session's choice: work_mem stands for a loaded library's setting at
// its default, vecside.ef_search for a placeholder.
func TestSessionSettingsOnly(t *testing.T) {
	db := connect(t, pgtest.Shared(t).NewDatabase(t))
	names := []string{"work_mem", "vecside.ef_search"}
	sql := "SELECT " + settingsSQLFor(names)
	read := func() string {
		t.Helper()
		rows, err := db.Query(context.Background(), sql, pgx.QueryExecModeSimpleProtocol)
		if err != nil {
			t.Fatal(err)
		}
		defer rows.Close()
		if !rows.Next() {
			t.Fatalf("no row: %v", rows.Err())
		}
		var shown []string
		for _, v := range setValues(names, slices.Clone(rows.RawValues())) {
			if v == nil {
				shown = append(shown, "NULL")
			} else {
				shown = append(shown, string(v))
			}
		}
		return strings.Join(shown, " ")
	}
	for _, c := range []struct{ set, want string }{
		{"", "NULL NULL"},
		{"SET work_mem = '8MB'; SET vecside.ef_search = 33", "8MB 33"},
		{"RESET work_mem; RESET vecside.ef_search", "NULL "},
	} {
		if c.set != "" {
			mustExec(t, db, c.set)
		}
		if got := read(); got != c.want {
			t.Errorf("after %q: %q, want %q", c.set, got, c.want)
		}
	}

	// Through the proxy, the session's SET is the sidecar's option; the
	// index's own settings stand otherwise.
	f := newFixture(t, 1000)
	proxied := connect(t, f.via)
	query := "SELECT id FROM items ORDER BY embedding <-> '" + f.vector() + "' LIMIT 5"
	for _, c := range []struct{ set, want string }{
		{"", ""},
		{"SET vecside.ef_search = 33", "options ef_search=33"},
		{"SET hnsw.ef_search = 50", "options ef_search=33"},
		{"RESET vecside.ef_search", "options ef_search=50"},
		{"RESET hnsw.ef_search", ""},
	} {
		if c.set != "" {
			mustExec(t, proxied, c.set)
		}
		run(t, proxied, query)
		plan := lastPlan(t, proxied)
		if !strings.HasPrefix(plan, "accelerated") || c.want != "" && !strings.Contains(plan, c.want) || c.want == "" && strings.Contains(plan, "options") {
			t.Errorf("after %q: %q, want %q", c.set, plan, c.want)
		}
	}
}

// TestParseDuration: statement_timeout as SHOW shows it.
func TestParseDuration(t *testing.T) {
	for v, want := range map[string]time.Duration{
		"0": 0, "250": 250 * time.Millisecond, "1500ms": 1500 * time.Millisecond, "3s": 3 * time.Second,
		"2min": 2 * time.Minute, "1h": time.Hour, "2d": 48 * time.Hour,
	} {
		if got, ok := parseDuration(v); !ok || got != want {
			t.Errorf("%q: %v %v, want %v", v, got, ok, want)
		}
	}
	for _, v := range []string{"", "1x", "-1s", "99999999999999d"} {
		if got, ok := parseDuration(v); ok {
			t.Errorf("%q: %v, want an error", v, got)
		}
	}
}

// stalledSidecar is a sidecar whose searches, while stalled, never end
// by themselves: each waits until its context ends, and says how it
// ended.
type stalledSidecar struct {
	Sidecar
	stalled *atomic.Bool
	waiting chan struct{}
	ended   chan error
}

func (s stalledSidecar) Candidates(ctx context.Context, req heapfetch.Request) ([]heapfetch.Candidate, heapfetch.Source, error) {
	if !s.stalled.Load() {
		return s.Sidecar.Candidates(ctx, req)
	}
	s.waiting <- struct{}{}
	<-ctx.Done()
	s.ended <- ctx.Err()
	return nil, heapfetch.Source{}, ctx.Err()
}

// TestSidecarStalled: a statement waits for a stalled sidecar no longer
// than Config.CandidateWait, less under a shorter statement_timeout, and
// until the client cancels, then passes through and gets PostgreSQL's
// rows. A stall keeps other statements from asking for a second; a
// session's own cancel or timeout does not.
func TestSidecarStalled(t *testing.T) {
	f := newFixture(t, 1000)
	stalled := stalledSidecar{Sidecar: InProcess(f.sc.Indexer, nil), stalled: new(atomic.Bool), waiting: make(chan struct{}, 1), ended: make(chan error, 1)}
	const wait = 2 * time.Second
	p, via := startProxyWith(t, f.dsn, "", Config{Sidecar: stalled, CandidateWait: wait})
	waitIndexed(t, p, "items", "l2")
	ctx := context.Background()
	query := "SELECT id FROM items ORDER BY embedding <-> '" + f.vector() + "' LIMIT 5"
	// Each session is first answered by the sidecar, then passes a
	// statement through (the same, in descending order), as a session in
	// use would have: the stalled statement is probed for again, and
	// what it takes is its probe, the wait and then the statement.
	warm := strings.Replace(query, " LIMIT", " DESC LIMIT", 1)
	run(t, f.db, warm)
	began := time.Now()
	want := run(t, f.db, query)
	direct := time.Since(began)
	t.Logf("straight to PostgreSQL: %v", direct)
	// ask runs the query on c: PostgreSQL's rows, or, cancelled, its
	// error for a cancelled statement (the cancel reaches PostgreSQL
	// too, and cancels the statement passed through if it is there
	// first).
	ask := func(c *pgx.Conn, cancelled bool) (time.Duration, error) {
		stalled.stalled.Store(false)
		run(t, c, query)
		run(t, c, warm)
		stalled.stalled.Store(true)
		start := time.Now()
		rs, err := c.PgConn().Exec(ctx, query).ReadAll()
		switch {
		case cancelled && err != nil && strings.Contains(err.Error(), "57014"):
		case err != nil || len(rs) != 1 || fmt.Sprint(rs[0].Rows) != fmt.Sprint(want.Rows):
			t.Errorf("got %v %v, want PostgreSQL's %q", rs, err, want.Rows)
		}
		<-stalled.waiting
		took := time.Since(start)
		t.Logf("answered in %v", took)
		return took, <-stalled.ended
	}

	// Each case in a session of its own, one after the other, past the
	// back-off a stall starts.
	took, err := ask(connect(t, via), false)
	if !errors.Is(err, context.DeadlineExceeded) || took < wait {
		t.Errorf("stalled: the statement took %v, its wait ended by %v; want %v, the deadline", took, err, wait)
	}
	if got := p.Stats().Fallbacks["sidecar"]; got != 1 {
		t.Errorf("stalled: %d statements passed through for the sidecar, want 1", got)
	}
	time.Sleep(sidecarBackoff)

	short := connect(t, via)
	mustExec(t, short, "SET statement_timeout = '300ms'")
	if took, err = ask(short, false); !errors.Is(err, context.DeadlineExceeded) || took >= wait {
		t.Errorf("statement_timeout 300ms: the statement took %v, its wait ended by %v", took, err)
	}
	if sidecarResting(p) {
		t.Error("a session's statement_timeout kept every statement from asking the sidecar")
	}

	cancelled := connect(t, via)
	go func() {
		<-stalled.waiting
		stalled.waiting <- struct{}{} // for ask
		cancelled.PgConn().CancelRequest(ctx)
	}()
	if took, err = ask(cancelled, true); !errors.Is(err, context.Canceled) || took >= wait {
		t.Errorf("cancelled: the statement took %v, its wait ended by %v", took, err)
	}
	if sidecarResting(p) {
		t.Error("a cancel kept every statement from asking the sidecar")
	}
}

// TestLastPlanTellsNoMore: SHOW vecside.last_plan says, per round, how
// many candidates were asked for and how many rows came back, which the
// role saw itself, and nothing of a statement that failed: not how many
// rows the index holds, which a role under row-level security may not
// count.
func TestLastPlanTellsNoMore(t *testing.T) {
	f := newFixture(t, 2000)
	for _, sql := range []string{
		"DO $$ BEGIN CREATE ROLE proxy_tenant LOGIN; EXCEPTION WHEN duplicate_object THEN NULL; END $$",
		"GRANT SELECT ON items TO proxy_tenant",
		"ALTER TABLE items ENABLE ROW LEVEL SECURITY",
		"CREATE POLICY tenant3 ON items TO proxy_tenant USING (tenant = 3)",
	} {
		mustExec(t, f.db, sql)
	}
	tenant := connect(t, strings.Replace(f.via, "postgres@", "proxy_tenant@", 1))
	v := f.vector()
	run(t, tenant, "SELECT id FROM items WHERE id % 7 = 0 ORDER BY embedding <-> '"+v+"' LIMIT 10")
	plan := lastPlan(t, tenant)
	if !regexp.MustCompile(`^accelerated: index \w+; rounds \(candidates asked→rows\) \d+→\d+(, \d+→\d+)*(; waited for [0-9A-F/]+)?$`).MatchString(plan) {
		t.Errorf("under RLS: %q", plan)
	}
	_, err := tenant.Exec(context.Background(), "SELECT id FROM items WHERE 1 / (id - id) = 1 ORDER BY embedding <-> '"+v+"' LIMIT 10",
		pgx.QueryExecModeSimpleProtocol)
	if err == nil {
		t.Fatal("a division by zero did not fail")
	}
	if plan := lastPlan(t, tenant); regexp.MustCompile(`\d`).MatchString(strings.TrimPrefix(plan, "accelerated: index items_l2")) {
		t.Errorf("after a failure: %q", plan)
	}
}

// TestStatementFault: a query vector the sidecar refuses (another
// dimension) passes through, counted as the sidecar's refusal, and keeps
// no other statement from asking.
func TestStatementFault(t *testing.T) {
	f := newFixture(t, 200)
	c := connect(t, f.via)
	short := strings.Replace(f.vector(), "{", "{0.5,", 1)
	sql := "SELECT id FROM items ORDER BY embedding <-> '" + short + "' LIMIT 3"
	_, err := c.Exec(context.Background(), sql, pgx.QueryExecModeSimpleProtocol)
	_, direct := f.db.Exec(context.Background(), sql, pgx.QueryExecModeSimpleProtocol)
	if fmt.Sprint(err) != fmt.Sprint(direct) {
		t.Errorf("a vector of another dimension: %v, PostgreSQL %v", err, direct)
	}
	if n := f.p.Stats().Fallbacks["refused by the sidecar"]; n != 1 || sidecarResting(f.p) {
		t.Errorf("%d statements counted as refused by the sidecar (want 1), the sidecar resting: %v", n, sidecarResting(f.p))
	}
	if plan := lastPlan(t, c); !strings.Contains(plan, "refused by the sidecar: ") || !strings.Contains(plan, "dimensions") {
		t.Errorf("last_plan %q does not say what the sidecar refused", plan)
	}
	run(t, c, "SELECT id FROM items ORDER BY embedding <-> '"+f.vector()+"' LIMIT 3")
	if plan := lastPlan(t, c); !strings.HasPrefix(plan, "accelerated") {
		t.Errorf("the next statement: %q", plan)
	}
}
