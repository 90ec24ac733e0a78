package replicate

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math"
	"math/rand/v2"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/vecside/vecside/indexer"
	"github.com/vecside/vecside/internal/pgtest"
	"github.com/vecside/vecside/internal/pgvalue"
	"github.com/vecside/vecside/internal/workload"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

// harness is one database with a running replicator.
type harness struct {
	t      testing.TB
	ctx    context.Context
	dsn    string
	conn   *pgx.Conn
	ix     *indexer.Indexer
	rep    *Replicator
	cancel context.CancelFunc
	done   chan error
	parts  int
	// checkpointChanges, if set, checkpoints an index once that many
	// changes are applied (the policy's default is far above a test's).
	checkpointChanges uint64
}

func newHarness(t *testing.T, setupSQL string) *harness {
	t.Helper()
	ctx := context.Background()
	h := &harness{t: t, ctx: ctx, dsn: pgtest.Shared(t).NewDatabase(t), ix: indexer.New()}
	var err error
	if h.conn, err = pgx.Connect(ctx, h.dsn); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { h.conn.Close(ctx) })
	h.exec(setupSQL)
	return h
}

func (h *harness) exec(sql string, args ...any) {
	h.t.Helper()
	if _, err := h.conn.Exec(h.ctx, sql, args...); err != nil {
		h.t.Fatalf("%s: %v", sql, err)
	}
}

func (h *harness) add(def string) *indexer.Entry {
	h.t.Helper()
	spec, err := indexer.ParseSpec(def)
	if err != nil {
		h.t.Fatal(err)
	}
	e, err := h.ix.Add(spec)
	if err != nil {
		h.t.Fatal(err)
	}
	return e
}

// start runs a replicator over every index added so far.
func (h *harness) start(cfg Config) {
	h.t.Helper()
	if cfg.Source == "" {
		cfg.Source = h.dsn
	}
	cfg.Entries = h.ix.Entries()
	if cfg.Logger == nil {
		cfg.Logger = testLogger(h.t)
	}
	if cfg.DataDir != "" {
		cfg.Durable = h.ix.Covered
	}
	var err error
	if h.rep, err = New(cfg); err != nil {
		h.t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(h.ctx)
	h.cancel, h.done = cancel, make(chan error, 2)
	go func() { h.done <- h.rep.Run(ctx) }()
	h.parts = 1
	if cfg.DataDir != "" {
		h.parts++
		go func() {
			h.done <- h.ix.RunCheckpoints(ctx, indexer.CheckpointPolicy{Dir: cfg.DataDir, Source: h.rep.Source, Logger: cfg.Logger, Changes: h.checkpointChanges})
		}()
	}
	h.t.Cleanup(h.stop)
}

func (h *harness) stop() {
	if h.cancel != nil {
		h.cancel()
		for ; h.parts > 0; h.parts-- {
			if err := <-h.done; err != nil {
				h.t.Errorf("replicator: %v", err)
			}
		}
		h.cancel = nil
	}
}

// catchUp waits until every index that follows its table (not in error,
// not waiting) has applied the WAL written so far: never a sleep.
func (h *harness) catchUp() {
	h.t.Helper()
	h.catchUpWithin(60 * time.Second)
}

func (h *harness) catchUpWithin(d time.Duration) {
	h.t.Helper()
	want := h.walLSN()
	ctx, cancel := context.WithTimeout(h.ctx, d)
	defer cancel()
	for _, e := range h.ix.Entries() {
		if state, _ := e.State(); !state.Follows() {
			continue
		}
		if err := e.WaitApplied(ctx, want); err != nil {
			h.t.Fatalf("catching up: %v (state %v)", err, e.Status())
		}
	}
}

// walLSN is the source's current WAL insert position.
func (h *harness) walLSN() indexer.LSN {
	h.t.Helper()
	var lsn string
	if err := h.conn.QueryRow(h.ctx, "SELECT pg_current_wal_lsn()::text").Scan(&lsn); err != nil {
		h.t.Fatal(err)
	}
	l, _ := indexer.ParseLSN(lsn)
	return l
}

// tableVectors reads the valid rows of the table, whose key and vector
// columns are now called key and column: key → vector, bit for bit as
// stored.
func (h *harness) tableVectors(e *indexer.Entry, dims int, key, column string) map[string][]float32 {
	h.t.Helper()
	rows, err := h.conn.Query(h.ctx, fmt.Sprintf("SELECT %s::text, %s::real[] FROM %s",
		indexer.QuoteIdent(key), indexer.QuoteIdent(column), e.Spec().QualifiedTable()))
	if err != nil {
		h.t.Fatal(err)
	}
	out := map[string][]float32{}
	for rows.Next() {
		var k string
		var v []float32
		if err := rows.Scan(&k, &v); err != nil {
			h.t.Fatal(err)
		}
		if len(v) != dims || pgvalue.CheckFinite(v) != nil {
			continue
		}
		key, err := e.KeyType().DecodeText(k)
		if err != nil {
			h.t.Fatal(err)
		}
		out[key] = v
	}
	if rows.Err() != nil {
		h.t.Fatal(rows.Err())
	}
	return out
}

// assertConverged checks that the index holds exactly the table's valid
// rows with bit-identical vectors, and counts the others as skipped.
func (h *harness) assertConverged(e *indexer.Entry, dims int) {
	h.t.Helper()
	h.assertConvergedAs(e, dims, e.Spec().Key, e.Spec().Column)
}

// assertConvergedAs is assertConverged for a table whose key and vector
// columns have been renamed to key and column.
func (h *harness) assertConvergedAs(e *indexer.Entry, dims int, key, column string) {
	h.t.Helper()
	h.catchUp()
	want := h.tableVectors(e, dims, key, column)
	got := map[string][]float32{}
	e.Keys(func(k string) { got[k], _ = e.Vector(k) })
	kt := e.KeyType()
	for k, v := range want {
		g, ok := got[k]
		if !ok {
			h.t.Errorf("key %s missing from the index", kt.FormatKey(k))
			continue
		}
		if !bitEqual(g, v) {
			h.t.Errorf("key %s: index vector differs from the table's", kt.FormatKey(k))
		}
	}
	for k := range got {
		if _, ok := want[k]; !ok {
			h.t.Errorf("key %s in the index, not a valid row of the table", kt.FormatKey(k))
		}
	}
	var total int
	if err := h.conn.QueryRow(h.ctx, "SELECT count(*) FROM "+e.Spec().QualifiedTable()).Scan(&total); err != nil {
		h.t.Fatal(err)
	}
	st := e.Status()
	if st.Rows != len(want) || st.Skipped != total-len(want) {
		h.t.Errorf("status rows=%d skipped=%d, want rows=%d skipped=%d", st.Rows, st.Skipped, len(want), total-len(want))
	}
}

func bitEqual(a, b []float32) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if math.Float32bits(a[i]) != math.Float32bits(b[i]) {
			return false
		}
	}
	return true
}

// testLogger sends logs to t.Log: shown only for failed tests or with -v.
func testLogger(t testing.TB) *slog.Logger {
	return slog.New(slog.NewTextHandler(testWriter{t}, nil))
}

type testWriter struct{ t testing.TB }

// logBuffer keeps what a logger writes from any goroutine.
type logBuffer struct {
	mu  sync.Mutex
	buf strings.Builder
}

func (b *logBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *logBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

func (w testWriter) Write(p []byte) (int, error) {
	w.t.Log(strings.TrimSpace(string(p)))
	return len(p), nil
}

func waitReady(t testing.TB, e *indexer.Entry) {
	t.Helper()
	waitReadyWithin(t, e, 60*time.Second)
}

// waitReadyWithin is waitReady with its own deadline, for benchmarks that
// build large indexes.
func waitReadyWithin(t testing.TB, e *indexer.Entry, d time.Duration) {
	t.Helper()
	deadline := time.Now().Add(d)
	for {
		st, msg := e.State()
		if st == indexer.StateReady {
			return
		}
		if st == indexer.StateError || time.Now().After(deadline) {
			t.Fatalf("index %s: state %s %s", e.Spec().Name, st, msg)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// TestConvergesOnTOASTedVectors is the spine's convergence test: 5,000
// rows of incompressible 768-d vectors (so they are TOASTed), then every
// kind of change in several transactions.
func TestConvergesOnTOASTedVectors(t *testing.T) {
	const dims, rows = 768, 5000
	h := newHarness(t, workload.CreateTable(rows, dims))
	var toastTable string
	if err := h.conn.QueryRow(h.ctx, `SELECT reltoastrelid::regclass::text FROM pg_class WHERE relname = 'items'`).Scan(&toastTable); err != nil {
		t.Fatal(err)
	}
	var chunks int
	if err := h.conn.QueryRow(h.ctx, `SELECT count(DISTINCT chunk_id) FROM `+toastTable).Scan(&chunks); err != nil || chunks != rows {
		t.Fatalf("%d of %d vectors are TOASTed (%v): the test needs them all out of line", chunks, rows, err)
	}
	e := h.add("items_embedding=items(embedding) key=id metric=l2")
	h.start(Config{})
	waitReady(t, e)
	h.assertConverged(e, dims)

	rng := rand.New(rand.NewPCG(1, 2))
	for _, sql := range workload.Changes(rng, dims) {
		h.exec(sql)
	}
	h.assertConverged(e, dims)
	if got := e.Status().Skipped; got != 2 { // 8 (2 elements) and 30003 (NaN)
		t.Errorf("skipped = %d, want 2", got)
	}

	for _, sql := range workload.Refill(rng, dims) {
		h.exec(sql)
	}
	h.assertConverged(e, dims)
	if st := e.Status(); st.Rows != 1 || st.Skipped != 1 {
		t.Errorf("after TRUNCATE and re-insert: rows=%d skipped=%d, want 1 and 1", st.Rows, st.Skipped)
	}
}

// TestRowsWrittenDuringCopy pauses between slot creation and COPY while a
// writer inserts, updates and deletes: nothing may be lost or doubled.
func TestRowsWrittenDuringCopy(t *testing.T) {
	const dims = 8
	h := newHarness(t, `CREATE TABLE docs (id int PRIMARY KEY, v real[]);
		INSERT INTO docs SELECT g, array_fill(g::real, ARRAY[8]) FROM generate_series(1, 1000) g`)
	e := h.add("docs_v=docs(v) key=id metric=l2")
	writer, err := pgx.Connect(h.ctx, h.dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer writer.Close(h.ctx)
	var once sync.Once
	h.start(Config{BeforeCopy: func() {
		once.Do(func() {
			for _, sql := range []string{
				`INSERT INTO docs SELECT g, array_fill(g::real, ARRAY[8]) FROM generate_series(1001, 1500) g`,
				`UPDATE docs SET v = array_fill(-1::real, ARRAY[8]) WHERE id <= 100`,
				`DELETE FROM docs WHERE id BETWEEN 900 AND 1100`,
				`UPDATE docs SET id = id + 10000 WHERE id BETWEEN 200 AND 210`,
			} {
				if _, err := writer.Exec(h.ctx, sql); err != nil {
					t.Errorf("%s: %v", sql, err)
				}
			}
		})
	}})
	waitReady(t, e)
	h.assertConverged(e, dims)
	if got := e.Status().Rows; got != 1500-201 {
		t.Errorf("rows = %d, want %d", got, 1500-201)
	}
}

func TestKeyTypes(t *testing.T) {
	for _, typ := range []string{"smallint", "integer", "bigint", "uuid", "text", "varchar(20)"} {
		t.Run(strings.Fields(typ)[0], func(t *testing.T) {
			key := "g::" + typ
			if typ == "uuid" {
				key = "md5(g::text)::uuid"
			}
			h := newHarness(t, fmt.Sprintf(`CREATE TABLE k (id %s PRIMARY KEY, v real[]);
				INSERT INTO k SELECT %s, ARRAY[g, 1]::real[] FROM generate_series(1, 50) g`, typ, key))
			e := h.add("k_v=k(v) key=id metric=cosine")
			h.start(Config{})
			waitReady(t, e)
			h.exec(fmt.Sprintf(`INSERT INTO k SELECT %s, ARRAY[g, 2]::real[] FROM generate_series(51, 60) g`, key))
			h.exec(`DELETE FROM k WHERE v[1] < 5`)
			h.assertConverged(e, 2)
		})
	}
}

func TestRefusesTableWithoutReplicaIdentity(t *testing.T) {
	h := newHarness(t, `CREATE TABLE nokey (id int, v real[]);
		CREATE TABLE other (id int PRIMARY KEY, code int UNIQUE NOT NULL, v real[])`)
	for _, def := range []string{"a=nokey(v) key=id metric=l2", "b=other(v) key=code metric=l2"} {
		ix := indexer.New()
		spec, _ := indexer.ParseSpec(def)
		e, _ := ix.Add(spec)
		rep, err := New(Config{Source: h.dsn, Entries: []*indexer.Entry{e}, Logger: testLogger(t)})
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithTimeout(h.ctx, 30*time.Second)
		err = rep.Run(ctx)
		cancel()
		if err == nil || !strings.Contains(err.Error(), "REPLICA IDENTITY USING INDEX") {
			t.Errorf("%s: got %v, want a refusal saying how to fix the replica identity", def, err)
		}
	}
	var pubs int
	if err := h.conn.QueryRow(h.ctx, `SELECT count(*) FROM pg_publication_tables`).Scan(&pubs); err != nil || pubs != 0 {
		t.Errorf("a refused table was published (%d tables, %v)", pubs, err)
	}
}

// TestTwoIndexesOneSlot feeds two indexes on one table, and one on
// another, from a single publication and slot.
func TestTwoIndexesOneSlot(t *testing.T) {
	h := newHarness(t, `CREATE TABLE a (id int PRIMARY KEY, v real[], w double precision[]);
		CREATE TABLE b (id int PRIMARY KEY, v real[]);
		INSERT INTO a SELECT g, ARRAY[g, 0]::real[], ARRAY[0, g, 1]::float8[] FROM generate_series(1, 20) g;
		INSERT INTO b SELECT g, ARRAY[g, g]::real[] FROM generate_series(1, 20) g`)
	ea := h.add("a_v=a(v) key=id metric=l2")
	ea2 := h.add("a_v_ip=a(v) key=id metric=ip")
	ew := h.add("a_w=a(w) key=id metric=l2")
	eb := h.add("b_v=b(v) key=id metric=l2")
	h.start(Config{})
	for _, e := range []*indexer.Entry{ea, ea2, ew, eb} {
		waitReady(t, e)
	}
	h.exec(`UPDATE a SET v = ARRAY[100, 100]::real[] WHERE id = 1`)
	h.exec(`UPDATE a SET w = NULL WHERE id = 2`)
	h.exec(`DELETE FROM b WHERE id > 10`)
	h.assertConverged(ea, 2)
	h.assertConverged(ea2, 2)
	h.assertConverged(ew, 3)
	h.assertConverged(eb, 2)
	var slots, pubs int
	h.conn.QueryRow(h.ctx, `SELECT count(*) FROM pg_replication_slots WHERE database = current_database()`).Scan(&slots)
	h.conn.QueryRow(h.ctx, `SELECT count(*) FROM pg_publication`).Scan(&pubs)
	if slots != 1 || pubs != 1 {
		t.Errorf("%d slots and %d publications, want one of each", slots, pubs)
	}
}

// TestReconnectsAfterWalsenderIsKilled cuts the replication connection
// with pg_terminate_backend and checks that the stream resumes.
func TestReconnectsAfterWalsenderIsKilled(t *testing.T) {
	h := newHarness(t, `CREATE TABLE r (id int PRIMARY KEY, v real[])`)
	e := h.add("r_v=r(v) key=id metric=l2")
	h.start(Config{})
	waitReady(t, e)
	for round := 0; round < 3; round++ {
		h.exec(fmt.Sprintf(`INSERT INTO r SELECT g, ARRAY[g, %d]::real[] FROM generate_series(%d, %d) g`, round, round*100, round*100+99))
		h.killWalsender()
		h.exec(fmt.Sprintf(`UPDATE r SET v = ARRAY[-1, %d]::real[] WHERE id %% 7 = 0`, round))
	}
	h.assertConverged(e, 2)
	h.assertReconnected()
	if s := h.rep.Stats(); s.Changes.Load() == 0 || s.Confirmed() == 0 {
		t.Errorf("stats after the reconnects: %d changes, confirmed %s", s.Changes.Load(), s.Confirmed())
	}
}

// startBehindProxy starts a replicator that reaches Postgres through a
// proxy, with a 2 s ReceiveTimeout, and shortens wal_sender_timeout to
// 3 s while the test runs: a walsender cut off by the proxy holds the slot
// until then.
func (h *harness) startBehindProxy() *pgtest.Proxy {
	h.t.Helper()
	h.exec(`ALTER SYSTEM SET wal_sender_timeout = '3s'`)
	h.exec(`SELECT pg_reload_conf()`)
	h.t.Cleanup(func() {
		h.exec(`ALTER SYSTEM RESET wal_sender_timeout`)
		h.exec(`SELECT pg_reload_conf()`)
	})
	proxy := pgtest.NewProxy(h.t, fmt.Sprintf("127.0.0.1:%d", pgtest.Shared(h.t).Port))
	h.start(Config{Source: proxy.Via(h.t, h.dsn), ReceiveTimeout: 2 * time.Second})
	return proxy
}

// A network partition leaves the connections open and silent: no error
// ever comes. The stream asks the server to answer, hears nothing, and
// reconnects after ReceiveTimeout; the rows written meanwhile arrive. An
// idle connection that is alive answers and stays.
func TestReconnectsAfterSilentPartition(t *testing.T) {
	h := newHarness(t, `CREATE TABLE p (id int PRIMARY KEY, v real[]);
		INSERT INTO p SELECT g, ARRAY[g, 0]::real[] FROM generate_series(1, 100) g`)
	e := h.add("p_v=p(v) key=id metric=l2")
	proxy := h.startBehindProxy()
	waitReady(t, e)
	h.exec(`UPDATE p SET v = ARRAY[id, 1]::real[] WHERE id <= 50`)
	h.catchUp()
	// Idle but connected, the server answers the stream's pings.
	time.Sleep(5 * time.Second)
	if n := h.rep.Stats().Reconnects.Load(); n != 0 {
		t.Fatalf("a healthy idle connection was dropped %d times", n)
	}
	if n := proxy.Partition(); n == 0 {
		t.Fatal("no connection to cut")
	}
	cut := time.Now()
	h.exec(`INSERT INTO p SELECT g, ARRAY[g, 2]::real[] FROM generate_series(101, 200) g`)
	h.exec(`DELETE FROM p WHERE id % 10 = 0`)
	h.catchUp()
	t.Logf("caught up %v after the partition", time.Since(cut).Round(time.Millisecond))
	h.assertConverged(e, 2)
	h.assertReconnected()
}

// killWalsender terminates the slot's walsender once there is one: the
// replicator may still be between connecting and START_REPLICATION, and
// a kill that finds no walsender tests nothing.
func (h *harness) killWalsender() {
	h.t.Helper()
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		var killed bool
		if err := h.conn.QueryRow(h.ctx, `SELECT coalesce(bool_or(pg_terminate_backend(active_pid)), false)
			FROM pg_replication_slots WHERE slot_name = 'vecside' AND active_pid IS NOT NULL`).Scan(&killed); err != nil {
			h.t.Fatal(err)
		}
		if killed {
			return
		}
		if time.Now().After(deadline) {
			h.t.Fatal("the slot had no walsender to kill for 30 s")
		}
	}
}

func (h *harness) assertReconnected() {
	h.t.Helper()
	if h.rep.Stats().Reconnects.Load() == 0 {
		h.t.Error("the replicator never reconnected")
	}
}

// A partition that lasts: every reconnect meets it too, in the middle of
// its first exchanges, which must give up after ReceiveTimeout and try
// again until the network heals.
func TestReconnectsThroughLastingPartition(t *testing.T) {
	h := newHarness(t, `CREATE TABLE l (id int PRIMARY KEY, v real[]);
		INSERT INTO l SELECT g, ARRAY[g, 0]::real[] FROM generate_series(1, 100) g`)
	e := h.add("l_v=l(v) key=id metric=l2")
	proxy := h.startBehindProxy()
	waitReady(t, e)
	proxy.Isolate(true)
	proxy.Partition()
	h.exec(`UPDATE l SET v = ARRAY[id, 1]::real[] WHERE id <= 50`)
	// Long enough for attempts to hang in connecting, or in their first
	// queries, and give up.
	for deadline := time.Now().Add(time.Minute); h.rep.Stats().Reconnects.Load() < 3; time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("%d reconnects in a minute: an attempt hangs", h.rep.Stats().Reconnects.Load())
		}
	}
	proxy.Isolate(false)
	h.assertConverged(e, 2)
}

// A partition in the middle of the initial copy: no row comes any more
// and no error either. The copy gives up after ReceiveTimeout and the
// next attempt copies the table again.
func TestCopyCutByPartitionStartsOver(t *testing.T) {
	h := newHarness(t, `CREATE TABLE c (id int PRIMARY KEY, v real[]);
		INSERT INTO c SELECT g, ARRAY[g, 0]::real[] FROM generate_series(1, 300000) g`)
	e := h.add("c_v=c(v) key=id metric=l2")
	proxy := h.startBehindProxy()
	for deadline := time.Now().Add(time.Minute); e.Status().CopiedRows == 0; time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the copy never started")
		}
	}
	if e.Status().State != indexer.StateBuilding {
		t.Fatal("the copy ended before the partition: make the table larger")
	}
	proxy.Partition()
	h.exec(`UPDATE c SET v = ARRAY[id, 1]::real[] WHERE id % 1000 = 0`)
	h.assertConverged(e, 2)
	h.assertReconnected()
}

// TestReconnectConfirmsOnlyDurableState: after a reconnect the stream
// resumes from what the index has applied, but the slot must not be told
// more than its checkpoint covers.
func TestReconnectConfirmsOnlyDurableState(t *testing.T) {
	h := newHarness(t, `CREATE TABLE r (id int PRIMARY KEY, v real[]);
		INSERT INTO r SELECT g, ARRAY[g, 1]::real[] FROM generate_series(1, 100) g`)
	e := h.add("r_v=r(v) key=id metric=l2")
	h.start(Config{DataDir: t.TempDir(), StatusInterval: 100 * time.Millisecond})
	waitReady(t, e)
	for deadline := time.Now().Add(30 * time.Second); e.Durable().Covered() == 0; time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("no first checkpoint")
		}
	}
	// Applied now moves past covered: the next checkpoint is minutes away.
	h.exec(`UPDATE r SET v = ARRAY[0, 0]::real[] WHERE id <= 10`)
	h.catchUp()
	var oldPID int
	if err := h.conn.QueryRow(h.ctx, `SELECT active_pid FROM pg_replication_slots WHERE slot_name = 'vecside'`).Scan(&oldPID); err != nil {
		t.Fatal(err)
	}
	h.exec(`SELECT pg_terminate_backend($1)`, oldPID)
	// Wait until the new walsender has had a status update.
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		var replied bool
		err := h.conn.QueryRow(h.ctx, `SELECT EXISTS (SELECT FROM pg_replication_slots s JOIN pg_stat_replication r ON r.pid = s.active_pid
			WHERE s.slot_name = 'vecside' AND s.active_pid <> $1 AND r.flush_lsn IS NOT NULL)`, oldPID).Scan(&replied)
		if err != nil {
			t.Fatal(err)
		}
		if replied {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the replicator did not reconnect")
		}
	}
	var s string
	if err := h.conn.QueryRow(h.ctx, `SELECT confirmed_flush_lsn::text FROM pg_replication_slots WHERE slot_name = 'vecside'`).Scan(&s); err != nil {
		t.Fatal(err)
	}
	if confirmed, _ := indexer.ParseLSN(s); confirmed > e.Durable().Covered() {
		t.Fatalf("after the reconnect the slot confirmed %s; the checkpoint covers %s (applied %s)", confirmed, e.Durable().Covered(), e.Applied())
	}
}

// TestIdleKeepaliveReleasesWaiters writes only to an unrelated table and
// waits for pg_current_wal_lsn(): the keepalive's WAL end must release it.
func TestIdleKeepaliveReleasesWaiters(t *testing.T) {
	h := newHarness(t, `CREATE TABLE r (id int PRIMARY KEY, v real[]); CREATE TABLE unrelated (x int)`)
	e := h.add("r_v=r(v) key=id metric=l2")
	h.start(Config{StatusInterval: 200 * time.Millisecond})
	waitReady(t, e)
	h.exec(`INSERT INTO unrelated SELECT generate_series(1, 1000)`)
	h.catchUp()
}

// restart stops the replicator and starts a new one, with new entries of
// the same definitions, as a restarted process would.
func (h *harness) restart(cfg Config) {
	h.t.Helper()
	h.stop()
	old := h.ix.Entries()
	h.ix = indexer.New()
	for _, e := range old {
		if _, err := h.ix.Add(e.Spec()); err != nil {
			h.t.Fatal(err)
		}
	}
	h.start(cfg)
}

// TestRestartResumesFromCheckpoints: a clean stop writes checkpoints; the
// next start loads them and streams what was written meanwhile, without
// copying the table again. A corrupt checkpoint is refused and the table
// copied again.
func TestRestartResumesFromCheckpoints(t *testing.T) {
	h := newHarness(t, `CREATE TABLE r (id int PRIMARY KEY, v real[]);
		INSERT INTO r SELECT g, ARRAY[g, 1]::real[] FROM generate_series(1, 3000) g`)
	h.add("r_v=r(v) key=id metric=l2")
	var logs logBuffer
	cfg := Config{DataDir: t.TempDir(), StatusInterval: 100 * time.Millisecond,
		Logger: slog.New(slog.NewTextHandler(io.MultiWriter(testWriter{t}, &logs), nil))}
	h.start(cfg)
	waitReady(t, h.ix.Entries()[0])
	// A first start has no checkpoint to load, which is no warning; the
	// table, never analyzed, has no estimate of its rows to show.
	if first := logs.String(); !strings.Contains(first, `level=INFO msg="no checkpoint yet`) || strings.Contains(first, "level=WARN") ||
		!strings.Contains(first, "msg=copied") || strings.Contains(first, `"of about"=0`) {
		t.Errorf("the first start's log, want no checkpoint at INFO, no WARN, and no estimate of 0 rows:\n%s", first)
	}
	h.exec(`UPDATE r SET v = ARRAY[0, 0]::real[] WHERE id <= 10`)
	h.catchUp()
	h.stop()
	h.exec(`INSERT INTO r SELECT g, ARRAY[g, 2]::real[] FROM generate_series(3001, 3100) g`)
	h.exec(`DELETE FROM r WHERE id BETWEEN 11 AND 20`)

	h.restart(cfg)
	e := h.ix.Entries()[0]
	waitReady(t, e)
	h.assertConverged(e, 2)
	if n := h.rep.Stats().CopiedRows.Load(); n != 0 {
		t.Errorf("restart copied %d rows; it should resume from the checkpoint", n)
	}

	h.stop()
	path := e.Durable().CheckpointPath(cfg.DataDir)
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	data[len(data)/2] ^= 1
	os.WriteFile(path, data, 0o600)
	h.restart(cfg)
	e = h.ix.Entries()[0]
	waitReady(t, e)
	if !strings.Contains(logs.String(), `level=WARN msg="index has no usable checkpoint`) {
		t.Errorf("a corrupt checkpoint was not warned of:\n%s", logs.String())
	}
	h.assertConverged(e, 2)
	if n := h.rep.Stats().CopiedRows.Load(); n != 3090 {
		t.Errorf("after a corrupt checkpoint %d rows were copied, want all 3090", n)
	}
}

// TestSlotAdvancesWhenIdle: with checkpoints and only an unrelated table
// written, the slot's confirmed position follows the WAL.
func TestSlotAdvancesWhenIdle(t *testing.T) {
	h := newHarness(t, `CREATE TABLE r (id int PRIMARY KEY, v real[]); CREATE TABLE unrelated (x int);
		INSERT INTO r SELECT g, ARRAY[g, 1]::real[] FROM generate_series(1, 100) g`)
	e := h.add("r_v=r(v) key=id metric=l2")
	h.start(Config{DataDir: t.TempDir(), StatusInterval: 100 * time.Millisecond})
	waitReady(t, e)
	h.assertSlotFollowsIdleWAL(30 * time.Second)
}

// confirmed is the slot's confirmed_flush_lsn.
func (h *harness) confirmed() indexer.LSN {
	h.t.Helper()
	var s string
	if err := h.conn.QueryRow(h.ctx, `SELECT confirmed_flush_lsn::text FROM pg_replication_slots WHERE slot_name = 'vecside'`).Scan(&s); err != nil {
		h.t.Fatal(err)
	}
	l, _ := indexer.ParseLSN(s)
	return l
}

// assertSlotFollowsIdleWAL writes only to the table unrelated and checks,
// within d, that the slot confirms the WAL written.
func (h *harness) assertSlotFollowsIdleWAL(d time.Duration) {
	h.t.Helper()
	before := h.confirmed()
	h.exec(`INSERT INTO unrelated SELECT generate_series(1, 10000)`)
	h.exec(`CHECKPOINT`)
	h.waitConfirmed(h.walLSN(), d, before)
}

// waitConfirmed waits, bounded by d, until the slot has confirmed want;
// before is where it was, for the message.
func (h *harness) waitConfirmed(want indexer.LSN, d time.Duration, before indexer.LSN) {
	h.t.Helper()
	for deadline := time.Now().Add(d); h.confirmed() < want; time.Sleep(50 * time.Millisecond) {
		if time.Now().After(deadline) {
			h.t.Fatalf("slot stuck at %s (was %s), want %s; covered %s", h.confirmed(), before, want, h.ix.Covered())
		}
	}
}

// TestDroppedColumnFailsOnlyItsIndex: DROP COLUMN … CASCADE silently
// takes the table out of the publication; the index on it goes into the
// error state, saying its column is gone, and the other index keeps
// serving.
func TestDroppedColumnFailsOnlyItsIndex(t *testing.T) {
	h := newHarness(t, `CREATE TABLE a (id int PRIMARY KEY, v real[], extra int);
		CREATE TABLE b (id int PRIMARY KEY, v real[]);
		INSERT INTO a SELECT g, ARRAY[g, 1]::real[] FROM generate_series(1, 10) g;
		INSERT INTO b SELECT g, ARRAY[g, 1]::real[] FROM generate_series(1, 10) g`)
	ea := h.add("a_v=a(v) key=id metric=l2")
	eb := h.add("b_v=b(v) key=id metric=l2")
	h.start(Config{HealthInterval: 100 * time.Millisecond})
	waitReady(t, ea)
	waitReady(t, eb)
	h.exec(`ALTER TABLE a ADD COLUMN note text`) // harmless
	h.exec(`UPDATE a SET note = 'x', v = ARRAY[0, 0]::real[] WHERE id = 1`)
	h.assertConverged(ea, 2)
	h.exec(`ALTER TABLE a DROP COLUMN v CASCADE`)
	deadline := time.Now().Add(10 * time.Second)
	for {
		state, msg := ea.State()
		if state == indexer.StateError {
			if !strings.Contains(msg, `column "v"`) || !strings.Contains(msg, "does not exist") {
				t.Errorf("error message %q does not say what happened", msg)
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("index on a dropped column is still", state)
		}
		time.Sleep(50 * time.Millisecond)
	}
	h.exec(`INSERT INTO b VALUES (11, ARRAY[11, 1]::real[])`)
	h.assertConverged(eb, 2)
	if _, err := eb.Search(h.ctx, []float32{11, 1}, 1, indexer.DefaultSearchOptions()); err != nil {
		t.Errorf("the other index stopped serving: %v", err)
	}
}

// invalidateSlot writes WAL past a tiny max_slot_wal_keep_size until
// Postgres invalidates the slot (without checkpoints the replicator never
// confirms past its start, so the slot keeps all of it).
func (h *harness) invalidateSlot() {
	h.t.Helper()
	h.exec(`ALTER SYSTEM SET max_slot_wal_keep_size = '1MB'`)
	h.exec(`SELECT pg_reload_conf()`)
	h.t.Cleanup(func() {
		h.conn.Exec(h.ctx, `ALTER SYSTEM RESET max_slot_wal_keep_size`)
		h.conn.Exec(h.ctx, `SELECT pg_reload_conf()`)
	})
	h.exec(`CREATE TABLE IF NOT EXISTS filler (x text)`)
	for i := 0; i < 20; i++ {
		var status *string
		h.conn.QueryRow(h.ctx, `SELECT wal_status FROM pg_replication_slots WHERE slot_name = 'vecside'`).Scan(&status)
		if status != nil && *status == "lost" {
			return
		}
		h.exec(`INSERT INTO filler SELECT repeat('x', 1000) FROM generate_series(1, 2000)`)
		h.exec(`SELECT pg_switch_wal()`)
		h.exec(`CHECKPOINT`)
	}
	h.t.Fatal("the slot was never invalidated")
}

func TestSlotLost(t *testing.T) {
	for _, policy := range []string{"fail", "resync"} {
		t.Run(policy, func(t *testing.T) {
			h := newHarness(t, `CREATE TABLE r (id int PRIMARY KEY, v real[]);
				INSERT INTO r SELECT g, ARRAY[g, 1]::real[] FROM generate_series(1, 100) g`)
			e := h.add("r_v=r(v) key=id metric=l2")
			cfg := Config{OnSlotLost: policy, HealthInterval: 100 * time.Millisecond}
			h.start(cfg)
			waitReady(t, e)
			h.invalidateSlot()
			h.exec(`DELETE FROM r WHERE id > 50`)
			if policy == "fail" {
				select {
				case err := <-h.done:
					h.parts--
					if err == nil || !strings.Contains(err.Error(), "--on-slot-lost=resync") {
						t.Fatalf("got %v, want an error saying how to recover", err)
					}
				case <-time.After(10 * time.Second):
					t.Fatal("the lost slot was not reported within 10 s")
				}
				if state, _ := e.State(); state != indexer.StateError {
					t.Errorf("state %s after the slot was lost, want error", state)
				}
				return
			}
			deadline := time.Now().Add(30 * time.Second)
			for h.rep.Stats().CopiedRows.Load() == 0 {
				if time.Now().After(deadline) {
					t.Fatal("no resync after the slot was lost")
				}
				time.Sleep(50 * time.Millisecond)
			}
			waitReady(t, e)
			h.assertConverged(e, 2)
		})
	}
}

// TestNewIndexSyncsOnlyItsTable: restarting with one more index copies
// only that index's table, under its own snapshot, while writes to both
// tables go on during the copy; the restored index is not copied again.
func TestNewIndexSyncsOnlyItsTable(t *testing.T) {
	h := newHarness(t, `CREATE TABLE a (id int PRIMARY KEY, v real[]);
		CREATE TABLE b (id int PRIMARY KEY, v real[]);
		INSERT INTO a SELECT g, ARRAY[g, 1]::real[] FROM generate_series(1, 500) g;
		INSERT INTO b SELECT g, ARRAY[g, 2]::real[] FROM generate_series(1, 700) g`)
	h.add("a_v=a(v) key=id metric=l2")
	dir := t.TempDir()
	h.start(Config{DataDir: dir, StatusInterval: 100 * time.Millisecond})
	waitReady(t, h.ix.Entries()[0])
	h.catchUp()
	h.stop()

	writer, err := pgx.Connect(h.ctx, h.dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer writer.Close(h.ctx)
	h.exec(`INSERT INTO a VALUES (501, ARRAY[501, 1]::real[])`) // while stopped
	if _, err := h.ix.Add(mustSpec(t, "b_v=b(v) key=id metric=l2")); err != nil {
		t.Fatal(err)
	}
	var once sync.Once
	h.restart(Config{DataDir: dir, StatusInterval: 100 * time.Millisecond, BeforeCopy: func() {
		once.Do(func() {
			for _, sql := range []string{
				`INSERT INTO b SELECT g, ARRAY[g, 3]::real[] FROM generate_series(701, 800) g`,
				`UPDATE b SET v = ARRAY[-1, -1]::real[] WHERE id <= 50`,
				`DELETE FROM b WHERE id BETWEEN 600 AND 650`,
				`UPDATE a SET v = ARRAY[0, 0]::real[] WHERE id <= 5`,
			} {
				if _, err := writer.Exec(h.ctx, sql); err != nil {
					t.Errorf("%s: %v", sql, err)
				}
			}
		})
	}})
	ea, eb := h.ix.Entries()[0], h.ix.Entries()[1]
	waitReady(t, ea)
	waitReady(t, eb)
	h.assertConverged(ea, 2)
	h.assertConverged(eb, 2)
	if n := h.rep.Stats().CopiedRows.Load(); n != 700 {
		t.Errorf("copied %d rows, want only b's 700 (the snapshot predates the concurrent writes)", n)
	}
	if a, b := ea.Status().CopiedRows, eb.Status().CopiedRows; a != 0 || b != 700 {
		t.Errorf("status copied_rows a=%d b=%d, want 0 (restored) and 700", a, b)
	}
	// A temporary slot goes when its walsender has seen its connection
	// close, a moment after the copy ends.
	var temp int
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		h.conn.QueryRow(h.ctx, `SELECT count(*) FROM pg_replication_slots WHERE slot_name <> 'vecside'`).Scan(&temp)
		if temp == 0 || time.Now().After(deadline) {
			break
		}
	}
	if temp != 0 {
		t.Errorf("%d temporary slots left behind after 10 s", temp)
	}
}

// TestParallelCopy copies a table large enough to be split into ctid
// ranges, with rows written during the copy.
func TestParallelCopy(t *testing.T) {
	h := newHarness(t, `CREATE TABLE big (id int PRIMARY KEY, v real[]);
		INSERT INTO big SELECT g, ARRAY[g, g % 7, 1, 2, 3, 4, 5, 6]::real[] FROM generate_series(1, 200000) g;
		ANALYZE big`)
	var pages int
	h.conn.QueryRow(h.ctx, `SELECT relpages FROM pg_class WHERE relname = 'big'`).Scan(&pages)
	if pages < 2*rangePages {
		t.Fatalf("table has %d pages, too few for two readers", pages)
	}
	e := h.add("big_v=big(v) key=id metric=l2")
	writer, err := pgx.Connect(h.ctx, h.dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer writer.Close(h.ctx)
	h.start(Config{CopyReaders: 3, BeforeCopy: func() {
		writer.Exec(h.ctx, `DELETE FROM big WHERE id % 1000 = 0`)
	}})
	waitReady(t, e)
	h.assertConverged(e, 8)
	if n := h.rep.Stats().CopiedRows.Load(); n != 200000 {
		t.Errorf("copied %d rows, want 200000", n)
	}
}

func mustSpec(t testing.TB, def string) indexer.Spec {
	t.Helper()
	s, err := indexer.ParseSpec(def)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func findings(t *testing.T, dsn string, defs ...string) map[string]Finding {
	t.Helper()
	var specs []indexer.Spec
	for _, d := range defs {
		specs = append(specs, mustSpec(t, d))
	}
	fs, err := Check(context.Background(), dsn, "vecside", specs)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]Finding{}
	for _, f := range fs {
		out[f.Check] = f
	}
	return out
}

func TestCheck(t *testing.T) {
	h := newHarness(t, `CREATE TABLE good (id int PRIMARY KEY, v real[]);
		CREATE TABLE nokey (id int, v real[]);
		CREATE TABLE wrongtype (id int PRIMARY KEY, v text);
		CREATE ROLE plain LOGIN`)
	t.Cleanup(func() { h.conn.Exec(h.ctx, `DROP ROLE IF EXISTS plain`) })
	fs := findings(t, h.dsn, "g=good(v) key=id metric=l2", "n=nokey(v) key=id metric=l2", "w=wrongtype(v) key=id metric=l2")
	for check, want := range map[string]Level{
		"server version": OK, "wal_level": OK, "REPLICATION attribute": OK, "slots and senders": OK,
		"max_slot_wal_keep_size": Warn, "slot vecside": OK, "publication vecside": OK,
		"index g": OK, "index n": Fail, "index w": Fail,
	} {
		f, ok := fs[check]
		if !ok || f.Level != want {
			t.Errorf("%s: got %+v, want level %s", check, f, want)
		}
		if f.Level != OK && f.Fix == "" {
			t.Errorf("%s: %s without a fix", check, f.Level)
		}
	}
	if fix := fs["index n"].Fix; !strings.Contains(fix, "REPLICA IDENTITY USING INDEX") {
		t.Errorf("fix for a table without a key: %q", fix)
	}
	// A row filter is tried as a publication would hold it, and nothing
	// of the trial is left behind.
	fs = findings(t, h.dsn, "even=good(v) key=id metric=l2 where='id % 2 = 0'",
		"byvec=good(v) key=id metric=l2 where='v IS NOT NULL'", "typo=good(v) key=id metric=l2 where='idd > 0'")
	for check, want := range map[string]Level{"index even where=": OK, "index byvec where=": Fail, "index typo where=": Fail} {
		if f := fs[check]; f.Level != want || want == Fail && !strings.Contains(f.Fix, "replica identity") {
			t.Errorf("%s: got %+v, want level %s", check, f, want)
		}
	}
	var pubs int
	if err := h.conn.QueryRow(h.ctx, `SELECT count(*) FROM pg_publication`).Scan(&pubs); err != nil || pubs != 0 {
		t.Errorf("the checks left %d publications (%v)", pubs, err)
	}
	plain := strings.Replace(h.dsn, "postgres://postgres@", "postgres://plain@", 1)
	fs = findings(t, plain, "g=good(v) key=id metric=l2")
	if fs["REPLICATION attribute"].Level != Fail || fs["index g"].Level != Fail {
		t.Errorf("a role without REPLICATION or SELECT passed: %+v %+v", fs["REPLICATION attribute"], fs["index g"])
	}
}

// TestRetriesConnectionErrorsNotConfigErrors: an unreachable database is
// retried; an index whose definition is wrong, when it is the only one,
// ends Run with an error at once.
func TestRetriesConnectionErrorsNotConfigErrors(t *testing.T) {
	h := newHarness(t, `SELECT 1`)
	e := h.add("m=missing(v) key=id metric=l2")
	down, err := New(Config{Source: "postgres://postgres@127.0.0.1:1/x?sslmode=disable&connect_timeout=1", Entries: []*indexer.Entry{e}, Logger: testLogger(t)})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(h.ctx, 1500*time.Millisecond)
	defer cancel()
	if err := down.Run(ctx); err != nil {
		t.Errorf("Run gave up on an unreachable database: %v", err)
	}
	if down.Stats().Reconnects.Load() == 0 {
		t.Error("no retry against an unreachable database")
	}
	bad := h.add("b=missing(v) key=nope metric=l2")
	h.exec(`CREATE TABLE missing (id int PRIMARY KEY, v real[])`)
	refused, _ := New(Config{Source: h.dsn, Entries: []*indexer.Entry{bad}, Logger: testLogger(t)})
	ctx, cancel = context.WithTimeout(h.ctx, 30*time.Second)
	defer cancel()
	if err := refused.Run(ctx); err == nil || !strings.Contains(err.Error(), "replica identity") {
		t.Errorf("the only index's key is not the replica identity: got %v, want an error at once", err)
	}
}

// TestMissingTableWaits: an index whose table does not exist yet (the
// application's migrations have not run) waits, saying so, while the
// other index serves; once the table is created it is copied and
// followed, without a restart.
func TestMissingTableWaits(t *testing.T) {
	h := newHarness(t, `CREATE TABLE a (id int PRIMARY KEY, v real[]); INSERT INTO a VALUES (1, '{1,1}')`)
	ea := h.add("a_v=a(v) key=id metric=l2")
	em := h.add("m_v=later(v) key=id metric=l2")
	h.start(Config{HealthInterval: 100 * time.Millisecond})
	waitReady(t, ea)
	assertMentions(t, waitState(t, em, indexer.StateWaiting, "does not exist"), "later", "does not exist", "--index")
	if _, err := em.Search(h.ctx, []float32{1, 1}, 1, indexer.DefaultSearchOptions()); !errors.Is(err, indexer.ErrNotReady) {
		t.Errorf("a waiting index answered: %v", err)
	}
	h.exec(`CREATE TABLE later (id int PRIMARY KEY, v real[]); INSERT INTO later SELECT g, ARRAY[g, 3]::real[] FROM generate_series(1, 30) g`)
	waitReady(t, em)
	h.exec(`INSERT INTO later VALUES (31, '{31,3}'); INSERT INTO a VALUES (2, '{2,1}')`)
	h.assertConverged(em, 2)
	h.assertConverged(ea, 2)
}

// waitState waits, bounded, until e is in state want with a message that
// says says, and returns the message.
func waitState(t testing.TB, e *indexer.Entry, want indexer.State, says string) string {
	t.Helper()
	for deadline := time.Now().Add(15 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		state, msg := e.State()
		if state == want && strings.Contains(msg, says) {
			return msg
		}
		if time.Now().After(deadline) {
			t.Fatalf("index %s still %s (%s) after 15 s, want %s saying %q", e.Spec().Name, state, msg, want, says)
		}
	}
}

// TestPartitionedTable follows a partitioned table through its root.
func TestPartitionedTable(t *testing.T) {
	h := newHarness(t, `CREATE TABLE p (id int PRIMARY KEY, v real[]) PARTITION BY RANGE (id);
		CREATE TABLE p1 PARTITION OF p FOR VALUES FROM (0) TO (1000);
		CREATE TABLE p2 PARTITION OF p FOR VALUES FROM (1000) TO (2000);
		INSERT INTO p SELECT g, ARRAY[g, 1]::real[] FROM generate_series(1, 1500) g`)
	e := h.add("p_v=p(v) key=id metric=l2")
	h.start(Config{})
	waitReady(t, e)
	h.exec(`INSERT INTO p SELECT g, ARRAY[g, 2]::real[] FROM generate_series(1501, 1990) g`)
	h.exec(`UPDATE p SET id = id + 1980 WHERE id BETWEEN 11 AND 19`) // moves rows across partitions, to free ids
	h.exec(`DELETE FROM p WHERE id BETWEEN 500 AND 600`)
	h.assertConverged(e, 2)
}

// TestUnchangedVectorOfUnknownKeyIsRead: an UPDATE that leaves a TOASTed
// vector alone sends it as 'u'; if the index does not have that key, the
// row is read from the table.
func TestUnchangedVectorOfUnknownKeyIsRead(t *testing.T) {
	const dims = 768
	h := newHarness(t, workload.CreateTable(10, dims))
	e := h.add("items_embedding=items(embedding) key=id metric=l2")
	h.start(Config{})
	waitReady(t, e)
	lost := mustKey(t, e, "3")
	e.Stream().Delete(lost) // as if the index had lost the row
	h.exec(`UPDATE items SET note = 'only the note' WHERE id = 3`)
	h.assertConverged(e, dims)
	if n := h.rep.Stats().Repairs.Load(); n != 1 {
		t.Errorf("%d repair reads, want 1", n)
	}
}

func mustKey(t *testing.T, e *indexer.Entry, text string) string {
	t.Helper()
	k, err := e.KeyType().DecodeText(text)
	if err != nil {
		t.Fatal(err)
	}
	return k
}
