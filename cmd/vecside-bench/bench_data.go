package main

import (
	"bufio"
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/vecside/vecside/cmd/vecside-bench/internal/benchreport"
	"github.com/vecside/vecside/indexer/dataset"
	"github.com/vecside/vecside/kernels"
)

// loadData reads or generates the rows and the held-out queries, and
// finds the ground truth.
func (b *bench) loadData(ctx context.Context) error {
	p := b.p
	name := p.dataset
	var err error
	var truthIDs [][]int32
	switch {
	case p.fvecsBase != "":
		name = "fvecs:" + filepath.Base(p.fvecsBase)
		limit := 0
		if p.limitRows {
			limit = p.rows
		}
		b.say("reading %s", p.fvecsBase)
		if b.data, err = dataset.ReadVecs(p.fvecsBase, limit); err != nil {
			return err
		}
		b.say("reading %s", p.fvecsQuery)
		if b.queries, err = dataset.ReadVecs(p.fvecsQuery, p.queries); err != nil {
			return err
		}
		if len(b.queries[0]) != len(b.data[0]) {
			return fmt.Errorf("--fvecs-query has %d dimensions, --fvecs-base %d", len(b.queries[0]), len(b.data[0]))
		}
		if p.fvecsTruth != "" {
			if limit > 0 {
				return fmt.Errorf("--fvecs-truth holds neighbours among all of --fvecs-base's rows: leave out --rows, or --fvecs-truth to compute the truth over the first %d", limit)
			}
			if truthIDs, err = dataset.ReadIvecs(p.fvecsTruth); err != nil {
				return err
			}
			truthIDs = truthIDs[:min(len(truthIDs), len(b.queries))]
		}
	case p.table != "":
		if err := b.readTable(ctx); err != nil {
			return err
		}
		name = fmt.Sprintf("table:%s(%s)", p.table, p.column)
	case p.dataset == "clustered":
		b.say("generating %d × %d clustered vectors (seed %d, %s) and %d held-out queries", p.rows, p.dims, p.seed, p.metric, p.queries)
		// Rows to insert later come from the same generator, after the
		// loaded ones.
		b.data, b.queries = dataset.Clustered{Seed: p.seed, Rows: p.rows + p.inserts, Queries: p.queries, Dims: p.dims, Normalize: p.metric == kernels.Cosine}.Generate()
	case p.dataset == mixture1536:
		b.say("generating %d × %d vectors in %d clusters, normalized (seed %d), and %d queries perturbing rows", p.rows, p.dims, mixture1536Clusters, p.seed, p.queries)
		b.data, b.queries = dataset.Clustered{Seed: p.seed, Rows: p.rows + p.inserts, Queries: p.queries, Dims: p.dims,
			Clusters: mixture1536Clusters, Normalize: true, Perturb: mixture1536Perturb}.Generate()
	case p.dataset == "textlike":
		b.p.metric = kernels.Cosine
		b.say("generating %d × %d text-like vectors (seed %d) and %d held-out queries", p.rows, p.dims, p.seed, p.queries)
		b.data, b.queries = dataset.TextLike{Seed: p.seed, Rows: p.rows + p.inserts, Queries: p.queries, Dims: p.dims}.Generate()
	case p.dataset == "fashion-mnist":
		b.p.metric = kernels.L2
		b.say("loading Fashion-MNIST from %s", p.fashionDir)
		if b.data, b.queries, err = dataset.FashionMNIST(p.fashionDir); err != nil {
			return err
		}
		b.queries = b.queries[:min(p.queries, len(b.queries))]
	default:
		return fmt.Errorf("--dataset %q: want clustered, textlike, mixture1536 or fashion-mnist (or --fvecs-base, or --table)", p.dataset)
	}
	b.rows = len(b.data) - p.inserts
	truth := "computed by brute force"
	if truthIDs != nil {
		truth = "from " + filepath.Base(p.fvecsTruth)
		if b.truth, err = dataset.TruthFromIDs(b.p.metric, b.data, b.queries, truthIDs, p.k); err != nil {
			return err
		}
	} else {
		b.say("ground truth: brute force top-%d of %d queries over %d rows", p.k, len(b.queries), b.rows)
		b.truth = dataset.GroundTruth(b.p.metric, b.data[:b.rows], b.queries, p.k)
	}
	b.report.Header.Dataset = benchreport.Dataset{Name: name, Rows: b.rows, Dims: len(b.data[0]), Metric: b.p.metric.String(),
		Queries: len(b.queries), K: p.k, Truth: truth}
	b.say("data set %s: %d rows × %d dimensions, %s, %d queries, k=%d", name, b.rows, len(b.data[0]), b.p.metric, len(b.queries), p.k)
	return nil
}

// readTable reads --column of --table, never writing to it, and holds out
// --queries rows sampled with --seed as queries: they are not copied to
// the scratch table, so no query finds its own row.
func (b *bench) readTable(ctx context.Context) error {
	p := b.p
	if strings.EqualFold(p.table, benchTable) || strings.EqualFold(p.table, pgvectorTable) {
		return fmt.Errorf("--table %s is the bench's own scratch table, which it replaces: copy the data to another table", p.table)
	}
	var table string
	if err := b.db.QueryRow(ctx, "SELECT to_regclass($1)::text", p.table).Scan(&table); err != nil {
		return fmt.Errorf("--table %s: %w (no such table?)", p.table, err)
	}
	sql := fmt.Sprintf("SELECT %s::real[] FROM %s WHERE %[1]s IS NOT NULL", pgx.Identifier{p.column}.Sanitize(), table)
	if p.limitRows {
		sql += fmt.Sprintf(" LIMIT %d", p.rows)
	}
	b.say("reading %s", sql)
	rows, err := b.db.Query(ctx, sql)
	if err != nil {
		return fmt.Errorf("--table %s --column %s: %w", p.table, p.column, err)
	}
	all, err := pgx.CollectRows(rows, pgx.RowTo[[]float32])
	if err != nil {
		return fmt.Errorf("--table %s --column %s: %w", p.table, p.column, err)
	}
	if len(all) < p.queries+p.k {
		return fmt.Errorf("--table %s has %d rows with a vector: too few for %d held-out queries and k=%d", p.table, len(all), p.queries, p.k)
	}
	for _, v := range all {
		if len(v) != len(all[0]) {
			return fmt.Errorf("--table %s: a row has %d dimensions, another %d: the bench needs one dimension", p.table, len(v), len(all[0]))
		}
	}
	held := make([]bool, len(all))
	for _, i := range rand.New(rand.NewPCG(p.seed, 0x686f6c646f7574)).Perm(len(all))[:p.queries] {
		held[i] = true
	}
	for i, v := range all {
		if held[i] {
			b.queries = append(b.queries, v)
		} else {
			b.data = append(b.data, v)
		}
	}
	b.say("read %d rows; %d held out as queries", len(all), len(b.queries))
	return nil
}

// describeMachine records what the bench runs on.
func (b *bench) describeMachine(ctx context.Context) error {
	m := &b.report.Header.Machine
	m.Cores, m.Go = runtime.NumCPU(), runtime.Version()
	m.CPU = procField("/proc/cpuinfo", "model name")
	if kb, err := strconv.ParseInt(strings.TrimSuffix(procField("/proc/meminfo", "MemTotal"), " kB"), 10, 64); err == nil {
		m.MemoryBytes = kb << 10
	}
	if raw, err := os.ReadFile("/proc/sys/kernel/osrelease"); err == nil {
		m.Kernel = "Linux " + strings.TrimSpace(string(raw))
	}
	if err := b.db.QueryRow(ctx, "SELECT split_part(version(), ' on ', 1), current_setting('shared_buffers')").Scan(&m.Postgres, &m.SharedBuffers); err != nil {
		return err
	}
	rtt, err := roundTrip(ctx, b.db, 200)
	m.RoundTripMicros = float64(rtt.p50.Nanoseconds()) / 1e3
	return err
}

// roundTrip times n SELECT 1 on conn, one after another.
func roundTrip(ctx context.Context, conn *pgx.Conn, n int) (timing, error) {
	lat := make([]time.Duration, n)
	start := time.Now()
	var one int
	for i := range lat {
		t0 := time.Now()
		if err := conn.QueryRow(ctx, "SELECT 1").Scan(&one); err != nil {
			return timing{}, err
		}
		lat[i] = time.Since(t0)
	}
	return percentiles(lat, time.Since(start)), nil
}

// procField is the value of the first "name: value" line of a /proc file.
func procField(path, name string) string {
	f, err := os.Open(path)
	if err != nil {
		return "unknown"
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if k, v, ok := strings.Cut(sc.Text(), ":"); ok && strings.TrimSpace(k) == name {
			return strings.TrimSpace(v)
		}
	}
	return "unknown"
}
