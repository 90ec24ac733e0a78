package main

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/vecside/vecside/kernels"
)

// pgvector measures pgvector's HNSW and IVFFlat indexes on a vector copy
// of the column, when the database offers the extension; it never
// requires it.
func (b *bench) pgvector(ctx context.Context) error {
	var one int
	err := b.db.QueryRow(ctx, "SELECT 1 FROM pg_available_extensions WHERE name = 'vector'").Scan(&one)
	if err == pgx.ErrNoRows {
		fmt.Fprintln(b.out, "pgvector: the vector extension is not available in this database; not compared")
		return nil
	}
	if err != nil {
		return err
	}
	op := map[kernels.Metric]string{kernels.L2: "vector_l2_ops", kernels.Cosine: "vector_cosine_ops", kernels.IP: "vector_ip_ops"}[b.p.metric]
	setup := []string{
		"CREATE EXTENSION IF NOT EXISTS vector",
		fmt.Sprintf("ALTER TABLE vecside_bench ADD COLUMN IF NOT EXISTS v vector(%d)", len(b.data[0])),
		"UPDATE vecside_bench SET v = embedding::vector",
		"SET maintenance_work_mem = '2GB'",
	}
	for _, sql := range setup {
		b.say("pgvector: %s", sql)
		if _, err := b.db.Exec(ctx, sql); err != nil {
			return fmt.Errorf("pgvector: %s: %w", sql, err)
		}
	}
	lists := max(1, len(b.data)/1000)
	for _, ix := range []struct {
		name, create, knob string
		values             []int
	}{
		{"hnsw", fmt.Sprintf("CREATE INDEX vecside_bench_hnsw ON vecside_bench USING hnsw (v %s) WITH (m = 16, ef_construction = 64)", op), "hnsw.ef_search", []int{40, 100, 200, 400}},
		{"ivfflat", fmt.Sprintf("CREATE INDEX vecside_bench_ivf ON vecside_bench USING ivfflat (v %s) WITH (lists = %d)", op, lists), "ivfflat.probes", []int{1, 5, 10, 20, 50}},
	} {
		b.say("pgvector: %s", ix.create)
		t0 := time.Now()
		if _, err := b.db.Exec(ctx, ix.create); err != nil {
			return fmt.Errorf("pgvector: %w", err)
		}
		fmt.Fprintf(b.out, "pgvector %-17s built in %.1fs\n", ix.name, time.Since(t0).Seconds())
		for _, v := range ix.values {
			if _, err := b.db.Exec(ctx, fmt.Sprintf("SET %s = %d", ix.knob, v)); err != nil {
				return err
			}
			if err := b.pgvectorSetting(ctx, ix.name, fmt.Sprintf("%s=%d", ix.knob, v)); err != nil {
				return err
			}
		}
		if _, err := b.db.Exec(ctx, "DROP INDEX vecside_bench_"+map[string]string{"hnsw": "hnsw", "ivfflat": "ivf"}[ix.name]); err != nil {
			return err
		}
	}
	return nil
}

// pgvectorSetting times one setting on one connection with literal
// vectors in simple protocol, so that no generic plan can trade the index
// for a sequential scan.
func (b *bench) pgvectorSetting(ctx context.Context, name, setting string) error {
	opr := b.p.metric.Operator()
	query := func(qi int) ([]int64, error) {
		var lit strings.Builder
		lit.WriteByte('[')
		for i, f := range b.queries[qi] {
			if i > 0 {
				lit.WriteByte(',')
			}
			lit.WriteString(strconv.FormatFloat(float64(f), 'g', -1, 32))
		}
		lit.WriteByte(']')
		rows, err := b.db.Query(ctx, fmt.Sprintf("SELECT id FROM vecside_bench ORDER BY v %s '%s' LIMIT %d", opr, lit.String(), b.p.k), pgx.QueryExecModeSimpleProtocol)
		if err != nil {
			return nil, err
		}
		return pgx.CollectRows(rows, pgx.RowTo[int64])
	}
	var hits int
	for qi := range b.queries {
		ids, err := query(qi)
		if err != nil {
			return err
		}
		hits += b.hits(qi, ids)
	}
	t := b.timeRun(1, func(_, qi int) error { _, err := query(qi); return err })
	if t.err != nil {
		return t.err
	}
	fmt.Fprintf(b.out, "pgvector %-17s %-18s %7.4f %6d | %9s | %8.0f %7.2f %7.2f %7.2f |\n",
		name, setting, float64(hits)/float64(b.p.k*len(b.queries)), b.p.k, "-", t.qps, ms(t.p50), ms(t.p95), ms(t.p99))
	return nil
}
