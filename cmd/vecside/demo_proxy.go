//go:build cgo

package main

import (
	"context"
	"io"
	"log/slog"
	"net"
	"slices"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/vecside/vecside/cmd/vecside/sidecar"
	"github.com/vecside/vecside/deploy"
	"github.com/vecside/vecside/heapfetch"
	"github.com/vecside/vecside/rpc/proxy"
)

// demoHasProxy: this build's demo goes through the proxy.
const demoHasProxy = true

// demoProxy sends pgvector's own statement, unchanged, through the proxy
// run in the sidecar's process as vecside serve --proxy runs it, and
// compares its rows with the exact answers.
func demoProxy(ctx context.Context, say func(string, ...any), db *pgx.Conn, dsn string, sc *sidecar.Sidecar, queries [][]float32, exact [][]float64) error {
	// pgvector's <-> over real[], as the tests have it without pgvector.
	if _, err := db.Exec(ctx, deploy.RealOperatorsSQL, pgx.QueryExecModeSimpleProtocol); err != nil {
		return err
	}
	p, err := proxy.New(proxy.Config{Upstream: dsn, Sidecar: proxy.InProcess(sc.Indexer, sc.Server.ObserveSearch), StatusInterval: 100 * time.Millisecond,
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		return err
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return err
	}
	pctx, cancel := context.WithCancel(ctx)
	served := make(chan error, 1)
	go func() { served <- p.Serve(pctx, ln) }()
	defer func() {
		cancel()
		<-served
	}()
	cfg, err := proxy.ClientConfig(dsn, ln.Addr().String())
	if err != nil {
		return err
	}
	conn, err := pgx.ConnectConfig(ctx, cfg)
	if err != nil {
		return err
	}
	defer conn.Close(context.Background())

	const stmt = "SELECT id, embedding <-> $1 AS distance FROM items ORDER BY embedding <-> $1 LIMIT 10"
	search := func(q []float32) ([]heapfetch.Row, error) {
		rows, err := conn.Query(ctx, stmt, q)
		if err != nil {
			return nil, err
		}
		var out []heapfetch.Row
		var r heapfetch.Row
		var id int64
		_, err = pgx.ForEachRow(rows, []any{&id, &r.Distance}, func() error {
			r.Key = id
			out = append(out, r)
			return nil
		})
		return out, err
	}
	// The proxy learns the index from the sidecar a moment after it
	// starts; until then the statement passes through.
	for deadline := time.Now().Add(10 * time.Second); p.Stats().Accelerated == 0 && time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
		if _, err := search(queries[0]); err != nil {
			return err
		}
	}
	say("the same queries as an application using pgvector sends them, unchanged, through the proxy (vecside serve --proxy):")
	say("  %s", stmt)
	var latencies []time.Duration
	var recall float64
	before := p.Stats().Accelerated
	for i, q := range queries {
		t0 := time.Now()
		got, err := search(q)
		if err != nil {
			return err
		}
		latencies = append(latencies, time.Since(t0))
		recall += recallAt(got, exact[i])
	}
	slices.Sort(latencies)
	say("recall@%d = %.2f   latency p50 = %s, p95 = %s (through the proxy; %d of %d answered through the sidecar)", demoK,
		recall/float64(len(queries)), latencies[len(latencies)/2].Round(time.Microsecond),
		latencies[len(latencies)*95/100].Round(time.Microsecond), p.Stats().Accelerated-before, len(queries))
	var plan string
	if err := conn.QueryRow(ctx, "SHOW vecside.last_plan").Scan(&plan); err != nil {
		return err
	}
	say("  SHOW vecside.last_plan: %s", plan)
	return nil
}
