package replicate

import (
	"context"
	"errors"
	"fmt"
	"slices"

	"github.com/jackc/pgx/v5"
	"github.com/vecside/vecside/indexer"
)

// errCatalogChanged ends a session when the catalog no longer matches
// what it resolved: a table was dropped, left the publication or lost
// columns from its list, or one that an index waits for can be copied
// now. The next session resolves every table anew, at once: a table
// created again under its name is a new OID, bound and copied (follow),
// and the indexes of the others resume streaming where they were.
var errCatalogChanged = errors.New("the catalog changed")

// waitFor is what a waiting index waits for, and how the health checks
// see that it happened.
type waitFor struct {
	why string
	// table, qualified and quoted, is the table that does not exist yet;
	// empty when the index waits for the publication instead.
	table string
	// oid and attnums: the table that the publication must include, with
	// those columns in its column list.
	oid     uint32
	attnums []int16
}

// over reports whether what w waits for has happened, or can no longer:
// the table exists, or the publication now lists it (or it was dropped
// meanwhile: its index then waits for a table of its name); a wait for
// nothing (copyAgain's) is over at once.
func (w waitFor) over(ctx context.Context, conn *pgx.Conn, pub string) (bool, error) {
	if w.table == "" && w.oid == 0 {
		return true, nil
	}
	if w.table != "" {
		var exists bool
		err := conn.QueryRow(ctx, `SELECT to_regclass($1) IS NOT NULL`, w.table).Scan(&exists)
		return exists, err
	}
	if exists, err := relationExists(ctx, conn, w.oid); err != nil || !exists {
		return !exists, err
	}
	listed, err := readListing(ctx, conn, pub, w.oid)
	if err != nil {
		return false, err
	}
	return !slices.ContainsFunc(w.attnums, func(n int16) bool { return !listed.has(n) }), nil
}

// relationExists reports whether a relation of OID oid exists.
func relationExists(ctx context.Context, conn *pgx.Conn, oid uint32) (bool, error) {
	var exists bool
	err := conn.QueryRow(ctx, `SELECT EXISTS (SELECT FROM pg_class WHERE oid = $1)`, oid).Scan(&exists)
	return exists, err
}

// missingTable is the wait of an index for table (qualified, quoted) to
// exist.
func missingTable(table, why string) waitFor {
	return waitFor{table: table, why: why}
}

// unpublishedTable is the wait of t's indexes for the publication to
// include t, which the sidecar's role may not do: fix is the statement
// that does it.
func unpublishedTable(t *table, pub, fix string) waitFor {
	attnums := make([]int16, len(t.published))
	for i, c := range t.published {
		attnums[i] = c.attnum
	}
	return waitFor{oid: t.oid, attnums: attnums,
		why: fmt.Sprintf("waiting for publication %s to include %s; as its owner or a superuser, run: %s", pub, t.qualified(), fix)}
}

// copyAgain has e wait while the session ends: the next one resolves
// its table as it is now (a column of another type, put back into the
// publication) and copies it, or fails e if it cannot be served.
func (r *Replicator) copyAgain(e Index, why string) {
	r.wait(e, waitFor{why: why})
	r.changed()
}

// wait empties e and has it wait for w; the health checks watch for
// the end of the wait, and the session after copies its table.
func (r *Replicator) wait(e Index, w waitFor) {
	r.mu.Lock()
	r.pending[e] = true
	r.waiting[e] = w
	r.mu.Unlock()
	if state, why := e.State(); state != indexer.StateWaiting || why != w.why {
		r.log.Warn("index waiting", "index", e.Spec().Name, "for", w.why)
	}
	e.Wait(w.why)
}

// checkWaiting returns errCatalogChanged once what an index waits for has
// happened.
func (r *Replicator) checkWaiting(ctx context.Context, conn *pgx.Conn) error {
	r.mu.Lock()
	waits := make([]waitFor, 0, len(r.waiting))
	for e, w := range r.waiting {
		// One failed since (its table was found wrong) waits no more.
		if state, _ := e.State(); state == indexer.StateWaiting {
			waits = append(waits, w)
		} else {
			delete(r.waiting, e)
		}
	}
	r.mu.Unlock()
	for _, w := range waits {
		over, err := w.over(ctx, conn, r.cfg.Name)
		if err != nil {
			return fmt.Errorf("health check: %w", err)
		}
		if over {
			r.log.Info("what an index waited for happened; resolving its table again", "was", w.why)
			return errCatalogChanged
		}
	}
	return nil
}
