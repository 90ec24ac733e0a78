package main

import (
	"cmp"
	"context"
	"fmt"
	"io"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/urfave/cli/v2"
	"github.com/vecside/vecside/cmd/vecside-bench/internal/benchreport"
	"github.com/vecside/vecside/cmd/vecside/sidecar"
	"github.com/vecside/vecside/indexer"
	"github.com/vecside/vecside/indexer/dataset"
	"github.com/vecside/vecside/indexer/kind"
	"github.com/vecside/vecside/internal/pgcluster"
	"github.com/vecside/vecside/kernels"
	"github.com/vecside/vecside/replicate"
	"github.com/vecside/vecside/rpc"
)

var benchCommand = &cli.Command{
	Name:  "vecside-bench",
	Usage: "measure recall, latency, throughput, build time and memory of index kinds end to end, against pgvector where it is installed",
	Description: `Loads a data set into a scratch table (in a throwaway PostgreSQL 15, or in
the database named by --source), starts one sidecar per --index, and for
each setting of the sweep measures recall@k (a row is a hit when its exact
distance is at most the true k-th), the mean number of candidates, and QPS
and p50/p95/p99 latency with 1 and --clients clients, by each way in that
--paths names:

  sidecar    the knn call alone, over pgwire (mode sidecar-only)
  heapfetch  end to end through the Go client: candidates, heap fetch,
             exact re-rank (mode end-to-end)
  sql        the SQL helpers, as vecside sql install installs them, one
             pgx connection per client, the query vector a parameter:
             SELECT id FROM vecside.search('<index>', $1::real[], k,
             NULL::bigint, '<options>') (mode sql-search) and SELECT
             (item).id FROM vecside.search_rows(..., NULL::vecside_bench,
             ...) (mode sql-search-rows), the setting's knn options as the
             options string. The helpers' dblink connections log in to
             the bench's sidecars with a password (SCRAM): the bench makes
             one per run. They reach one sidecar at a time, so before an
             index's first point vecside.set_sidecar points them at its
             sidecar and the clients connect anew (a backend keeps its
             dblink connection). With --source, a database that already
             has the helpers is left alone and the path not measured; else
             they are installed and removed at the end.
  proxy      pgvector's own statement, SELECT id FROM vecside_bench ORDER
             BY embedding <-> $1 LIMIT k (the operator by --metric),
             prepared (the vector a binary real[], or pgvector's text on a
             vector column), through a vecside proxy run in this process in front
             of the database and asking the index's sidecar (one proxy per
             index in turn), the setting as the session's SET
             vecside.ef_search, vecside.probes and vecside.oversample (0,
             the index's default, where the setting names none). A point
             fails if the proxy passed a statement through. On a real[]
             scratch column the throwaway database gets pgvector's
             operators over vecside's distance functions; --source must
             have them, or the path is not measured. Needs a cgo build
  serve-proxy
             the same statements through the proxy as vecside serve
             --proxy runs it: in the sidecar's process, asking its indexes
             with a function call instead of a round trip (with --process,
             the child's own, its CPU the sidecar's)
  pgvector   pgvector's HNSW, where the database offers the extension

Every vecside point carries the candidates of the sidecar's recall pass,
which runs whatever --paths says. The recall pass asks every query once,
in order, on one connection: it is also the timing of one client, sidecar
only (and that of the sql, proxy and pgvector paths, which have recall
passes of their own); the other runs time --measure queries, for
--measure-time at most. New connections of every end-to-end path are
warmed by one pass of the queries before they are timed.

Data sets: the seeded generators (clustered, textlike), Fashion-MNIST
(Debian's dataset-fashion-mnist), .fvecs/.bvecs files (--fvecs-base,
--fvecs-query, optional --fvecs-truth; without it the ground truth is
computed exactly), or a column of an existing table (--source --table
--column): the table is only read; --queries rows sampled from it are held
out as queries and the rest copied into the scratch table. Its vector
column is pgvector's vector where the database offers the extension, else
real[] (--column-type): the end-to-end path reads vectors from it, and
Postgres sends a real[] an element at a time.

When the database offers the vector extension, pgvector HNSW is measured
in its best case, on the table vecside follows, as a user has both (a
copy with a vector column where that table's is real[]): the key and the
vector column, loaded by COPY, VACUUM ANALYZEd, built with --pgvector-m and
--pgvector-ef-construction, prewarmed with pg_prewarm where available, and
queried with the same client, protocol and statement shape as the end to
end path (one prepared statement, the vector as a binary float4[]
parameter), hnsw.ef_search set on every connection and the statement
prepared again per setting, the plan checked with EXPLAIN to use the
index, every connection first warmed by one pass of the queries at the
largest hnsw.ef_search (a new backend runs its first thousand queries
slower, mapping the shared buffers it reads; vecside's heap connections
are warmed the same way, by one pass end to end). It is built before the
sidecars start, so that no walsender
decodes its WAL while it is measured, and its settings are measured
interleaved with vecside's, so that a change in the machine's load falls
on both.

Every point also reports the Postgres CPU time per query: the user and
system time of the throwaway server's processes (the postmaster and its
children, from /proc) over the timed run, divided by its queries. With
--source it is not measured: that server may be on another host, or
shared with other work. With --process, vecside's points report the
sidecar's CPU time per query the same way, from its vecside serve
process: so the SQL helpers' cost to the sidecar compares with the Go
client's.

Where the throwaway server and the bench run (not with --source, whose
server the bench neither starts nor owns): --pg-cpus pins the postmaster,
its children and every backend it forks later to a Linux CPU list
(sched_setaffinity on every thread); --bench-cpus pins the bench's own
process, and with it the clients, the in-process sidecars and proxy,
pgbench and, unless --sidecar-cpus says otherwise, the --process children;
--pg-memory runs the server in a memory cgroup of that size (cgroup v2's
memory.max where the unified hierarchy has the memory controller, else
cgroup v1's memory.limit_in_bytes; made below the bench's own cgroup and
removed at the end), with shared_buffers a quarter of it unless
--shared-buffers says otherwise. Measured that way, Postgres is the
bottleneck it is on a primary, not one more process sharing every core.
The report's header says what ran where, the limit and Postgres's peak
memory.

Progress goes to stderr, the Markdown table to stdout; --json, --markdown
and --svg write the results to files.`,
	Flags: []cli.Flag{
		&cli.StringFlag{Name: "source", Usage: "Postgres to use (libpq connection string or URL); default: start a throwaway one", EnvVars: []string{"VECSIDE_SOURCE"}},
		&cli.StringFlag{Name: "dataset", Value: "clustered", Usage: "clustered (seeded generator), textlike (seeded, like text embeddings: anisotropic, low contrast), mixture1536 (seeded, like OpenAI's embeddings in size: 1,536 dimensions, 100 clusters, cosine, queries perturbed rows; 250,000 rows unless --rows says) or fashion-mnist (Debian's dataset-fashion-mnist); ignored with --fvecs-base or --table"},
		&cli.StringFlag{Name: "fvecs-base", Usage: "data set from a .fvecs or .bvecs file of rows"},
		&cli.StringFlag{Name: "fvecs-query", Usage: "with --fvecs-base: the .fvecs or .bvecs file of queries"},
		&cli.StringFlag{Name: "fvecs-truth", Usage: "with --fvecs-base: an .ivecs file of each query's nearest row ids, nearest first (default: computed exactly)"},
		&cli.StringFlag{Name: "table", Usage: "data set from this table of --source (read only; schema-qualified if need be)"},
		&cli.StringFlag{Name: "column", Usage: "with --table: the vector column (vector, real[] or double precision[])"},
		&cli.BoolFlag{Name: "process", Usage: "run each sidecar as a child vecside serve process, and report its memory (RSS after the build, peak during it) apart from the bench's own"},
		&cli.StringFlag{Name: "vecside", Usage: "with --process: the vecside command to run (default: vecside in this command's directory, else on PATH)"},
		&cli.StringFlag{Name: "fashion-dir", Value: dataset.FashionMNISTDir, Usage: "where the Fashion-MNIST IDX files are"},
		&cli.IntFlag{Name: "rows", Value: 100000, Usage: "generators: rows; files and tables: read at most this many rows when given"},
		&cli.IntFlag{Name: "dims", Value: 128, Usage: "generators: dimensions"},
		&cli.IntFlag{Name: "queries", Value: 1000, Usage: "held-out queries (fashion-mnist and files: the first N)"},
		&cli.Uint64Flag{Name: "seed", Value: 1, Usage: "generators: seed; --table: which rows are sampled as queries"},
		&cli.StringFlag{Name: "metric", Value: "cosine", Usage: "l2, cosine or ip (fashion-mnist is l2)"},
		&cli.StringSliceFlag{Name: "index", Value: cli.NewStringSlice("kind=flat store=ext8", "kind=ivf", "kind=hnsw"), Usage: "index kind and options to measure, e.g. 'kind=ivf store=ext8' (repeat)"},
		&cli.IntFlag{Name: "k", Value: 10, Usage: "neighbours per query"},
		&cli.StringFlag{Name: "probes", Value: "0,2,8,32", Usage: "ivf: probes to sweep (0 = the index's default)"},
		&cli.StringFlag{Name: "ef-search", Value: "0,16,32,64,128,256", Usage: "hnsw: ef_search values to sweep (0 = the index's default)"},
		&cli.StringFlag{Name: "oversample", Value: "0,2", Usage: "oversample values to sweep (0 = the index's default)"},
		&cli.IntFlag{Name: "clients", Value: 8, Usage: "concurrent clients for the throughput runs"},
		&cli.IntFlag{Name: "measure", Value: 1000, Usage: "queries timed per run with --clients clients, and end to end (cycling through the held-out ones); at one client the sidecar-only and pgvector timings are those of the recall pass over every query"},
		&cli.DurationFlag{Name: "measure-time", Value: 3 * time.Second, Usage: "at most this long per timed run, whatever --measure says"},
		&cli.StringFlag{Name: "paths", Value: strings.Join(allPaths, ","), Usage: "the ways in to measure, comma-separated: sidecar (the knn call alone), heapfetch (the Go client, end to end), sql (the SQL helpers vecside.search and vecside.search_rows through dblink), proxy (pgvector's statement through vecside proxy; needs a cgo build), serve-proxy (the same through vecside serve --proxy, the proxy in the sidecar's process) and pgvector (its HNSW, where the database offers the extension); the sidecar's recall pass runs whatever is listed: it gives every vecside point its candidates"},
		&cli.BoolFlag{Name: "e2e", Value: true, Usage: "false: leave out every end-to-end path of vecside's (heapfetch, sql, proxy), whatever --paths says"},
		&cli.StringFlag{Name: "column-type", Value: "auto", Usage: "type of the scratch table's vector column, which the end-to-end path reads vectors from: vector (pgvector's, stored out of line), real[], or auto: vector where the database offers the extension, else real[]"},
		&cli.BoolFlag{Name: "pgvector", Value: true, Usage: "false: leave out pgvector, whatever --paths says"},
		&cli.IntFlag{Name: "pgvector-m", Value: 16, Usage: "pgvector HNSW: m"},
		&cli.IntFlag{Name: "pgvector-ef-construction", Value: 64, Usage: "pgvector HNSW: ef_construction"},
		&cli.StringFlag{Name: "pgvector-ef-search", Value: "10,20,40,80,120,200,400", Usage: "pgvector HNSW: hnsw.ef_search values to sweep"},
		&cli.DurationFlag{Name: "pgvector-build-timeout", Usage: "stop pgvector's HNSW build after this long (statement_timeout), reported as stopped, and go on without it; 0: no limit. A build that fails (out of memory under --pg-memory) is reported the same way"},
		&cli.StringFlag{Name: "pgvector-maintenance-work-mem", Value: "2GB", Usage: "maintenance_work_mem for pgvector's build (its graph should fit, or the build slows down many times)"},
		&cli.StringFlag{Name: "shared-buffers", Value: "2GB", Usage: "throwaway Postgres: shared_buffers, enough to hold the tables and pgvector's index"},
		&cli.StringFlag{Name: "pg-cpus", Usage: "throwaway Postgres: pin the postmaster, its children and every backend to these CPUs (a Linux CPU list such as 0 or 0-1,3)"},
		&cli.StringFlag{Name: "bench-cpus", Usage: "pin the bench's own process (its clients, the in-process sidecars and proxy, a --process sidecar, pgbench) to these CPUs (a Linux CPU list)"},
		&cli.StringFlag{Name: "sidecar-cpus", Usage: "with --process: start each vecside serve child on these CPUs (a Linux CPU list), apart from the clients; default: the bench's own"},
		&cli.StringFlag{Name: "pg-memory", Usage: "throwaway Postgres: run it in a memory cgroup with this limit (e.g. 4GB or 512MiB), shared_buffers a quarter of it unless --shared-buffers says otherwise"},
		&cli.IntFlag{Name: "write-rate", Usage: "after the sweep, per index: insert this many rows per second (pgbench, one row per transaction) while --clients search, and report the replication lag and apply rate; 0: no writes"},
		&cli.DurationFlag{Name: "write-duration", Value: 20 * time.Second, Usage: "how long --write-rate writes per index"},
		&cli.StringFlag{Name: "json", Usage: "write the results as JSON to this file"},
		&cli.StringFlag{Name: "markdown", Usage: "write the results as Markdown to this file"},
		&cli.StringFlag{Name: "svg", Usage: "write a recall-vs-QPS plot (every end-to-end path: heapfetch, sql, proxy, pgvector) as SVG to this file"},
		&cli.StringFlag{Name: "churn", Usage: "clustered: INSERTS,DELETES streamed through replication into the first --index under query load, then recall against a fresh build, e.g. 100000,50000"},
	},
	Action: func(c *cli.Context) error {
		metric, err := kernels.ParseMetric(c.String("metric"))
		if err != nil {
			return fmt.Errorf("--metric: %w", err)
		}
		p := benchParams{
			source: c.String("source"), dataset: c.String("dataset"), fashionDir: c.String("fashion-dir"),
			fvecsBase: c.String("fvecs-base"), fvecsQuery: c.String("fvecs-query"), fvecsTruth: c.String("fvecs-truth"),
			table: c.String("table"), column: c.String("column"),
			rows: c.Int("rows"), limitRows: c.IsSet("rows"), dims: c.Int("dims"), queries: c.Int("queries"), seed: c.Uint64("seed"), metric: metric,
			indexes: c.StringSlice("index"), k: c.Int("k"),
			clients: c.Int("clients"), measure: c.Int("measure"), measureTime: c.Duration("measure-time"), e2e: c.Bool("e2e"), process: c.Bool("process"),
			columnType: c.String("column-type"),
			pgvector:   c.Bool("pgvector"), pgvM: c.Int("pgvector-m"), pgvEfConstruction: c.Int("pgvector-ef-construction"),
			pgvMaintenanceWorkMem: c.String("pgvector-maintenance-work-mem"), pgvBuildTimeout: c.Duration("pgvector-build-timeout"), sharedBuffers: c.String("shared-buffers"),
			writeRate: c.Int("write-rate"), writeDuration: c.Duration("write-duration"),
			jsonFile: c.String("json"), markdownFile: c.String("markdown"), svgFile: c.String("svg"),
			command: strings.Join(append([]string{"vecside-bench"}, os.Args[1:]...), " "),
		}
		for _, l := range []struct {
			flag string
			dst  *[]int
		}{{"probes", &p.probes}, {"ef-search", &p.efSearch}, {"pgvector-ef-search", &p.pgvEfSearch}} {
			if *l.dst, err = intList(c.String(l.flag)); err != nil {
				return fmt.Errorf("--%s: %w", l.flag, err)
			}
		}
		if err := p.readTier(c); err != nil {
			return err
		}
		if err := p.preset(c); err != nil {
			return err
		}
		if p.oversample, err = floatList(c.String("oversample")); err != nil {
			return fmt.Errorf("--oversample: %w", err)
		}
		if v := c.String("churn"); v != "" {
			churn, err := intList(v)
			if err != nil || len(churn) != 2 {
				return fmt.Errorf("--churn %q: want INSERTS,DELETES", v)
			}
			p.inserts, p.deletes = churn[0], churn[1]
		}
		p.pathsNamed = c.IsSet("paths")
		if p.paths, err = parsePaths(c.String("paths"), p.pathsNamed); err != nil {
			return fmt.Errorf("--paths: %w", err)
		}
		if !p.e2e {
			delete(p.paths, pathHeapfetch)
			delete(p.paths, pathSQL)
			delete(p.paths, pathProxy)
			delete(p.paths, pathServeProxy)
		}
		if !p.pgvector {
			delete(p.paths, pathPGVector)
		}
		p.e2e, p.pgvector = p.paths[pathHeapfetch], p.paths[pathPGVector]
		if err := p.check(); err != nil {
			return err
		}
		if p.process {
			if p.vecside, err = vecsideCommand(c.String("vecside")); err != nil {
				return err
			}
			if p.paths[pathServeProxy] && !hasServeProxy(p.vecside) {
				if p.pathsNamed {
					return fmt.Errorf("--paths serve-proxy with --process: %s was built without cgo, and its serve has no --proxy", p.vecside)
				}
				fmt.Fprintf(os.Stderr, "serve-proxy: not measured: %s was built without cgo, and its serve has no --proxy\n", p.vecside)
				delete(p.paths, pathServeProxy)
			}
		}
		return runBench(c.Context, c.App.Writer, p)
	},
}

type benchParams struct {
	source, dataset, fashionDir          string
	fvecsBase, fvecsQuery, fvecsTruth    string
	table, column                        string
	rows, dims, queries                  int
	limitRows                            bool // --rows given: read at most rows from files and tables
	seed                                 uint64
	metric                               kernels.Metric
	indexes                              []string
	k                                    int
	probes, efSearch                     []int
	oversample                           []float64
	clients, measure                     int
	measureTime                          time.Duration
	e2e, process                         bool            // e2e: the heapfetch path
	vecside                              string          // with --process: the vecside command's path
	paths                                map[string]bool // --paths, less what --e2e and --pgvector leave out
	pathsNamed                           bool            // --paths was given
	columnType                           string          // --column-type
	pgvector                             bool
	pgvM, pgvEfConstruction              int
	pgvEfSearch                          []int
	pgvMaintenanceWorkMem, sharedBuffers string
	pgvBuildTimeout                      time.Duration // 0: none
	writeRate                            int
	writeDuration                        time.Duration
	jsonFile, markdownFile, svgFile      string
	command                              string
	inserts, deletes                     int      // --churn
	pgCPUs, benchCPUs, sidecarCPUs       *cpuList // --pg-cpus, --bench-cpus, --sidecar-cpus; nil: not pinned
	pgMemory                             int64    // --pg-memory in bytes; 0: no limit
}

// check refuses combinations of flags that cannot work, naming the fix.
// mixture1536 is the --dataset preset of the per-tier pgvector benchmarks
// vecside is compared with: a 1,536-dimensional Gaussian mixture,
// normalized for cosine distance, queries perturbed rows.
const (
	mixture1536         = "mixture1536"
	mixture1536Dims     = 1536
	mixture1536Rows     = 250000
	mixture1536Clusters = 100
	mixture1536Perturb  = 0.5
)

// preset applies --dataset mixture1536's dimensions, metric and rows.
func (p *benchParams) preset(c *cli.Context) error {
	if p.dataset != mixture1536 || p.fvecsBase != "" || p.table != "" {
		return nil
	}
	if c.IsSet("dims") && p.dims != mixture1536Dims || c.IsSet("metric") && p.metric != kernels.Cosine {
		return fmt.Errorf("--dataset %s is %d-dimensional and cosine: leave out --dims and --metric, or use --dataset clustered", mixture1536, mixture1536Dims)
	}
	p.dims, p.metric = mixture1536Dims, kernels.Cosine
	if !c.IsSet("rows") {
		p.rows = mixture1536Rows
	}
	return nil
}

func (p benchParams) check() error {
	switch {
	case !slices.Contains([]string{"auto", "vector", "real[]"}, p.columnType):
		return fmt.Errorf("--column-type %q: want vector, real[] or auto", p.columnType)
	case p.fvecsBase != "" && p.fvecsQuery == "":
		return fmt.Errorf("--fvecs-base needs --fvecs-query, the file of queries")
	case p.fvecsBase == "" && (p.fvecsQuery != "" || p.fvecsTruth != ""):
		return fmt.Errorf("--fvecs-query and --fvecs-truth go with --fvecs-base")
	case p.table != "" && (p.source == "" || p.column == ""):
		return fmt.Errorf("--table needs --source, the database that holds it, and --column, its vector column")
	case p.table != "" && p.fvecsBase != "":
		return fmt.Errorf("--table and --fvecs-base both name a data set: give one")
	case p.k < 1 || p.clients < 1 || p.measure < 1 || p.queries < 1 || p.measureTime <= 0:
		return fmt.Errorf("--k, --clients, --measure and --queries must be at least 1, --measure-time more than 0")
	case p.source != "" && (p.pgCPUs != nil || p.benchCPUs != nil || p.sidecarCPUs != nil || p.pgMemory > 0):
		return fmt.Errorf("--pg-cpus, --bench-cpus, --sidecar-cpus and --pg-memory place the throwaway Postgres and the bench beside it: with --source the bench neither starts nor owns the server (it may be on another host); leave them out, or leave out --source")
	case p.sidecarCPUs != nil && !p.process:
		return fmt.Errorf("--sidecar-cpus places the vecside serve children of --process: add --process (in-process sidecars share the bench's threads, which --bench-cpus places)")
	case p.writeRate < 0:
		return fmt.Errorf("--write-rate %d: want rows per second, or 0 for none", p.writeRate)
	case p.writeRate > 0 && p.process:
		return fmt.Errorf("--write-rate measures the lag of an in-process sidecar: leave out --process")
	case p.inserts+p.deletes > 0 && (p.fvecsBase != "" || p.table != "" || p.dataset == "fashion-mnist"):
		return fmt.Errorf("--churn draws its new rows from a generator: use --dataset clustered, textlike or mixture1536")
	}
	return nil
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

// The scratch tables the bench creates, in the throwaway database or in
// --source's, and drops at the end when it is --source's.
const (
	benchTable    = "vecside_bench"
	pgvectorTable = "vecside_bench_pgvector"
)

// bench is one run: the data, its ground truth, the database, the report.
type bench struct {
	p       benchParams
	data    [][]float32 // row i has id i
	rows    int         // rows loaded at first; --churn inserts the rest
	queries [][]float32
	truth   []dataset.Truth
	dsn     string
	cluster *pgcluster.Cluster // the throwaway database, if there is one
	// postmaster is the throwaway server's PID, whose processes' CPU
	// time is measured; 0 with --source.
	postmaster int
	// sidecarPID is the vecside serve child of the index being measured
	// (--process), whose CPU time is measured; 0 when the sidecars run
	// in-process.
	sidecarPID int
	// tuned and estimate are the recall calibration of the vecside
	// setting being measured (see readCalibration).
	tuned    string
	estimate *float64
	db       *pgx.Conn
	// vectorColumn: the scratch table's column is pgvector's vector,
	// else real[] (--column-type).
	vectorColumn bool
	say          func(format string, args ...any)
	out          io.Writer
	report       benchreport.Report
	// sidecarPassword is the bench user's password on every sidecar it
	// starts (SCRAM: dblink logs in as a non-superuser only with a
	// password), and users the sidecars' users file, made from it.
	sidecarPassword string
	users           *rpc.Users
	// sql and proxy are the connections of those paths, for one index at
	// a time; nil when the path is not measured.
	sql, proxy, serveProxy *perIndex
	sqlInstalled           bool  // the bench installed the SQL helpers
	proxyArgs              []any // each query as the proxy path binds it
	tier                   tier  // what --pg-cpus, --bench-cpus and --pg-memory did
}

func runBench(ctx context.Context, out io.Writer, p benchParams) error {
	began := time.Now()
	b := &bench{p: p, out: out}
	b.say = func(format string, args ...any) {
		fmt.Fprintf(os.Stderr, "[%6.1fs] "+format+"\n", append([]any{time.Since(began).Seconds()}, args...)...)
	}
	b.report.Header.Started = began.UTC().Format(time.RFC3339)
	b.report.Header.Command = p.command
	b.report.Header.Settings = benchreport.Settings{Clients: p.clients, Measured: p.measure, WriteRate: p.writeRate}

	if !proxyBuilt && !p.pathsNamed {
		b.say("proxy: not measured: %v", errProxyNotBuilt)
	}
	if err := b.makeSidecarUser(); err != nil {
		return err
	}
	// Undone last, after the server has stopped: its cgroup must be empty.
	defer b.undoTier()
	if err := b.placeBench(); err != nil {
		return err
	}
	b.dsn = p.source
	if b.dsn == "" {
		if err := b.makePGCgroup(); err != nil {
			return err
		}
		b.say("starting a throwaway PostgreSQL 15 (shared_buffers %s)", p.sharedBuffers)
		cluster, err := pgcluster.Start()
		if err != nil {
			return err
		}
		defer cluster.Stop()
		b.cluster, b.dsn = cluster, cluster.DSN("postgres")
		if err := b.setSharedBuffers(ctx); err != nil {
			return err
		}
		if b.postmaster, err = cluster.PostmasterPID(); err != nil {
			return err
		}
		if err := b.placePostgres(); err != nil {
			return err
		}
	}
	var err error
	if b.db, err = pgx.Connect(ctx, b.dsn); err != nil {
		return err
	}
	defer b.db.Close(context.Background())
	if err := b.loadData(ctx); err != nil {
		return err
	}
	if p.source != "" {
		defer b.dropScratch()
	}
	if err := b.describeMachine(ctx); err != nil {
		return err
	}
	if err := b.load(ctx); err != nil {
		return err
	}
	if p.inserts+p.deletes > 0 {
		return b.churn(ctx, p.indexes[0])
	}

	// pgvector first: the WAL of its COPY and build comes before the
	// sidecars' slots, so that no walsender decodes it while pgvector is
	// measured.
	pgv, err := b.startPGVector(ctx)
	if err != nil {
		return err
	}
	if pgv != nil {
		defer pgv.close()
	}
	var targets []*vecsideTarget
	defer func() {
		for _, t := range targets {
			t.stop()
		}
	}()
	for i, def := range p.indexes {
		t, err := b.startVecside(ctx, i, def)
		if err != nil {
			return err
		}
		targets = append(targets, t)
	}
	if err := b.settle(ctx, targets); err != nil {
		return err
	}
	if err := b.startPaths(ctx, targets); err != nil {
		return err
	}
	defer b.stopPaths()
	if err := b.sweep(ctx, targets, pgv); err != nil {
		return err
	}
	if p.writeRate > 0 {
		for _, t := range targets {
			if err := b.writeLoad(ctx, t); err != nil {
				return err
			}
		}
	}
	return b.writeReport()
}

// setSharedBuffers restarts the throwaway database with shared_buffers
// large enough for the tables and pgvector's index, as a server tuned for
// the job would have.
func (b *bench) setSharedBuffers(ctx context.Context) error {
	db, err := pgx.Connect(ctx, b.dsn)
	if err != nil {
		return err
	}
	_, err = db.Exec(ctx, "ALTER SYSTEM SET shared_buffers = "+quoteLiteral(b.p.sharedBuffers))
	db.Close(ctx)
	if err != nil {
		return fmt.Errorf("--shared-buffers: %w", err)
	}
	return b.cluster.Restart("fast")
}

func quoteLiteral(s string) string { return "'" + strings.ReplaceAll(s, "'", "''") + "'" }

// settle lets the server and the sidecars finish what the setup left
// them before anything is timed: a checkpoint writes out what the loads
// dirtied, and every sidecar applies the WAL written so far, which its
// walsender would otherwise be decoding during the first points.
func (b *bench) settle(ctx context.Context, targets []*vecsideTarget) error {
	if _, err := b.db.Exec(ctx, "CHECKPOINT"); err != nil {
		return err
	}
	var lsn indexer.LSN
	if err := b.db.QueryRow(ctx, "SELECT pg_current_wal_lsn()").Scan(&lsn); err != nil {
		return err
	}
	b.say("waiting for every sidecar to apply %s", lsn)
	for _, t := range targets {
		if err := t.waitApplied(ctx, lsn); err != nil {
			return fmt.Errorf("%s: %w", t.def, err)
		}
	}
	return nil
}

// sweep measures every setting of every index, vecside's and pgvector's
// interleaved: each list of settings is spread evenly over the run, so
// that a drift in the machine's load falls on both systems alike.
func (b *bench) sweep(ctx context.Context, targets []*vecsideTarget, pgv *pgvectorTarget) error {
	type step struct {
		at  float64 // position in the run, 0 to 1
		run func() error
	}
	var vs []func() error
	for _, t := range targets {
		for _, opts := range b.settings(t.def) {
			vs = append(vs, func() error { return b.measureVecside(ctx, t, opts) })
		}
	}
	var steps []step
	for i, run := range vs {
		steps = append(steps, step{(float64(i) + 0.5) / float64(len(vs)), run})
	}
	if pgv != nil {
		for i, ef := range b.p.pgvEfSearch {
			steps = append(steps, step{(float64(i) + 0.5) / float64(len(b.p.pgvEfSearch)), func() error { return b.measurePGVector(ctx, pgv, ef) }})
		}
	}
	slices.SortStableFunc(steps, func(x, y step) int { return cmp.Compare(x.at, y.at) })
	for i, s := range steps {
		b.say("point %d of %d", i+1, len(steps))
		if err := s.run(); err != nil {
			return err
		}
	}
	return nil
}

// settings lists the search options to sweep for an index definition:
// its kind's sweep setting, over the values of that setting's flag.
func (b *bench) settings(def string) []string {
	sweep := b.sweepOf(def).Setting
	values, ok := map[string][]int{"probes": b.p.probes, "ef_search": b.p.efSearch}[sweep]
	if !ok {
		values = []int{0}
	}
	var out []string
	for _, v := range values {
		for _, o := range b.p.oversample {
			opts := fmt.Sprintf("oversample=%g %s=%d", o, sweep, v)
			if v == 0 {
				opts = fmt.Sprintf("oversample=%g", o)
			}
			out = append(out, opts)
		}
	}
	return out
}

// specOf is the spec of an index of the bench's table with options def.
func (b *bench) specOf(def string) (indexer.Spec, error) {
	return indexer.ParseSpec(fmt.Sprintf("x=public.%s(embedding) key=id metric=%s %s", benchTable, b.p.metric, def))
}

// sweepOf is what the bench varies for the index options def: the sweep
// its kind registered.
func (b *bench) sweepOf(def string) kind.Sweep {
	spec, err := b.specOf(def)
	if err != nil {
		return kind.Sweep{}
	}
	k, _ := kind.Lookup(spec.Kind)
	return k.Sweep
}

// writeReport prints the Markdown and writes the files asked for.
func (b *bench) writeReport() error {
	b.recordPeak()
	r := &b.report
	if err := r.WriteMarkdown(b.out); err != nil {
		return err
	}
	for _, f := range []struct {
		path  string
		write func(string) error
	}{{b.p.jsonFile, r.WriteJSON}, {b.p.markdownFile, r.WriteMarkdownFile}, {b.p.svgFile, r.WriteSVGFile}} {
		if f.path == "" {
			continue
		}
		if err := f.write(f.path); err != nil {
			return err
		}
		b.say("wrote %s", f.path)
	}
	return nil
}

// load creates the scratch table (id bigint primary key, embedding of
// --column-type) and copies the data in.
func (b *bench) load(ctx context.Context) error {
	typ := b.p.columnType
	if typ != "real[]" {
		_, err := b.db.Exec(ctx, "CREATE EXTENSION IF NOT EXISTS vector")
		switch {
		case err == nil:
			typ = "vector"
		case typ == "vector":
			return fmt.Errorf("--column-type vector: %w", err)
		default:
			typ = "real[]"
		}
	}
	b.vectorColumn = typ == "vector"
	if b.vectorColumn {
		typ = fmt.Sprintf("vector(%d)", len(b.data[0]))
	}
	b.say("scratch table %s: embedding %s", benchTable, typ)
	b.report.Header.Dataset.Column = typ
	if _, err := b.db.Exec(ctx, fmt.Sprintf(`DROP TABLE IF EXISTS %[1]s; CREATE TABLE %[1]s (id bigint PRIMARY KEY, embedding %s)`, benchTable, typ)); err != nil {
		return err
	}
	const batch = 50000
	for lo := 0; lo < b.rows; lo += batch {
		hi := min(lo+batch, b.rows)
		if err := b.copyRows(ctx, lo, hi); err != nil {
			return err
		}
		b.say("loaded %d/%d rows into %s", hi, b.rows, benchTable)
	}
	_, err := b.db.Exec(ctx, "VACUUM ANALYZE "+benchTable)
	return err
}

// copyRows copies rows [lo, hi) of the data into the table: in binary
// into real[], in text into pgvector's vector (pgx knows no binary form
// for it).
func (b *bench) copyRows(ctx context.Context, lo, hi int) error {
	if b.vectorColumn {
		return b.copyVectorText(ctx, benchTable, "embedding", lo, hi)
	}
	_, err := b.db.CopyFrom(ctx, pgx.Identifier{benchTable}, []string{"id", "embedding"}, pgx.CopyFromSlice(hi-lo, func(i int) ([]any, error) {
		return []any{int64(lo + i), b.data[lo+i]}, nil
	}))
	return err
}

// dropScratch removes from --source's database what the bench made
// there: its tables, and the slots and publications of its sidecars.
func (b *bench) dropScratch() {
	ctx := context.Background()
	names := []string{"churn", "fresh"}
	for i := range b.p.indexes {
		names = append(names, sidecarName(i))
	}
	for _, name := range names {
		if _, err := replicate.Teardown(ctx, b.dsn, "vecside_"+name, sidecar.TeardownWait); err != nil {
			b.say("%v", err)
		}
	}
	for _, t := range []string{benchTable, pgvectorTable, "vecside_staged"} {
		b.db.Exec(ctx, "DROP TABLE IF EXISTS "+t)
	}
	b.db.Exec(ctx, "DROP SEQUENCE IF EXISTS vecside_staged_next")
	b.say("dropped the scratch tables, slots and publications from --source")
}

func perRow(b int64, rows int) float64 { return float64(b) / float64(max(rows, 1)) }

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
	pgCPU         *float64 // the server's CPU per query, ms; nil if not measured
	sidecarCPU    *float64 // the vecside serve child's, likewise
	err           error
}

func ms(d time.Duration) float64 { return float64(d) / 1e6 }

// recallPass asks every query once, in order, on one connection (after
// a short warm-up): the recall@k, the mean number of rows returned, and
// the latencies, which are the concurrency-1 timing of the call.
func (b *bench) recallPass(search func(qi int) ([]int64, error)) (recall, rows float64, t timing) {
	for qi := range min(20, len(b.queries)) {
		if _, t.err = search(qi); t.err != nil {
			return 0, 0, t
		}
	}
	lat := make([]time.Duration, len(b.queries))
	var hits, n int
	cpu := b.startCPU()
	start := time.Now()
	for qi := range b.queries {
		t0 := time.Now()
		ids, err := search(qi)
		lat[qi] = time.Since(t0)
		if err != nil {
			return 0, 0, timing{err: err}
		}
		n += len(ids)
		hits += b.hits(qi, ids)
	}
	t = percentiles(lat, time.Since(start))
	cpu.perQuery(len(lat), &t)
	return float64(hits) / float64(b.p.k*len(b.queries)), float64(n) / float64(len(b.queries)), t
}

// timeRun runs --measure queries spread over clients goroutines (after a
// short warm-up on each), for --measure-time at most, and reports
// throughput and latency percentiles.
func (b *bench) timeRun(clients int, call func(client, qi int) error) timing {
	for c := range clients {
		for i := range min(20, len(b.queries)) {
			if err := call(c, i); err != nil {
				return timing{err: err}
			}
		}
	}
	per := max(1, b.p.measure/clients)
	lat := make([][]time.Duration, clients)
	errs := make([]error, clients)
	var wg sync.WaitGroup
	cpu := b.startCPU()
	start := time.Now()
	for c := range clients {
		wg.Go(func() {
			for i := 0; i < per && time.Since(start) < b.p.measureTime; i++ {
				qi := (c*per + i) % len(b.queries)
				t0 := time.Now()
				if err := call(c, qi); err != nil {
					errs[c] = err
					return
				}
				lat[c] = append(lat[c], time.Since(t0))
			}
		})
	}
	wg.Wait()
	all := slices.Concat(lat...)
	t := percentiles(all, time.Since(start))
	cpu.perQuery(len(all), &t)
	t.err = errorsJoin(errs)
	return t
}

// percentiles sorts lat and summarises it, with the throughput of
// len(lat) calls in elapsed.
func percentiles(lat []time.Duration, elapsed time.Duration) timing {
	var t timing
	if len(lat) == 0 {
		return t
	}
	slices.Sort(lat)
	t.qps = float64(len(lat)) / elapsed.Seconds()
	t.p50, t.p95, t.p99 = lat[len(lat)/2], lat[len(lat)*95/100], lat[len(lat)*99/100]
	return t
}

// point records a measured point and shows it.
func (b *bench) point(system, index, mode string, params map[string]float64, recall float64, cands *float64, concurrency int, t timing) {
	p := benchreport.Point{System: system, Index: index, Mode: mode, Params: params, K: b.p.k, Recall: recall,
		P50: ms(t.p50), P95: ms(t.p95), P99: ms(t.p99), QPS: t.qps, Concurrency: concurrency, CandidatesMean: cands, PostgresCPU: t.pgCPU}
	if system == "vecside" {
		p.SidecarCPU = t.sidecarCPU
		p.Tuned, p.RecallEstimate = b.tuned, b.estimate
	}
	b.report.Points = append(b.report.Points, p)
	b.say("  %s %s %s %s c=%d: recall %.4f, %.0f q/s, p50 %.3f ms, p99 %.3f ms",
		system, index, benchreport.FormatParams(params), mode, concurrency, recall, p.QPS, p.P50, p.P99)
}

func errorsJoin(errs []error) error {
	for _, err := range errs {
		if err != nil {
			return err
		}
	}
	return nil
}
