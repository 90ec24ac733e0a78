package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/vecside/vecside/cmd/vecside-bench/internal/benchreport"
	"github.com/vecside/vecside/internal/pgvalue"
	"github.com/vecside/vecside/kernels"
)

// pgvectorTarget is pgvector's HNSW index on the bench's table, with one
// connection per client.
type pgvectorTarget struct {
	index string // as reported: "hnsw m=16 ef_construction=64"
	query string // the statement every client prepares
	conns []*pgx.Conn
}

func (t *pgvectorTarget) close() {
	for _, c := range t.conns {
		c.Close(context.Background())
	}
}

const (
	pgvectorIndex     = pgvectorTable + "_hnsw"
	pgvectorStatement = "vecside_bench_pgvector_knn"
)

// startPGVector gives pgvector its best case, when the database offers
// the extension (nil otherwise): an HNSW index built with the build
// settings reported on the table vecside follows, as a user has both (or,
// where that table's column is real[], on a copy of it with a vector
// column, loaded by COPY and VACUUM ANALYZEd), table and index prewarmed
// where pg_prewarm is available.
func (b *bench) startPGVector(ctx context.Context) (*pgvectorTarget, error) {
	if !b.p.pgvector {
		return nil, nil
	}
	var version string
	err := b.db.QueryRow(ctx, "SELECT default_version FROM pg_available_extensions WHERE name = 'vector'").Scan(&version)
	if errors.Is(err, pgx.ErrNoRows) {
		b.say("pgvector: the vector extension is not available in this database; not compared")
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	op := map[kernels.Metric]string{kernels.L2: "vector_l2_ops", kernels.Cosine: "vector_cosine_ops", kernels.IP: "vector_ip_ops"}[b.p.metric]
	table, column := benchTable, "embedding"
	if !b.vectorColumn {
		table, column = pgvectorTable, "v"
	}
	t := &pgvectorTarget{
		index: fmt.Sprintf("hnsw m=%d ef_construction=%d", b.p.pgvM, b.p.pgvEfConstruction),
		query: fmt.Sprintf("SELECT id FROM %s ORDER BY %s %s $1::real[]::vector LIMIT %d", table, column, b.p.metric.Operator(), b.p.k),
	}
	exec := func(sql string) error {
		b.say("pgvector: %s", sql)
		if _, err := b.db.Exec(ctx, sql); err != nil {
			return fmt.Errorf("pgvector: %s: %w", sql, err)
		}
		return nil
	}
	if err := exec("CREATE EXTENSION IF NOT EXISTS vector"); err != nil {
		return nil, err
	}
	if err := b.db.QueryRow(ctx, "SELECT extversion FROM pg_extension WHERE extname = 'vector'").Scan(&b.report.Header.Machine.PGVector); err != nil {
		return nil, err
	}
	build := benchreport.Build{System: "pgvector", Index: t.index, Settings: map[string]string{"table": "the table vecside follows"}}
	if !b.vectorColumn {
		build.Settings["table"] = "a copy with a vector column (the table vecside follows has real[])"
		if err := exec(fmt.Sprintf("DROP TABLE IF EXISTS %[1]s; CREATE TABLE %[1]s (id bigint PRIMARY KEY, v vector(%[2]d))", pgvectorTable, len(b.data[0]))); err != nil {
			return nil, err
		}
		b.say("pgvector: COPY %d rows into %s", b.rows, pgvectorTable)
		if err := b.copyVectorText(ctx, pgvectorTable, "v", 0, b.rows); err != nil {
			return nil, fmt.Errorf("pgvector: COPY: %w", err)
		}
	}
	if err := exec("VACUUM ANALYZE " + table); err != nil {
		return nil, err
	}
	if err := exec("SET maintenance_work_mem = " + quoteLiteral(b.p.pgvMaintenanceWorkMem)); err != nil {
		return nil, err
	}
	build.Settings["loaded"] = "COPY, then VACUUM ANALYZE"
	for _, name := range []string{"maintenance_work_mem", "max_parallel_maintenance_workers", "max_worker_processes"} {
		var v string
		if err := b.db.QueryRow(ctx, "SELECT current_setting($1)", name).Scan(&v); err != nil {
			return nil, err
		}
		build.Settings[name] = v
	}
	create := fmt.Sprintf("CREATE INDEX %s ON %s USING hnsw (%s %s) WITH (m = %d, ef_construction = %d)",
		pgvectorIndex, table, column, op, b.p.pgvM, b.p.pgvEfConstruction)
	if b.p.pgvBuildTimeout > 0 {
		if err := exec(fmt.Sprintf("SET statement_timeout = %d", b.p.pgvBuildTimeout.Milliseconds())); err != nil {
			return nil, err
		}
	}
	t0 := time.Now()
	stop := b.every(15*time.Second, func() { b.say("pgvector: building HNSW, %.0fs so far", time.Since(t0).Seconds()) })
	err = exec(create)
	stop()
	build.Seconds = time.Since(t0).Seconds()
	if err != nil {
		if build.Outcome, err = b.pgvectorBuildFailed(ctx, err); err != nil {
			return nil, err
		}
		b.report.Header.Builds = append(b.report.Header.Builds, build)
		b.say("pgvector: %s after %.0fs; not compared", build.Outcome, build.Seconds)
		return nil, nil
	}
	if err := exec("RESET statement_timeout"); err != nil {
		return nil, err
	}
	if err := b.db.QueryRow(ctx, "SELECT pg_relation_size($1), pg_total_relation_size($2)", pgvectorIndex, table).Scan(&build.IndexBytes, &build.TableBytes); err != nil {
		return nil, err
	}
	build.TableBytes -= build.IndexBytes // the heap, its TOAST and the primary key
	build.BytesPerRow = perRow(build.IndexBytes, b.rows)
	build.Settings["prewarmed"] = "no (pg_prewarm is not available)"
	if err := exec("CREATE EXTENSION IF NOT EXISTS pg_prewarm"); err == nil {
		var pages int64
		if err := b.db.QueryRow(ctx, "SELECT pg_prewarm($1) + pg_prewarm($2)", table, pgvectorIndex).Scan(&pages); err != nil {
			return nil, err
		}
		build.Settings["prewarmed"] = fmt.Sprintf("%d pages (pg_prewarm)", pages)
	}
	b.report.Header.Builds = append(b.report.Header.Builds, build)
	b.say("pgvector: built in %.1fs; index %d MiB, table %d MiB", build.Seconds, build.IndexBytes>>20, build.TableBytes>>20)

	build.Settings["session"] = "enable_seqscan=off, hnsw.ef_search per point"
	for range b.p.clients {
		c, err := pgx.Connect(ctx, b.dsn)
		if err == nil {
			// The planner may judge a scan cheaper than the index at a
			// high ef_search on a small table; it is the index that is
			// measured.
			_, err = c.Exec(ctx, "SET enable_seqscan = off")
		}
		if err != nil {
			t.close()
			return nil, err
		}
		t.conns = append(t.conns, c)
	}
	if err := b.warmPGVector(ctx, t); err != nil {
		t.close()
		return nil, err
	}
	return t, nil
}

// warmPGVector runs every query once on every client's connection at
// the sweep's largest hnsw.ef_search, the connections concurrently. A
// new backend maps each page of shared memory the first time it reads
// it, a minor page fault: over a graph of hundreds of megabytes a
// connection's first thousand queries take thousands of them (about
// 100 µs each on our virtual machine) and run up to twice as slow as its
// later ones. An application's pooled connections are past that, and so
// is a connection that has walked the graph at the largest setting.
func (b *bench) warmPGVector(ctx context.Context, t *pgvectorTarget) error {
	ef := slices.Max(b.p.pgvEfSearch)
	b.say("pgvector: warming %d connection(s): every query once at hnsw.ef_search=%d", len(t.conns), ef)
	for _, c := range t.conns {
		if _, err := c.Exec(ctx, fmt.Sprintf("SET hnsw.ef_search = %d", ef)); err != nil {
			return fmt.Errorf("pgvector: %w", err)
		}
	}
	err := b.everyQuery(len(t.conns), func(c, qi int) error {
		rows, err := t.conns[c].Query(ctx, t.query, b.queries[qi])
		if err == nil {
			_, err = pgx.CollectRows(rows, pgx.RowTo[int64])
		}
		return err
	})
	if err != nil {
		return fmt.Errorf("pgvector: warming up: %w", err)
	}
	return nil
}

// everyQuery runs fn for every query on each of n connections, the
// connections concurrently, and returns the first error of each.
func (b *bench) everyQuery(n int, fn func(c, qi int) error) error {
	errs := make([]error, n)
	var wg sync.WaitGroup
	for c := range n {
		wg.Go(func() {
			for qi := range b.queries {
				if errs[c] = fn(c, qi); errs[c] != nil {
					return
				}
			}
		})
	}
	wg.Wait()
	return errors.Join(errs...)
}

// copyVectorText copies rows [lo, hi) of the data into column of table
// (and its id) in text, vectors as [1,2,3], which pgvector reads.
func (b *bench) copyVectorText(ctx context.Context, table, column string, lo, hi int) error {
	r, w := io.Pipe()
	go func() {
		var line []byte
		for id := lo; id < hi; id++ {
			line = strconv.AppendInt(line[:0], int64(id), 10)
			line = append(line, '\t')
			line = pgvalue.AppendVectorText(line, b.data[id])
			line = append(line, '\n')
			if _, err := w.Write(line); err != nil {
				return
			}
		}
		w.Close()
	}()
	_, err := b.db.PgConn().CopyFrom(ctx, r, fmt.Sprintf("COPY %s (id, %s) FROM STDIN", table, column))
	r.Close()
	return err
}

// measurePGVector measures one hnsw.ef_search: set on every client's
// connection, the statement prepared again under it, recall over every
// query (the timing at concurrency 1), then at --clients. EXPLAIN of the prepared
// statement must show the index before the first execution (a custom
// plan) and after the last (by then perhaps the generic plan).
func (b *bench) measurePGVector(ctx context.Context, t *pgvectorTarget, ef int) error {
	b.say("pgvector %s hnsw.ef_search=%d: recall over %d queries", t.index, ef, len(b.queries))
	for _, c := range t.conns {
		if _, err := c.Exec(ctx, fmt.Sprintf("SET hnsw.ef_search = %d", ef)); err != nil {
			return fmt.Errorf("pgvector: %w", err)
		}
		if err := c.Deallocate(ctx, pgvectorStatement); err != nil {
			var pgErr *pgconn.PgError
			if !errors.As(err, &pgErr) || pgErr.Code != "26000" { // not prepared yet
				return fmt.Errorf("pgvector: %w", err)
			}
		}
		if _, err := c.Prepare(ctx, pgvectorStatement, t.query); err != nil {
			return fmt.Errorf("pgvector: %w", err)
		}
	}
	search := func(c, qi int) ([]int64, error) {
		rows, err := t.conns[c].Query(ctx, pgvectorStatement, b.queries[qi])
		if err != nil {
			return nil, err
		}
		return pgx.CollectRows(rows, pgx.RowTo[int64])
	}
	if err := t.checkPlan(ctx, b.queries[0], ef); err != nil {
		return err
	}
	if err := b.measurePath("pgvector", t.index, benchreport.EndToEnd, map[string]float64{"hnsw.ef_search": float64(ef)}, nil, search); err != nil {
		return err
	}
	return t.checkPlan(ctx, b.queries[0], ef)
}

// checkPlan fails unless EXPLAIN of the prepared statement, as the plan
// cache has it now, shows an index scan of pgvector's index.
func (t *pgvectorTarget) checkPlan(ctx context.Context, q []float32, ef int) error {
	explain := fmt.Sprintf("EXPLAIN (COSTS OFF) EXECUTE %s('%s'::vector::real[])", pgvectorStatement, pgvalue.AppendVectorText(nil, q))
	rows, err := t.conns[0].Query(ctx, explain, pgx.QueryExecModeSimpleProtocol)
	if err != nil {
		return fmt.Errorf("pgvector: EXPLAIN: %w", err)
	}
	plan, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return fmt.Errorf("pgvector: EXPLAIN: %w", err)
	}
	if !strings.Contains(strings.Join(plan, "\n"), "Index Scan using "+pgvectorIndex) {
		return fmt.Errorf("pgvector: at hnsw.ef_search=%d the plan does not use %s:\n%s", ef, pgvectorIndex, strings.Join(plan, "\n"))
	}
	return nil
}

// every calls fn every d until the returned stop is called.
func (b *bench) every(d time.Duration, fn func()) (stop func()) {
	done := make(chan struct{})
	go func() {
		tick := time.NewTicker(d)
		defer tick.Stop()
		for {
			select {
			case <-done:
				return
			case <-tick.C:
				fn()
			}
		}
	}()
	return func() { close(done) }
}

// pgvectorBuildFailed says what became of pgvector's build that ended in
// err: stopped at --pgvector-build-timeout, or failed (out of memory, in
// a server with --pg-memory); the bench goes on without pgvector. If the
// server restarted (the kernel killed a backend at the memory limit),
// the bench's connection is made again once it accepts connections.
func (b *bench) pgvectorBuildFailed(ctx context.Context, err error) (string, error) {
	var pgErr *pgconn.PgError
	outcome := "failed: " + err.Error()
	if errors.As(err, &pgErr) && pgErr.Code == "57014" && b.p.pgvBuildTimeout > 0 {
		outcome = fmt.Sprintf("stopped at the time limit (--pgvector-build-timeout %s)", b.p.pgvBuildTimeout)
	}
	if !b.db.IsClosed() {
		_, err := b.db.Exec(ctx, "RESET statement_timeout")
		return outcome, err
	}
	deadline := time.Now().Add(2 * time.Minute)
	for {
		conn, err := pgx.Connect(ctx, b.dsn)
		if err == nil {
			b.db = conn
			return outcome, nil
		}
		if time.Now().After(deadline) {
			return "", fmt.Errorf("pgvector's build %s, and the server did not come back: %w", outcome, err)
		}
		time.Sleep(time.Second)
	}
}
