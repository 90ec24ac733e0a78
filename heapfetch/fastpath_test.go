package heapfetch_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"reflect"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/vecside/vecside/cmd/vecside/sidecar"
	"github.com/vecside/vecside/heapfetch"
	"github.com/vecside/vecside/internal/pgtest"
)

// stall holds a sidecar's stream before a chosen message, so that a test
// can search while a transaction is half applied.
type stall struct {
	mu     sync.Mutex
	typ    byte
	n      int // hold before the n-th message of type typ from arm on
	held   chan struct{}
	resume chan struct{}
}

func (s *stall) before(typ byte) {
	s.mu.Lock()
	if s.typ != typ || s.n == 0 {
		s.mu.Unlock()
		return
	}
	s.n--
	if s.n > 0 {
		s.mu.Unlock()
		return
	}
	held, resume := s.held, s.resume
	s.mu.Unlock()
	close(held)
	<-resume
}

// arm holds the stream before the n-th message of type typ from now.
func (s *stall) arm(typ byte, n int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.typ, s.n, s.held, s.resume = typ, n, make(chan struct{}), make(chan struct{})
}

// wait returns once the stream is held.
func (s *stall) wait(t *testing.T) {
	t.Helper()
	s.mu.Lock()
	held := s.held
	s.mu.Unlock()
	select {
	case <-held:
	case <-time.After(time.Minute):
		t.Fatal("the stream never reached the message to hold at")
	}
}

// release lets the stream go on; it may be called more than once.
func (s *stall) release() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.resume != nil {
		close(s.resume)
		s.resume, s.typ, s.n = nil, 0, 0
	}
}

// startStalledSidecar is startSidecar with a stall on the stream.
func startStalledSidecar(t *testing.T, dsn string, defs ...string) (*sidecar.Sidecar, *pgx.Conn, *stall) {
	t.Helper()
	st := &stall{}
	sc, side := startSidecarConfig(t, sidecar.Config{Source: dsn, Indexes: defs, BeforeMessage: st.before})
	// Cleanups run last first: the stream is let go before the sidecar
	// is stopped.
	t.Cleanup(st.release)
	return sc, side, st
}

// fastEqualsFetch searches with the fast path and by fetching every
// vector, and fails unless both give the same rows, order and distances.
// It returns the fast path's counts for the search.
func fastEqualsFetch(t *testing.T, client *heapfetch.Client, index string, q []float32, k int) heapfetch.FastPathStats {
	t.Helper()
	ctx := context.Background()
	before := client.FastPathStats()
	fast, err := client.Search(ctx, heapfetch.Request{Index: index, Vector: q, K: k})
	if err != nil {
		t.Fatal(err)
	}
	after := client.FastPathStats()
	slow, err := client.Search(ctx, heapfetch.Request{Index: index, Vector: q, K: k, AlwaysFetch: true})
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(fast, slow) {
		t.Fatalf("fast path %v, fetching every vector %v", fast, slow)
	}
	return heapfetch.FastPathStats{Candidates: after.Candidates - before.Candidates, VectorsFetched: after.VectorsFetched - before.VectorsFetched}
}

// dims makes the tests' vectors TOASTed out of line (2,400 bytes, past
// the 2 kB threshold, with SET STORAGE EXTERNAL), so that an UPDATE of
// another column sends the vector as unchanged TOAST.
const dims = 600

// vecAt is a test vector near x.
func vecAt(x float32) []float32 {
	v := make([]float32, dims)
	for i := range v {
		v[i] = x + float32(i)/100
	}
	return v
}

// rowsSQL fills docs with ids 1…50, id g's vector near g·scale.
func rowsSQL(scale int) string {
	return fmt.Sprintf(`INSERT INTO docs SELECT g, (SELECT array_agg(g * %d + i / 100.0) FROM generate_series(0, %d) i) FROM generate_series(1, 50) g`, scale, dims-1)
}

// step is one statement of a test's transaction, with its vector if it
// takes one.
type step struct {
	sql string
	v   []float32
}

// TestFastPathNeverStale holds the sidecar's stream at the worst moment
// of transactions that give a row a vector the sidecar has not applied
// yet, and checks each time that the fast path answers exactly as
// fetching every vector does; once the stream has gone on, that it
// skips fetches again.
func TestFastPathNeverStale(t *testing.T) {
	ctx := context.Background()
	dsn, db := newDatabase(t)
	mustExec(t, db, `CREATE TABLE docs (id bigint PRIMARY KEY, v real[], note text);
		ALTER TABLE docs ALTER COLUMN v SET STORAGE EXTERNAL`)
	mustExec(t, db, rowsSQL(10))
	sc, side, st := startStalledSidecar(t, dsn, "docs_v=public.docs(v) key=id metric=l2")
	waitApplied(t, db, sc)
	client := heapfetch.New(side, db)
	const k = 5

	if got := fastEqualsFetch(t, client, "docs_v", vecAt(100), k); got.VectorsFetched != 0 || got.Candidates != k {
		t.Fatalf("after the copy: %+v, want %d candidates and no vector fetched", got, k)
	}
	a, b := vecAt(1000), vecAt(2000)
	for _, c := range []struct {
		name  string
		steps []step
		at    byte // hold before the n-th message of this type
		n     int
	}{
		{"two writes to one key, held between them", []step{{"UPDATE docs SET v = $1 WHERE id = 3", a}, {"UPDATE docs SET v = $1 WHERE id = 3", b}}, 'U', 2},
		{"two writes to one key, held before the commit", []step{{"UPDATE docs SET v = $1 WHERE id = 4", a}, {"UPDATE docs SET v = $1 WHERE id = 4", b}}, 'C', 1},
		{"insert then update, held between them", []step{{"INSERT INTO docs VALUES (1001, $1)", a}, {"UPDATE docs SET v = $1 WHERE id = 1001", b}}, 'U', 1},
		{"insert then update, held before the commit", []step{{"INSERT INTO docs VALUES (1002, $1)", a}, {"UPDATE docs SET v = $1 WHERE id = 1002", b}}, 'C', 1},
		{"savepoint released", []step{{"UPDATE docs SET v = $1 WHERE id = 5", a}, {"SAVEPOINT s", nil}, {"UPDATE docs SET v = $1 WHERE id = 5", b}, {"RELEASE s", nil}}, 'C', 1},
		{"savepoint rolled back", []step{{"UPDATE docs SET v = $1 WHERE id = 6", b}, {"SAVEPOINT s", nil}, {"UPDATE docs SET v = $1 WHERE id = 6", a}, {"ROLLBACK TO s", nil}}, 'C', 1},
		{"vector kept while another column changed", []step{{"UPDATE docs SET v = $1 WHERE id = 7", a}, {"UPDATE docs SET note = 'y' WHERE id = 7", nil}, {"UPDATE docs SET v = $1 WHERE id = 7", b}}, 'U', 2},
		{"vector kept, held before the commit", []step{{"UPDATE docs SET note = 'z' WHERE id = 9", nil}}, 'C', 1},
	} {
		ok := t.Run(c.name, func(t *testing.T) {
			st.arm(c.at, c.n)
			t.Cleanup(st.release)
			tx, err := db.Begin(ctx)
			if err != nil {
				t.Fatal(err)
			}
			for _, s := range c.steps {
				var args []any
				if s.v != nil {
					args = append(args, s.v)
				}
				if _, err := tx.Exec(ctx, s.sql, args...); err != nil {
					t.Fatalf("%s: %v", s.sql, err)
				}
			}
			if err := tx.Commit(ctx); err != nil {
				t.Fatal(err)
			}
			st.wait(t)
			for _, q := range [][]float32{a, b, vecAt(90)} {
				fastEqualsFetch(t, client, "docs_v", q, k)
			}
			st.release()
			waitApplied(t, db, sc)
			for _, q := range [][]float32{a, b, vecAt(90)} {
				if got := fastEqualsFetch(t, client, "docs_v", q, k); got.VectorsFetched == got.Candidates {
					t.Fatalf("once applied: %+v, want vectors spared", got)
				}
			}
		})
		if !ok {
			return
		}
	}

	t.Run("table rewrite", func(t *testing.T) {
		t.Cleanup(st.release)
		mustExec(t, db, `ALTER TABLE docs ADD COLUMN r float8 DEFAULT random()`)
		st.arm('C', 1)
		mustExecArgs(t, db, `UPDATE docs SET v = $1 WHERE id = 8`, vecAt(3000))
		st.wait(t)
		fastEqualsFetch(t, client, "docs_v", vecAt(80), k)
		fastEqualsFetch(t, client, "docs_v", vecAt(3000), k)
		st.release()
		waitApplied(t, db, sc)
		// Every row has the rewrite's xmin now, which the sidecar never
		// adopts: every vector is fetched, but for row 8's, written since.
		if got := fastEqualsFetch(t, client, "docs_v", vecAt(100), k); got.VectorsFetched != got.Candidates {
			t.Fatalf("after a rewrite: %+v, want every vector fetched", got)
		}
		if got := fastEqualsFetch(t, client, "docs_v", vecAt(3000), 1); got.VectorsFetched != 0 || got.Candidates != 1 {
			t.Fatalf("a row written after the rewrite: %+v, want its vector spared", got)
		}
	})
}

// TestFastPathOtherSystem: a heap server that is not the sidecar's
// source, whose rows have the very xmins the sidecar recorded but other
// vectors, is never trusted.
func TestFastPathOtherSystem(t *testing.T) {
	ctx := context.Background()
	clusters := make([]*pgtest.Cluster, 2)
	conns := make([]*pgx.Conn, 2)
	for i := range clusters {
		c, err := pgtest.Start()
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(c.Stop)
		clusters[i] = c
		if conns[i], err = pgx.Connect(ctx, c.DSN("postgres")); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { conns[i].Close(ctx) })
		mustExec(t, conns[i], `CREATE TABLE docs (id bigint PRIMARY KEY, v real[])`)
	}
	// Bring both servers' next xid to the same value, and write the same
	// keys in one transaction on each, with other vectors on the second.
	var next [2]int64
	for i, c := range conns {
		if err := c.QueryRow(ctx, `SELECT txid_current() + 1`).Scan(&next[i]); err != nil {
			t.Fatal(err)
		}
	}
	target := max(next[0], next[1]) + 5
	for i, c := range conns {
		mustExec(t, c, fmt.Sprintf(`DO $$ BEGIN WHILE txid_current() < %d LOOP COMMIT; END LOOP; END $$`, target-1))
		mustExec(t, c, rowsSQL(10+i))
		var xmin int64
		if err := c.QueryRow(ctx, `SELECT max(xmin::text::int8) FROM docs`).Scan(&xmin); err != nil {
			t.Fatal(err)
		}
		if xmin != target {
			t.Fatalf("server %d wrote the rows as xid %d, want %d", i, xmin, target)
		}
	}
	sc, side := startSidecar(t, clusters[0].DSN("postgres"), "docs_v=public.docs(v) key=id metric=l2")
	waitApplied(t, conns[0], sc)

	q := vecAt(100)
	same := fastEqualsFetch(t, heapfetch.New(side, conns[0]), "docs_v", q, 5)
	if same.VectorsFetched != 0 {
		t.Fatalf("the sidecar's own source: %+v, want no vector fetched", same)
	}
	other := heapfetch.New(side, conns[1])
	got := fastEqualsFetch(t, other, "docs_v", q, 5)
	if got.VectorsFetched != got.Candidates || got.Candidates == 0 {
		t.Fatalf("another server: %+v, want every vector fetched", got)
	}
	rng := rand.New(rand.NewPCG(1, 2))
	for range 5 {
		fastEqualsFetch(t, other, "docs_v", vecAt(rng.Float32()*600), 5)
	}
	// Each session keeps the identifier of its own server, read once.
	for i, c := range conns {
		var kept, actual string
		if err := c.QueryRow(ctx, `SELECT current_setting('heapfetch.system_identifier'), system_identifier::text FROM pg_control_system()`).Scan(&kept, &actual); err != nil {
			t.Fatal(err)
		}
		if kept != actual {
			t.Errorf("server %d: the session keeps system identifier %s, the server's is %s", i, kept, actual)
		}
	}
}

// TestFastPathAfterRestart: the xids are kept in the checkpoints, so a
// sidecar restarted from them spares the same fetches, for rows of the
// copy and of the stream alike.
func TestFastPathAfterRestart(t *testing.T) {
	ctx := context.Background()
	dsn, db := newDatabase(t)
	mustExec(t, db, `CREATE TABLE docs (id bigint PRIMARY KEY, v real[])`)
	mustExec(t, db, rowsSQL(10))
	dir := t.TempDir()
	cfg := sidecar.Config{Source: dsn, Indexes: []string{"docs_v=public.docs(v) key=id metric=l2"}, DataDir: dir, CheckpointInterval: 50 * time.Millisecond}
	sc, side := startSidecarConfig(t, cfg)
	waitApplied(t, db, sc)
	mustExecArgs(t, db, `UPDATE docs SET v = $1 WHERE id = 50`, vecAt(1000))
	waitApplied(t, db, sc)
	e := mustEntry(t, sc, "docs_v")
	for e.Durable().Covered() < e.Applied() {
		time.Sleep(20 * time.Millisecond)
	}
	side.Close(ctx)
	if err := sc.Stop(); err != nil {
		t.Fatal(err)
	}

	sc, side = startSidecarConfig(t, cfg)
	waitApplied(t, db, sc)
	if st := mustEntry(t, sc, "docs_v").Status(); st.CopiedRows > 0 {
		t.Fatalf("the restarted sidecar copied %d rows: it did not load its checkpoint", st.CopiedRows)
	}
	client := heapfetch.New(side, db)
	for _, q := range [][]float32{vecAt(100), vecAt(1000)} {
		if got := fastEqualsFetch(t, client, "docs_v", q, 5); got.VectorsFetched != 0 || got.Candidates != 5 {
			t.Fatalf("after a restart: %+v, want 5 candidates and no vector fetched", got)
		}
	}
}
