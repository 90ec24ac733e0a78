//go:build cgo

package proxy

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/vecside/vecside/heapfetch"
	"github.com/vecside/vecside/indexer"
	"github.com/vecside/vecside/internal/pgvalue"
)

// Sidecar is what the proxy asks of the sidecar: what it indexes, and a
// statement's candidates. Remote asks one over pgwire, InProcess the
// indexes of the process the proxy runs in.
type Sidecar interface {
	// Indexes lists the ready indexes.
	Indexes(ctx context.Context) ([]Index, error)
	// Candidates is heapfetch.Client.Candidates: the keys nearest to
	// req.Vector, with xids of the source returned unless
	// req.AlwaysFetch.
	Candidates(ctx context.Context, req heapfetch.Request) ([]heapfetch.Candidate, heapfetch.Source, error)
}

// Index is one ready index of a sidecar, as vecside_status() reports it:
// names as PostgreSQL stores them (unquoted, case kept), the table as
// schema and name, and what an answer is bound to: the table's OID, its
// database and the server's system identifier (0 or empty from a
// sidecar too old to say, whose statements pass through). Exact says its
// distances are exact (store=float), so that its candidates come with
// xids (the fast path, accelerate.go).
type Index struct {
	Name, Schema, Table, Column, Key, Metric string
	Exact                                    bool
	TableOID                                 uint32
	Database                                 string
	SystemID                                 int64
}

// Remote is the sidecar that client asks for candidates, whose
// vecside_status() status reads.
func Remote(client *heapfetch.Client, status heapfetch.Querier) Sidecar {
	return remote{client, status}
}

type remote struct {
	*heapfetch.Client
	status heapfetch.Querier
}

func (r remote) Indexes(ctx context.Context) ([]Index, error) {
	ixs, err := r.read(ctx, true)
	var pe *pgconn.PgError
	if errors.As(err, &pe) && pe.Code == "42703" {
		// A sidecar older than table_oid: its indexes are read without
		// what binds an answer, so that a proxy may be upgraded before the
		// sidecars it asks; their statements pass through.
		ixs, err = r.read(ctx, false)
	}
	return ixs, err
}

// read reads the ready indexes, with their identity and exact_distances
// if bound.
func (r remote) read(ctx context.Context, bound bool) ([]Index, error) {
	columns := "index_name, table_name, column_name, key_column, metric, state"
	var ix Index
	var table, state string
	dest := []any{&ix.Name, &table, &ix.Column, &ix.Key, &ix.Metric, &state}
	if bound {
		columns += ", exact_distances, table_oid, database_name, system_identifier"
		dest = append(dest, &ix.Exact, &ix.TableOID, &ix.Database, &ix.SystemID)
	}
	rows, err := r.status.Query(ctx, "SELECT "+columns+" FROM vecside_status()")
	if err != nil {
		return nil, err
	}
	var out []Index
	_, err = pgx.ForEachRow(rows, dest, func() error {
		if state == string(indexer.StateReady) {
			ix.Schema, ix.Table = splitTable(table)
			out = append(out, ix)
		}
		return nil
	})
	return out, err
}

// splitTable splits vecside_status()'s table_name, schema.table, neither
// quoted, at its first dot: a name split at the wrong dot fails the probe
// (accelerate.go) and passes through.
func splitTable(name string) (schema, table string) {
	schema, table, _ = strings.Cut(name, ".")
	return schema, table
}

// InProcess is the sidecar whose indexes ix holds, in this process
// (vecside serve --proxy-listen): a statement's candidates cost a
// function call, not a round trip and the encoding of its vector.
// observe, if not nil, is told of each search, so that the sidecar counts
// them with its knn calls (rpc.Server.ObserveSearch).
func InProcess(ix *indexer.Indexer, observe SearchObserver) Sidecar { return inProcess{ix, observe} }

// SearchObserver is told of a search: its index, its error (nil if it
// succeeded) and how long it took.
type SearchObserver func(index string, err error, d time.Duration)

type inProcess struct {
	ix      *indexer.Indexer
	observe SearchObserver
}

func (l inProcess) Indexes(context.Context) ([]Index, error) {
	var out []Index
	for _, s := range l.ix.Status() {
		if s.State == indexer.StateReady {
			schema, table := splitTable(s.Table)
			out = append(out, Index{Name: s.Name, Schema: schema, Table: table, Column: s.Column, Key: s.KeyColumn,
				Metric: s.Metric.String(), Exact: s.ExactDistances, TableOID: s.TableOID, Database: s.Database, SystemID: int64(s.SystemID)})
		}
	}
	return out, nil
}

// Candidates searches as knn would with the same options: the index's
// default oversampling unless req says, req.Options on top of the
// defaults, and the xids of this process's source.
func (l inProcess) Candidates(ctx context.Context, req heapfetch.Request) (cands []heapfetch.Candidate, src heapfetch.Source, err error) {
	if req.K < 1 {
		return nil, src, fmt.Errorf("proxy: k=%d, want ≥ 1", req.K)
	}
	opts := indexer.DefaultSearchOptions()
	parsed, err := indexer.ParseOptions(req.Options)
	if err == nil {
		err = opts.Apply(parsed)
	}
	if err != nil {
		return nil, src, fmt.Errorf("%w: knn options: %v", indexer.ErrInvalidArgument, err)
	}
	if req.Oversample > 0 {
		opts.Oversample = max(req.Oversample, 1)
	}
	if req.MinLSN != "" {
		if opts.MinLSN, err = indexer.ParseLSN(req.MinLSN); err != nil {
			return nil, src, fmt.Errorf("%w: min_lsn: %v", indexer.ErrInvalidArgument, err)
		}
	}
	if s := l.ix.Source(); !req.AlwaysFetch && s.SystemID != 0 {
		opts.WithXID, opts.XIDSource = true, &s
		src = heapfetch.Source{SystemID: int64(s.SystemID), Timeline: int64(s.Timeline)}
	}
	ctx, cancel := context.WithTimeout(ctx, opts.Timeout)
	defer cancel()
	defer func() {
		// A bug in a search fails its statement, which passes through,
		// as the sidecar's server answers it with an error; it must not
		// end every session of the process.
		if r := recover(); r != nil {
			cands, err = nil, fmt.Errorf("proxy: search of index %s failed: %v", req.Index, r)
		}
	}()
	start := time.Now()
	res, err := l.ix.Search(ctx, req.Index, req.Vector, req.K, opts)
	if l.observe != nil {
		l.observe(req.Index, err, time.Since(start))
	}
	if err != nil {
		return nil, src, err
	}
	cands = make([]heapfetch.Candidate, len(res.Hits))
	for i, h := range res.Hits {
		cands[i] = heapfetch.Candidate{Key: res.KeyType.FormatKey(h.Key), Distance: h.Distance}
		if opts.WithXID && h.Exact {
			cands[i].Xid = int64(h.XID)
		}
	}
	return cands, src, nil
}

// refusal is what the sidecar said refusing a statement: its message,
// without the SQLSTATE a remote sidecar's error carries.
func refusal(err error) string {
	var pe *pgconn.PgError
	if errors.As(err, &pe) {
		return pe.Message
	}
	return err.Error()
}

// statementFault reports whether err, a sidecar's answer, is the
// statement's own fault (a vector of the wrong dimension, an index gone)
// rather than the sidecar's trouble.
func statementFault(err error) bool {
	var pe *pgconn.PgError
	if errors.As(err, &pe) {
		return pe.Code[:2] == "22" || pe.Code[:2] == "42"
	}
	return errors.Is(err, indexer.ErrUnknownIndex) || errors.Is(err, indexer.ErrInvalidVector) ||
		errors.Is(err, indexer.ErrInvalidArgument) || errors.Is(err, pgvalue.ErrMalformedVector)
}
