//go:build cgo

package proxy

import (
	"context"
	"log/slog"
	"sync/atomic"
	"time"
)

// statusTimeout bounds a read of the sidecar's indexes.
const statusTimeout = 5 * time.Second

// catalog is what the sidecar indexes, refreshed in the background. A
// sidecar that does not answer leaves it as it was: a statement on an
// index that is gone or no longer ready then fails to get candidates
// and passes through, as it does while the sidecar is down.
type catalog struct {
	sidecar  Sidecar
	interval time.Duration
	indexes  atomic.Pointer[map[[2]string][]Index] // by table, column
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
	ctx, cancel := context.WithTimeout(ctx, statusTimeout)
	defer cancel()
	ixs, err := c.sidecar.Indexes(ctx)
	if err != nil {
		return err
	}
	m := map[[2]string][]Index{}
	for _, ix := range ixs {
		k := [2]string{ix.Table, ix.Column}
		m[k] = append(m[k], ix)
	}
	c.indexes.Store(&m)
	return nil
}

// lookup returns a ready index on schema.table(column) with metric. An
// empty schema matches any: of several, the one whose schema comes first
// in path, the session's search_path as its last probe read it (the
// answering statement checks that the name finds that index's table).
func (c *catalog) lookup(schema, table, column, metric string, path []string) (Index, bool) {
	m := c.indexes.Load()
	if m == nil {
		return Index{}, false
	}
	var found []Index
	for _, ix := range (*m)[[2]string{table, column}] {
		if ix.Metric == metric && (schema == "" || schema == ix.Schema) {
			found = append(found, ix)
		}
	}
	if len(found) == 0 {
		return Index{}, false
	}
	for _, sp := range path {
		for _, ix := range found {
			if ix.Schema == sp {
				return ix, true
			}
		}
	}
	return found[0], true
}
