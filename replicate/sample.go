package replicate

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/jackc/pgx/v5"
	"github.com/vecside/vecside/indexer"
)

// beginSyncs starts the copy of t for entries (see indexer.Entry.BeginSync):
// the kinds that train (IVF's lists, coded flat's mean) do so on a random
// sample of the table read now, before the snapshot is taken, so that the
// copy encodes each row as it arrives and never holds the table twice. A
// rebuild keeps the entries serving until their copy ends.
func (r *Replicator) beginSyncs(ctx context.Context, t *table, entries []Index, rebuild bool) error {
	samples, rows, err := r.sample(ctx, t, entries)
	if err != nil {
		return fmt.Errorf("sampling %s for training: %w", t.qualified(), err)
	}
	for i, e := range entries {
		begin := e.Copies().BeginSync
		if rebuild {
			begin = e.Copies().BeginRebuild
		}
		if err := begin(samples[i], rows); err != nil {
			return err
		}
	}
	return nil
}

// sample reads about as many random rows of t as the entries' kinds train
// on, of those its row filter lets through, and returns each entry's
// vectors and the estimated number of such rows. The sample is drawn by
// Bernoulli sampling at the rate that yields about that many rows, and
// capped.
func (r *Replicator) sample(ctx context.Context, t *table, entries []Index) ([][][]float32, int, error) {
	samples := make([][][]float32, len(entries))
	trains := false
	for _, e := range entries {
		trains = trains || e.Copies().SampleSize(1<<40, 1) > 0
	}
	if !trains {
		return samples, 0, nil
	}
	ctx, cancel := r.bounded(ctx)
	defer cancel()
	conn, err := pgx.Connect(ctx, r.cfg.Source)
	if err != nil {
		return nil, 0, err
	}
	defer conn.Close(context.Background())
	rows, err := indexedRows(ctx, conn, t)
	if err != nil {
		return nil, 0, err
	}
	cols := make([]string, len(entries))
	for i, e := range entries {
		cols[i] = indexer.QuoteIdent(t.vectors[e.Spec().Column].name)
	}
	want := 0
	for i, e := range entries {
		dims := e.Dims()
		if dims == 0 { // real[] without dims=: ask a row
			var v []float32
			if err := conn.QueryRow(ctx, fmt.Sprintf("SELECT %s::real[] FROM %s%s LIMIT 1", cols[i], t.qualified(), t.filter(" WHERE "+cols[i]+" IS NOT NULL"))).Scan(&v); err != nil && !errors.Is(err, pgx.ErrNoRows) {
				return nil, 0, err
			}
			dims = len(v)
		}
		want = max(want, e.Copies().SampleSize(int(rows), dims))
	}
	if want == 0 || rows == 0 {
		return samples, int(rows), nil
	}
	rate := min(100, 100*1.1*float64(want)/float64(rows))
	sql := fmt.Sprintf("SELECT %s FROM %s TABLESAMPLE BERNOULLI (%g) REPEATABLE (1)%s LIMIT %d", strings.Join(cols, ", "), t.qualified(), rate, t.filter(""), want)
	// Rows are decoded as they come: the sample is held once, not also as
	// the raw result.
	res, err := conn.Query(ctx, sql, pgx.QueryResultFormats{pgx.BinaryFormatCode})
	if err != nil {
		return nil, 0, err
	}
	read := 0
	for res.Next() {
		raw := res.RawValues()
		for i, e := range entries {
			if v := decodeVector(e, raw[i], true); v != nil {
				samples[i] = append(samples[i], v)
			}
		}
		read++
	}
	if err := res.Err(); err != nil {
		return nil, 0, err
	}
	r.log.Info("sampled a table to train its indexes", "table", t.qualified(), "rows", read, "of about", rows)
	return samples, int(rows), nil
}

// sizeNow reads a table's pages now and its rows as the planner
// estimates them, the rows per page of its last ANALYZE times those pages
// (0 if it was never analyzed); $1 is its oid.
const sizeNow = `SELECT size.pages, (CASE WHEN relpages > 0 THEN reltuples / relpages * size.pages ELSE greatest(reltuples, 0) END)::bigint
	FROM pg_class, LATERAL (SELECT pg_relation_size(oid) / current_setting('block_size')::int8 AS pages) size WHERE oid = $1`

// indexedRows estimates how many rows of t its indexes hold: the
// planner's estimate of the table's size, or, for a table never analyzed,
// its count. Like the planner, it scales the rows per page of the last
// ANALYZE by the pages the table has now: reltuples alone is the size at
// that ANALYZE, and a table that has grown since (autovacuum analyzes it
// only after a tenth of it has changed) would have its index trained for
// too few rows, and rebuilt again as soon as its copy ended. Under a row
// filter, it is the count of the rows the filter lets through, since the
// planner knows nothing of how many rows a shard's condition (id % 2 = 0)
// keeps, and the copy reads the whole table anyway.
func indexedRows(ctx context.Context, conn *pgx.Conn, t *table) (int64, error) {
	var rows int64
	if t.where == "" {
		var pages int64
		if err := conn.QueryRow(ctx, sizeNow, t.oid).Scan(&pages, &rows); err != nil || rows >= 1 {
			return rows, err
		}
	}
	err := conn.QueryRow(ctx, "SELECT count(*) FROM "+t.qualified()+t.filter("")).Scan(&rows)
	return rows, err
}
