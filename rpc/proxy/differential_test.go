//go:build cgo

package proxy

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgproto3"
	pg_query "github.com/pganalyze/pg_query_go/v6"

	"github.com/vecside/vecside/cmd/vecside/sidecar"
	"github.com/vecside/vecside/deploy"
	"github.com/vecside/vecside/internal/pgtest"
)

// The differential suite. A session runs twice, step by step: straight
// to PostgreSQL, on a database of its own, and through the proxy, on a
// twin database that the sidecar follows. Both are set up alike and
// every step happens in both, so that PostgreSQL holds the same rows in
// each; neither database has a pgvector index, so direct answers are
// exact. One oracle (compare) judges each step: a statement the proxy
// passed through must get what PostgreSQL gave directly; one it
// answered must get PostgreSQL's number of rows, each a row of the exact
// answer, in the exact answer's order of distances, and leave the
// session as PostgreSQL left it.
//
// Scripts (testdata/differential/*.txt) are sections ended by a line
// "----". A section's first line says what it is:
//
//	setup              SQL run on both databases as the superuser, before the sidecar starts;
//	                   a line "%table NAME ROWS" creates NAME (id bigint PRIMARY KEY, tenant
//	                   int, category int, note text, embedding real[]) with ROWS rows of
//	                   seeded 8-d vectors (tenant id % 10, category id % 100), "%role NAME"
//	                   a role that may log in; "%direct SQL" runs SQL on the direct
//	                   database only (for sessions opened with db=direct)
//	index DEF          a sidecar index definition, one per line
//	session            steps, one a line (a line ending in \ continues)
//
// Steps:
//
//	@NAME [user=ROLE] [db=direct]  the session NAME from now on, opened as ROLE; db=direct
//	                               goes through the proxy to the database the sidecar does
//	                               not follow
//	!SQL                           another session's statement: run as the superuser straight
//	                               on both databases
//	[+|-][x ]SQL [;; PARAM ...]    a statement of the session; + it must be answered by the
//	                               proxy, - passed through; x: in the extended protocol,
//	                               with PARAMs in text (NULL for a null)
//	wait                           until the sidecar has applied what is committed
//	recall R                       the statements answered since the last recall step found
//	                               at least R of PostgreSQL's exact rows
//	sleep DURATION
//
// %Qn% in a step is the n-th seeded query vector, in array form; %Z% the
// zero vector. Lines starting with # are comments.

// diffFixture is the pair of databases, the sidecar following one of
// them, and a proxy in front of both.
type diffFixture struct {
	direct, twin string       // the databases' URLs (superuser)
	names        [2]string    // their names, which errors may mention
	others       [2]*pgx.Conn // superuser connections to each, for "!" steps
	sc           *sidecar.Sidecar
	p            *Proxy
	via          func(dsn string) string // the URL dsn names, through the proxy
	ratio        recallCount
	// errorf reports a difference: t.Errorf, or, while a failing session
	// is shrunk, a note that it failed.
	errorf func(format string, args ...any)
	// statements counts the session statements run; searches those of
	// them the proxy recognised, answered those it answered, passed why
	// it passed the others through; blocks the transaction blocks ended.
	statements, searches, answered, blocks int
	passed                                 map[string]int
}

// recallCount sums, over the statements the proxy answered, the rows of
// PostgreSQL's exact answer and how many of them the proxy returned.
type recallCount struct{ exact, found int }

func (r recallCount) String() string {
	if r.exact == 0 {
		return "no rows answered"
	}
	return fmt.Sprintf("recall %.3f over %d rows", float64(r.found)/float64(r.exact), r.exact)
}

// newDiffFixture sets up both databases with setup, a sidecar with defs
// over the twin, and a proxy asking it as inProcess says.
func newDiffFixture(t *testing.T, sc script, inProcess bool) *diffFixture {
	t.Helper()
	c := pgtest.Shared(t)
	f := &diffFixture{direct: c.NewDatabase(t), twin: c.NewDatabase(t)}
	for i, dsn := range []string{f.direct, f.twin} {
		f.others[i] = connect(t, dsn)
		mustExec(t, f.others[i], deploy.DistanceSQL)
		mustExec(t, f.others[i], deploy.RealOperatorsSQL)
		if sc.setup != "" {
			mustExec(t, f.others[i], sc.setup)
		}
	}
	if sc.direct != "" {
		mustExec(t, f.others[0], sc.direct)
	}
	defs := sc.indexes
	var side string
	f.sc, side = startSidecar(t, f.twin, defs...)
	(&fixture{db: f.others[1], sc: f.sc}).waitApplied(t)
	var via string
	if inProcess {
		f.p, via = startProxyWith(t, f.twin, "", Config{Sidecar: InProcess(f.sc.Indexer, nil)})
	} else {
		f.p, via = startProxy(t, f.twin, side)
	}
	proxyAt := mustParseURL(t, via).Host
	f.via = func(dsn string) string {
		u := mustParseURL(t, dsn)
		u.Host = proxyAt
		return u.String()
	}
	f.names = [2]string{strings.TrimPrefix(mustParseURL(t, f.direct).Path, "/"), strings.TrimPrefix(mustParseURL(t, f.twin).Path, "/")}
	f.errorf = t.Errorf
	deadline := time.Now().Add(30 * time.Second)
	for indexCount(f.p) < len(defs) {
		if time.Now().After(deadline) {
			t.Fatalf("the proxy sees %d of %d indexes", indexCount(f.p), len(defs))
		}
		time.Sleep(20 * time.Millisecond)
	}
	return f
}

// pair is one session, run both ways, with what each side received
// traced: the oracle compares the kinds of messages too, which results
// alone would hide (a RowDescription sent twice).
type pair struct {
	direct, proxied *pgconn.PgConn
	traces          [2]*bytes.Buffer
}

// trace starts tracing c's messages into b.
func trace(c *pgconn.PgConn, b *bytes.Buffer) {
	c.Frontend().Trace(b, pgproto3.TracerOptions{SuppressTimestamps: true})
}

// received is the kinds of the messages a trace shows PostgreSQL (or the
// proxy) sent since it was last read, and empties it.
func received(b *bytes.Buffer) string {
	var kinds []string
	for _, line := range strings.Split(b.String(), "\n") {
		if f := strings.SplitN(line, "\t", 3); len(f) >= 2 && f[0] == "B" {
			kinds = append(kinds, f[1])
		}
	}
	b.Reset()
	return strings.Join(kinds, " ")
}

// asRole is dsn with its user replaced by role.
func asRole(dsn, role string) string {
	if role == "" {
		return dsn
	}
	return strings.Replace(dsn, "postgres@", role+"@", 1)
}

// open opens the session pair: as role, on the databases' twin unless
// other, when the proxied side goes to the direct database too.
func (f *diffFixture) open(t *testing.T, role string, other bool) *pair {
	t.Helper()
	target := f.twin
	if other {
		target = f.direct
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var p pair
	var err error
	if p.direct, err = pgconn.Connect(ctx, asRole(f.direct, role)); err != nil {
		t.Fatal(err)
	}
	if p.proxied, err = pgconn.Connect(ctx, f.via(asRole(target, role))); err != nil {
		t.Fatal(err)
	}
	p.traces = [2]*bytes.Buffer{{}, {}}
	trace(p.direct, p.traces[0])
	trace(p.proxied, p.traces[1])
	return &p
}

// diffOutcome is what a statement gave: its results in text, or its error,
// and the transaction status after it.
type diffOutcome struct {
	Results []diffResult
	Tx      byte
}

type diffResult struct {
	Fields []string // name and type OID of each column
	Rows   [][]string
	Tag    string
	Err    string // SQLSTATE, message, detail, hint
}

func (o diffOutcome) String() string {
	var b strings.Builder
	for _, r := range o.Results {
		if r.Err != "" {
			fmt.Fprintf(&b, "ERROR %s; ", r.Err)
			continue
		}
		fmt.Fprintf(&b, "%s %v %v; ", r.Tag, r.Fields, r.Rows)
	}
	fmt.Fprintf(&b, "status %c", o.Tx)
	return b.String()
}

// execute runs sql on c, simple or extended, with params in text.
func execute(t *testing.T, c *pgconn.PgConn, sql string, extended bool, params []*string) diffOutcome {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	var results []*pgconn.Result
	if extended {
		values := make([][]byte, len(params))
		for i, p := range params {
			if p != nil {
				values[i] = []byte(*p)
			}
		}
		results = []*pgconn.Result{c.ExecParams(ctx, sql, values, nil, nil, nil).Read()}
	} else {
		var err error
		results, err = c.Exec(ctx, sql).ReadAll()
		var pe *pgconn.PgError
		switch {
		case err != nil && !errors.As(err, &pe):
			t.Fatalf("%s: %v", sql, err)
		case err != nil && (len(results) == 0 || results[len(results)-1].Err == nil):
			// The statement that failed has no result of its own.
			results = append(results, &pgconn.Result{Err: pe})
		}
	}
	var o diffOutcome
	for _, r := range results {
		var ro diffResult
		for _, fd := range r.FieldDescriptions {
			ro.Fields = append(ro.Fields, fmt.Sprintf("%s:%d", fd.Name, fd.DataTypeOID))
		}
		for _, row := range r.Rows {
			var vs []string
			for _, v := range row {
				if v == nil {
					vs = append(vs, "NULL")
				} else {
					vs = append(vs, string(v))
				}
			}
			ro.Rows = append(ro.Rows, vs)
		}
		ro.Tag = r.CommandTag.String()
		if r.Err != nil {
			pe, ok := r.Err.(*pgconn.PgError)
			if !ok {
				t.Fatalf("%s: %v", sql, r.Err)
			}
			ro = diffResult{Err: strings.Join([]string{pe.Code, pe.Message, pe.Detail, pe.Hint}, " | ")}
		}
		o.Results = append(o.Results, ro)
	}
	o.Tx = c.TxStatus()
	return o
}

func mustParseURL(t *testing.T, s string) *url.URL {
	t.Helper()
	u, err := url.Parse(s)
	if err != nil {
		t.Fatal(err)
	}
	return u
}

// normalized is o with each database's name in its errors made one.
func (f *diffFixture) normalized(o diffOutcome) diffOutcome {
	out := diffOutcome{Tx: o.Tx}
	for _, r := range o.Results {
		for _, n := range f.names {
			r.Err = strings.ReplaceAll(r.Err, n, "<db>")
		}
		out.Results = append(out.Results, r)
	}
	return out
}

// step runs one statement of a session both ways and judges it; expect
// is '+' (answered by the proxy), '-' (passed through) or 0.
func (f *diffFixture) step(t *testing.T, s *pair, sql string, extended bool, params []*string, expect byte) {
	t.Helper()
	received(s.traces[0])
	received(s.traces[1])
	want := f.normalized(execute(t, s.direct, sql, extended, params))
	wantKinds := received(s.traces[0])
	before := f.p.Stats()
	got := f.normalized(execute(t, s.proxied, sql, extended, params))
	gotKinds := received(s.traces[1])
	after := f.p.Stats()
	if gotKinds != wantKinds {
		f.errorf("%s: the client received %s, want %s", sql, gotKinds, wantKinds)
	}
	answered := after.Accelerated != before.Accelerated
	f.statements++
	if answered {
		f.searches++
	}
	for reason, n := range after.Fallbacks {
		if n != before.Fallbacks[reason] {
			f.searches++
			if f.passed == nil {
				f.passed = map[string]int{}
			}
			if reason == "too few rows" && shortAnswer(sql, params, want) {
				// PostgreSQL's own answer is short of LIMIT: no
				// candidates can show that it is complete.
				reason = "answer shorter than LIMIT"
			}
			f.passed[reason]++
		}
	}
	if w := strings.ToUpper(sql); w == "COMMIT" || w == "ROLLBACK" {
		f.blocks++
	}
	switch {
	case expect == '+' && !answered:
		f.errorf("%s: passed through (%v), want it answered by the proxy", sql, f.p.Stats().Fallbacks)
	case expect == '-' && answered:
		f.errorf("%s: answered by the proxy, want it passed through", sql)
	}
	if !answered {
		if !outcomesEqual(got, want) {
			f.errorf("%s: passed through, got\n\t%v\nwant\n\t%v", sql, got, want)
		}
		return
	}
	f.answered++
	if err := f.judge(t, s, sql, extended, params, got, want); err != "" {
		f.errorf("%s: answered by the proxy, %s\ngot\n\t%v\nPostgreSQL gave\n\t%v", sql, err, got, want)
	}
}

// shortAnswer reports whether want, the answer to sql with params, has
// fewer rows than its LIMIT.
func shortAnswer(sql string, params []*string, want diffOutcome) bool {
	tree, err := pg_query.Parse(sql)
	if err != nil || len(tree.Stmts) != 1 || len(want.Results) != 1 {
		return false
	}
	n := tree.Stmts[0].Stmt.GetSelectStmt().GetLimitCount()
	var limit string
	switch {
	case n.GetAConst().GetIval() != nil:
		limit = strconv.Itoa(int(n.GetAConst().GetIval().Ival))
	case n.GetAConst().GetSval() != nil:
		limit = n.GetAConst().GetSval().Sval
	case n.GetParamRef() != nil && int(n.GetParamRef().Number) <= len(params) && params[n.GetParamRef().Number-1] != nil:
		limit = *params[n.GetParamRef().Number-1]
	}
	l, err := strconv.ParseInt(limit, 10, 64)
	return err == nil && int64(len(want.Results[0].Rows)) < l
}

func outcomesEqual(a, b diffOutcome) bool {
	return fmt.Sprint(a) == fmt.Sprint(b)
}

// judge is the oracle for a statement the proxy answered: "" if got is
// an answer PostgreSQL could give, with want its exact one.
func (f *diffFixture) judge(t *testing.T, s *pair, sql string, extended bool, params []*string, got, want diffOutcome) string {
	t.Helper()
	if got.Tx != want.Tx {
		return fmt.Sprintf("transaction status %c, want %c", got.Tx, want.Tx)
	}
	if len(got.Results) != 1 || len(want.Results) != 1 {
		return "not one result"
	}
	g, w := got.Results[0], want.Results[0]
	switch {
	case g.Err != "" || w.Err != "":
		if g.Err != w.Err {
			return "another error"
		}
		return ""
	case !slices.Equal(g.Fields, w.Fields):
		return "other columns"
	case g.Tag != w.Tag || len(g.Rows) != len(w.Rows):
		return fmt.Sprintf("%d rows, want %d", len(g.Rows), len(w.Rows))
	}
	// Every row PostgreSQL would return for the statement, with its
	// distance, in the direct session as it stands.
	all, err := unlimited(sql)
	if err != "" {
		return err
	}
	full := execute(t, s.direct, all, extended, params)
	if len(full.Results) != 1 || full.Results[0].Err != "" {
		return "the oracle's statement failed: " + fmt.Sprint(full)
	}
	distances := map[string][]float64{}
	for _, r := range full.Results[0].Rows {
		k := strings.Join(r[:len(r)-1], "\x00")
		distances[k] = append(distances[k], sortValue(r[len(r)-1]))
	}
	exact := map[string]int{}
	for _, r := range w.Rows {
		exact[strings.Join(r, "\x00")]++
	}
	last := math.Inf(-1)
	for i, r := range g.Rows {
		k := strings.Join(r, "\x00")
		ds := distances[k]
		j := slices.IndexFunc(ds, func(d float64) bool { return d >= last })
		if j < 0 {
			if len(ds) == 0 {
				return fmt.Sprintf("row %d %v is no row of the statement's", i, r)
			}
			return fmt.Sprintf("row %d %v out of order", i, r)
		}
		last = ds[j]
		distances[k] = slices.Delete(ds, j, j+1)
		if exact[k] > 0 {
			exact[k]--
			f.ratio.found++
		}
	}
	f.ratio.exact += len(w.Rows)
	return ""
}

// sortValue orders a distance as PostgreSQL sorts float8 ascending:
// NaN after every number, NULL after NaN.
func sortValue(s string) float64 {
	switch s {
	case "NULL":
		return math.MaxFloat64
	case "NaN":
		return math.MaxFloat64 / 2
	}
	v, err := strconv.ParseFloat(s, 64)
	if err != nil {
		return math.MaxFloat64
	}
	return v
}

// unlimited is sql without LIMIT and OFFSET and with its sort key as a
// last column: the oracle's view of every row the statement orders. A
// LIMIT or OFFSET that is a parameter stays named, multiplied by zero,
// so that the statement takes the same parameters.
func unlimited(sql string) (string, string) {
	tree, err := pg_query.Parse(sql)
	if err != nil || len(tree.Stmts) != 1 || tree.Stmts[0].Stmt.GetSelectStmt() == nil {
		return "", "the oracle cannot read the statement"
	}
	sel := tree.Stmts[0].Stmt.GetSelectStmt()
	if len(sel.SortClause) == 0 {
		return "", "the oracle needs ORDER BY"
	}
	unbound := func(n *pg_query.Node, tmpl string) *pg_query.Node {
		p := n.GetParamRef()
		if p == nil {
			return nil
		}
		t, err := pg_query.Parse(fmt.Sprintf(tmpl, p.Number))
		if err != nil {
			panic(err)
		}
		return t.Stmts[0].Stmt.GetSelectStmt().TargetList[0].GetResTarget().Val
	}
	sel.LimitCount = unbound(sel.LimitCount, "SELECT NULL::bigint + 0 * $%d::bigint")
	sel.LimitOffset = unbound(sel.LimitOffset, "SELECT 0 * $%d::bigint")
	key := sel.SortClause[0].GetSortBy().Node
	// A target's alias or position stands for its expression, as
	// PostgreSQL reads ORDER BY.
	if f := key.GetColumnRef().GetFields(); len(f) == 1 && f[0].GetString_() != nil {
		for _, t := range sel.TargetList {
			if t.GetResTarget().Name == f[0].GetString_().Sval {
				key = t.GetResTarget().Val
			}
		}
	}
	if c := key.GetAConst().GetIval(); c != nil && int(c.Ival) <= len(sel.TargetList) {
		key = sel.TargetList[c.Ival-1].GetResTarget().Val
	}
	sel.TargetList = append(sel.TargetList, pg_query.MakeResTargetNodeWithVal(key, -1))
	out, err := pg_query.Deparse(tree)
	if err != nil {
		return "", "the oracle cannot deparse the statement"
	}
	return out, ""
}

// other runs another session's statement on both databases.
func (f *diffFixture) other(t *testing.T, sql string) {
	t.Helper()
	for _, c := range f.others {
		mustExec(t, c, sql)
	}
}

// waitApplied waits until the sidecar has applied what is committed.
func (f *diffFixture) waitApplied(t *testing.T) {
	t.Helper()
	(&fixture{db: f.others[1], sc: f.sc}).waitApplied(t)
}

// script is a parsed differential script.
type script struct {
	setup   string
	direct  string // setup of the direct database only
	indexes []string
	steps   []string
}

func parseScript(text string) (script, error) {
	var sc script
	var section []string
	flush := func() error {
		if len(section) == 0 {
			return nil
		}
		head, body := section[0], section[1:]
		switch {
		case head == "setup":
			for _, l := range body {
				if d, ok := strings.CutPrefix(l, "%direct "); ok {
					sc.direct += d + "\n"
				} else {
					sc.setup += expandSetup(l) + "\n"
				}
			}
		case strings.HasPrefix(head, "index"):
			for _, l := range append([]string{head}, body...) {
				if l = strings.TrimSpace(strings.TrimPrefix(l, "index")); l != "" {
					sc.indexes = append(sc.indexes, l)
				}
			}
		case head == "session":
			for _, l := range body {
				sc.steps = append(sc.steps, expandVectors(l))
			}
		default:
			return fmt.Errorf("unknown section %q", head)
		}
		section = nil
		return nil
	}
	cont := ""
	for _, line := range strings.Split(text, "\n") {
		if cont != "" {
			line = cont + " " + strings.TrimSpace(line)
			cont = ""
		}
		if strings.HasSuffix(line, "\\") {
			cont = strings.TrimSuffix(line, "\\")
			continue
		}
		trimmed := strings.TrimSpace(line)
		switch {
		case trimmed == "----":
			if err := flush(); err != nil {
				return sc, err
			}
		case trimmed == "" && len(section) == 0, strings.HasPrefix(trimmed, "#"):
		case trimmed != "":
			section = append(section, trimmed)
		}
	}
	return sc, flush()
}

// run plays the script's steps on f, in sessions closed at its end.
func (f *diffFixture) run(t *testing.T, steps []string) {
	t.Helper()
	sessions := map[string]*pair{}
	defer func() {
		for _, p := range sessions {
			p.direct.Close(context.Background())
			p.proxied.Close(context.Background())
		}
	}()
	var cur *pair
	for _, st := range steps {
		switch {
		case strings.HasPrefix(st, "@"):
			fields := strings.Fields(st[1:])
			if cur = sessions[fields[0]]; cur == nil {
				role, other := "", false
				for _, opt := range fields[1:] {
					k, v, _ := strings.Cut(opt, "=")
					switch k {
					case "user":
						role = v
					case "db":
						other = v == "direct"
					default:
						t.Fatalf("step %q: unknown option %s", st, k)
					}
				}
				cur = f.open(t, role, other)
				sessions[fields[0]] = cur
			}
		case strings.HasPrefix(st, "!"):
			f.other(t, st[1:])
		case st == "wait":
			f.waitApplied(t)
		case strings.HasPrefix(st, "recall "):
			least, err := strconv.ParseFloat(strings.TrimPrefix(st, "recall "), 64)
			if err != nil {
				t.Fatal(err)
			}
			if f.ratio.exact == 0 || float64(f.ratio.found) < least*float64(f.ratio.exact) {
				f.errorf("%s, want at least %g", f.ratio, least)
			}
			t.Logf("%s", f.ratio)
			f.ratio = recallCount{}
		case strings.HasPrefix(st, "sleep "):
			d, err := time.ParseDuration(strings.TrimPrefix(st, "sleep "))
			if err != nil {
				t.Fatal(err)
			}
			time.Sleep(d)
		default:
			if cur == nil {
				cur = f.open(t, "", false)
				sessions[""] = cur
			}
			var expect byte
			if st[0] == '+' || st[0] == '-' {
				expect, st = st[0], st[1:]
			}
			extended := strings.HasPrefix(st, "x ")
			if extended {
				st = st[2:]
			}
			parts := strings.Split(st, " ;; ")
			var params []*string
			for _, p := range parts[1:] {
				if p == "NULL" {
					params = append(params, nil)
				} else {
					params = append(params, &p)
				}
			}
			f.step(t, cur, parts[0], extended, params, expect)
		}
	}
}

// TestDifferential runs every script both ways: through vecside proxy
// (the sidecar asked over pgwire) and vecside serve --proxy (in process).
func TestDifferential(t *testing.T) {
	files, err := filepath.Glob("testdata/differential/*.txt")
	if err != nil || len(files) == 0 {
		t.Fatalf("no scripts: %v", err)
	}
	for _, file := range files {
		text, err := os.ReadFile(file)
		if err != nil {
			t.Fatal(err)
		}
		sc, err := parseScript(string(text))
		if err != nil {
			t.Fatalf("%s: %v", file, err)
		}
		name := strings.TrimSuffix(filepath.Base(file), ".txt")
		for _, mode := range []string{"pgwire", "in-process"} {
			t.Run(name+"/"+mode, func(t *testing.T) {
				f := newDiffFixture(t, sc, mode == "in-process")
				f.run(t, sc.steps)
				t.Logf("%s", f.ratio)
			})
		}
	}
}

// indexCount is how many ready indexes p's catalog holds.
func indexCount(p *Proxy) int {
	m := p.cat.indexes.Load()
	if m == nil {
		return 0
	}
	n := 0
	for _, ixs := range *m {
		n += len(ixs)
	}
	return n
}

// diffDims is the scripts' vectors' dimension.
const diffDims = 8

// expandSetup expands a setup line's %table and %role.
func expandSetup(line string) string {
	f := strings.Fields(line)
	switch {
	case len(f) == 3 && f[0] == "%table":
		rows, _ := strconv.Atoi(f[2])
		seed := 0
		for _, c := range f[1] {
			seed = seed*31 + int(c)
		}
		return fmt.Sprintf(`CREATE TABLE %[1]s (id bigint PRIMARY KEY, tenant int, category int, note text, embedding real[]);
INSERT INTO %[1]s SELECT g, g %% 10, g %% 100, 'n' || g,
  ARRAY(SELECT round(sin(g * 0.37 + d * 1.71 + %[3]d)::numeric, 4)::real FROM generate_series(1, %[4]d) d)
FROM generate_series(1, %[2]d) g;`, f[1], rows, seed%1000, diffDims)
	case len(f) == 2 && f[0] == "%role":
		return fmt.Sprintf(`DO $$ BEGIN CREATE ROLE %s LOGIN; EXCEPTION WHEN duplicate_object THEN NULL; END $$;`, f[1])
	}
	return line
}

// expandVectors puts the seeded query vectors in place of %Qn% and %Z%.
func expandVectors(line string) string {
	for n := 9; n >= 1; n-- {
		line = strings.ReplaceAll(line, fmt.Sprintf("%%Q%d%%", n), queryVector(n))
	}
	zero := strings.Repeat("0,", diffDims)
	return strings.ReplaceAll(line, "%Z%", "{"+zero[:len(zero)-1]+"}")
}

// queryVector is the n-th seeded query vector, in array form.
func queryVector(n int) string {
	parts := make([]string, diffDims)
	for d := range parts {
		parts[d] = strconv.FormatFloat(math.Round(math.Cos(float64(n)*2.3+float64(d)*0.9)*1e4)/1e4, 'g', -1, 64)
	}
	return "{" + strings.Join(parts, ",") + "}"
}
