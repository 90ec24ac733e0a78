package chaos

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"math"
	"math/rand/v2"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/vecside/vecside/heapfetch"
	"github.com/vecside/vecside/indexer"
	"github.com/vecside/vecside/internal/loadgen"
)

var (
	flagSoak     = flag.Duration("chaos.soak", 0, "run TestSoak for this long (e.g. 30m), with figures per 5-minute window; 0 runs its short version (60 s, 15-s windows)")
	flagSoakRate = flag.Float64("chaos.soak.rate", 200, "searches per second of TestSoak's 64 clients together")
)

// The soak's table and index: 64-d vectors, so that 500 rows/s and the
// searches leave room on a small machine; hnsw, whose deletes (tombstones
// and neighbour repair) are the likeliest to leak.
const (
	soakDims     = 64
	soakIndex    = "soak_embedding"
	soakClients  = 64
	soakCheckers = 16 // of the clients, those that ask the sidecar alone and check its answers
	soakTxnRows  = 10 // rows written per transaction
	// soakRetryFor bounds how long a client retries while the sidecar is
	// away; a restart takes seconds.
	soakRetryFor = 2 * time.Minute
	// soakGrace is how long after a restarted sidecar is ready a failure
	// to reach it still counts as the restart's: clients find their old
	// connections broken only when they next use them.
	soakGrace = 5 * time.Second
)

var soakIndexDef = fmt.Sprintf("%s=public.soak(embedding) key=id metric=l2 kind=hnsw dims=%d", soakIndex, soakDims)

// soakConfig sizes a soak.
type soakConfig struct {
	duration     time.Duration
	window       time.Duration // figures are reported per window
	restartEvery time.Duration
	rows         int     // in the table before the sidecar first starts
	searchRate   float64 // searches per second, all clients
	writeRate    int     // rows per second
	// checkRSS: the run is long enough for the sidecar's size to settle,
	// so the last window's must be within 10% of the first's.
	checkRSS bool
}

func soakConfigFor(d time.Duration, rate float64) soakConfig {
	if d == 0 { // the short version, in CI
		return soakConfig{duration: time.Minute, window: 15 * time.Second, restartEvery: 15 * time.Second,
			rows: 5000, searchRate: rate, writeRate: 500}
	}
	return soakConfig{duration: d, window: 5 * time.Minute, restartEvery: 3 * time.Minute,
		rows: 20000, searchRate: rate, writeRate: 500, checkRSS: d >= 15*time.Minute}
}

// TestSoak runs the sidecar under a steady load for a set time: 64
// clients searching (48 through heapfetch with mixed k and filters, 16
// asking the sidecar alone and checking every answer against what was
// deleted, a few of their requests bad on purpose), 500 rows/s of
// inserts, updates and deletes, a restart every few minutes (SIGTERM and
// SIGKILL in turn) and a checkpoint every 30 s. It reports, per window,
// search and lag percentiles, the sidecar's RSS and the machine's load,
// and fails on any error but the bad requests' own, a deleted key in an
// answer, or a key missing or extra at the end.
func TestSoak(t *testing.T) {
	cfg := soakConfigFor(*flagSoak, *flagSoakRate)
	ctx, cancel := context.WithTimeout(context.Background(), cfg.duration+15*time.Minute)
	defer cancel()
	dsn := cluster.NewDatabase(t)
	db := &pgClient{dsn: dsn}
	defer db.close()
	if _, err := db.exec(ctx, fmt.Sprintf(`SELECT setseed(0.25);
CREATE TABLE soak (id bigint PRIMARY KEY, cat int NOT NULL, embedding real[]);
INSERT INTO soak SELECT g, g %% 10, %s FROM generate_series(1, %d) g`, serverVector(soakDims), cfg.rows)); err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	proc := launch(t, dir, dsn, "soak", []string{soakIndexDef}, checkpointing{30 * time.Second, 100_000_000}, "soak", "")
	if _, err := waitApplied(ctx, proc, 0, 2*time.Minute); err != nil {
		t.Fatal(err)
	}

	s, err := newSoak(ctx, cfg, proc, dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer s.close()
	t.Logf("soak: %s, %d initial rows, %d clients at %.0f searches/s (%d sidecar-only), %d rows/s, a restart every %s, checkpoints every 30 s, windows of %s",
		cfg.duration, cfg.rows, soakClients, cfg.searchRate, soakCheckers, cfg.writeRate, cfg.restartEvery, cfg.window)
	windows := s.run(ctx, t.Logf)

	// The end: with the load stopped and everything applied, the sidecar
	// holds exactly the table's keys.
	status, err := caughtUp(ctx, db, proc, 3*time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	table, err := readTable(ctx, db, "soak", soakDims)
	if err != nil {
		t.Fatal(err)
	}
	if status[0].rows != int64(len(table.valid)) || table.invalid != 0 {
		t.Errorf("vecside_status rows=%d, the table has %d rows (%d invalid)", status[0].rows, len(table.valid), table.invalid)
	}
	// The ledger's own sanity: the table holds no key it deleted.
	if bad := s.ledger.tableKeys(table); len(bad) > 0 {
		t.Errorf("the writer's ledger disagrees with the table: %s", strings.Join(bad, "; "))
	}
	_, rssEnd, _ := s.usage()
	if err := proc.stop(); err != nil {
		t.Fatal(err)
	}
	e, _, err := loadCheckpoint(filepath.Join(dir, "data"), soakIndexDef)
	if err != nil {
		t.Fatalf("loading the final checkpoint: %v", err)
	}
	diffs := compareIndex(e, table)
	for _, d := range diffs {
		t.Errorf("final checkpoint: %s", d)
	}

	sum := s.summary()
	t.Logf("soak end: %d rows in the table, %d differences with the index; %d keys deleted, %d sidecar-only answers checked against them, %d violations",
		len(table.valid), len(diffs), s.ledger.deletedKeys(), sum.checked, len(sum.violations))
	t.Logf("soak restarts: %s", strings.Join(sum.restarts, ", "))
	t.Logf("soak errors: %s; connections refused at startup outside restarts (53300, retried): %s; failures to reach the sidecar during restarts (retried): %s; bad requests answered as expected: %s",
		counts(sum.byClass[classError]), counts(sum.byClass[classRefused]), counts(sum.byClass[classRestart]), counts(sum.badRequests))
	if n := sum.byClass[classRefused]; len(n) > 0 {
		t.Logf("soak: connections refused at startup outside restarts, e.g. %s", sum.examples[classRefused])
	}
	for i, v := range sum.violations {
		if i == 10 {
			t.Errorf("… and %d more", len(sum.violations)-10)
			break
		}
		t.Errorf("answer violation: %s", v)
	}
	for kind, n := range sum.byClass[classError] {
		t.Errorf("%d errors of kind %s", n, kind)
	}
	if len(sum.byClass[classError]) > 0 {
		t.Errorf("the first error: %s", sum.examples[classError])
	}
	for _, x := range proc.unexpectedExits() {
		t.Errorf("vecside exited unexpectedly: %s", x)
	}
	if sum.checked == 0 {
		t.Error("no sidecar-only answer was checked")
	}
	if len(windows) > 0 {
		first := windows[0].rssLast
		t.Logf("soak RSS: %.1f MiB after the first window, %.1f MiB at the end (%+.1f%%)", mib(first), mib(rssEnd), 100*(float64(rssEnd)/float64(first)-1))
		if cfg.checkRSS && math.Abs(float64(rssEnd)/float64(first)-1) > 0.10 {
			t.Errorf("the sidecar's RSS at the end, %.1f MiB, is not within 10%% of its %.1f MiB after the first window", mib(rssEnd), mib(first))
		}
	}
}

// soak is one run's load, faults and observations.
type soak struct {
	cfg    soakConfig
	proc   *process
	ledger *ledger
	writer *soakWriter
	client *heapfetch.Client
	pools  []*pgxpool.Pool
	url    string // the sidecar's

	mu       sync.Mutex
	rngs     []*rand.Rand // per search worker
	checkers []*pgx.Conn  // per checking worker, nil until connected
	began    time.Time
	samples  []sample       // RSS and load, every second
	lags     []lagSample    // commit → visible
	outages  []outage       // restarts, from the signal to the new process's readiness
	events   []failure      // failed calls
	bad      map[string]int // bad requests answered as expected, by kind
	checked  int
	violated []string
}

type sample struct {
	at    time.Time
	pid   int
	rss   int64 // bytes; 0 if the sidecar was down
	ticks int64 // the sidecar's CPU time so far
	load1 float64
}

type lagSample struct {
	at  time.Time
	lag time.Duration
}

type outage struct {
	from, to time.Time
	what     string
}

// failure is a call that failed. transient ones (the sidecar away) are
// retried; see classify.
type failure struct {
	at              time.Time
	kind, code, msg string // code: the SQLSTATE, or "conn" for a failed connection
	transient       bool
}

func newSoak(ctx context.Context, cfg soakConfig, proc *process, dsn string) (*soak, error) {
	s := &soak{cfg: cfg, proc: proc, ledger: newLedger(cfg.rows), url: "postgres://vecside@" + proc.addr + "/vecside?sslmode=disable&connect_timeout=5",
		bad: map[string]int{}, checkers: make([]*pgx.Conn, soakCheckers)}
	for w := range soakClients {
		s.rngs = append(s.rngs, rand.New(rand.NewPCG(uint64(w), 0x736f616b)))
	}
	sidecar, err := pgxpool.ParseConfig(s.url)
	if err != nil {
		return nil, err
	}
	sidecar.MaxConns = soakClients - soakCheckers
	sidecar.AfterConnect = func(_ context.Context, c *pgx.Conn) error {
		heapfetch.RegisterTypes(c.TypeMap())
		return nil
	}
	heap, err := pgxpool.ParseConfig(dsn)
	if err != nil {
		return nil, err
	}
	heap.MaxConns = 16
	for _, c := range []*pgxpool.Config{sidecar, heap} {
		p, err := pgxpool.NewWithConfig(ctx, c)
		if err != nil {
			s.close()
			return nil, err
		}
		s.pools = append(s.pools, p)
	}
	s.client = heapfetch.New(s.pools[0], s.pools[1])
	if s.writer, err = newSoakWriter(ctx, dsn, cfg.rows, s.ledger); err != nil {
		s.close()
		return nil, err
	}
	return s, nil
}

func (s *soak) close() {
	for _, p := range s.pools {
		p.Close()
	}
	for _, c := range s.checkers {
		if c != nil {
			c.Close(context.Background())
		}
	}
	if s.writer != nil {
		s.writer.close()
	}
}

// window is one period's figures.
type window struct {
	searches, checks, writes loadgen.Result
	lags                     loadgen.Latencies
	rssLast, rssMax          int64
	load1Mean, load1Max      float64
	cpu                      loadgen.CPUUse
	sidecarCores             float64 // the sidecar's CPU time over the window's length
	restarts                 []string
	failures                 [numClasses]int
}

// run runs the load, the restarts and the samplers for the configured
// duration, logging each window's figures as it ends.
func (s *soak) run(ctx context.Context, logf func(string, ...any)) []window {
	s.began = time.Now()
	searchRate := s.cfg.searchRate * (soakClients - soakCheckers) / soakClients
	searches := loadgen.Paced(soakClients-soakCheckers, searchRate, func(w, _ int) error { return s.search(ctx, w) })
	checks := loadgen.Paced(soakCheckers, s.cfg.searchRate-searchRate, func(w, i int) error { return s.checkCall(ctx, w, i) })
	writes := loadgen.Paced(1, float64(s.cfg.writeRate)/soakTxnRows, func(int, int) error { return s.write(ctx) })
	bg, stopBG := context.WithCancel(ctx)
	defer stopBG()
	var wg sync.WaitGroup
	wg.Go(func() { s.probeLag(bg) })
	wg.Go(func() { s.sample(bg) })
	wg.Go(func() { s.restart(bg) })

	var out []window
	cpu, _ := loadgen.ReadCPU()
	for n := 1; ; n++ {
		end := s.began.Add(time.Duration(n) * s.cfg.window)
		last := !end.Before(s.began.Add(s.cfg.duration))
		if last {
			end = s.began.Add(s.cfg.duration)
		}
		select {
		case <-ctx.Done():
			last = true
		case <-time.After(time.Until(end)):
		}
		var w window
		if last {
			w.searches, w.checks, w.writes = searches.Stop(), checks.Stop(), writes.Stop()
			stopBG()
			wg.Wait()
		} else {
			w.searches, w.checks, w.writes = searches.Window(), checks.Window(), writes.Window()
		}
		now, _ := loadgen.ReadCPU()
		w.cpu, cpu = now.Since(cpu), now
		s.fill(&w, end.Add(-s.cfg.window), end)
		out = append(out, w)
		logf("%s", w.line(n, s.cfg.window))
		if last {
			return out
		}
	}
}

// fill adds the samples, lags, restarts and failures of [from, to) to w.
func (s *soak) fill(w *window, from, to time.Time) {
	s.mu.Lock()
	defer s.mu.Unlock()
	in := func(t time.Time) bool { return !t.Before(from) && t.Before(to) }
	var loads []float64
	var ticks int64
	for i, x := range s.samples {
		if i > 0 && in(x.at) && x.pid != 0 && x.pid == s.samples[i-1].pid {
			ticks += x.ticks - s.samples[i-1].ticks
		}
		if in(x.at) {
			if x.rss > 0 {
				w.rssLast = x.rss
			}
			w.rssMax = max(w.rssMax, x.rss)
			loads = append(loads, x.load1)
		}
	}
	w.sidecarCores = float64(ticks) / clockTicks / to.Sub(from).Seconds()
	for _, l := range loads {
		w.load1Mean += l / float64(len(loads))
		w.load1Max = max(w.load1Max, l)
	}
	for _, l := range s.lags {
		if in(l.at) {
			w.lags = append(w.lags, l.lag)
		}
	}
	for _, o := range s.outages {
		if in(o.from) {
			w.restarts = append(w.restarts, o.what)
		}
	}
	for _, f := range s.events {
		if in(f.at) {
			w.failures[s.classify(f)]++
		}
	}
}

func (w window) line(n int, width time.Duration) string {
	restarts := "none"
	if len(w.restarts) > 0 {
		restarts = strings.Join(w.restarts, ", ")
	}
	return fmt.Sprintf("window %d (%s–%s): heapfetch searches %.1f/s p50 %.1f ms p99 %.1f ms; sidecar-only %.1f/s p99 %.1f ms; "+
		"lag n=%d p50 %.1f ms p99 %.1f ms max %.1f ms; writes %.0f rows/s (txn p99 %.1f ms); restarts: %s; "+
		"sidecar RSS %.1f MiB (max %.1f); load1 mean %.2f max %.2f; machine busy %.0f%% steal %.0f%%, sidecar %.2f cores, test process %.2f cores; errors %d, refused at startup %d, failures during restarts %d",
		n, time.Duration(n-1)*width, time.Duration(n)*width,
		w.searches.PerSecond, w.searches.Latencies.Ms(0.5), w.searches.Latencies.Ms(0.99),
		w.checks.PerSecond, w.checks.Latencies.Ms(0.99),
		len(w.lags), w.lags.Ms(0.5), w.lags.Ms(0.99), w.lags.Ms(0.999999),
		w.writes.PerSecond*soakTxnRows, w.writes.Latencies.Ms(0.99), restarts,
		mib(w.rssLast), mib(w.rssMax), w.load1Mean, w.load1Max, 100*w.cpu.Busy, 100*w.cpu.Steal, w.sidecarCores, w.cpu.Cores,
		w.failures[classError], w.failures[classRefused], w.failures[classRestart])
}

func mib(b int64) float64 { return float64(b) / (1 << 20) }

// failureClass is what a failed call counts as.
type failureClass int

const (
	classError   failureClass = iota // fails the soak
	classRestart                     // the sidecar away during a restart: retried
	// classRefused: a new connection refused with 53300 outside a
	// restart, retried. The sidecar refuses or evicts connections in
	// startup when one address has many waiting to be read (rpc's
	// admission), which a pool from one host that opens many connections
	// at once on a loaded machine can trip; counted and reported apart.
	classRefused
	numClasses
)

// classify says what f counts as: a failure to reach the sidecar that
// began between a restart's signal and soakGrace after the new process
// was ready is the restart's; a 53300 refusal elsewhere is reported
// apart; anything else is an error. Call with s.mu held.
func (s *soak) classify(f failure) failureClass {
	if !f.transient {
		return classError
	}
	for _, o := range s.outages {
		if !f.at.Before(o.from) && !f.at.After(o.to.Add(soakGrace)) {
			return classRestart
		}
	}
	if f.code == "53300" {
		return classRefused
	}
	return classError
}

// soakSummary is the whole run's outcome.
type soakSummary struct {
	byClass              [numClasses]map[string]int // failures by kind and SQLSTATE
	examples             [numClasses]string         // the first of each class
	badRequests          map[string]int
	restarts, violations []string
	checked              int
}

func (s *soak) summary() soakSummary {
	s.mu.Lock()
	defer s.mu.Unlock()
	sum := soakSummary{badRequests: s.bad, violations: s.violated, checked: s.checked}
	for c := range sum.byClass {
		sum.byClass[c] = map[string]int{}
	}
	for _, f := range s.events {
		c := s.classify(f)
		sum.byClass[c][f.kind+":"+f.code]++
		if sum.examples[c] == "" {
			sum.examples[c] = fmt.Sprintf("%s at %.1fs: %s", f.kind, f.at.Sub(s.began).Seconds(), f.msg)
		}
	}
	for _, o := range s.outages {
		sum.restarts = append(sum.restarts, fmt.Sprintf("%s at %.0fs", o.what, o.from.Sub(s.began).Seconds()))
	}
	return sum
}

func counts(m map[string]int) string {
	if len(m) == 0 {
		return "none"
	}
	var parts []string
	for k, n := range m {
		parts = append(parts, fmt.Sprintf("%s=%d", k, n))
	}
	slices.Sort(parts)
	return strings.Join(parts, " ")
}

func (s *soak) failed(kind string, err error, transient bool) {
	f := failure{at: time.Now(), kind: kind, code: "conn", msg: err.Error(), transient: transient}
	var pe *pgconn.PgError
	if errors.As(err, &pe) {
		f.code = pe.Code
	}
	s.mu.Lock()
	s.events = append(s.events, f)
	s.mu.Unlock()
}

// retrying runs fn until it succeeds, fails for a reason other than the
// sidecar being away, or soakRetryFor has passed. Each failure is
// recorded; one of the sidecar being away (a lost or refused connection,
// a server shutting down, an index not yet ready or behind a min_lsn
// after a restart) is tried again.
func (s *soak) retrying(ctx context.Context, kind string, fn func(context.Context) error) error {
	deadline := time.Now().Add(soakRetryFor)
	for {
		err := fn(ctx)
		if err == nil || ctx.Err() != nil {
			return err
		}
		away := sidecarAway(err)
		if away && time.Now().After(deadline) {
			away, err = false, fmt.Errorf("still failing after %s: %w", soakRetryFor, err)
		}
		s.failed(kind, err, away)
		if !away {
			return err
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// sidecarAway reports whether err says the sidecar could not answer
// rather than refused the request.
func sidecarAway(err error) bool {
	var pe *pgconn.PgError
	if errors.As(err, &pe) && pe.Code == "55000" {
		return true
	}
	return transient(err)
}

// search is one heapfetch search: mixed k, no filter, a filter that
// post-filters (a tenth of the rows) or one that pre-filters (a
// five-hundredth). Rows come from the table, so a key the writer had
// deleted before the search began must not be among them.
func (s *soak) search(ctx context.Context, w int) error {
	rng := s.rngs[w]
	req := heapfetch.Request{Index: soakIndex, Vector: soakVector(rng), K: []int{1, 5, 10, 20, 50, 100}[rng.IntN(6)]}
	switch rng.IntN(3) {
	case 1:
		req.Filter, req.Args = "cat = $1", []any{rng.IntN(10)}
	case 2:
		req.Filter, req.Args = "cat = $1 AND id % 50 = 0", []any{rng.IntN(10)}
	}
	before, _, _ := s.ledger.newest()
	var rows []heapfetch.Row
	err := s.retrying(ctx, "search", func(ctx context.Context) (err error) {
		rows, err = s.client.Search(ctx, req)
		return err
	})
	if err != nil {
		return ctx.Err() // recorded; the worker goes on
	}
	keys := make([]int64, len(rows))
	for i, r := range rows {
		keys[i], _ = r.Key.(int64)
	}
	if bad := s.ledger.check(keys, before); len(bad) > 0 || len(rows) > req.K {
		s.mu.Lock()
		for _, b := range bad {
			s.violated = append(s.violated, "heapfetch: "+b)
		}
		if len(rows) > req.K {
			s.violated = append(s.violated, fmt.Sprintf("heapfetch: %d rows for k=%d", len(rows), req.K))
		}
		s.mu.Unlock()
	}
	return nil
}

// badRequests are the requests sent on purpose, each with the SQLSTATE
// the sidecar must answer it with.
var badRequests = []struct {
	kind, code string
	args       func(v []float32) []any
}{
	{"wrong_dims", "22023", func(v []float32) []any { return []any{soakIndex, v[1:], 10, ""} }},
	{"unknown_index", "42704", func(v []float32) []any { return []any{"no_such_index", v, 10, ""} }},
	{"k_zero", "22023", func(v []float32) []any { return []any{soakIndex, v, 0, ""} }},
	{"nan", "22023", func(v []float32) []any { v[3] = float32(math.NaN()); return []any{soakIndex, v, 10, ""} }},
	{"bad_option", "22023", func(v []float32) []any { return []any{soakIndex, v, 10, "ef_search=lots"} }},
}

// checkCall is one call of a checking client: every 50th a bad request,
// else a search asked of the sidecar alone, whose answer is checked
// against the ledger. Half of them carry min_lsn (the newest commit), so
// the answer is served at it or later; the other half read applied_lsn
// from vecside_status() first, on the same connection: the same process,
// whose applied LSN only grows.
func (s *soak) checkCall(ctx context.Context, w, i int) error {
	rng := s.rngs[soakClients-soakCheckers+w]
	v := soakVector(rng)
	if i%50 == 49 {
		b := badRequests[(i/50+w)%len(badRequests)]
		err := s.retrying(ctx, "bad_request", func(ctx context.Context) error {
			conn, err := s.checker(ctx, w)
			if err != nil {
				return err
			}
			rows, _ := conn.Query(ctx, "SELECT id, distance FROM knn($1, $2, $3, $4)", b.args(v)...)
			rows.Close()
			err = rows.Err()
			var pe *pgconn.PgError
			switch {
			case err == nil:
				return fmt.Errorf("bad request %s answered", b.kind)
			case errors.As(err, &pe) && pe.Code == b.code:
				return nil
			case sidecarAway(err):
				s.dropChecker(w)
				return err
			}
			return fmt.Errorf("bad request %s: want SQLSTATE %s, got %w", b.kind, b.code, err)
		})
		if err == nil {
			s.mu.Lock()
			s.bad[b.kind]++
			s.mu.Unlock()
		}
		return ctx.Err()
	}
	k := []int{1, 10, 100}[rng.IntN(3)]
	var keys []int64
	var served indexer.LSN
	err := s.retrying(ctx, "check", func(ctx context.Context) error {
		conn, err := s.checker(ctx, w)
		if err != nil {
			return err
		}
		opts := ""
		if i%2 == 0 {
			served, _, _ = s.ledger.newest()
			opts = "min_lsn=" + served.String()
		} else if served, err = appliedLSN(ctx, conn); err != nil {
			s.dropChecker(w)
			return err
		}
		keys, err = knnKeys(ctx, conn, v, k, opts)
		if err != nil {
			s.dropChecker(w)
		}
		return err
	})
	if err != nil {
		return ctx.Err()
	}
	bad := s.ledger.check(keys, served)
	s.mu.Lock()
	s.checked++
	s.violated = append(s.violated, bad...)
	s.mu.Unlock()
	return nil
}

// checker is checking worker w's connection to the sidecar, made anew
// after a failure.
func (s *soak) checker(ctx context.Context, w int) (*pgx.Conn, error) {
	s.mu.Lock()
	conn := s.checkers[w]
	s.mu.Unlock()
	if conn != nil {
		return conn, nil
	}
	conn, err := connectSidecar(ctx, s.url)
	if err != nil {
		return nil, err
	}
	s.mu.Lock()
	s.checkers[w] = conn
	s.mu.Unlock()
	return conn, nil
}

func (s *soak) dropChecker(w int) {
	s.mu.Lock()
	conn := s.checkers[w]
	s.checkers[w] = nil
	s.mu.Unlock()
	if conn != nil {
		conn.Close(context.Background())
	}
}

func connectSidecar(ctx context.Context, url string) (*pgx.Conn, error) {
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		return nil, err
	}
	heapfetch.RegisterTypes(conn.TypeMap())
	return conn, nil
}

// appliedLSN is the soak index's applied LSN, from vecside_status()
// (which takes no WHERE clause).
func appliedLSN(ctx context.Context, conn *pgx.Conn) (indexer.LSN, error) {
	rows, err := conn.Query(ctx, "SELECT index_name, applied_lsn FROM vecside_status()")
	if err != nil {
		return 0, err
	}
	var name, applied, ours string
	_, err = pgx.ForEachRow(rows, []any{&name, &applied}, func() error {
		if name == soakIndex {
			ours = applied
		}
		return nil
	})
	if err != nil {
		return 0, err
	}
	if ours == "" {
		return 0, fmt.Errorf("vecside_status() has no row for %s", soakIndex)
	}
	return indexer.ParseLSN(ours)
}

// knnKeys asks the sidecar alone for the k nearest keys.
func knnKeys(ctx context.Context, conn *pgx.Conn, v []float32, k int, opts string) ([]int64, error) {
	rows, err := conn.Query(ctx, "SELECT id FROM knn($1, $2, $3, $4)", soakIndex, v, k, opts)
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, pgx.RowTo[int64])
}

// probeLag measures commit → visible: at each of the writer's commits
// (the one after the previous probe ended), the time from its COMMIT
// returning until the sidecar answers a search with min_lsn at its LSN.
// The answer is checked too.
func (s *soak) probeLag(ctx context.Context) {
	var conn *pgx.Conn
	defer func() {
		if conn != nil {
			conn.Close(context.Background())
		}
	}()
	rng := rand.New(rand.NewPCG(1, 0x6c6167))
	for ctx.Err() == nil {
		_, _, next := s.ledger.newest()
		select {
		case <-ctx.Done():
			return
		case <-next:
		}
		lsn, at, _ := s.ledger.newest()
		var keys []int64
		err := s.retrying(ctx, "lag", func(ctx context.Context) (err error) {
			if conn == nil {
				if conn, err = connectSidecar(ctx, s.url); err != nil {
					return err
				}
			}
			if keys, err = knnKeys(ctx, conn, soakVector(rng), 1, "min_lsn="+lsn.String()); err != nil {
				conn.Close(context.Background())
				conn = nil
			}
			return err
		})
		if err != nil {
			continue
		}
		now := time.Now()
		bad := s.ledger.check(keys, lsn)
		s.mu.Lock()
		s.lags = append(s.lags, lagSample{at: now, lag: now.Sub(at)})
		s.checked++
		s.violated = append(s.violated, bad...)
		s.mu.Unlock()
	}
}

// restart stops the sidecar every restartEvery, with SIGTERM and SIGKILL
// in turn, starts it again and waits until it is ready. None falls in the
// last 10 s, so that the run ends with a sidecar under load.
func (s *soak) restart(ctx context.Context) {
	for n := 1; ; n++ {
		at := s.began.Add(time.Duration(n) * s.cfg.restartEvery)
		if at.After(s.began.Add(s.cfg.duration - 10*time.Second)) {
			return
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(time.Until(at)):
		}
		o := outage{from: time.Now(), what: "SIGTERM"}
		stop := s.proc.stop
		if n%2 == 0 {
			o.what, stop = "SIGKILL", s.proc.kill
		}
		err := stop()
		if err == nil {
			err = s.proc.start()
		}
		if err == nil {
			_, err = waitApplied(ctx, s.proc, 0, 2*time.Minute)
		}
		o.to = time.Now()
		o.what += fmt.Sprintf(" (%.1fs to ready)", o.to.Sub(o.from).Seconds())
		s.mu.Lock()
		s.outages = append(s.outages, o)
		s.mu.Unlock()
		if err != nil {
			s.failed("restart", err, false)
		}
	}
}

// sample reads the sidecar's RSS and the machine's load every second.
func (s *soak) sample(ctx context.Context) {
	for {
		x := sample{at: time.Now(), load1: load1()}
		x.pid, x.rss, x.ticks = s.usage()
		s.mu.Lock()
		s.samples = append(s.samples, x)
		s.mu.Unlock()
		select {
		case <-ctx.Done():
			return
		case <-time.After(time.Second):
		}
	}
}

// write is one transaction of the writer; a failed one is an error.
func (s *soak) write(ctx context.Context) error {
	if err := s.writer.txn(ctx); err != nil && ctx.Err() == nil {
		s.failed("write", err, false)
	}
	return ctx.Err()
}

// soakVector is a random vector like the table's.
func soakVector(rng *rand.Rand) []float32 {
	v := make([]float32, soakDims)
	for i := range v {
		v[i] = rng.Float32()*2 - 1
	}
	return v
}
