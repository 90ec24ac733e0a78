package main

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/vecside/vecside/indexer"
	"github.com/vecside/vecside/indexer/dataset"
)

// churn streams inserts and deletes through replication into one index
// while a client searches it without pause, waits until everything is
// applied and any retrain has swapped in, then compares its recall with a
// fresh build over the same rows. Deleted are the even ids below
// 2 × deletes.
func (b *bench) churn(ctx context.Context, def string) error {
	sc, entry, err := b.startSidecar(ctx, "churn", def)
	if err != nil {
		return err
	}
	defer sc.Stop()
	conn, err := b.dialSidecar(ctx, sc.Addr.String())
	if err != nil {
		return err
	}
	defer conn.Close(context.Background())
	load, err := b.dialSidecar(ctx, sc.Addr.String())
	if err != nil {
		return err
	}
	defer load.Close(context.Background())

	var queries, failures atomic.Int64
	var firstErr error
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for i := 0; ; i++ {
			select {
			case <-stop:
				return
			default:
			}
			rows, err := load.Query(ctx, "SELECT id FROM knn('churn', $1, $2)", b.queries[i%len(b.queries)], b.p.k)
			if err == nil {
				rows.Close()
				err = rows.Err()
			}
			queries.Add(1)
			if err != nil {
				if failures.Add(1) == 1 {
					firstErr = err
				}
			}
		}
	}()
	t0 := time.Now()
	for lo := b.rows; lo < b.rows+b.p.inserts; lo += 10000 {
		if err := b.copyRows(ctx, lo, min(lo+10000, b.rows+b.p.inserts)); err != nil {
			return err
		}
	}
	for lo := 0; lo < 2*b.p.deletes; lo += 20000 {
		if _, err := b.db.Exec(ctx, "DELETE FROM "+benchTable+" WHERE id >= $1 AND id < $2 AND id % 2 = 0", lo, min(lo+20000, 2*b.p.deletes)); err != nil {
			return err
		}
	}
	var lsn string
	if err := b.db.QueryRow(ctx, "SELECT pg_current_wal_lsn()::text").Scan(&lsn); err != nil {
		return err
	}
	target, err := indexer.ParseLSN(lsn)
	if err != nil {
		return err
	}
	wctx, cancel := context.WithTimeout(ctx, 10*time.Minute)
	defer cancel()
	if err := entry.WaitApplied(wctx, target); err != nil {
		return err
	}
	applied := time.Since(t0)
	b.say("churn: %d inserts and %d deletes applied in %.1fs; waiting for rebuilds", b.p.inserts, b.p.deletes, applied.Seconds())
	for entry.Status().Rebuilding || entry.Copies().WantsRebuild() {
		time.Sleep(100 * time.Millisecond)
	}
	time.Sleep(time.Second) // keep searching across the swap
	// A graph repairs the lists that point at deleted rows in the
	// background, and reports the rows waiting as its figure
	// deleted_rows_unrepaired: wait (a minute at most) until they are
	// below the share that starts a pass.
	for deadline := time.Now().Add(time.Minute); time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
		st := entry.Status().IndexStats
		if waiting, ok := st.Value("deleted_rows_unrepaired"); !ok || waiting < 0.01*float64(st.Rows) {
			break
		}
	}
	repaired := time.Since(t0) - applied
	close(stop)
	wg.Wait()
	status := entry.Status()
	st := status.IndexStats
	figures := ""
	if f := st.FigurePairs(); f != "" {
		figures = fmt.Sprintf(", %.1fs later %s", repaired.Seconds(), f)
	}
	fmt.Fprintf(b.out, "churn %s: %d inserts + %d deletes applied in %.1fs under search load: %d queries, %d failed%s; %d rebuilds, %d rows%s\n",
		def, b.p.inserts, b.p.deletes, applied.Seconds(), queries.Load(), failures.Load(), errSuffix(firstErr), status.Rebuilds, st.Rows, figures)

	var live []int
	for id := range b.rows + b.p.inserts {
		if !(id < 2*b.p.deletes && id%2 == 0) {
			live = append(live, id)
		}
	}
	vecs := make([][]float32, len(live))
	for i, id := range live {
		vecs[i] = b.data[id]
	}
	b.say("churn: ground truth over the %d rows left", len(live))
	b.truth = dataset.GroundTruth(b.p.metric, vecs, b.queries, b.p.k)
	settings := []string{"oversample=1", "oversample=2"}
	if s := b.sweepOf(def); s.Setting != "" {
		settings = append(settings, fmt.Sprintf("oversample=1 %s=%d", s.Setting, s.Low), fmt.Sprintf("oversample=1 %s=%d", s.Setting, s.High))
	}
	churned := make([]float64, len(settings))
	for i, opts := range settings {
		if churned[i], _, err = b.recall(ctx, conn, "churn", opts); err != nil {
			return err
		}
	}
	sc.Stop()
	fresh, _, err := b.startSidecar(ctx, "fresh", def)
	if err != nil {
		return err
	}
	defer fresh.Stop()
	fconn, err := b.dialSidecar(ctx, fresh.Addr.String())
	if err != nil {
		return err
	}
	defer fconn.Close(context.Background())
	for i, opts := range settings {
		r, _, err := b.recall(ctx, fconn, "fresh", opts)
		if err != nil {
			return err
		}
		fmt.Fprintf(b.out, "churn %-22s %-24s recall after churn %.4f, fresh build %.4f, difference %+.4f\n", def, opts, churned[i], r, churned[i]-r)
	}
	return nil
}

func errSuffix(err error) string {
	if err == nil {
		return ""
	}
	return " (first: " + err.Error() + ")"
}
