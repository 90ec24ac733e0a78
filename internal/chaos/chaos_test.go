package chaos

import (
	"context"
	"fmt"
	"math/rand/v2"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/vecside/vecside/internal/pgtest"
)

// mode sizes a seed's run.
type mode struct {
	name        string
	duration    time.Duration // of the workload under faults
	extraFaults int           // faults beyond one of each kind, at most
	bigRows     int           // the large transaction on bulk
	itemsRows   int           // before the sidecar first starts
	bulkRows    int
}

// fast runs in CI: about 20 s per seed on two cores.
var fast = mode{
	name: "fast", duration: 10 * time.Second, extraFaults: 1, itemsRows: 200, bulkRows: 2000,
	bigRows: 100_000,
}

var long = mode{
	name: "long", duration: 20 * time.Second, extraFaults: 4, itemsRows: 500, bulkRows: 5000,
	bigRows: 120_000,
}

// seedResult is one seed's outcome, for the summary.
type seedResult struct {
	faults  faultCounts
	txns    int
	retries int
	rows    int // valid rows in the two tables at the end
	checked int // samples where confirmed ≤ covered was checked
	took    time.Duration
}

func TestChaos(t *testing.T) {
	m := fast
	if *flagLong {
		m = long
	}
	seeds := make([]int64, 0, *flagSeeds)
	if *flagSeed != 0 {
		seeds = append(seeds, *flagSeed)
	} else {
		for s := *flagFrom; s < *flagFrom+*flagSeeds; s++ {
			seeds = append(seeds, int64(s))
		}
	}
	var total seedResult
	var failed []int64
	for _, seed := range seeds {
		t.Run(fmt.Sprintf("seed=%d", seed), func(t *testing.T) {
			// Deferred: a seed that fails with t.Fatal ends here too.
			defer func() {
				if t.Failed() {
					failed = append(failed, seed)
				}
			}()
			r := runSeed(t, m, seed)
			for k := range total.faults {
				total.faults[k] += r.faults[k]
			}
			total.txns += r.txns
			total.retries += r.retries
			total.took += r.took
			total.checked += r.checked
		})
	}
	t.Logf("%s mode, %d seeds: %s txns=%d retries=%d checked_samples=%d, %.1fs per seed; failed seeds: %v",
		m.name, len(seeds), total.faults, total.txns, total.retries, total.checked, total.took.Seconds()/float64(len(seeds)), failed)
}

// runSeed runs one seed: a fresh database and sidecar, the workload under
// the seed's faults, then the invariants.
func runSeed(t *testing.T, m mode, seed int64) (res seedResult) {
	began := time.Now()
	rng := rand.New(rand.NewPCG(uint64(seed), 0x6368616f73))
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	dsn := cluster.NewDatabase(t)
	db := &pgClient{dsn: dsn}
	defer db.close()
	if _, err := db.exec(ctx, setupSQL+initialSQL(rng, m.itemsRows, m.bulkRows)); err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	slot := fmt.Sprintf("chaos_%d", seed)
	ckpt := checkpointings[rng.IntN(len(checkpointings))]
	proxy := pgtest.NewProxy(t, fmt.Sprintf("127.0.0.1:%d", cluster.Port))
	proc := launch(t, dir, proxy.Via(t, dsn), slot, indexDefs, ckpt, fmt.Sprintf("seed-%d", seed),
		fmt.Sprintf("seed %d failed; replay with -chaos.seed %d. ", seed, seed))
	first, err := currentLSN(ctx, db)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := waitApplied(ctx, proc, first, 2*time.Minute); err != nil {
		t.Fatal(err)
	}

	// The run: two writers and the sampler until the faults are over and
	// the duration has passed.
	faults := schedule(rng, m.duration, rng.IntN(m.extraFaults+1), time.Second)
	items := newItemsGen(rand.New(rand.NewPCG(uint64(seed), 1)), m.itemsRows)
	bulk := newBulkGen(rand.New(rand.NewPCG(uint64(seed), 2)), m.bulkRows)
	bigAt := time.Duration(rng.Int64N(int64(m.duration / 2)))
	t.Logf("seed %d: faults %v, %d-row transaction at %s, checkpoints every %s or %d changes", seed, faults, m.bigRows, bigAt, ckpt.interval, ckpt.changes)

	samp := &sampler{proc: proc, db: &pgClient{dsn: dsn}, slot: slot}
	sctx, stopSampler := context.WithCancel(ctx)
	var sampling sync.WaitGroup
	sampling.Go(func() { samp.run(sctx) })
	defer func() {
		stopSampler()
		sampling.Wait()
		samp.db.close()
	}()

	start := time.Now()
	stopWriting := make(chan struct{})
	writers := make(chan writerResult, 2)
	go func() { writers <- writeItems(ctx, dsn, items, stopWriting) }()
	go func() { writers <- writeBulk(ctx, dsn, bulk, m.bigRows, start.Add(bigAt), stopWriting) }()
	in := &injector{proc: proc, proxy: proxy, slot: slot, logf: t.Logf}
	injErr := in.run(ctx, start, faults)
	if wait := time.Until(start.Add(m.duration)); wait > 0 {
		time.Sleep(wait) // the workload's length, not a synchronisation
	}
	close(stopWriting)
	for range 2 {
		w := <-writers
		res.txns += w.txns
		res.retries += w.retries
		if w.err != nil {
			t.Errorf("writer: %v", w.err)
		}
	}
	res.faults = in.counts
	if injErr != nil {
		t.Fatalf("fault injection: %v", injErr)
	}
	for k, n := range res.faults {
		if n == 0 {
			t.Errorf("fault %s never fired", faultKind(k))
		}
	}

	// Convergence: caught up with everything written, the sidecar's
	// counts are the tables'.
	status, err := caughtUp(ctx, db, proc, 3*time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	tables := map[string]tableState{}
	for _, tb := range []struct {
		index, table string
		dims         int
	}{{"items_embedding", "items", itemsDims}, {"bulk_embedding", "bulk", bulkDims}} {
		ts, err := readTable(ctx, db, tb.table, tb.dims)
		if err != nil {
			t.Fatal(err)
		}
		tables[tb.index] = ts
		res.rows += len(ts.valid)
		for _, s := range status {
			if s.name == tb.index && (s.rows != int64(len(ts.valid)) || s.skipped != int64(ts.invalid)) {
				t.Errorf("%s: vecside_status rows=%d skipped_rows=%d, table %s has %d valid and %d invalid rows",
					s.name, s.rows, s.skipped, tb.table, len(ts.valid), ts.invalid)
			}
		}
	}

	// Idle does not mean stuck.
	if err := idleAdvance(ctx, db, slot, 90*time.Second); err != nil {
		t.Error(err)
	}

	// A clean stop leaves checkpoints equal to the tables, covering at
	// least what the slot confirmed.
	stopSampler()
	sampling.Wait()
	if err := proc.stop(); err != nil {
		t.Fatal(err)
	}
	confirmed, _, err := slotPosition(ctx, db, slot)
	if err != nil {
		t.Fatal(err)
	}
	for _, def := range indexDefs {
		e, covered, err := loadCheckpoint(filepath.Join(dir, "data"), def)
		if err != nil {
			t.Fatalf("loading the checkpoint of %s: %v", def, err)
		}
		name := e.Spec().Name
		if confirmed > covered {
			t.Errorf("%s: the slot confirmed %s, the checkpoint covers only %s", name, confirmed, covered)
		}
		for _, d := range compareIndex(e, tables[name]) {
			t.Errorf("%s checkpoint: %s", name, d)
		}
	}

	samples, checked, violations := samp.result()
	res.checked = checked
	for _, v := range violations {
		t.Errorf("slot ahead of durable state: %s", v)
	}
	if checked == 0 {
		t.Errorf("no sample compared confirmed_flush_lsn with the covered LSN (%d taken)", samples)
	}
	for _, x := range proc.unexpectedExits() {
		t.Errorf("vecside exited unexpectedly: %s", x)
	}
	res.took = time.Since(began)
	t.Logf("seed %d: %s txns=%d retries=%d rows=%d samples=%d/%d starts=%d took=%.1fs",
		seed, res.faults, res.txns, res.retries, res.rows, checked, samples, proc.startCount(), res.took.Seconds())
	return res
}
