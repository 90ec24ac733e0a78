package heapfetch

import (
	"context"
	"errors"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// The fast path: a large vector is TOASTed, so fetching it is the dearest
// part of a query. The sidecar returns with each candidate the id of the
// transaction that wrote the row its distance comes from, where that
// distance is exact (store=float): knn's xid column with with_xid=true.
// The heap fetch, one statement and so one snapshot, returns each
// candidate's xmin and its vector only where the xmin differs: where it
// is the same, the heap's row is the version the sidecar measured, and
// its distance is the one the client would compute.
//
// xids are trusted only when the heap server's system identifier and
// timeline equal those of the sidecar's source (after a failover, PITR or
// restore, xids are reused); the statement checks them itself, so a heap
// connection that lands on another server after a failover falls back to
// fetching, and knn's xid_source makes the sidecar return no xids once it
// follows another source than the one the client read (it forgets them
// all when its source changes). The sidecar publishes an xid only once the transaction that
// wrote the row has been applied whole, and never one whose version of the
// row has another vector (see the indexer), so a matching xmin is never
// stale.

// candidate is one row the sidecar proposes.
type candidate struct {
	key      any
	distance float64
	xid      int64 // 0: unknown, fetch the vector
}

// FastPathStats count how often the fast path spared a vector fetch.
type FastPathStats struct {
	Candidates     int64 // rows fetched from the heap
	VectorsFetched int64 // of those, rows whose vector was fetched too
}

// HitRate is the share of candidates whose vector was not fetched.
func (s FastPathStats) HitRate() float64 {
	if s.Candidates == 0 {
		return 0
	}
	return 1 - float64(s.VectorsFetched)/float64(s.Candidates)
}

// FastPathStats reports the client's counts since it was made.
func (c *Client) FastPathStats() FastPathStats {
	return FastPathStats{Candidates: c.fast.candidates.Load(), VectorsFetched: c.fast.vectors.Load()}
}

// fastPath is the client's state for the fast path.
type fastPath struct {
	candidates, vectors atomic.Int64
	denied              atomic.Bool // the heap role may not read the server's identity
	mu                  sync.Mutex
	sources             map[string]source // by index name
}

// source is a sidecar's source system and timeline for an index, as last
// read from vecside_status().
type source struct {
	systemID, timeline int64 // 0: unknown
	read               time.Time
}

// sourceTTL is how long a sidecar's source is taken as known: a sidecar
// pointed at another server is noticed within it.
const sourceTTL = 10 * time.Second

// source returns the sidecar's source for index name; zero if it does
// not report one (it has not connected yet, or predates the fast path).
func (c *Client) source(ctx context.Context, name string) (source, error) {
	c.fast.mu.Lock()
	s, ok := c.fast.sources[name]
	c.fast.mu.Unlock()
	if ok && time.Since(s.read) < sourceTTL {
		return s, nil
	}
	s = source{read: time.Now()}
	rows, err := c.sidecar.Query(ctx, "SELECT index_name, system_identifier, timeline FROM vecside_status()")
	if err == nil {
		var index string
		var sys, tli *int64
		_, err = pgx.ForEachRow(rows, []any{&index, &sys, &tli}, func() error {
			if index == name && sys != nil && tli != nil {
				s.systemID, s.timeline = *sys, *tli
			}
			return nil
		})
	}
	if err != nil {
		return source{}, fmt.Errorf("heapfetch: reading the source of index %s from vecside_status(): %w", name, err)
	}
	c.fast.mu.Lock()
	if c.fast.sources == nil {
		c.fast.sources = map[string]source{}
	}
	c.fast.sources[name] = s
	c.fast.mu.Unlock()
	return s, nil
}

// fastCandidates asks the sidecar for candidates; with src known, for
// their distances and xids too.
func (c *Client) fastCandidates(ctx context.Context, req Request, oversample float64, src source) ([]candidate, error) {
	var opts string
	if oversample > 0 {
		opts = "oversample=" + strconv.FormatFloat(max(oversample, 1), 'g', -1, 64)
	}
	if req.MinLSN != "" {
		opts += " min_lsn=" + req.MinLSN
	}
	if src.systemID != 0 {
		opts += fmt.Sprintf(" with_xid=true xid_source=%d/%d", src.systemID, src.timeline)
	}
	opts = strings.TrimSpace(opts + " " + req.Options)
	rows, err := c.sidecar.Query(ctx, "SELECT id, distance, xid FROM knn($1, $2, $3, $4)", req.Index, req.Vector, req.K, opts)
	if err != nil {
		return nil, fmt.Errorf("heapfetch: asking the sidecar: %w", err)
	}
	var out []candidate
	var cd candidate
	var xid *int64
	_, err = pgx.ForEachRow(rows, []any{&cd.key, &cd.distance, &xid}, func() error {
		cd.xid = 0
		if xid != nil {
			cd.xid = *xid
		}
		out = append(out, cd)
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("heapfetch: asking the sidecar: %w", err)
	}
	return out, nil
}

// fetchFast reads the candidates' rows in one statement, each row's
// vector only where the sidecar's xid for it is not the row's xmin (or
// the heap server is not the sidecar's source), and ranks them as fetch
// does.
func (ix *index) fetchFast(ctx context.Context, heap Querier, cands []candidate, q []float32, src source, fp *fastPath) ([]Row, error) {
	if len(cands) == 0 {
		return nil, nil
	}
	keys := make([]any, len(cands))
	xids := make([]int64, len(cands))
	sidecar := make(map[any]float64, len(cands))
	for i, cd := range cands {
		keys[i], xids[i] = cd.key, cd.xid
		sidecar[mapKey(cd.key)] = cd.distance
	}
	// hf_same is true where the heap's row is the version the sidecar
	// measured. The server's identity is read once per statement (an
	// InitPlan); a primary's timeline is that of its WAL insert position,
	// a standby's that of its last restartpoint. OFFSET 0 keeps the
	// subquery whole, so that hf_same is computed once a row; the vector
	// leaves it as a TOAST pointer, read only where it is returned.
	sql := fmt.Sprintf(`SELECT hf_key, hf_same, CASE WHEN hf_same THEN NULL ELSE hf_vec::real[] END FROM (
		SELECT %[1]s AS hf_key, %[2]s AS hf_vec, xmin::text::int8 = ($2::int8[])[array_position($1, %[1]s)] AND (
			SELECT s.system_identifier = $3 AND CASE WHEN pg_is_in_recovery() THEN (SELECT timeline_id FROM pg_control_checkpoint())
				ELSE ('x' || substr(pg_walfile_name(pg_current_wal_lsn()), 1, 8))::bit(32)::int8 END = $4
			FROM pg_control_system() s) AS hf_same
		FROM %[3]s WHERE %[1]s = ANY($1) OFFSET 0) c`, ix.key, ix.column, ix.table)
	rows, err := heap.Query(ctx, sql, typedKeys(keys), xids, src.systemID, src.timeline)
	if err != nil {
		return nil, fmt.Errorf("heapfetch: fetching candidates from %s: %w", ix.table, err)
	}
	defer rows.Close()
	var out []Row
	var read, fetched int64
	for rows.Next() {
		read++
		var r Row
		var hit bool
		var v []float32
		if err := rows.Scan(&r.Key, &hit, &v); err != nil {
			return nil, fmt.Errorf("heapfetch: reading %s: %w", ix.table, err)
		}
		if hit {
			r.Distance = sidecar[mapKey(r.Key)]
		} else {
			fetched++
			if len(v) != len(q) {
				continue // no longer indexable: as if deleted (see scanRow)
			}
			r.Distance = ix.metric.Distance(q, v)
			if math.IsNaN(r.Distance) || math.IsInf(r.Distance, 0) {
				continue
			}
		}
		out = append(out, r)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("heapfetch: fetching candidates from %s: %w", ix.table, err)
	}
	fp.candidates.Add(read)
	fp.vectors.Add(fetched)
	sortRows(out)
	return out, nil
}

// fetchCandidates reads the candidates from the heap and ranks them: by
// the fast path where the sidecar's source is known and it gave xids
// (only exact distances come with one), else fetching every vector. A
// heap role not allowed to read the server's identity (pg_control_system)
// gets the slow path from then on.
func (c *Client) fetchCandidates(ctx context.Context, ix *index, cands []candidate, q []float32, src source) ([]Row, error) {
	anyXID := slices.ContainsFunc(cands, func(cd candidate) bool { return cd.xid != 0 })
	if src.systemID != 0 && anyXID && !c.fast.denied.Load() {
		rows, err := ix.fetchFast(ctx, c.heap, cands, q, src, &c.fast)
		var pgErr *pgconn.PgError
		if !errors.As(err, &pgErr) || pgErr.Code != insufficientPrivilege {
			return rows, err
		}
		c.fast.denied.Store(true)
	}
	keys := make([]any, len(cands))
	for i, cd := range cands {
		keys[i] = cd.key
	}
	rows, err := ix.fetch(ctx, c.heap, keys, q)
	c.fast.candidates.Add(int64(len(rows)))
	c.fast.vectors.Add(int64(len(rows)))
	return rows, err
}

// insufficientPrivilege is SQLSTATE 42501.
const insufficientPrivilege = "42501"

// mapKey makes a key usable as a map key whatever width of integer pgx
// returned it as.
func mapKey(k any) any {
	switch k.(type) {
	case int16, int32, int64:
		return toInt64(k)
	}
	return k
}
