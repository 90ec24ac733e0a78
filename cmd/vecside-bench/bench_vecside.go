package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/vecside/vecside/cmd/vecside-bench/internal/benchreport"
	"github.com/vecside/vecside/cmd/vecside/sidecar"
	"github.com/vecside/vecside/heapfetch"
	"github.com/vecside/vecside/indexer"
	"github.com/vecside/vecside/replicate"
	"github.com/vecside/vecside/rpc"
)

// vecsideTarget is one index served by one sidecar, with the bench's
// connections to it and to the heap.
type vecsideTarget struct {
	def, name string
	addr      string           // the sidecar's
	entry     *indexer.Entry   // in process only
	indexer   *indexer.Indexer // in process only
	proxy     *childProxy      // the child's serve --proxy (--process only)
	pid       int              // the vecside serve child's (--process only)
	conns     []*pgx.Conn      // to the sidecar, one per client
	heaps     []*pgx.Conn      // to Postgres, one per client
	hf        []*heapfetch.Client
	closers   []func()
}

func (t *vecsideTarget) stop() {
	for i := len(t.closers) - 1; i >= 0; i-- {
		t.closers[i]()
	}
}

// waitApplied returns once the index has applied lsn: in process, as the
// indexer reports it; in a child process, as vecside_status() does.
func (t *vecsideTarget) waitApplied(ctx context.Context, lsn indexer.LSN) error {
	wctx, cancel := context.WithTimeout(ctx, 10*time.Minute)
	defer cancel()
	if t.entry != nil {
		return t.entry.WaitApplied(wctx, lsn)
	}
	for {
		var applied indexer.LSN
		// The child serves this index alone.
		if err := t.conns[0].QueryRow(wctx, "SELECT applied_lsn FROM vecside_status()").Scan(&applied); err != nil {
			return err
		}
		if applied >= lsn {
			return nil
		}
		select {
		case <-wctx.Done():
			return fmt.Errorf("not applied %s after 10 minutes: %w", lsn, wctx.Err())
		case <-time.After(50 * time.Millisecond):
		}
	}
}

func sidecarName(n int) string { return fmt.Sprintf("bench_%d", n) }

// startVecside starts a sidecar with one index (in this process, or as a
// child process with --process), records its build and opens the
// clients' connections.
func (b *bench) startVecside(ctx context.Context, n int, def string) (t *vecsideTarget, err error) {
	t = &vecsideTarget{def: def, name: sidecarName(n)}
	defer func() {
		if err != nil {
			t.stop()
		}
	}()
	t0 := time.Now()
	build := benchreport.Build{System: "vecside", Index: def}
	if b.p.process {
		proc, err := b.startProcess(ctx, t.name, def)
		if err != nil {
			return nil, err
		}
		t.pid = proc.cmd.Process.Pid
		t.closers = append(t.closers, proc.stop)
		t.addr, t.proxy = proc.addr, proc.proxy
		build.IndexBytes, build.BytesPerRow = proc.indexBytes, perRow(proc.indexBytes, proc.rows)
		build.RSSBytes, build.PeakRSSBytes = proc.rss, proc.peak
	} else {
		sc, entry, err := b.startSidecar(ctx, t.name, def)
		if err != nil {
			return nil, err
		}
		t.closers = append(t.closers, func() { sc.Stop() })
		t.addr, t.entry, t.indexer = sc.Addr.String(), entry, sc.Indexer
		st := entry.Status().IndexStats
		build.IndexBytes, build.BytesPerRow = st.Bytes(), st.BytesPerRow()
	}
	build.Seconds = time.Since(t0).Seconds()
	b.report.Header.Builds = append(b.report.Header.Builds, build)
	b.say("%s ready in %.1fs: %.0f bytes/row, %d MiB", def, build.Seconds, build.BytesPerRow, build.IndexBytes>>20)

	t.conns = make([]*pgx.Conn, b.p.clients)
	t.heaps = make([]*pgx.Conn, b.p.clients)
	for i := range t.conns {
		if t.conns[i], err = b.dialSidecar(ctx, t.addr); err != nil {
			return nil, err
		}
		t.closers = append(t.closers, func() { t.conns[i].Close(context.Background()) })
		if t.heaps[i], err = pgx.Connect(ctx, b.dsn); err != nil {
			return nil, err
		}
		t.closers = append(t.closers, func() { t.heaps[i].Close(context.Background()) })
		t.hf = append(t.hf, heapfetch.New(t.conns[i], t.heaps[i]))
	}
	if b.p.e2e {
		// The heap connections are new backends: see warmPGVector.
		b.say("%s: warming %d heap connection(s): every query once end to end", def, len(t.hf))
		if err := b.everyQuery(len(t.hf), func(c, qi int) error {
			_, err := t.hf[c].Search(ctx, heapfetch.Request{Index: t.name, Vector: b.queries[qi], K: b.p.k})
			return err
		}); err != nil {
			return nil, fmt.Errorf("%s: warming up: %w", def, err)
		}
	}
	return t, nil
}

// startSidecar starts a sidecar with one index over the table and waits
// until it is ready, showing the copy's progress.
func (b *bench) startSidecar(ctx context.Context, name, def string) (*sidecar.Sidecar, *indexer.Entry, error) {
	spec := fmt.Sprintf("%s=public.%s(embedding) key=id metric=%s %s", name, benchTable, b.p.metric, def)
	// A slot left behind by an interrupted run would resume a stream over
	// a table since replaced.
	if _, err := replicate.Teardown(ctx, b.dsn, "vecside_"+name, sidecar.TeardownWait); err != nil {
		return nil, nil, err
	}
	b.say("%s: starting a sidecar for %s", def, spec)
	sc, err := sidecar.Start(ctx, sidecar.Config{
		Source: b.dsn, Name: "vecside_" + name, Listen: "127.0.0.1:0", Auth: rpc.AuthSCRAM, Users: b.users,
		Indexes: []string{spec}, Logger: slog.New(slog.NewTextHandler(io.Discard, nil)),
	})
	if err != nil {
		return nil, nil, err
	}
	entry, err := sc.Indexer.Get(name)
	for err == nil {
		if err = sidecar.WaitReady(ctx, entry, 10*time.Second); err == nil {
			return sc, entry, nil
		}
		if state, _ := entry.State(); state == indexer.StateError {
			break
		}
		st := entry.Status()
		b.say("%s: %s, %d of %d rows copied, %d indexed", def, st.State, st.CopiedRows, b.rows, st.Rows)
		err = nil
	}
	sc.Stop()
	return nil, nil, err
}

// measureVecside measures one index at one setting: recall and candidates
// over every query, then sidecar-only and end-to-end timings at
// concurrency 1 and --clients.
func (b *bench) measureVecside(ctx context.Context, t *vecsideTarget, opts string) error {
	so := indexer.DefaultSearchOptions()
	parsed, err := indexer.ParseOptions(opts)
	if err != nil {
		return err
	}
	if err := so.Apply(parsed); err != nil {
		return err
	}
	params := map[string]float64{}
	for _, f := range strings.Fields(opts) {
		k, v, _ := strings.Cut(f, "=")
		params[k], _ = strconv.ParseFloat(v, 64)
	}
	b.sidecarPID = t.pid
	b.say("vecside %s %s: recall over %d queries", t.def, opts, len(b.queries))
	recall, cands, tm := b.recallPass(func(qi int) ([]int64, error) { return b.knn(ctx, t.conns[0], t.name, qi, opts) })
	if tm.err != nil {
		return tm.err
	}
	if err := b.readCalibration(ctx, t, params, recall); err != nil {
		return err
	}
	if b.p.paths[pathSidecar] {
		b.point("vecside", t.def, benchreport.SidecarOnly, params, recall, &cands, 1, tm)
		if b.p.clients > 1 {
			tm := b.timeRun(b.p.clients, func(c, qi int) error { _, err := b.knn(ctx, t.conns[c], t.name, qi, opts); return err })
			if tm.err != nil {
				return tm.err
			}
			b.point("vecside", t.def, benchreport.SidecarOnly, params, recall, &cands, b.p.clients, tm)
		}
	}
	if b.p.e2e {
		rest := strings.TrimSpace(strings.Replace(opts, fmt.Sprintf("oversample=%g", so.Oversample), "", 1))
		e2e := func(c, qi int) error {
			_, err := t.hf[c].Search(ctx, heapfetch.Request{Index: t.name, Vector: b.queries[qi], K: b.p.k, Oversample: so.Oversample, Options: rest})
			return err
		}
		for _, clients := range concurrencies(b.p.clients) {
			tm := b.timeRun(clients, e2e)
			if tm.err != nil {
				return tm.err
			}
			b.point("vecside", t.def, benchreport.EndToEnd, params, recall, &cands, clients, tm)
		}
	}
	return b.measureVecsidePaths(ctx, t, opts, params, &cands)
}

// readCalibration reads the index's recall calibration after a recall
// pass, for the points of a setting that left it the tuning (see
// benchreport.Point.Tuned): the estimate is read for the offset of the
// queries just run.
func (b *bench) readCalibration(ctx context.Context, t *vecsideTarget, params map[string]float64, measured float64) error {
	b.tuned, b.estimate = "", nil
	type calibration struct {
		Name     string   `db:"index_name"`
		Setting  *string  `db:"recall_setting"`
		Estimate *float64 `db:"recall_estimate"`
		Offset   *float64 `db:"query_offset"`
	}
	rows, _ := t.conns[0].Query(ctx, "SELECT index_name, recall_setting, recall_estimate, query_offset FROM vecside_status()")
	all, err := pgx.CollectRows(rows, pgx.RowToStructByName[calibration])
	if err != nil {
		return err
	}
	i := slices.IndexFunc(all, func(c calibration) bool { return c.Name == t.name && c.Setting != nil })
	if i < 0 {
		return nil // not calibrated, or a kind without a setting to tune
	}
	c := all[i]
	if name, _, _ := strings.Cut(*c.Setting, "="); params[name] != 0 {
		return nil
	}
	b.tuned, b.estimate = *c.Setting, c.Estimate
	b.say("  calibrated: %s for queries %.2f of the rows' spacing off them, recall@10 estimated %.4f, measured %.4f", *c.Setting, *c.Offset, *c.Estimate, measured)
	return nil
}

// concurrencies are 1 and --clients.
func concurrencies(clients int) []int {
	if clients == 1 {
		return []int{1}
	}
	return []int{1, clients}
}

// knn asks the sidecar for query qi's candidates.
func (b *bench) knn(ctx context.Context, conn *pgx.Conn, name string, qi int, opts string) ([]int64, error) {
	rows, err := conn.Query(ctx, "SELECT id FROM knn($1, $2, $3, $4)", name, b.queries[qi], b.p.k, opts)
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, pgx.RowTo[int64])
}

// recall asks the sidecar for every query's candidates and returns
// recall@k after exact re-rank and the mean number of candidates.
func (b *bench) recall(ctx context.Context, conn *pgx.Conn, name, opts string) (recall, cands float64, err error) {
	recall, cands, t := b.recallPass(func(qi int) ([]int64, error) { return b.knn(ctx, conn, name, qi, opts) })
	return recall, cands, t.err
}
