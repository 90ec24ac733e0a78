//go:build cgo

package proxy

import (
	"context"
	"errors"
	"log/slog"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/vecside/vecside/heapfetch"
)

// indexed is one ready index of the sidecar, as vecside_status() reports
// it: names are as PostgreSQL stores them (unquoted, case kept). exact
// says its distances are exact (store=float), so that its candidates
// come with xids (the fast path, accelerate.go).
type indexed struct {
	name, schema, table, column, key, metric string
	exact                                    bool
}

// catalog is what the sidecar indexes, refreshed in the background. A
// sidecar that does not answer leaves it as it was: a statement on an
// index that is gone or no longer ready then fails to get candidates
// and passes through, as it does while the sidecar is down.
type catalog struct {
	status   heapfetch.Querier
	interval time.Duration
	indexes  atomic.Pointer[map[[2]string][]indexed] // by table, column
}

// run refreshes the catalog every interval until ctx ends.
func (c *catalog) run(ctx context.Context, log *slog.Logger) {
	t := time.NewTicker(c.interval)
	defer t.Stop()
	failing := false
	for {
		err := c.refresh(ctx)
		if err != nil && !failing && ctx.Err() == nil {
			log.Warn("proxy: the sidecar does not answer vecside_status(); statements pass through while it cannot give candidates", "err", err)
		}
		failing = err != nil
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

func (c *catalog) refresh(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, sidecarTimeout)
	defer cancel()
	m, err := c.read(ctx, true)
	var pe *pgconn.PgError
	if errors.As(err, &pe) && pe.Code == "42703" {
		// A sidecar older than exact_distances: its indexes are read
		// without it, none exact (no fast path), so that a proxy may be
		// upgraded before the sidecars it asks.
		m, err = c.read(ctx, false)
	}
	if err != nil {
		return err
	}
	c.indexes.Store(&m)
	return nil
}

// read reads the sidecar's ready indexes, with exact_distances if exact.
func (c *catalog) read(ctx context.Context, exact bool) (map[[2]string][]indexed, error) {
	columns := "index_name, table_name, column_name, key_column, metric, state"
	var ix indexed
	var table, state string
	dest := []any{&ix.name, &table, &ix.column, &ix.key, &ix.metric, &state}
	if exact {
		columns += ", exact_distances"
		dest = append(dest, &ix.exact)
	}
	rows, err := c.status.Query(ctx, "SELECT "+columns+" FROM vecside_status()")
	if err != nil {
		return nil, err
	}
	m := map[[2]string][]indexed{}
	_, err = pgx.ForEachRow(rows, dest, func() error {
		if state != "ready" {
			return nil
		}
		// table_name is schema.table, neither quoted: a name split at the
		// wrong dot fails the probe (accelerate.go) and passes through.
		for i := 0; i < len(table); i++ {
			if table[i] == '.' {
				ix.schema, ix.table = table[:i], table[i+1:]
				break
			}
		}
		k := [2]string{ix.table, ix.column}
		m[k] = append(m[k], ix)
		return nil
	})
	return m, err
}

// lookup returns a ready index on schema.table(column) with metric; an
// empty schema matches any (the probe then checks that the session's
// search_path finds that table).
func (c *catalog) lookup(schema, table, column, metric string) (indexed, bool) {
	m := c.indexes.Load()
	if m == nil {
		return indexed{}, false
	}
	for _, ix := range (*m)[[2]string{table, column}] {
		if ix.metric == metric && (schema == "" || schema == ix.schema) {
			return ix, true
		}
	}
	return indexed{}, false
}
