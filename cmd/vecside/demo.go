package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"slices"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/urfave/cli/v2"
	"github.com/vecside/vecside/cmd/vecside/sidecar"
	"github.com/vecside/vecside/deploy"
	"github.com/vecside/vecside/heapfetch"
	"github.com/vecside/vecside/indexer"
	"github.com/vecside/vecside/indexer/dataset"
	"github.com/vecside/vecside/internal/pgcluster"
)

var demoCommand = &cli.Command{
	Name:  "demo",
	Usage: "run vecside against a throwaway local Postgres and show recall, latency and live updates",
	Description: `Starts a PostgreSQL from the local server binaries (PG_BINDIR, default
/usr/lib/postgresql/15/bin) in a temporary directory, loads a seeded
clustered data set, starts a sidecar in-process, searches with held-out
queries through heapfetch and compares with exact SQL, sends pgvector's
own statement through the proxy as vecside serve --proxy runs it (a cgo
build), then writes to the table and shows each change in the next
answer. Everything is removed at the end.`,
	Flags: []cli.Flag{
		&cli.IntFlag{Name: "rows", Value: 20000, Usage: "rows in the data set"},
		&cli.IntFlag{Name: "dims", Value: 128, Usage: "dimensions"},
		&cli.IntFlag{Name: "queries", Value: 50, Usage: "held-out queries (each also answered by exact SQL)"},
		&cli.Uint64Flag{Name: "seed", Value: 1, Usage: "data set seed"},
	},
	Action: func(c *cli.Context) error {
		return runDemo(c.Context, c.App.Writer, demoParams{
			rows: c.Int("rows"), dims: c.Int("dims"), queries: c.Int("queries"), seed: c.Uint64("seed"),
		})
	},
}

type demoParams struct {
	rows, dims, queries int
	seed                uint64
}

const demoK = 10

func runDemo(ctx context.Context, out io.Writer, p demoParams) error {
	began := time.Now()
	say := func(format string, args ...any) {
		fmt.Fprintf(out, "[%5.1fs] "+format+"\n", append([]any{time.Since(began).Seconds()}, args...)...)
	}
	say("starting a throwaway PostgreSQL 15 (wal_level=logical)")
	cluster, err := pgcluster.Start()
	if err != nil {
		return err
	}
	defer cluster.Stop()
	dsn := cluster.DSN("postgres")
	db, err := pgx.Connect(ctx, dsn)
	if err != nil {
		return err
	}
	defer db.Close(context.Background())

	data, queries := dataset.Clustered{Seed: p.seed, Rows: p.rows, Queries: p.queries, Dims: p.dims}.Generate()
	say("loading %d × %d clustered vectors (seed %d) into items(id bigint primary key, embedding real[])", p.rows, p.dims, p.seed)
	if _, err := db.Exec(ctx, `CREATE TABLE items (id bigint PRIMARY KEY, embedding real[])`); err != nil {
		return err
	}
	if _, err := db.Exec(ctx, deploy.DistanceSQL); err != nil {
		return err
	}
	if _, err := db.CopyFrom(ctx, pgx.Identifier{"items"}, []string{"id", "embedding"}, pgx.CopyFromSlice(len(data), func(i int) ([]any, error) {
		return []any{int64(i + 1), data[i]}, nil
	})); err != nil {
		return err
	}

	const index = "items_embedding"
	sc, err := sidecar.Start(ctx, sidecar.Config{
		Source:  dsn,
		Name:    "vecside",
		Listen:  "127.0.0.1:0",
		Auth:    "trust",
		Indexes: []string{index + "=public.items(embedding) key=id metric=l2 kind=flat"},
		Logger:  slog.New(slog.NewTextHandler(io.Discard, nil)),
	})
	if err != nil {
		return err
	}
	defer sc.Stop()
	entry, err := sc.Indexer.Get(index)
	if err != nil {
		return err
	}
	say("sidecar listening on %s; copying the table through a replication slot's snapshot", sc.Addr)
	if err := sidecar.WaitReady(ctx, entry, 2*time.Minute); err != nil {
		return err
	}
	st := entry.Status()
	say("index %s ready: %d rows, kind=%s, metric=%s", index, st.Rows, st.Kind, st.Metric)

	side, err := dialSidecar(ctx, sc.Addr.String(), defaultUser)
	if err != nil {
		return err
	}
	defer side.Close(context.Background())
	client := heapfetch.New(side, db)

	say("%d held-out queries, k=%d: heapfetch (sidecar candidates + heap re-rank) vs exact SQL over the table", len(queries), demoK)
	say("  exact SQL scans every row for each query: the slow part (about a second a query at 20,000 rows)")
	// A line every fifth of the way: the exact answers take most of a
	// minute at the defaults.
	every := max(1, len(queries)/5)
	var latencies []time.Duration
	var recall float64
	exact := make([][]float64, len(queries))
	for i, q := range queries {
		t0 := time.Now()
		got, err := client.Search(ctx, heapfetch.Request{Index: index, Vector: q, K: demoK})
		if err != nil {
			return err
		}
		latencies = append(latencies, time.Since(t0))
		want, err := exactSQL(ctx, db, q)
		if err != nil {
			return err
		}
		exact[i] = want
		recall += recallAt(got, want)
		if n := i + 1; n%every == 0 || n == len(queries) {
			say("  %d of %d queries answered both ways", n, len(queries))
		}
	}
	slices.Sort(latencies)
	say("recall@%d = %.2f   latency p50 = %s, p95 = %s (heapfetch end to end)", demoK, recall/float64(len(queries)),
		latencies[len(latencies)/2].Round(time.Microsecond), latencies[len(latencies)*95/100].Round(time.Microsecond))

	if err := demoProxy(ctx, say, db, dsn, sc, queries, exact); err != nil {
		return err
	}
	return demoLiveUpdates(ctx, say, db, client, entry, queries[0])
}

// demoLiveUpdates writes to the table and shows each change in the next
// answer, timing how soon after COMMIT the sidecar has applied it.
func demoLiveUpdates(ctx context.Context, say func(string, ...any), db *pgx.Conn, client *heapfetch.Client, entry *indexer.Entry, q []float32) error {
	search := func() ([]heapfetch.Row, error) {
		return client.Search(ctx, heapfetch.Request{Index: entry.Spec().Name, Vector: q, K: demoK})
	}
	write := func(what, sql string, args ...any) ([]heapfetch.Row, error) {
		if _, err := db.Exec(ctx, sql, args...); err != nil {
			return nil, err
		}
		committed := time.Now()
		var lsn string
		if err := db.QueryRow(ctx, "SELECT pg_current_wal_lsn()::text").Scan(&lsn); err != nil {
			return nil, err
		}
		target, err := indexer.ParseLSN(lsn)
		if err != nil {
			return nil, err
		}
		wctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		defer cancel()
		if err := entry.WaitApplied(wctx, target); err != nil {
			return nil, err
		}
		say("%s — applied by the sidecar within %s of COMMIT", what, time.Since(committed).Round(time.Microsecond))
		return search()
	}
	before, err := search()
	if err != nil {
		return err
	}
	say("live updates, on query 0 (nearest now: id %v at %.4f)", before[0].Key, before[0].Distance)

	const newID = 1_000_001
	rows, err := write(fmt.Sprintf("INSERT id %d with the query's own vector", newID), `INSERT INTO items VALUES ($1, $2)`, newID, q)
	if err != nil {
		return err
	}
	say("  nearest: id %v at %.4f (want %d at 0)", rows[0].Key, rows[0].Distance, newID)

	far := make([]float32, len(q))
	for i := range far {
		far[i] = 100
	}
	rows, err = write(fmt.Sprintf("UPDATE id %d to a far-away vector", newID), `UPDATE items SET embedding = $1 WHERE id = $2`, far, newID)
	if err != nil {
		return err
	}
	say("  nearest: id %v at %.4f; id %d in top %d: %v", rows[0].Key, rows[0].Distance, newID, demoK, containsKey(rows, newID))

	top := rows[0].Key
	rows, err = write(fmt.Sprintf("DELETE id %v, the nearest row", top), `DELETE FROM items WHERE id = $1`, top)
	if err != nil {
		return err
	}
	say("  nearest: id %v at %.4f; id %v in top %d: %v", rows[0].Key, rows[0].Distance, top, demoK, containsKey(rows, top))
	say("done; removing the throwaway database")
	return nil
}

func containsKey(rows []heapfetch.Row, key any) bool {
	for _, r := range rows {
		if fmt.Sprint(r.Key) == fmt.Sprint(key) {
			return true
		}
	}
	return false
}

// exactSQL answers a query by scanning the table in SQL: the ground truth.
func exactSQL(ctx context.Context, db *pgx.Conn, q []float32) ([]float64, error) {
	rows, err := db.Query(ctx, `SELECT vecside.l2_distance(embedding, $1) d FROM items ORDER BY d LIMIT $2`, q, demoK)
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, pgx.RowTo[float64])
}

// recallAt counts a returned row as a hit when its distance is within the
// true k-th distance (so ties at rank k count).
func recallAt(got []heapfetch.Row, want []float64) float64 {
	if len(want) == 0 {
		return 1
	}
	kth := want[len(want)-1]
	hits := 0
	for _, r := range got {
		if r.Distance <= kth*(1+1e-9)+1e-12 {
			hits++
		}
	}
	return float64(min(hits, len(want))) / float64(len(want))
}
