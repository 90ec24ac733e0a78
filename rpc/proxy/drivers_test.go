//go:build cgo

package proxy

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/vecside/vecside/deploy"
	"github.com/vecside/vecside/internal/pgtest"
)

// driversDir holds the client programs, each ordinary application code
// in its ecosystem's driver (see scripts/install-drivers).
const driversDir = "testdata/drivers"

// driver is a client program and how to find what it needs.
type driver struct {
	name string
	// command is the program's command line, DSN and phase to follow;
	// it fails or skips the test when the driver is not installed.
	command func(t *testing.T) []string
	// prepared matches the names of the statements the driver prepares
	// server-side in the queries phase (pg_prepared_statements).
	prepared *regexp.Regexp
	// freshNames: the driver names its statements anew on each
	// connection, so that the two runs' names differ (postgres.js: a
	// random id of the connection's and a count); they are compared as
	// names prepared matches.
	freshNames bool
}

var drivers = []driver{
	{"psycopg", psycopgCommand, regexp.MustCompile(`^_pg3_\d+$`), false},
	{"node-postgres", nodePostgresCommand, regexp.MustCompile(`^knn_by_tenant$`), false},
	{"postgres.js", postgresJSCommand, regexp.MustCompile(`^[0-9a-z]+$`), true},
}

// missingDriver fails the test in CI, where scripts/install-drivers has
// run, and skips it elsewhere.
func missingDriver(t *testing.T, what string) {
	t.Helper()
	missingTool(t, what+" is not installed: scripts/install-drivers installs it")
}

// missingTool fails the test in CI, whose set-up installs every tool the
// tests use, and skips it elsewhere with msg.
func missingTool(t *testing.T, msg string) {
	t.Helper()
	if os.Getenv("CI") == "true" {
		t.Fatal(msg)
	}
	t.Skip(msg)
}

// psycopgCommand finds a Python with psycopg 3: $VECSIDE_PYTHON, else
// python3 on PATH, else Debian's.
func psycopgCommand(t *testing.T) []string {
	for _, python := range []string{os.Getenv("VECSIDE_PYTHON"), "python3", "/usr/bin/python3"} {
		if python == "" {
			continue
		}
		path, err := exec.LookPath(python)
		if err == nil && exec.Command(path, "-c", "import psycopg").Run() == nil {
			return []string{path, "workload.py"}
		}
	}
	missingDriver(t, "psycopg 3")
	return nil
}

// nodePostgresCommand finds node and the packages of driversDir's
// package-lock.json.
func nodePostgresCommand(t *testing.T) []string {
	node, err := exec.LookPath("node")
	if err != nil {
		missingDriver(t, "node")
	}
	for _, pkg := range []string{"pg", "pg-copy-streams"} {
		if _, err := os.Stat(filepath.Join(driversDir, "node_modules", pkg, "package.json")); err != nil {
			missingDriver(t, "npm package "+pkg)
		}
	}
	return []string{node, "workload.js"}
}

// postgresJSCommand finds node and postgres.js (npm postgres), of
// driversDir's package-lock.json.
func postgresJSCommand(t *testing.T) []string {
	node, err := exec.LookPath("node")
	if err != nil {
		missingDriver(t, "node")
	}
	if _, err := os.Stat(filepath.Join(driversDir, "node_modules", "postgres", "package.json")); err != nil {
		missingDriver(t, "npm package postgres")
	}
	return []string{node, "workload-postgresjs.js"}
}

// TestDrivers: unchanged client programs in psycopg 3, node-postgres and
// postgres.js run a pgvector workload through the proxy and against
// PostgreSQL directly, each on a database of its own with the same data.
// What the proxy passes through — DDL, COPY both ways, INSERT, UPDATE,
// DELETE, CREATE INDEX, other SELECTs, a search inside a transaction
// that wrote, a metric the sidecar does not index — returns what
// PostgreSQL returns; every other search (filtered or not, in a
// transaction or out, unprepared, prepared by name, psycopg's automatic
// prepare and postgres.js's describing before binding included, binary,
// through a pool) is answered by the proxy with only rows that match its
// filter, PostgreSQL's exact distances in exact order, and recall@10 ≥
// 0.95 against the direct run's exact answers.
func TestDrivers(t *testing.T) {
	for _, d := range drivers {
		t.Run(d.name, func(t *testing.T) { testDriver(t, d) })
	}
}

func testDriver(t *testing.T, d driver) {
	argv := d.command(t)
	direct, via := pgtest.Shared(t).NewDatabase(t), pgtest.Shared(t).NewDatabase(t)
	for _, dsn := range []string{direct, via} {
		db := connect(t, dsn)
		mustExec(t, db, deploy.DistanceSQL)
		mustExec(t, db, deploy.RealOperatorsSQL)
		// Where pgvector is offered the programs give their column its
		// HNSW index. Searched wide, it answers as exactly as a scan on
		// 2,000 rows, so that the direct run's answers are the exact ones
		// to compare with, and what passes through gives the same rows
		// both ways.
		pgvector := pgtest.OffersPGVector(t, dsn)
		if pgvector {
			mustExec(t, db, "DO $$ BEGIN EXECUTE format('ALTER DATABASE %I SET hnsw.ef_search = 1000', current_database()); END $$")
		}
		t.Logf("pgvector offered: %v", pgvector)
	}

	// The table is the program's: the sidecar comes after it.
	_, plain := startProxy(t, via, "")
	want, got := runDriver(t, argv, direct, "setup"), runDriver(t, argv, plain, "setup")
	if len(got) != len(want) {
		t.Fatalf("setup: %d lines through the proxy, %d direct", len(got), len(want))
	}
	for i := range want {
		if !bytes.Equal(got[i].raw, want[i].raw) {
			t.Errorf("setup: through the proxy\n%s\ndirect\n%s", got[i].raw, want[i].raw)
		}
	}

	sc, side := startSidecar(t, via, "items_l2=public.items(embedding) key=id metric=l2 kind=hnsw recall=0.99",
		"items_cosine=public.items(embedding) key=id metric=cosine kind=hnsw recall=0.99")
	(&fixture{db: connect(t, via), sc: sc}).waitApplied(t)
	p, proxied := startProxy(t, via, side)
	waitIndexed(t, p, "items", "l2", "cosine")
	before := p.Stats().Accelerated
	want, got = runDriver(t, argv, direct, "queries"), runDriver(t, argv, proxied, "queries")
	accelerated := p.Stats().Accelerated - before
	// The driver did prepare its statements server-side (psycopg after
	// its fifth execution): their executions were among the accelerated.
	d.preparedNames(t, got, "through the proxy")
	d.preparedNames(t, want, "direct")
	nearest, recall := compareQueries(t, got, want)
	t.Logf("%d searches, %d accelerated, recall@10 %.3f; fallbacks %v", nearest, accelerated, recall, p.Stats().Fallbacks)
	if recall < 0.95 {
		t.Errorf("recall@10 %.3f, want ≥ 0.95", recall)
	}
	if accelerated != uint64(nearest) {
		t.Errorf("%d statements accelerated, want the %d searches; fallbacks %v", accelerated, nearest, p.Stats().Fallbacks)
	}
}

// preparedNames checks a run's prepared-statements lines, their rows
// (name, statement) each: the driver's prepared matches a name of one at
// least. Where the driver names its statements anew on each connection,
// the names it matches become "…", for compareQueries to compare the
// runs.
func (d driver) preparedNames(t *testing.T, lines []*driverLine, run string) {
	t.Helper()
	for _, l := range lines {
		if l.Step != "prepared-statements" {
			continue
		}
		var rows [][]string
		if err := json.Unmarshal(l.fields["rows"], &rows); err != nil {
			t.Fatalf("%s: %v", l.raw, err)
		}
		prepared := false
		for _, r := range rows {
			if len(r) > 0 && d.prepared.MatchString(r[0]) {
				prepared = true
				if d.freshNames {
					r[0] = "…"
				}
			}
		}
		if !prepared {
			t.Errorf("%s: no statement %s prepared: %s", run, d.prepared, l.raw)
		}
		if d.freshNames {
			raw, err := json.Marshal(rows)
			if err != nil {
				t.Fatal(err)
			}
			l.fields["rows"] = raw
		}
	}
}

// compareQueries checks the queries phase's lines through the proxy
// against the direct run's: the same steps, PostgreSQL's lines the same,
// what SHOW vecside.last_plan said as passedSteps has it, the searches as
// compareNearest checks them. It returns the number of searches and
// their recall.
func compareQueries(t *testing.T, got, want []*driverLine) (nearest int, recall float64) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("queries: %d lines through the proxy, %d direct", len(got), len(want))
	}
	var found, total int
	for i := range want {
		w, g := want[i], got[i]
		if g.Step != w.Step {
			t.Fatalf("line %d: step %q through the proxy, %q direct", i+1, g.Step, w.Step)
		}
		if w.Plan != nil {
			t.Errorf("%s: PostgreSQL showed vecside.last_plan %q", w.Step, *w.Plan)
		}
		step := strings.TrimSuffix(g.Step, "-plan")
		passedBy, passes := passedSteps[step]
		switch {
		case g.Plan == nil && g.hasPlan:
			t.Errorf("%s: no vecside.last_plan through the proxy", g.Step)
		case g.Plan == nil:
		case passes && *g.Plan != "passed through: "+passedBy:
			t.Errorf("%s: last plan %q, want passed through: %s", g.Step, *g.Plan, passedBy)
		case !passes && !strings.HasPrefix(*g.Plan, "accelerated: "):
			t.Errorf("%s: last plan %q, want accelerated", g.Step, *g.Plan)
		}
		if !nearestSteps[g.Step] {
			if !reflect.DeepEqual(g.fields, w.fields) {
				t.Errorf("%s: through the proxy\n%s\ndirect\n%s", g.Step, g.raw, w.raw)
			}
			continue
		}
		nearest++
		f, n := compareNearest(t, g, w)
		found += f
		total += n
	}
	return nearest, float64(found) / float64(total)
}

// nearestSteps are the workloads' searches the proxy answers; the other
// steps' lines are PostgreSQL's, the same through the proxy as direct.
var nearestSteps = map[string]bool{
	"knn": true, "knn-filter": true, "auto-prepare": true, "prepare-true": true, "named": true,
	"binary": true, "pool": true, "transaction-read": true, "implicit-transaction": true,
	"read-your-writes": true, "after-update": true, "after-delete": true, "after-executemany": true,
}

// passedSteps are the searches the proxy passes through, and why.
var passedSteps = map[string]string{
	"transaction-write": "wrote in transaction",
	"not-indexed":       "not indexed",
}

// driverLine is one JSON line a program printed: a step's result.
type driverLine struct {
	raw     []byte
	fields  map[string]json.RawMessage // all but plan
	Step    string
	hasPlan bool
	Plan    *string // vecside.last_plan, null from PostgreSQL
	// A search's filter (tenant = Tenant) and rows (id, tenant, distance).
	Tenant *int64
	Rows   [][]json.Number
}

// runDriver runs a program's phase against dsn and returns its lines.
func runDriver(t *testing.T, argv []string, dsn, phase string) []*driverLine {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, argv[0], append(argv[1:], dsn, phase)...)
	cmd.Dir = driversDir
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("%s %s: %v\n%s", filepath.Base(argv[1]), phase, err, stderr.Bytes())
	}
	var lines []*driverLine
	for _, raw := range bytes.Split(bytes.TrimSpace(out), []byte("\n")) {
		l := &driverLine{raw: raw}
		err := json.Unmarshal(raw, &l.fields)
		if err == nil {
			err = json.Unmarshal(l.fields["step"], &l.Step)
		}
		if plan, ok := l.fields["plan"]; ok && err == nil {
			l.hasPlan, err = true, json.Unmarshal(plan, &l.Plan)
			delete(l.fields, "plan")
		}
		if nearestSteps[l.Step] && err == nil {
			dec := json.NewDecoder(bytes.NewReader(raw))
			dec.UseNumber()
			err = dec.Decode(l)
		}
		if err != nil {
			t.Fatalf("%s: %v", raw, err)
		}
		lines = append(lines, l)
	}
	return lines
}

// compareNearest checks a search's rows through the proxy, (id, tenant,
// distance) each, against its exact rows direct: as many, matching the
// filter, in order, each distance the exact one where the direct run
// has its id. It returns how many of the direct rows were found.
func compareNearest(t *testing.T, got, want *driverLine) (found, total int) {
	t.Helper()
	if len(got.Rows) != len(want.Rows) {
		t.Errorf("%s: %d rows through the proxy, %d direct", got.Step, len(got.Rows), len(want.Rows))
	}
	exact := map[string]json.Number{}
	for _, r := range want.Rows {
		exact[r[0].String()] = r[2]
	}
	last := -1.0
	for _, r := range got.Rows {
		if len(r) != 3 {
			t.Fatalf("%s: row %v", got.Step, r)
		}
		if got.Tenant != nil && r[1].String() != strconv.FormatInt(*got.Tenant, 10) {
			t.Errorf("%s: a row of tenant %s, filter tenant = %d", got.Step, r[1], *got.Tenant)
		}
		d, err := r[2].Float64()
		if err != nil || d < last {
			t.Errorf("%s: distance %s after %v", got.Step, r[2], last)
		}
		last = d
		if e, ok := exact[r[0].String()]; ok {
			found++
			if e != r[2] {
				t.Errorf("%s: id %s distance %s, exact %s", got.Step, r[0], r[2], e)
			}
		}
	}
	return found, len(want.Rows)
}
