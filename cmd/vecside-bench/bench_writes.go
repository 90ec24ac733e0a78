package main

import (
	"context"
	"time"

	"github.com/vecside/vecside/cmd/vecside-bench/internal/benchreport"
	"github.com/vecside/vecside/indexer"
	"github.com/vecside/vecside/internal/loadgen"
	"github.com/vecside/vecside/internal/writeload"
)

// writeLoad inserts --write-rate rows per second into the table for
// --write-duration while --clients search the index at its default
// setting, and reports the lag, the rate the index applied rows at and
// the searches. The rows are copies of the data set's, under new ids.
func (b *bench) writeLoad(ctx context.Context, t *vecsideTarget) error {
	n := int(float64(b.p.writeRate) * b.p.writeDuration.Seconds())
	first := int64(b.rows)
	for _, w := range b.report.Writes { // earlier indexes' loads wrote these ids
		first += int64(float64(w.Rate) * w.Seconds)
	}
	vecs := make([][]float32, n)
	for i := range vecs {
		vecs[i] = b.data[i%b.rows]
	}
	b.say("vecside %s: %d rows/s for %s while %d clients search", t.def, b.p.writeRate, b.p.writeDuration, b.p.clients)
	search := func(c, i int) error {
		rows, err := t.conns[c].Query(ctx, "SELECT id FROM knn($1, $2, $3)", t.name, b.queries[(c*len(b.queries)/b.p.clients+i)%len(b.queries)], b.p.k)
		if err != nil {
			return err
		}
		rows.Close()
		return rows.Err()
	}
	before := t.entry.Status().Rows
	began := time.Now()
	searches := loadgen.Start(b.p.clients, search)
	w, err := writeload.Run(ctx, writeload.Config{DSN: b.dsn, Conn: b.db, Table: benchTable, Key: "id", Vector: "embedding",
		Vectors: vecs, FirstID: first, Rate: b.p.writeRate, Duration: b.p.writeDuration, WaitApplied: t.entry.WaitApplied})
	searched := searches.Stop()
	if err != nil {
		return err
	}
	if searched.Err != nil {
		return searched.Err
	}
	var lsn indexer.LSN
	if err := b.db.QueryRow(ctx, "SELECT pg_current_wal_lsn()").Scan(&lsn); err != nil {
		return err
	}
	if err := t.entry.WaitApplied(ctx, lsn); err != nil {
		return err
	}
	applied := float64(t.entry.Status().Rows-before) / time.Since(began).Seconds()
	r := benchreport.WriteLoad{Index: t.def, Rate: b.p.writeRate, Seconds: b.p.writeDuration.Seconds(), Written: w.PerSecond, ApplyRate: applied,
		LagP50: w.Lag.Ms(0.5), LagP99: w.Lag.Ms(0.99), Concurrency: b.p.clients, SearchQPS: searched.PerSecond, SearchP99: searched.Latencies.Ms(0.99)}
	b.report.Writes = append(b.report.Writes, r)
	b.say("  lag p50 %.2f ms, p99 %.2f ms; %.0f rows/s written, %.0f applied; %.0f searches/s", r.LagP50, r.LagP99, r.Written, r.ApplyRate, r.SearchQPS)
	return nil
}
