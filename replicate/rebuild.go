package replicate

import (
	"context"
	"fmt"
	"time"

	"github.com/vecside/vecside/indexer"
)

// rebuildCheck is how often the indexes are asked whether their structure
// has drifted from their data (see indexer.Entry.WantsRebuild).
const rebuildCheck = time.Second

// rebuilds watches the indexes until ctx ends and builds again, one at a
// time and beside the stream, each one whose structure has drifted from
// its data: IVF lists trained for far fewer rows, or none. A rebuild is a
// table sync into a new index, which replaces the serving one when its
// copy ends: the new lists are trained on a fresh sample and every row is
// encoded from its exact vector, never from a reconstruction of its old
// codes, so errors do not grow from one rebuild to the next. A rebuild
// that fails is dropped (the serving index goes on) and tried again
// later; it never stops the stream.
func (r *Replicator) rebuilds(ctx context.Context, tables []*table) error {
	tick := time.NewTicker(rebuildCheck)
	defer tick.Stop()
	retry := map[Index]time.Time{}
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-tick.C:
		}
		for _, t := range tables {
			for _, e := range t.entries {
				if !e.Copies().WantsRebuild() || time.Now().Before(retry[e]) {
					continue
				}
				began := time.Now()
				r.log.Info("rebuilding an index from its table", "index", e.Spec().Name, "rows", e.Status().Rows)
				if err := r.rebuild(ctx, t, e); err != nil {
					if ctx.Err() != nil {
						e.Copies().AbortSync(nil)
						return nil
					}
					e.Copies().AbortSync(err)
					retry[e] = time.Now().Add(time.Minute)
					r.log.Warn("rebuilding an index failed; it keeps serving and will be rebuilt later", "index", e.Spec().Name, "err", err)
					continue
				}
				r.log.Info("index rebuilt", "index", e.Spec().Name, "rows", e.Status().Rows, "took", time.Since(began).Round(time.Millisecond).String())
			}
		}
	}
}

// rebuild copies t into a new index for e under a temporary slot's
// snapshot, as a table sync does, while the stream goes on.
func (r *Replicator) rebuild(ctx context.Context, t *table, e Index) error {
	if err := r.beginSyncs(ctx, t, []Index{e}, true); err != nil {
		return err
	}
	qctx, cancel := r.bounded(ctx)
	repl, err := connectReplication(qctx, r.cfg.Source)
	cancel()
	if err != nil {
		return err
	}
	defer repl.Close(context.Background())
	slot, err := createSlot(ctx, repl, fmt.Sprintf("%s_sync_%d", r.cfg.Name, t.oid), true, r.cfg.SlotTimeout)
	if err != nil {
		return err
	}
	point, err := indexer.ParseLSN(slot.ConsistentPoint)
	if err != nil {
		return err
	}
	e.Copies().SetSyncPoint(point)
	return r.copy(ctx, r.besideStream(r.copyJob(slot.SnapshotName, t, []Index{e})), func() { repl.Close(context.Background()) })
}
