package replicate

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/vecside/vecside/indexer"
)

// errSlotLost: Postgres invalidated the slot (it retained more WAL than
// max_slot_wal_keep_size allows); the changes it held are gone.
var errSlotLost = errors.New("replication slot invalidated")

// isSlotLost recognises the errors Postgres gives for an invalidated slot:
// "cannot read from logical replication slot" with a DETAIL saying it was
// invalidated (PG15), or "can no longer get changes" (later versions).
func isSlotLost(err error) bool {
	if errors.Is(err, errSlotLost) {
		return true
	}
	var pgErr *pgconn.PgError
	if !errors.As(err, &pgErr) {
		return false
	}
	text := pgErr.Message + " " + pgErr.Detail
	return strings.Contains(text, "invalidated") || strings.Contains(text, "can no longer get changes")
}

// monitor checks the slot and the publication every interval until ctx
// ends. It returns errSlotLost when the slot is invalidated, and
// errCatalogChanged when a table must be resolved again (see
// checkPublication).
func (r *Replicator) monitor(ctx context.Context, tables []*table, every time.Duration) error {
	qctx, cancel := r.bounded(ctx)
	conn, err := pgx.Connect(qctx, r.cfg.Source)
	cancel()
	if err != nil {
		return fmt.Errorf("connecting for health checks: %w", err)
	}
	defer conn.Close(context.Background())
	tick := time.NewTicker(every)
	defer tick.Stop()
	for {
		// Bounded: a partitioned connection answers nothing, ever.
		cctx, cancel := r.bounded(ctx)
		err := r.checkHealth(cctx, conn, tables)
		cancel()
		if err != nil {
			if ctx.Err() == nil && errors.Is(err, context.DeadlineExceeded) {
				err = fmt.Errorf("health check: no answer within %s (--receive-timeout): %w", r.cfg.ReceiveTimeout, err)
			}
			return err
		}
		select {
		case <-ctx.Done():
			return nil
		case <-r.change:
			return errCatalogChanged
		case <-tick.C:
		}
	}
}

// checkHealth checks the slot, reports it, and checks the publication.
func (r *Replicator) checkHealth(ctx context.Context, conn *pgx.Conn, tables []*table) error {
	h, err := slotHealth(ctx, conn, r.cfg.Name)
	if err != nil {
		return err
	}
	if r.cfg.ReportHealth != nil {
		r.cfg.ReportHealth(h)
	}
	if h.SlotState == "lost" {
		return fmt.Errorf("%w: slot %s has wal_status lost", errSlotLost, r.cfg.Name)
	}
	return r.checkPublication(ctx, conn, tables)
}

func slotHealth(ctx context.Context, conn *pgx.Conn, slot string) (indexer.SourceHealth, error) {
	h := indexer.SourceHealth{CheckedAt: time.Now()}
	var state, confirmed *string
	var wal string
	var retained, xminAge *int64
	err := conn.QueryRow(ctx, `
		SELECT s.wal_status, s.confirmed_flush_lsn::text, pg_current_wal_lsn()::text,
		       (pg_current_wal_lsn() - s.restart_lsn)::bigint, coalesce(s.safe_wal_size, -1),
		       age(s.catalog_xmin)::bigint
		FROM pg_replication_slots s WHERE s.slot_name = $1`, slot).
		Scan(&state, &confirmed, &wal, &retained, &h.SafeWALBytes, &xminAge)
	if errors.Is(err, pgx.ErrNoRows) {
		h.SlotState = "missing"
		return h, nil
	}
	if err != nil {
		return h, fmt.Errorf("reading slot %s: %w", slot, err)
	}
	h.SlotState = deref(state)
	h.WAL, _ = indexer.ParseLSN(wal)
	if confirmed != nil {
		h.Confirmed, _ = indexer.ParseLSN(*confirmed)
	}
	h.RetainedBytes, h.CatalogXminAge = deref(retained), deref(xminAge)
	return h, nil
}

func deref[T any](p *T) T {
	var zero T
	if p == nil {
		return zero
	}
	return *p
}

// checkPublication watches the tables for what no message of the stream
// says: a table dropped (a table created again under its name is another
// OID, of which the stream says nothing either), or one that left the
// publication or lost a column from its list (a published column dropped
// with CASCADE takes its table out of the publication). Their indexes are
// emptied and wait, and errCatalogChanged ends the session: the next one
// resolves the tables again, copies a table created again, puts back into
// the publication what left it, and fails an index whose column is gone.
// Column lists hold attribute numbers, so a renamed column is still
// published. A table renamed is shown under its new name at once, before
// any change to it comes with the name (followName). Then it checks what
// waiting indexes wait for.
func (r *Replicator) checkPublication(ctx context.Context, conn *pgx.Conn, tables []*table) error {
	pub := r.cfg.Name
	changed := false
	for _, t := range tables {
		listed, err := readListing(ctx, conn, pub, t.oid)
		if err != nil {
			return err
		}
		var why string
		switch {
		case !listed.found:
			exists, err := relationExists(ctx, conn, t.oid)
			if err != nil {
				return fmt.Errorf("looking up table %s: %w", t.qualified(), err)
			}
			why = fmt.Sprintf("table %s (OID %d) was dropped; waiting for a table of that name, which is copied", t.qualified(), t.oid)
			if exists {
				why = fmt.Sprintf("table %s left publication %s (was a column dropped?); resolving it again", t.qualified(), pub)
			}
		case !listed.has(t.key.attnum) || slices.ContainsFunc(t.entries, func(e Index) bool { return !listed.has(t.vectors[e.Spec().Column].attnum) }):
			why = fmt.Sprintf("the column list of publication %s no longer holds the indexed columns of %s; publishing them again", pub, t.qualified())
		}
		if why == "" {
			if err := r.followName(ctx, conn, t); err != nil {
				return err
			}
			continue
		}
		for _, e := range t.entries {
			if state, _ := e.State(); state.Follows() {
				r.wait(e, missingTable(t.qualified(), why))
				changed = true
			}
		}
	}
	if changed {
		return errCatalogChanged
	}
	return r.checkWaiting(ctx, conn)
}

// followName shows t's indexes under the name the catalog gives t's OID
// now, as a Relation message would once a change to the table comes: a
// table created under the old name is then never taken for t by a reader
// of vecside_status() (the proxy's lookup among others).
func (r *Replicator) followName(ctx context.Context, conn *pgx.Conn, t *table) error {
	var schema, name string
	err := conn.QueryRow(ctx, `SELECT n.nspname, c.relname FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace WHERE c.oid = $1`, t.oid).Scan(&schema, &name)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil // dropped since: the next check says so
	}
	if err != nil {
		return fmt.Errorf("looking up table %s: %w", t.qualified(), err)
	}
	for _, e := range t.entries {
		if was := e.Status().Table; was != schema+"."+name {
			r.log.Info("following a renamed table", "index", e.Spec().Name, "oid", t.oid, "was", was, "now", schema+"."+name)
			e.Durable().SetTable(indexer.Table{OID: t.oid, Schema: schema, Name: name})
		}
	}
	return nil
}
