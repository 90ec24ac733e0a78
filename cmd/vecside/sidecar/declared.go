package sidecar

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"slices"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/vecside/vecside/indexer"
	"github.com/vecside/vecside/replicate/declared"
)

// Discovery says whether the sidecar serves the indexes its database
// declares (replicate/declared), beside those of --index.
type Discovery struct {
	// Mode is "auto" (default: only when no --index is given), "on" or
	// "off".
	Mode string
	// Tables limits it: schema.table globs, "!" excluding.
	Tables []string
	// Interval is how often the catalog is read. Default 5 s.
	Interval time.Duration
}

// Enabled says whether discovery is on beside indexes --index
// definitions.
func (d Discovery) Enabled(indexes int) (bool, error) {
	switch d.Mode {
	case "", "auto":
		return indexes == 0, nil
	case "on":
		return true, nil
	case "off":
		return false, nil
	}
	return false, fmt.Errorf("--discover %q: want auto, on or off", d.Mode)
}

// follower keeps the declared indexes served: it adds those the catalog
// declares and lets go of those it no longer does, or declares anew
// with other options (a new index, copied again); --index definitions
// take the place of declarations as Declared says.
type follower struct {
	ix      *indexer.Indexer
	add     func(*indexer.Entry)
	remove  func(*indexer.Entry)
	flags   []indexer.Spec
	filter  declared.Filter
	dataDir string
	log     *slog.Logger
	served  map[string]string // the declared indexes served: name → definition
	skipped map[string]string // declarations skipped, as last logged: from → why
}

// Declared lists the declarations (declared.Find) that serve would serve
// beside flags, the --index definitions: one of the same name, or of the
// same table, column and metric, takes a declaration's place.
func Declared(ctx context.Context, conn *pgx.Conn, filter declared.Filter, flags []indexer.Spec) ([]declared.Declaration, []declared.Skipped, error) {
	found, skipped, err := declared.Find(ctx, conn, filter)
	if err != nil {
		return nil, nil, err
	}
	served := found[:0]
	for _, d := range found {
		if i := slices.IndexFunc(flags, func(flag indexer.Spec) bool {
			return flag.Name == d.Spec.Name || flag.QualifiedTable() == d.Spec.QualifiedTable() && flag.Column == d.Spec.Column && flag.Metric == d.Spec.Metric
		}); i >= 0 {
			skipped = append(skipped, declared.Skipped{From: d.From, Why: "--index " + flags[i].Name + " takes its place"})
			continue
		}
		served = append(served, d)
	}
	return served, skipped, nil
}

// sync reads the declarations once and brings the served set up to date.
func (f *follower) sync(ctx context.Context, conn *pgx.Conn) error {
	found, skipped, err := Declared(ctx, conn, f.filter, f.flags)
	if err != nil {
		return err
	}
	f.logSkipped(skipped)
	want := map[string]declared.Declaration{}
	for _, d := range found {
		want[d.Spec.Name] = d
	}
	for name, def := range f.served {
		if d, ok := want[name]; ok && (d.Spec.String() == def || f.renamed(d)) {
			f.served[name] = d.Spec.String()
			continue
		}
		if e := f.ix.Remove(name); e != nil {
			f.remove(e)
			f.forget(e)
			e.Wait("no longer declared") // what it holds is let go at once
		}
		delete(f.served, name)
		f.log.Info("no longer serving a declared index", "index", name, "was", def)
	}
	for _, d := range found {
		if _, ok := want[d.Spec.Name]; !ok || f.served[d.Spec.Name] != "" {
			continue
		}
		e, err := f.ix.Add(d.Spec)
		if err != nil {
			f.log.Warn("a declared index cannot be served", "from", d.From, "err", err)
			continue
		}
		f.served[d.Spec.Name] = d.Spec.String()
		f.add(e)
		f.log.Info("serving a declared index", "index", d.Spec.Name, "from", d.From, "definition", d.Spec.String())
	}
	return nil
}

// renamed reports whether d declares the index of its name as served but
// for the name of its table, which is the same table renamed (its OID):
// the index keeps following it, as the replicator does, with no copy.
func (f *follower) renamed(d declared.Declaration) bool {
	e, err := f.ix.Get(d.Spec.Name)
	if err != nil || e.Status().TableOID != d.TableOID {
		return false
	}
	was := e.Spec()
	now := d.Spec
	now.Schema, now.Table = was.Schema, was.Table
	return now.String() == was.String()
}

// forget removes a let-go index's checkpoint: one declared again later
// is copied afresh, and the directory holds only what is served.
func (f *follower) forget(e *indexer.Entry) {
	if f.dataDir == "" {
		return
	}
	if err := os.Remove(e.Durable().CheckpointPath(f.dataDir)); err != nil && !errors.Is(err, fs.ErrNotExist) {
		f.log.Warn("removing the checkpoint of an index no longer served", "index", e.Spec().Name, "err", err)
	}
}

// logSkipped logs each declaration that cannot be served, once for each
// reason.
func (f *follower) logSkipped(skipped []declared.Skipped) {
	now := map[string]string{}
	for _, s := range skipped {
		now[s.From] = s.Why
		if f.skipped[s.From] != s.Why {
			f.log.Warn("a declared index is not served", "from", s.From, "why", s.Why)
		}
	}
	f.skipped = now
}

// run syncs every interval until ctx ends. A failed read is logged and
// tried again: what is served stays as it was meanwhile.
func (f *follower) run(ctx context.Context, source string, every time.Duration) error {
	var conn *pgx.Conn
	defer func() {
		if conn != nil {
			conn.Close(context.Background())
		}
	}()
	tick := time.NewTicker(every)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-tick.C:
		}
		qctx, cancel := context.WithTimeout(ctx, every+10*time.Second)
		var err error
		if conn == nil {
			conn, err = pgx.Connect(qctx, source)
		}
		if err == nil {
			err = f.sync(qctx, conn)
		}
		cancel()
		if err != nil && ctx.Err() == nil {
			f.log.Warn("reading the declared indexes failed; retrying", "err", err)
			if conn != nil {
				conn.Close(context.Background())
				conn = nil
			}
		}
	}
}
