package replicate

import (
	"context"
	"errors"
	"fmt"
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
// ends. It returns errSlotLost when the slot is invalidated; a dropped
// vector column (which silently takes its table out of the publication)
// puts the affected indexes into the error state.
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

// checkPublication fails the indexes whose table or column has left the
// publication: a dropped table, or a published column dropped with
// CASCADE, which takes its table out of the publication. No message of the
// stream says so, so this check is what ends the answers from such an
// index. Column lists hold attribute numbers, so a renamed column is still
// published.
func (r *Replicator) checkPublication(ctx context.Context, conn *pgx.Conn, tables []*table) error {
	pub := r.cfg.Name
	for _, t := range tables {
		listed, err := readListing(ctx, conn, pub, t.oid)
		if err != nil {
			return err
		}
		var gone error
		if !listed.found {
			var exists bool
			if err := conn.QueryRow(ctx, `SELECT EXISTS (SELECT FROM pg_class WHERE oid = $1)`, t.oid).Scan(&exists); err != nil {
				return fmt.Errorf("looking up table %s: %w", t.qualified(), err)
			}
			gone = fmt.Errorf("table %s was dropped; remove its index from --index, or create the table again and restart vecside to copy it", t.qualified())
			if exists {
				gone = nil
			}
		}
		for _, e := range t.entries {
			if state, _ := e.State(); state == indexer.StateError {
				continue
			}
			col := t.vectors[e.Spec().Column]
			switch {
			case gone != nil:
				failOnly(r.log, e, gone)
			case !listed.found:
				failOnly(r.log, e, fmt.Errorf("table %s left publication %s (was column %s dropped?); fix the table, then restart vecside to rebuild the index", t.qualified(), pub, indexer.QuoteIdent(col.name)))
			case !listed.has(col.attnum) || !listed.has(t.key.attnum):
				failOnly(r.log, e, fmt.Errorf("the column list of publication %s no longer holds columns %s and %s of %s; restart vecside: it publishes them again and copies the table", pub, indexer.QuoteIdent(t.key.name), indexer.QuoteIdent(col.name), t.qualified()))
			}
		}
	}
	return nil
}
