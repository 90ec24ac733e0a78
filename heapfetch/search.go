package heapfetch

import (
	"context"
	"errors"
	"fmt"
	"math"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/vecside/vecside/internal/knnlimits"
)

// Request is one search.
type Request struct {
	Index  string
	Vector []float32
	K      int
	// Oversample asks the sidecar for at most K × Oversample candidates;
	// 0 takes the index's default (docs/indexes.md). More candidates cost
	// heap fetches but forgive a lossy index.
	Oversample float64
	// Options are further knn options in key=value form, e.g. "timeout=2s".
	Options string

	// Columns are the table's columns Collect scans into the caller's
	// type, in this order (names, quoted as identifiers).
	Columns []string
	// Filter, if not empty, is a SQL condition on the table's rows, e.g.
	// "tenant_id = $1 AND published", with Args for its $1, $2, …: only
	// rows that satisfy it are returned, k of them whenever at least k do
	// (as good as the index's recall, see the package doc). It is pasted
	// into the queries on the heap as it is: it is the caller's SQL, never
	// an end user's text.
	Filter string
	Args   []any
	// Filtering chooses how a Filter is applied; see Filtering.
	Filtering Filtering

	// OrderOnly returns the rows in order without their distances
	// (Hit.Distance is NaN): for applications that want the order, not
	// the numbers.
	OrderOnly bool

	// MinLSN asks for read-your-writes: pass pg_current_wal_lsn() taken
	// after a write (text form, e.g. "0/16B3748"). The sidecar answers
	// only once it has applied that far, and when the heap is a read
	// replica the client also waits until the replica has replayed it,
	// at most ReplicaWait (DefaultReplicaWait if 0) whatever ctx allows,
	// then fails with ErrReplicaBehind; with UsePrimary it reads from
	// Config.Primary instead of waiting.
	MinLSN      string
	ReplicaWait time.Duration
	UsePrimary  bool

	// AlwaysFetch fetches every candidate's vector, never taking the fast
	// path (see fastpath.go): for comparisons.
	AlwaysFetch bool
}

// Filtering is how a filtered search finds its rows.
type Filtering int

const (
	// FilterAuto pre-filters when post-filtering would need more than
	// PostFilterBudget candidates (2k / selectivity, the selectivity
	// estimated from the planner's row counts), else post-filters; a post-filter that starves
	// falls back to a pre-filter.
	FilterAuto Filtering = iota
	// PostFilter asks the sidecar for more candidates, in proportion to
	// the filter's estimated selectivity, filters them in the heap query
	// and widens the request, a bounded number of times, until k remain.
	PostFilter
	// PreFilter reads the keys of the matching rows from the heap first
	// (at most MaxPreFilterKeys), and asks the sidecar to search among
	// those only (knn's allow argument), in chunks that fit its message
	// cap, merging their candidates.
	PreFilter
)

// Hit is one row of a search: the caller's columns, the key, and the
// exact distance (NaN in order-only mode).
type Hit[T any] struct {
	Row      T
	Key      any
	Distance float64
}

// Row is a result of Search: the key as Postgres returned it (int16,
// int32, int64, [16]byte for uuid, or string) and its exact distance.
type Row struct {
	Key      any
	Distance float64
}

// ErrUnknownIndex: the sidecar has no index of that name.
var ErrUnknownIndex = errors.New("heapfetch: unknown index")

// ErrTooManyMatches: a search forced to pre-filter (Request.Filtering)
// has a filter that matches more than MaxPreFilterKeys rows.
var ErrTooManyMatches = errors.New("heapfetch: the filter matches too many rows to pre-filter")

// ErrReplicaBehind: the heap, a read replica, had not replayed a
// read-your-writes search's MinLSN within its ReplicaWait.
var ErrReplicaBehind = errors.New("heapfetch: the replica has not replayed the requested LSN")

// Limits of a search.
const (
	// maxWidening bounds how often a search asks again for more
	// candidates.
	maxWidening = 3
	// maxCandidates is the sidecar's cap on k × oversample.
	maxCandidates = knnlimits.MaxCandidates
	// PostFilterBudget is the most candidates FilterAuto lets a
	// post-filter ask for at first: each costs a heap row.
	PostFilterBudget = 512
	// postFilterMargin multiplies the candidates a post-filter asks for
	// beyond k / selectivity: the rows that pass are a binomial draw,
	// fewer than expected half the time, and an index finds the nearest
	// of a wider request with a wider search (ef_search, probes).
	postFilterMargin = 2
	// MaxPreFilterKeys bounds the keys a pre-filter reads from the heap;
	// a filter matching more is post-filtered.
	MaxPreFilterKeys = 1 << 20
	// DefaultReplicaWait bounds a read-your-writes search's wait for a
	// replica when Request.ReplicaWait is 0.
	DefaultReplicaWait = 5 * time.Second
)

// Search returns the K rows nearest to req.Vector, nearest first, with
// their keys and exact distances.
func (c *Client) Search(ctx context.Context, req Request) ([]Row, error) {
	req.Columns = nil
	hits, err := Collect(ctx, c, req, func(pgx.CollectableRow) (struct{}, error) { return struct{}{}, nil })
	out := make([]Row, len(hits))
	for i, h := range hits {
		out[i] = Row{h.Key, h.Distance}
	}
	return out, err
}

// Collect returns the K rows nearest to req.Vector that satisfy
// req.Filter, nearest first, each scanned by fn from req.Columns as
// pgx.CollectRows does (pgx.RowToStructByName[T] and the like), with its
// key and exact distance.
func Collect[T any](ctx context.Context, c *Client, req Request, fn pgx.RowToFunc[T]) ([]Hit[T], error) {
	if req.K < 1 {
		return nil, fmt.Errorf("heapfetch: k=%d, want ≥ 1", req.K)
	}
	if c.heap == nil {
		return nil, errors.New("heapfetch: Config.Heap is nil: a search needs a database to read rows from")
	}
	ix, err := c.index(ctx, req.Index)
	if err != nil {
		return nil, err
	}
	// The query as the column's type holds it (a halfvec column's in half
	// precision), as pgvector compares a column with its query.
	if req.Vector, err = ix.vec.Round(req.Vector); err != nil {
		return nil, fmt.Errorf("heapfetch: index %s is %s: query %w", req.Index, ix.vec, err)
	}
	heap, err := c.heapFor(ctx, &req)
	if err != nil {
		return nil, err
	}
	s := search[T]{c: c, heap: heap, ix: ix, req: &req, fn: fn}
	if !req.AlwaysFetch && !ix.float8() && !c.fast.denied.Load() {
		if s.src, err = c.source(ctx, req.Index); err != nil {
			return nil, err
		}
	}
	hits, err := s.run(ctx)
	if err != nil {
		return nil, err
	}
	hits = hits[:min(req.K, len(hits))]
	if req.OrderOnly {
		for i := range hits {
			hits[i].Distance = math.NaN()
		}
	}
	return hits, nil
}

// search is one Collect under way.
type search[T any] struct {
	c    *Client
	heap Querier
	ix   *index
	req  *Request
	fn   pgx.RowToFunc[T]
	src  source // the sidecar's source, zero for no fast path
}

// run applies the filter as req.Filtering says, or as FilterAuto chooses.
func (s *search[T]) run(ctx context.Context) ([]Hit[T], error) {
	req := s.req
	if req.Filter == "" {
		hits, _, err := s.widening(ctx, req.K, nil)
		return hits, err
	}
	how, selectivity := req.Filtering, 1.0
	if how != PreFilter {
		var err error
		if selectivity, err = s.selectivity(ctx); err != nil {
			return nil, err
		}
		if how == FilterAuto && postFilterMargin*float64(req.K)/selectivity*max(req.Oversample, 1) > PostFilterBudget {
			how = PreFilter
		}
	}
	if how == PreFilter {
		hits, err := s.preFiltered(ctx)
		if !errors.Is(err, ErrTooManyMatches) || req.Filtering == PreFilter {
			return hits, err
		}
	}
	k := min(int(math.Ceil(postFilterMargin*float64(req.K)/selectivity)), s.maxK())
	hits, starved, err := s.widening(ctx, k, nil)
	if err != nil || !starved || req.Filtering == PostFilter {
		return hits, err
	}
	more, err := s.preFiltered(ctx)
	if errors.Is(err, ErrTooManyMatches) {
		return hits, nil
	}
	return more, err
}

// maxK is the most candidates a search asks for with req's oversampling,
// or, when it leaves that to the index, with the largest default an index
// takes (DefaultOversample in indexer: 3, for ext4).
func (s *search[T]) maxK() int {
	o := s.req.Oversample
	if o == 0 {
		o = 3
	}
	return int(maxCandidates / max(o, 1))
}

// widening asks for the k nearest candidates (of the allowed keys, one
// call per chunk, when allow is not nil), fetches them, and asks again
// for twice as many while fewer than K remain, a bounded number of times:
// rows deleted, or filtered out, since the sidecar answered. starved says
// it stopped with fewer than K rows though the sidecar had more to give.
func (s *search[T]) widening(ctx context.Context, k int, allow [][]any) (hits []Hit[T], starved bool, err error) {
	req := s.req
	a := ask{index: req.Index, vector: req.Vector, oversample: req.Oversample, options: req.Options, minLSN: req.MinLSN, source: s.src}
	for attempt := 0; ; attempt++ {
		a.k = k
		var keys []candidate
		if allow == nil {
			keys, err = s.c.candidates(ctx, a)
		} else {
			for _, chunk := range allow {
				a.allow = chunk
				more, err := s.c.candidates(ctx, a)
				if err != nil {
					return nil, false, err
				}
				keys = append(keys, more...)
			}
		}
		if err != nil {
			return nil, false, err
		}
		if hits, err = fetch(ctx, s.heap, s.ix, req, keys, s.fn, s.src, &s.c.fast); err != nil {
			return nil, false, err
		}
		// Quantized indexes return fewer than k × oversample when their
		// error bounds allow, so only fewer than k keys say that no more
		// were to be had.
		exhausted := len(keys) < k*max(1, len(allow))
		if len(hits) >= req.K || exhausted {
			return hits, false, nil
		}
		if attempt == maxWidening || k >= s.maxK() {
			return hits, true, nil
		}
		k = min(2*k, s.maxK())
	}
}

// heapFor is the database a search reads rows from: the heap, once it
// has replayed req.MinLSN if it is a replica, or the primary.
func (c *Client) heapFor(ctx context.Context, req *Request) (Querier, error) {
	if req.MinLSN == "" {
		return c.heap, nil
	}
	if c.replica.Load() == 0 {
		var inRecovery bool
		if err := queryRow(ctx, c.heap, "SELECT pg_is_in_recovery()", nil, &inRecovery); err != nil {
			return nil, fmt.Errorf("heapfetch: %w", err)
		}
		c.replica.Store(map[bool]int32{false: 1, true: 2}[inRecovery])
	}
	if c.replica.Load() == 1 {
		return c.heap, nil
	}
	if req.UsePrimary {
		if c.primary == nil {
			return nil, errors.New("heapfetch: Request.UsePrimary, but Config.Primary is nil")
		}
		replayed, err := c.replayed(ctx, req.MinLSN)
		if err != nil || !replayed {
			return c.primary, nil
		}
		return c.heap, nil
	}
	wait := req.ReplicaWait
	if wait <= 0 {
		wait = DefaultReplicaWait
	}
	// The bound is kept apart from ctx: a context that ends during a
	// query closes a pgx connection, and the caller's may be a *pgx.Conn.
	deadline := time.Now().Add(wait)
	for {
		replayed, err := c.replayed(ctx, req.MinLSN)
		switch {
		case err != nil:
			return nil, fmt.Errorf("heapfetch: waiting for the replica to replay %s: %w", req.MinLSN, err)
		case replayed:
			return c.heap, nil
		case !time.Now().Before(deadline):
			return nil, fmt.Errorf("%w (%s, waited %s)", ErrReplicaBehind, req.MinLSN, wait)
		}
		select {
		case <-ctx.Done():
			return nil, fmt.Errorf("heapfetch: waiting for the replica to replay %s: %w", req.MinLSN, ctx.Err())
		case <-time.After(min(replayPoll, time.Until(deadline))):
		}
	}
}

// replayPoll is how often a replica's replay position is polled while a
// read-your-writes search waits for it.
const replayPoll = 2 * time.Millisecond

// replayed reports whether the heap replica has replayed lsn.
func (c *Client) replayed(ctx context.Context, lsn string) (bool, error) {
	var ok bool
	err := queryRow(ctx, c.heap, "SELECT pg_last_wal_replay_lsn() >= $1::pg_lsn", []any{lsn}, &ok)
	return ok, err
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
