package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/urfave/cli/v2"
	"github.com/vecside/vecside/heapfetch"
	"github.com/vecside/vecside/indexer"
	"github.com/vecside/vecside/internal/dataset"
	"github.com/vecside/vecside/internal/pgtest"
	"github.com/vecside/vecside/internal/sidecar"
	"github.com/vecside/vecside/kernels"
)

var benchCommand = &cli.Command{
	Name:  "bench",
	Usage: "measure recall, candidates, build time, memory and latency of index kinds end to end",
	Description: `Loads a data set into a table (a throwaway PostgreSQL 15, or --source),
starts one sidecar per --index, waits until it is ready, and for each
setting of the sweep measures recall@k after exact re-rank (a row is a hit
when its exact distance is at most the true k-th), the mean number of
candidates the sidecar returned, and QPS and p50/p95/p99 latency: in
process, over pgwire (sidecar only) with 1 and --clients clients, and end
to end through heapfetch (candidates, heap fetch, exact re-rank). Ground
truth is computed by brute force. When the database offers the vector
extension, pgvector HNSW and IVFFlat on a vector copy of the column are
measured too.`,
	Flags: []cli.Flag{
		&cli.StringFlag{Name: "source", Usage: "Postgres to use (libpq connection string or URL); default: start a throwaway one", EnvVars: []string{"VECSIDE_SOURCE"}},
		&cli.StringFlag{Name: "dataset", Value: "clustered", Usage: "clustered (seeded generator), textlike (seeded, like text embeddings: anisotropic, low contrast) or fashion-mnist (Debian's dataset-fashion-mnist)"},
		&cli.BoolFlag{Name: "process", Usage: "run each sidecar as a child vecside serve process, and report its memory (RSS after the build, peak during it) apart from the bench's own"},
		&cli.StringFlag{Name: "fashion-dir", Value: dataset.FashionMNISTDir, Usage: "where the Fashion-MNIST IDX files are"},
		&cli.IntFlag{Name: "rows", Value: 100000, Usage: "clustered: rows"},
		&cli.IntFlag{Name: "dims", Value: 128, Usage: "clustered: dimensions"},
		&cli.IntFlag{Name: "queries", Value: 1000, Usage: "held-out queries (fashion-mnist: the first N test images)"},
		&cli.Uint64Flag{Name: "seed", Value: 1, Usage: "clustered: seed"},
		&cli.StringFlag{Name: "metric", Value: "cosine", Usage: "clustered: l2, cosine or ip (fashion-mnist is l2)"},
		&cli.StringSliceFlag{Name: "index", Value: cli.NewStringSlice("kind=flat", "kind=flat store=ext8", "kind=ivf"), Usage: "index kind and options to measure, e.g. 'kind=ivf store=ext8' (repeat)"},
		&cli.IntFlag{Name: "k", Value: 10, Usage: "neighbours per query"},
		&cli.StringFlag{Name: "probes", Value: "0,1,2,4,8,16,32", Usage: "ivf: probes to sweep (0 = the index's default)"},
		&cli.StringFlag{Name: "ef-search", Value: "0,16,32,64,128,256", Usage: "hnsw: ef_search values to sweep (0 = the index's default)"},
		&cli.StringFlag{Name: "oversample", Value: "0,1,2", Usage: "oversample values to sweep (0 = the index's default)"},
		&cli.IntFlag{Name: "clients", Value: 8, Usage: "concurrent clients for the throughput runs"},
		&cli.IntFlag{Name: "measure", Value: 1000, Usage: "queries timed per run (cycling through the held-out ones)"},
		&cli.BoolFlag{Name: "e2e", Value: true, Usage: "also measure end to end through heapfetch"},
		&cli.StringFlag{Name: "churn", Usage: "clustered: INSERTS,DELETES streamed through replication into the first --index under query load, then recall against a fresh build, e.g. 100000,50000"},
	},
	Action: func(c *cli.Context) error {
		metric, err := kernels.ParseMetric(c.String("metric"))
		if err != nil {
			return fmt.Errorf("--metric: %w", err)
		}
		probes, err := intList(c.String("probes"))
		if err != nil {
			return fmt.Errorf("--probes: %w", err)
		}
		efs, err := intList(c.String("ef-search"))
		if err != nil {
			return fmt.Errorf("--ef-search: %w", err)
		}
		over, err := floatList(c.String("oversample"))
		if err != nil {
			return fmt.Errorf("--oversample: %w", err)
		}
		churn := []int{0, 0}
		if v := c.String("churn"); v != "" {
			if churn, err = intList(v); err != nil || len(churn) != 2 {
				return fmt.Errorf("--churn %q: want INSERTS,DELETES", v)
			}
		}
		return runBench(c.Context, c.App.Writer, benchParams{
			inserts: churn[0], deletes: churn[1],
			source: c.String("source"), dataset: c.String("dataset"), fashionDir: c.String("fashion-dir"),
			rows: c.Int("rows"), dims: c.Int("dims"), queries: c.Int("queries"), seed: c.Uint64("seed"), metric: metric,
			indexes: c.StringSlice("index"), k: c.Int("k"), probes: probes, efSearch: efs, oversample: over,
			clients: c.Int("clients"), measure: c.Int("measure"), e2e: c.Bool("e2e"), process: c.Bool("process"),
		})
	},
}

type benchParams struct {
	source, dataset, fashionDir string
	rows, dims, queries         int
	seed                        uint64
	metric                      kernels.Metric
	indexes                     []string
	k                           int
	probes, efSearch            []int
	oversample                  []float64
	clients, measure            int
	e2e, process                bool
	inserts, deletes            int // --churn
}

func intList(s string) ([]int, error) {
	var out []int
	for _, f := range strings.Split(s, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil {
			return nil, err
		}
		out = append(out, n)
	}
	return out, nil
}

func floatList(s string) ([]float64, error) {
	var out []float64
	for _, f := range strings.Split(s, ",") {
		n, err := strconv.ParseFloat(strings.TrimSpace(f), 64)
		if err != nil {
			return nil, err
		}
		out = append(out, n)
	}
	return out, nil
}

// bench is one run: the data, its ground truth, the database.
type bench struct {
	p       benchParams
	data    [][]float32 // row i has id i
	rows    int         // rows loaded at first; --churn inserts the rest
	queries [][]float32
	truth   []dataset.Truth
	dsn     string
	db      *pgx.Conn
	say     func(format string, args ...any)
	out     io.Writer
}

func runBench(ctx context.Context, out io.Writer, p benchParams) error {
	began := time.Now()
	b := &bench{p: p, out: out}
	b.say = func(format string, args ...any) {
		fmt.Fprintf(os.Stderr, "[%6.1fs] "+format+"\n", append([]any{time.Since(began).Seconds()}, args...)...)
	}
	var err error
	switch p.dataset {
	case "clustered":
		b.say("generating %d × %d clustered vectors (seed %d, %s) and %d held-out queries", p.rows, p.dims, p.seed, p.metric, p.queries)
		// Rows to insert later come from the same generator, after the
		// loaded ones.
		b.data, b.queries = dataset.Clustered{Seed: p.seed, Rows: p.rows + p.inserts, Queries: p.queries, Dims: p.dims, Normalize: p.metric == kernels.Cosine}.Generate()
		b.rows = p.rows
	case "textlike":
		b.p.metric = kernels.Cosine
		b.say("generating %d × %d text-like vectors (seed %d) and %d held-out queries", p.rows, p.dims, p.seed, p.queries)
		b.data, b.queries = dataset.TextLike{Seed: p.seed, Rows: p.rows + p.inserts, Queries: p.queries, Dims: p.dims}.Generate()
		b.rows = p.rows
	case "fashion-mnist":
		b.p.metric = kernels.L2
		b.say("loading Fashion-MNIST from %s", p.fashionDir)
		if b.data, b.queries, err = dataset.FashionMNIST(p.fashionDir); err != nil {
			return err
		}
		b.queries = b.queries[:min(p.queries, len(b.queries))]
		b.rows = len(b.data)
	default:
		return fmt.Errorf("--dataset %q: want clustered, textlike or fashion-mnist", p.dataset)
	}
	b.say("ground truth: brute force top-%d of %d queries over %d rows", p.k, len(b.queries), len(b.data))
	b.truth = dataset.GroundTruth(b.p.metric, b.data[:b.rows], b.queries, p.k)

	b.dsn = p.source
	if b.dsn == "" {
		b.say("starting a throwaway PostgreSQL 15")
		cluster, err := pgtest.Start()
		if err != nil {
			return err
		}
		defer cluster.Stop()
		b.dsn = cluster.DSN("postgres")
	}
	if b.db, err = pgx.Connect(ctx, b.dsn); err != nil {
		return err
	}
	defer b.db.Close(context.Background())
	if err := b.load(ctx); err != nil {
		return err
	}
	fmt.Fprintf(out, "data set %s: %d rows × %d dims, %s, %d held-out queries, k=%d; clients=%d\n",
		p.dataset, len(b.data), len(b.data[0]), b.p.metric, len(b.queries), p.k, p.clients)
	fmt.Fprintf(out, "%-26s %-18s %7s %6s | %9s | %8s %7s %7s %7s | %8s %7s | %8s %7s %8s\n",
		"index", "setting", "recall", "cands", "inproc/s", "pgw1 q/s", "p50ms", "p95ms", "p99ms", "pgwN q/s", "p99ms", "e2e1 q/s", "p50ms", "e2eN q/s")
	for i, def := range p.indexes {
		if err := b.measureIndex(ctx, i, def); err != nil {
			return err
		}
	}
	if p.inserts+p.deletes > 0 {
		return b.churn(ctx, p.indexes[0])
	}
	return b.pgvector(ctx)
}

// load creates items(id bigint primary key, embedding real[]) and copies
// the data in.
func (b *bench) load(ctx context.Context) error {
	if _, err := b.db.Exec(ctx, `DROP TABLE IF EXISTS vecside_bench; CREATE TABLE vecside_bench (id bigint PRIMARY KEY, embedding real[])`); err != nil {
		return err
	}
	const batch = 50000
	for lo := 0; lo < b.rows; lo += batch {
		hi := min(lo+batch, b.rows)
		if err := b.copyRows(ctx, lo, hi); err != nil {
			return err
		}
		b.say("loaded %d/%d rows", hi, b.rows)
	}
	_, err := b.db.Exec(ctx, "VACUUM ANALYZE vecside_bench")
	return err
}

// copyRows copies rows [lo, hi) of the data into the table.
func (b *bench) copyRows(ctx context.Context, lo, hi int) error {
	_, err := b.db.CopyFrom(ctx, pgx.Identifier{"vecside_bench"}, []string{"id", "embedding"}, pgx.CopyFromSlice(hi-lo, func(i int) ([]any, error) {
		return []any{int64(lo + i), b.data[lo+i]}, nil
	}))
	return err
}

func perRow(b int64, rows int) float64 { return float64(b) / float64(max(rows, 1)) }

// measureIndex starts a sidecar with one index (in this process, or as a
// child process with --process) and sweeps its settings.
func (b *bench) measureIndex(ctx context.Context, n int, def string) error {
	name := fmt.Sprintf("bench_%d", n)
	t0 := time.Now()
	var addr string
	var inproc func(qi int, so indexer.SearchOptions) error
	if b.p.process {
		proc, err := b.startProcess(ctx, name, def)
		if err != nil {
			return err
		}
		defer proc.stop()
		addr = proc.addr
		fmt.Fprintf(b.out, "%-26s ready in %.1fs; index %.0f bytes/row (%d MiB); process RSS %d MiB after the build, peak %d MiB during it (%.2f× steady; RSS %.2f× index + %d MiB)\n",
			def, time.Since(t0).Seconds(), perRow(proc.indexBytes, proc.rows), proc.indexBytes>>20, proc.rss>>20, proc.peak>>20,
			float64(proc.peak)/float64(proc.rss), float64(proc.rss-64<<20)/float64(proc.indexBytes), 64)
	} else {
		sc, entry, err := b.startSidecar(ctx, name, def)
		if err != nil {
			return err
		}
		defer sc.Stop()
		addr = sc.Addr.String()
		inproc = func(qi int, so indexer.SearchOptions) error {
			_, err := sc.Indexer.Search(ctx, name, b.queries[qi], b.p.k, so)
			return err
		}
		st := entry.Status().IndexStats
		shape := fmt.Sprintf("lists %d %s", len(st.Lists), st.ListHistogram())
		if st.GraphBytes > 0 {
			shape = fmt.Sprintf("graph %.0f bytes/row, %d rows unreachable", perRow(st.GraphBytes, st.Rows), st.Unreachable)
		}
		fmt.Fprintf(b.out, "%-26s ready in %.1fs; %.0f bytes/row (codes %.0f, floats %.0f, keys %.0f); %s\n",
			def, time.Since(t0).Seconds(), st.BytesPerRow(), perRow(st.CodeBytes, st.Rows), perRow(st.FloatBytes, st.Rows), perRow(st.KeyBytes, st.Rows), shape)
	}
	var err error

	conns := make([]*pgx.Conn, b.p.clients)
	heaps := make([]*pgx.Conn, b.p.clients)
	for i := range conns {
		if conns[i], err = pgx.Connect(ctx, sidecarURL(addr)); err != nil {
			return err
		}
		defer conns[i].Close(context.Background())
		if b.p.e2e {
			if heaps[i], err = pgx.Connect(ctx, b.dsn); err != nil {
				return err
			}
			defer heaps[i].Close(context.Background())
		}
	}
	sweep, values := "", []int{0}
	switch {
	case strings.Contains(def, "kind=ivf"):
		sweep, values = "probes", b.p.probes
	case strings.Contains(def, "kind=hnsw"):
		sweep, values = "ef_search", b.p.efSearch
	}
	for _, v := range values {
		for _, o := range b.p.oversample {
			opts := fmt.Sprintf("oversample=%g %s=%d", o, sweep, v)
			if v == 0 {
				opts = fmt.Sprintf("oversample=%g", o)
			}
			if err := b.measureSetting(ctx, inproc, name, def, opts, conns, heaps); err != nil {
				return err
			}
		}
	}
	return nil
}

// startSidecar starts a sidecar with one index over the table and waits
// until it is ready.
func (b *bench) startSidecar(ctx context.Context, name, def string) (*sidecar.Sidecar, *indexer.Entry, error) {
	spec := fmt.Sprintf("%s=public.vecside_bench(embedding) key=id metric=%s %s", name, b.p.metric, def)
	b.say("%s: starting a sidecar for %s", def, spec)
	sc, err := sidecar.Start(ctx, sidecar.Config{
		Source: b.dsn, Name: "vecside_" + name, Listen: "127.0.0.1:0", Auth: "trust",
		Indexes: []string{spec}, Logger: slog.New(slog.NewTextHandler(io.Discard, nil)),
	})
	if err != nil {
		return nil, nil, err
	}
	entry, err := sc.Indexer.Get(name)
	if err == nil {
		err = waitReady(ctx, entry, time.Hour)
	}
	if err != nil {
		sc.Stop()
		return nil, nil, err
	}
	return sc, entry, nil
}

// measureSetting measures one index at one setting.
func (b *bench) measureSetting(ctx context.Context, inproc func(int, indexer.SearchOptions) error, name, def, opts string, conns, heaps []*pgx.Conn) error {
	so := indexer.DefaultSearchOptions()
	parsed, err := indexer.ParseOptions(opts)
	if err != nil {
		return err
	}
	if err := so.Apply(parsed); err != nil {
		return err
	}
	b.say("%s %s: recall over %d queries", def, opts, len(b.queries))
	recall, cands, err := b.recall(ctx, conns[0], name, opts)
	if err != nil {
		return err
	}

	var in timing
	if inproc != nil {
		in = b.timeRun(1, func(_, qi int) error { return inproc(qi, so) })
	}
	pgw := func(c, qi int) error {
		rows, err := conns[c].Query(ctx, "SELECT id, distance FROM knn($1, $2, $3, $4)", name, b.queries[qi], b.p.k, opts)
		if err != nil {
			return err
		}
		rows.Close()
		return rows.Err()
	}
	b.say("%s %s: pgwire timing", def, opts)
	pg1, pgN := b.timeRun(1, pgw), b.timeRun(b.p.clients, pgw)
	var e1, eN timing
	if b.p.e2e {
		b.say("%s %s: end-to-end timing", def, opts)
		hf := make([]*heapfetch.Client, len(conns))
		for i := range hf {
			hf[i] = heapfetch.New(conns[i], heaps[i])
		}
		o := so.Oversample
		rest := strings.TrimSpace(strings.Replace(opts, fmt.Sprintf("oversample=%g", o), "", 1))
		e2e := func(c, qi int) error {
			_, err := hf[c].Search(ctx, heapfetch.Request{Index: name, Vector: b.queries[qi], K: b.p.k, Oversample: o, Options: rest})
			return err
		}
		e1, eN = b.timeRun(1, e2e), b.timeRun(b.p.clients, e2e)
	}
	for _, t := range []timing{in, pg1, pgN, e1, eN} {
		if t.err != nil {
			return t.err
		}
	}
	fmt.Fprintf(b.out, "%-26s %-18s %7.4f %6.1f | %9.0f | %8.0f %7.2f %7.2f %7.2f | %8.0f %7.2f | %8.0f %7.2f %8.0f\n",
		def, opts, recall, cands, in.qps,
		pg1.qps, ms(pg1.p50), ms(pg1.p95), ms(pg1.p99), pgN.qps, ms(pgN.p99), e1.qps, ms(e1.p50), eN.qps)
	return nil
}

// recall asks the sidecar for every query's candidates and returns
// recall@k after exact re-rank and the mean number of candidates.
func (b *bench) recall(ctx context.Context, conn *pgx.Conn, name, opts string) (recall, cands float64, err error) {
	var hits, n int
	for qi, q := range b.queries {
		rows, err := conn.Query(ctx, "SELECT id FROM knn($1, $2, $3, $4)", name, q, b.p.k, opts)
		if err != nil {
			return 0, 0, err
		}
		ids, err := pgx.CollectRows(rows, pgx.RowTo[int64])
		if err != nil {
			return 0, 0, err
		}
		n += len(ids)
		hits += b.hits(qi, ids)
	}
	return float64(hits) / float64(b.p.k*len(b.queries)), float64(n) / float64(len(b.queries)), nil
}

// hits counts the rows among ids, re-ranked by exact distance, whose
// distance is within the true k-th.
func (b *bench) hits(qi int, ids []int64) int {
	q := b.queries[qi]
	ds := make([]float64, len(ids))
	for i, id := range ids {
		ds[i] = b.p.metric.Distance(q, b.data[id])
	}
	slices.Sort(ds)
	kth := b.truth[qi].KthDistance()
	n := 0
	for _, d := range ds[:min(b.p.k, len(ds))] {
		if d <= kth+1e-9*max(1, kth) {
			n++
		}
	}
	return n
}

type timing struct {
	qps           float64
	p50, p95, p99 time.Duration
	err           error
}

func ms(d time.Duration) float64 { return float64(d) / 1e6 }

// timeRun runs p.measure queries spread over clients goroutines (after a
// short warm-up) and reports throughput and latency percentiles.
func (b *bench) timeRun(clients int, call func(client, qi int) error) timing {
	for i := range min(20, len(b.queries)) {
		if err := call(0, i); err != nil {
			return timing{err: err}
		}
	}
	per := max(1, b.p.measure/clients)
	lat := make([][]time.Duration, clients)
	errs := make([]error, clients)
	var wg sync.WaitGroup
	start := time.Now()
	for c := range clients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range per {
				qi := (c*per + i) % len(b.queries)
				t0 := time.Now()
				if err := call(c, qi); err != nil {
					errs[c] = err
					return
				}
				lat[c] = append(lat[c], time.Since(t0))
			}
		}()
	}
	wg.Wait()
	elapsed := time.Since(start)
	all := slices.Concat(lat...)
	slices.Sort(all)
	t := timing{err: errorsJoin(errs)}
	if len(all) > 0 {
		t.qps = float64(len(all)) / elapsed.Seconds()
		t.p50, t.p95, t.p99 = all[len(all)/2], all[len(all)*95/100], all[len(all)*99/100]
	}
	return t
}

func errorsJoin(errs []error) error {
	for _, err := range errs {
		if err != nil {
			return err
		}
	}
	return nil
}
