package heapfetch

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"
	"sync/atomic"
	"time"

	lru "github.com/hashicorp/golang-lru/v2"
	"github.com/jackc/pgx/v5"
	"github.com/vecside/vecside/kernels"
)

// Querier runs a query: *pgx.Conn, *pgxpool.Pool and pgx.Tx all do.
type Querier interface {
	Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error)
}

// Client searches through a sidecar and re-ranks against the heap.
type Client struct {
	sidecar Querier
	heap    Querier
	indexes *lru.Cache[string, *index]
	replica atomic.Int32 // 0 unknown, 1 primary, 2 in recovery
	fast    fastPath
}

// New returns a client asking sidecar for candidates and fetching rows
// from heap.
func New(sidecar, heap Querier) *Client {
	cache, err := lru.New[string, *index](256)
	if err != nil {
		panic(err) // only for a size ≤ 0
	}
	return &Client{sidecar: sidecar, heap: heap, indexes: cache}
}

// Request is one search.
type Request struct {
	Index  string
	Vector []float32
	K      int
	// Oversample asks the sidecar for at most K × Oversample candidates;
	// 0 takes the index's default (see the README). More candidates cost
	// heap fetches but forgive a lossy index.
	Oversample float64
	// Options are further knn options in key=value form, e.g. "timeout=2s".
	Options string
	// MinLSN asks for read-your-writes: pass pg_current_wal_lsn() taken
	// after a write (text form, e.g. "0/16B3748"). The sidecar answers
	// only once it has applied that far, and when the heap is a read
	// replica the client also waits until the replica has replayed it.
	MinLSN string
	// AlwaysFetch fetches every candidate's vector, never taking the fast
	// path (see fastpath.go): for comparisons.
	AlwaysFetch bool
}

// Row is a result: the key as Postgres returned it (int16, int32, int64,
// [16]byte for uuid, or string) and its exact distance.
type Row struct {
	Key      any
	Distance float64
}

// ErrUnknownIndex: the sidecar has no index of that name.
var ErrUnknownIndex = errors.New("heapfetch: unknown index")

// maxWidening bounds how often a search asks again for more candidates.
const maxWidening = 3

// Search returns the K rows nearest to req.Vector, nearest first.
func (c *Client) Search(ctx context.Context, req Request) ([]Row, error) {
	if req.K < 1 {
		return nil, fmt.Errorf("heapfetch: k=%d, want ≥ 1", req.K)
	}
	ix, err := c.index(ctx, req.Index)
	if err != nil {
		return nil, err
	}
	if req.MinLSN != "" {
		if err := c.waitReplay(ctx, req.MinLSN); err != nil {
			return nil, err
		}
	}
	var src source // zero: no fast path
	if !req.AlwaysFetch && !ix.float8 {
		if src, err = c.source(ctx, req.Index); err != nil {
			return nil, err
		}
	}
	oversample := req.Oversample
	for attempt := 0; ; attempt++ {
		keys, err := c.fastCandidates(ctx, req, oversample, src)
		if err != nil {
			return nil, err
		}
		rows, err := c.fetchCandidates(ctx, ix, keys, req.Vector, src)
		if err != nil {
			return nil, err
		}
		// Fewer than k left though the sidecar gave at least k: rows were
		// deleted since it answered. Ask again, wider. (Quantized indexes
		// return fewer than k × oversample when their error bounds allow,
		// so only k tells whether more were to be had.)
		if len(rows) >= req.K || len(keys) < req.K || attempt == maxWidening {
			return rows[:min(req.K, len(rows))], nil
		}
		oversample = 2 * float64(len(keys)) / float64(req.K)
	}
}

// index says where an index's rows live in the heap.
type index struct {
	table, key, column string // quoted identifiers
	metric             kernels.Metric
	float8             bool // the column is double precision[]: fetch it unrounded
}

// index describes the named index, from vecside_status() and the heap's
// catalog, cached.
func (c *Client) index(ctx context.Context, name string) (*index, error) {
	if ix, ok := c.indexes.Get(name); ok {
		return ix, nil
	}
	rows, err := c.sidecar.Query(ctx, "SELECT index_name, table_name, column_name, key_column, metric FROM vecside_status()")
	if err != nil {
		return nil, fmt.Errorf("heapfetch: reading vecside_status(): %w", err)
	}
	type status struct{ Name, Table, Column, Key, Metric string }
	all, err := pgx.CollectRows(rows, pgx.RowToStructByPos[status])
	if err != nil {
		return nil, fmt.Errorf("heapfetch: reading vecside_status(): %w", err)
	}
	i := slices.IndexFunc(all, func(s status) bool { return s.Name == name })
	if i < 0 {
		return nil, fmt.Errorf("%w %q", ErrUnknownIndex, name)
	}
	st := all[i]
	schema, table, _ := strings.Cut(st.Table, ".")
	ix := &index{
		table:  pgx.Identifier{schema, table}.Sanitize(),
		key:    pgx.Identifier{st.Key}.Sanitize(),
		column: pgx.Identifier{st.Column}.Sanitize(),
	}
	if ix.metric, err = kernels.ParseMetric(st.Metric); err != nil {
		return nil, fmt.Errorf("heapfetch: index %s: %w", name, err)
	}
	rows, err = c.heap.Query(ctx, `SELECT format_type(atttypid, atttypmod) FROM pg_attribute WHERE attrelid = $1::regclass AND attname = $2`, ix.table, st.Column)
	if err == nil {
		var typ string
		typ, err = pgx.CollectExactlyOneRow(rows, pgx.RowTo[string])
		ix.float8 = typ == "double precision[]"
	}
	if err != nil {
		return nil, fmt.Errorf("heapfetch: index %s: column %s of %s in the heap: %w", name, ix.column, ix.table, err)
	}
	c.indexes.Add(name, ix)
	return ix, nil
}

// fetch reads the candidate rows and ranks them by exact distance; ties
// go to the smaller key.
func (ix *index) fetch(ctx context.Context, heap Querier, keys []any, q []float32) ([]Row, error) {
	if len(keys) == 0 {
		return nil, nil
	}
	vec := ix.column + "::real[]"
	if ix.float8 {
		vec = ix.column
	}
	sql := fmt.Sprintf("SELECT %s, %s FROM %s WHERE %s = ANY($1)", ix.key, vec, ix.table, ix.key)
	rows, err := heap.Query(ctx, sql, typedKeys(keys))
	if err != nil {
		return nil, fmt.Errorf("heapfetch: fetching candidates from %s: %w", ix.table, err)
	}
	defer rows.Close()
	var out []Row
	for rows.Next() {
		var r Row
		var ok bool
		if ix.float8 {
			r, ok, err = scanRow[float64](rows, ix.metric, q)
		} else {
			r, ok, err = scanRow[float32](rows, ix.metric, q)
		}
		if err != nil {
			return nil, fmt.Errorf("heapfetch: reading %s: %w", ix.table, err)
		}
		if ok {
			out = append(out, r)
		}
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("heapfetch: fetching candidates from %s: %w", ix.table, err)
	}
	sortRows(out)
	return out, nil
}

// sortRows orders rows nearest first, ties to the smaller key.
func sortRows(rows []Row) {
	slices.SortFunc(rows, func(a, b Row) int {
		if c := cmp.Compare(a.Distance, b.Distance); c != 0 {
			return c
		}
		return compareKeys(a.Key, b.Key)
	})
}

// scanRow reads a fetched row and its exact distance to q. ok is false
// when the row's vector has changed, since the sidecar saw it, into one it
// does not index (NULL, another length, not finite): the row is left out
// as if it had been deleted, and the index will leave it out too once it
// has applied the change.
func scanRow[T float32 | float64](rows pgx.Rows, m kernels.Metric, q []float32) (r Row, ok bool, err error) {
	var v []T
	if err := rows.Scan(&r.Key, &v); err != nil {
		return Row{}, false, err
	}
	if len(v) != len(q) {
		return Row{}, false, nil
	}
	r.Distance = kernels.ExactDistance(m, q, v)
	return r, !math.IsNaN(r.Distance) && !math.IsInf(r.Distance, 0), nil
}

// typedKeys turns the keys the sidecar returned into a slice pgx encodes
// as an array of their type, for "key = ANY($1)".
func typedKeys(keys []any) any {
	switch keys[0].(type) {
	case int16, int32, int64:
		out := make([]int64, len(keys))
		for i, k := range keys {
			out[i] = toInt64(k)
		}
		return out
	case [16]byte:
		out := make([][16]byte, len(keys))
		for i, k := range keys {
			out[i] = k.([16]byte)
		}
		return out
	}
	out := make([]string, len(keys))
	for i, k := range keys {
		out[i] = fmt.Sprint(k)
	}
	return out
}

func toInt64(k any) int64 {
	switch v := k.(type) {
	case int16:
		return int64(v)
	case int32:
		return int64(v)
	case int64:
		return v
	}
	panic(fmt.Sprintf("heapfetch: key %T is not an integer", k))
}

func compareKeys(a, b any) int {
	switch x := a.(type) {
	case int16, int32, int64:
		return cmp.Compare(toInt64(x), toInt64(b))
	case [16]byte:
		y := b.([16]byte)
		return strings.Compare(string(x[:]), string(y[:]))
	}
	return strings.Compare(fmt.Sprint(a), fmt.Sprint(b))
}

// replayPoll is how often a replica's replay position is polled while a
// read-your-writes search waits for it.
const replayPoll = 2 * time.Millisecond

// waitReplay waits until the heap has replayed lsn, if it is a replica; a
// primary has it already.
func (c *Client) waitReplay(ctx context.Context, lsn string) error {
	if c.replica.Load() == 0 {
		var inRecovery bool
		if err := queryRow(ctx, c.heap, "SELECT pg_is_in_recovery()", nil, &inRecovery); err != nil {
			return fmt.Errorf("heapfetch: %w", err)
		}
		c.replica.Store(map[bool]int32{false: 1, true: 2}[inRecovery])
	}
	if c.replica.Load() == 1 {
		return nil
	}
	for {
		var replayed bool
		if err := queryRow(ctx, c.heap, "SELECT pg_last_wal_replay_lsn() >= $1::pg_lsn", []any{lsn}, &replayed); err != nil {
			return fmt.Errorf("heapfetch: waiting for the replica to replay %s: %w", lsn, err)
		}
		if replayed {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("heapfetch: the replica has not replayed %s: %w", lsn, ctx.Err())
		case <-time.After(replayPoll):
		}
	}
}

// queryRow runs a one-row query through a Querier.
func queryRow(ctx context.Context, q Querier, sql string, args []any, dest ...any) error {
	rows, err := q.Query(ctx, sql, args...)
	if err != nil {
		return err
	}
	defer rows.Close()
	if !rows.Next() {
		if err := rows.Err(); err != nil {
			return err
		}
		return pgx.ErrNoRows
	}
	if err := rows.Scan(dest...); err != nil {
		return err
	}
	rows.Close()
	return rows.Err()
}
