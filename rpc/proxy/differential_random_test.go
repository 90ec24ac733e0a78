//go:build cgo

package proxy

import (
	"flag"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"
	"time"
)

var (
	randomSessions = flag.Int("differential-sessions", 60, "random sessions TestDifferentialRandom plays each way, unless -differential-time")
	randomTime     = flag.Duration("differential-time", 0, "how long TestDifferentialRandom plays random sessions each way (0: -differential-sessions)")
	randomSeed     = flag.Uint64("differential-seed", 1, "the seed of TestDifferentialRandom's sessions")
)

// randomSetup is the world random sessions play in: items, some of its
// vectors NULL or zero, indexed for l2 and cosine; docs, inherited by
// docs_child; a schema s1 on some sessions' search_path where other
// sessions create and drop a table items; roles with row-level security
// (diff_rls sees tenant 3) and with some columns only (diff_cols: not the
// key). Autovacuum is off, so that the two databases keep their rows in
// the same places and ties come in the same order.
const randomSetup = `
%role diff_app
%role diff_rls
%role diff_cols
%table items 2000
UPDATE items SET embedding = NULL WHERE id % 400 = 0;
UPDATE items SET embedding = '{0,0,0,0,0,0,0,0}' WHERE id % 400 = 1;
ALTER TABLE items SET (autovacuum_enabled = false);
%table docs 500
CREATE TABLE docs_child () INHERITS (docs);
INSERT INTO docs_child SELECT id, tenant, category, note, ARRAY(SELECT -x FROM unnest(embedding) x) FROM docs WHERE id <= 50;
CREATE SCHEMA s1;
GRANT USAGE, CREATE ON SCHEMA s1 TO PUBLIC;
GRANT SELECT, INSERT, UPDATE, DELETE ON items, docs TO diff_app, diff_rls;
GRANT SELECT (tenant, category, embedding) ON items TO diff_cols;
ALTER TABLE items ENABLE ROW LEVEL SECURITY;
CREATE POLICY everyone ON items TO diff_app USING (true) WITH CHECK (true);
CREATE POLICY tenant3 ON items TO diff_rls USING (tenant = 3) WITH CHECK (tenant = 3);
CREATE TABLE audit (id int);
GRANT INSERT, SELECT ON audit TO PUBLIC;
`

var randomIndexes = []string{
	"items_l2=public.items(embedding) key=id metric=l2 kind=hnsw store=float",
	"items_cos=public.items(embedding) key=id metric=cosine kind=flat",
	"docs_l2=public.docs(embedding) key=id metric=l2 kind=flat",
}

// sessionGen writes random sessions.
type sessionGen struct {
	rng  *rand.Rand
	next int // the next id a session inserts
	cols int // columns added so far
}

func (g *sessionGen) pick(options ...string) string { return options[g.rng.IntN(len(options))] }

// statement is a random nearest-neighbour statement, with its expected
// outcome left open.
func (g *sessionGen) statement() string {
	table := g.pick("items", "items", "items", "items", "public.items", "docs", "ONLY docs")
	op := g.pick("<->", "<->", "<=>")
	targets := g.pick("id", "id, tenant", "*", "id, embedding "+op+" '%V%' AS d", "id, note, category")
	filter := g.pick("", "", "", "WHERE tenant = 3", "WHERE category = 42", "WHERE id % 1000 = 7",
		"WHERE id BETWEEN 100 AND 104", "WHERE note LIKE 'n1%'", "WHERE category < 50 AND tenant <> 3", "WHERE id < 0",
		"WHERE embedding IS NOT NULL", "WHERE tenant IN (1, 2) OR category = 7")
	limit := g.pick("1", "5", "10", "10", "100")
	offset := g.pick("", "", "", " OFFSET 5", " OFFSET 100")
	v := fmt.Sprintf("%%Q%d%%", 1+g.rng.IntN(9))
	if g.rng.IntN(20) == 0 {
		v = "%Z%"
	}
	if g.rng.IntN(3) == 0 { // extended protocol, the vector and LIMIT as parameters
		targets = strings.ReplaceAll(targets, "'%V%'", "$1")
		return fmt.Sprintf("x SELECT %s FROM %s %s ORDER BY embedding %s $1 LIMIT $2%s ;; %s ;; %s", targets, table, filter, op, offset, v, limit)
	}
	targets = strings.ReplaceAll(targets, "%V%", v)
	return fmt.Sprintf("SELECT %s FROM %s %s ORDER BY embedding %s '%s' LIMIT %s%s", targets, table, filter, op, v, limit, offset)
}

// session is a random session's steps.
func (g *sessionGen) session() []string {
	role := g.pick("postgres", "diff_app", "diff_app", "diff_app", "diff_rls", "diff_cols")
	if g.rng.IntN(8) == 0 {
		// A session of the database the sidecar does not follow, through
		// the same proxy: it reads only, as its statements run twice
		// there.
		steps := []string{"@s user=" + role + " db=direct"}
		for range 2 + g.rng.IntN(6) {
			steps = append(steps, g.pick(g.statement(), g.statement(), "SET search_path = s1, public"))
		}
		return steps
	}
	steps := []string{"@s user=" + role}
	inBlock := false
	for range 4 + g.rng.IntN(12) {
		switch r := g.rng.IntN(100); {
		case r < 55:
			steps = append(steps, g.statement())
		case r < 62:
			if inBlock {
				steps = append(steps, g.pick("COMMIT", "ROLLBACK", "SAVEPOINT a", "ROLLBACK TO SAVEPOINT a", "SELECT 1/0"))
				inBlock = steps[len(steps)-1] != "COMMIT" && steps[len(steps)-1] != "ROLLBACK"
			} else {
				steps = append(steps, g.pick("BEGIN", "BEGIN ISOLATION LEVEL REPEATABLE READ", "BEGIN READ ONLY"))
				inBlock = true
			}
		case r < 72:
			g.next++
			id := 100000 + g.next
			steps = append(steps, g.pick(
				fmt.Sprintf("INSERT INTO items VALUES (%d, 3, %d, 'new', (SELECT array_agg(x + %d * 0.0001) FROM unnest('%%Q%d%%'::real[]) x))", id, g.next%100, g.next, 1+g.rng.IntN(9)),
				fmt.Sprintf("UPDATE items SET embedding = (SELECT array_agg(x - 0.0001 * id) FROM unnest('%%Q%d%%'::real[]) x) WHERE id = %d", 1+g.rng.IntN(9), 2+g.rng.IntN(1990)),
				fmt.Sprintf("DELETE FROM items WHERE id = %d", 2+g.rng.IntN(1990)),
				"INSERT INTO audit VALUES (1)"))
		case r < 78:
			steps = append(steps, g.pick("SET search_path = s1, public", "RESET search_path", "SET vecside.ef_search = 20", "RESET vecside.ef_search", "SET hnsw.ef_search = 100"))
		case r < 90 && inBlock:
			// Another session's DDL would wait for this one's block.
			steps = append(steps, g.statement())
		case r < 84:
			steps = append(steps, g.pick(
				"!CREATE TABLE IF NOT EXISTS s1.items (LIKE public.items); INSERT INTO s1.items (id, tenant, category, note, embedding) "+
					"SELECT id, tenant, category, note, embedding FROM public.items WHERE id <= 30; GRANT SELECT ON s1.items TO PUBLIC",
				"!DROP TABLE IF EXISTS s1.items",
				"CREATE TEMP TABLE IF NOT EXISTS items AS SELECT id, tenant, category, note, embedding FROM public.items WHERE id <= 40",
				"DROP TABLE IF EXISTS pg_temp.items"))
		case r < 87:
			g.cols++
			steps = append(steps, fmt.Sprintf("!ALTER TABLE items ADD COLUMN extra%d int DEFAULT %d", g.cols, g.cols))
		case r < 90:
			steps = append(steps, "wait")
		default:
			steps = append(steps, g.statement())
		}
	}
	if inBlock {
		steps = append(steps, "ROLLBACK")
	}
	return append(steps, "!DROP TABLE IF EXISTS s1.items")
}

// unanswerable are the reasons a recognised search passes through that no
// proxy of this design could answer: the session's state (a failed or
// writing transaction block, a snapshot older than the sidecar's), the
// role's (it may not read the key), the table's (others inherit from it,
// or no index follows it), or the query's (no distance to compare, or an
// answer shorter than its LIMIT, which candidates cannot show complete).
var unanswerable = []string{"failed transaction", "wrote in transaction", "isolation", "key privilege", "inheritance",
	"not indexed", "another database", "zero vector", "vector value", "answer shorter than LIMIT"}

// TestDifferentialRandom plays seeded random sessions both ways against
// the differential oracle: statements of every accepted shape and many
// that are not, in and out of transaction blocks with writes, failures
// and savepoints, as roles with row-level security or column
// privileges, with search_path, settings, temporary and shadowing tables
// and other sessions' DDL between statements. A difference fails the
// test with the shortest session found to reproduce it, as a script for
// testdata/differential.
func TestDifferentialRandom(t *testing.T) {
	sc, err := parseScript("setup\n" + randomSetup + "\n----\nindex " + strings.Join(randomIndexes, "\n") + "\n----\n")
	if err != nil {
		t.Fatal(err)
	}
	for _, mode := range []string{"pgwire", "in-process"} {
		t.Run(mode, func(t *testing.T) {
			f := newDiffFixture(t, sc, mode == "in-process")
			g := &sessionGen{rng: rand.New(rand.NewPCG(*randomSeed, 7))}
			start := time.Now()
			sessions := 0
			for ; *randomTime > 0 && time.Since(start) < *randomTime || *randomTime == 0 && sessions < *randomSessions; sessions++ {
				steps := g.session()
				for i := range steps {
					steps[i] = expandVectors(steps[i])
				}
				var first string
				f.errorf = func(format string, args ...any) {
					if first == "" {
						first = fmt.Sprintf(format, args...)
					}
				}
				f.run(t, steps)
				if first != "" {
					f.errorf = t.Errorf
					t.Errorf("session %d of seed %d differs: %s\nshortest session found:\n%s", sessions, *randomSeed, first, shrink(t, sc, mode == "in-process", steps))
					return
				}
			}
			answerable := f.searches
			for _, reason := range unanswerable {
				answerable -= f.passed[reason]
			}
			t.Logf("%d sessions, %d statements, %d transaction blocks ended; %d searches recognised, %d of the %d the design may answer answered by the proxy (%.0f%%), %s; passed through: %v; in %v",
				sessions, f.statements, f.blocks, f.searches, f.answered, answerable, 100*float64(f.answered)/float64(max(answerable, 1)), f.ratio, f.passed,
				time.Since(start).Round(time.Second))
		})
	}
}

// shrink removes steps from a failing session while it still fails on a
// fresh fixture, and returns it as a script.
func shrink(t *testing.T, sc script, inProcess bool, steps []string) string {
	fails := func(steps []string) bool {
		failed := false
		t.Run("shrink", func(t *testing.T) {
			f := newDiffFixture(t, sc, inProcess)
			f.errorf = func(format string, args ...any) {
				if !failed {
					t.Logf(format, args...)
				}
				failed = true
			}
			f.run(t, steps)
		})
		return failed
	}
	for i := len(steps) - 1; i >= 1; i-- { // the first step opens the session
		fewer := append(append([]string(nil), steps[:i]...), steps[i+1:]...)
		if fails(fewer) {
			steps = fewer
		}
	}
	return "setup" + randomSetup + "----\nindex " + strings.Join(randomIndexes, "\nindex ") + "\n----\nsession\n" + strings.Join(steps, "\n") + "\n----\n"
}

// TestDifferentialFilters: 300 seeded searches with filters of 0.1%, 1%
// and 10% selectivity and LIMIT 1, 10 and 100 get PostgreSQL's number of
// rows, each a row of its exact answer in its order, whether the proxy
// answers them or passes them through.
func TestDifferentialFilters(t *testing.T) {
	sc, err := parseScript("setup\n%table items 10000\n----\nindex items=public.items(embedding) key=id metric=l2 kind=hnsw\n----\n")
	if err != nil {
		t.Fatal(err)
	}
	f := newDiffFixture(t, sc, true)
	s := f.open(t, "", false)
	rng := rand.New(rand.NewPCG(*randomSeed, 11))
	lanes := []struct{ name, filter string }{{"0.1%", "id %% 1000 = %d"}, {"1%", "category = %d"}, {"10%", "tenant = %d"}}
	answered := map[string]int{}
	for range 300 {
		lane := lanes[rng.IntN(len(lanes))]
		limit := []int{1, 10, 100}[rng.IntN(3)]
		parts := make([]string, diffDims)
		for d := range parts {
			parts[d] = fmt.Sprintf("%.4f", rng.Float64()*2-1)
		}
		sql := fmt.Sprintf("SELECT id, note FROM items WHERE "+lane.filter+" ORDER BY embedding <-> '{%s}' LIMIT %d",
			rng.IntN(10), strings.Join(parts, ","), limit)
		before := f.answered
		f.step(t, s, sql, false, nil, 0)
		answered[fmt.Sprintf("%s LIMIT %d", lane.name, limit)] += f.answered - before
	}
	t.Logf("answered by the proxy, by selectivity and LIMIT: %v; %s; passed through: %v", answered, f.ratio, f.passed)
}
