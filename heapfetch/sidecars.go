package heapfetch

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// ask runs fn against one sidecar of s: the next in turn, then, while
// they fail with an error another sidecar may not have or do not answer
// within s.timeout, each of the others once. A sidecar that failed so is
// asked after the others until its back-off ends: a partitioned one
// would otherwise cost every search sent its way a whole timeout.
func (s shard) ask(ctx context.Context, fn func(context.Context, Querier) error) error {
	start := int(s.next.Add(1))
	now := time.Now()
	order := make([]int, 0, len(s.sidecars))
	for _, up := range []bool{true, false} {
		for i := range s.sidecars {
			if j := (start + i) % len(s.sidecars); s.down[j].up(now) == up {
				order = append(order, j)
			}
		}
	}
	var errs []error
	for _, j := range order {
		err := s.attempt(ctx, s.sidecars[j], fn)
		if err == nil {
			s.down[j].succeeded()
			return nil
		}
		errs = append(errs, err)
		if !failover(ctx, err) {
			break
		}
		s.down[j].failed(time.Now())
	}
	if len(errs) == 1 {
		return errs[0]
	}
	return fmt.Errorf("every sidecar of the shard failed: %w", errors.Join(errs...))
}

// backoff is how long a sidecar is asked last after failing: 1 s after
// a failure, doubling with each failure in a row up to 30 s, ended by a
// success.
type backoff struct {
	until atomic.Int64 // Unix nanoseconds; 0: up
	last  atomic.Int64 // the last back-off, nanoseconds
}

const (
	minBackoff = time.Second
	maxBackoff = 30 * time.Second
)

func (b *backoff) up(now time.Time) bool { return now.UnixNano() >= b.until.Load() }

func (b *backoff) failed(now time.Time) {
	d := min(maxBackoff, max(minBackoff, 2*time.Duration(b.last.Load())))
	b.last.Store(int64(d))
	b.until.Store(now.Add(d).UnixNano())
}

func (b *backoff) succeeded() {
	if b.until.Load() != 0 {
		b.until.Store(0)
		b.last.Store(0)
	}
}

// attempt runs fn on one sidecar, within s.timeout when others remain
// to be tried.
func (s shard) attempt(ctx context.Context, q Querier, fn func(context.Context, Querier) error) error {
	if len(s.sidecars) == 1 {
		return fn(ctx, q)
	}
	ctx, cancel := context.WithTimeout(ctx, s.timeout)
	defer cancel()
	return fn(ctx, q)
}

// failover reports whether err is a sidecar's own trouble, so that another
// sidecar may answer: a lost or refused connection, a server shutting
// down, out of resources, or an index not ready on it. The caller's
// mistakes (bad vector, unknown index, bad options), a cancelled request
// and a timeout are not retried.
func failover(ctx context.Context, err error) bool {
	if ctx.Err() != nil {
		return false
	}
	var pe *pgconn.PgError
	if !errors.As(err, &pe) {
		return true // the connection, not the server, failed
	}
	switch pe.Code[:2] {
	case "08", "53", "57":
		return pe.Code != "57014"
	}
	return pe.Code == "55000"
}

// Candidate is a row the sidecars propose, for a caller that reads the
// rows itself (Client.Candidates).
type Candidate struct {
	Key      string  // as Postgres prints it
	Distance float64 // the index's distance: exact where Xid is not 0
	// Xid is the transaction that wrote the version of the row Distance
	// was measured on (knn's xid, see fastpath.go): a row whose xmin is
	// Xid, read on the server Source names, has that distance. 0: none.
	Xid int64
}

// Source is the server whose transactions a sidecar's xids count: its
// system identifier and timeline (vecside_status()). Zero: no xids.
type Source struct{ SystemID, Timeline int64 }

// Candidates asks the sidecars for the keys nearest to req.Vector in
// req.Index, nearest first as the index ranks them: req.K of them, or up
// to K × Oversample as the index gives them, fewer only when the index
// has no more. Only Index, Vector, K, Oversample, Options, MinLSN and
// AlwaysFetch are used, and no row is read: for a caller that reads the
// rows itself, as the proxy does. Unless AlwaysFetch, the candidates come
// with xids where the index's distances are exact, of the source
// returned, which the caller must check is the server it reads (as the
// fast path's statement does, sameVersion).
func (c *Client) Candidates(ctx context.Context, req Request) ([]Candidate, Source, error) {
	if req.K < 1 {
		return nil, Source{}, fmt.Errorf("heapfetch: k=%d, want ≥ 1", req.K)
	}
	a := ask{index: req.Index, vector: req.Vector, k: req.K, oversample: req.Oversample, options: req.Options, minLSN: req.MinLSN}
	if !req.AlwaysFetch {
		var err error
		if a.source, err = c.source(ctx, req.Index); err != nil {
			return nil, Source{}, err
		}
	}
	cands, err := c.candidates(ctx, a)
	if err != nil {
		return nil, Source{}, err
	}
	out := make([]Candidate, len(cands))
	for i, cd := range cands {
		out[i] = Candidate{Key: keyText(cd.key), Distance: cd.distance, Xid: cd.xid}
	}
	return out, a.source.Source, nil
}

// ask is what a search asks every shard: the nearest keys, of the allowed
// ones if allow is not nil.
type ask struct {
	index      string
	vector     []float32
	k          int
	oversample float64
	options    string // further knn options
	minLSN     string
	allow      []any  // nil: no allow-set
	source     source // known: ask for xids (see fastpath.go)
}

// candidates asks one sidecar of each shard and returns the union of their
// candidates.
func (c *Client) candidates(ctx context.Context, a ask) ([]candidate, error) {
	sql, args := a.knnCall()
	if len(c.shards) == 1 {
		return c.shards[0].candidates(ctx, sql, args)
	}
	var mu sync.Mutex
	var all []candidate
	var errs []error
	var wg sync.WaitGroup
	for i, s := range c.shards {
		wg.Go(func() {
			got, err := s.candidates(ctx, sql, args)
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				errs = append(errs, fmt.Errorf("shard %d: %w", i, err))
			}
			all = append(all, got...)
		})
	}
	wg.Wait()
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	return all, nil
}

func (s shard) candidates(ctx context.Context, sql string, args []any) ([]candidate, error) {
	var out []candidate
	err := s.ask(ctx, func(ctx context.Context, q Querier) error {
		out = out[:0]
		rows, err := q.Query(ctx, sql, args...)
		if err != nil {
			return err
		}
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
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("heapfetch: asking the sidecar: %w", err)
	}
	return out, nil
}

// knnCall is the knn statement and arguments for a.
func (a ask) knnCall() (string, []any) {
	var opts []string
	if a.oversample > 0 {
		opts = append(opts, "oversample="+strconv.FormatFloat(max(a.oversample, 1), 'g', -1, 64))
	}
	if a.minLSN != "" {
		opts = append(opts, "min_lsn="+a.minLSN)
	}
	if a.source.SystemID != 0 {
		opts = append(opts, fmt.Sprintf("with_xid=true xid_source=%d/%d", a.source.SystemID, a.source.Timeline))
	}
	if a.options != "" {
		opts = append(opts, a.options)
	}
	args := []any{a.index, a.vector, a.k, strings.Join(opts, " ")}
	if a.allow == nil {
		return "SELECT id, distance, xid FROM knn($1, $2, $3, $4)", args
	}
	typ, keys := allowArray(a.allow)
	return "SELECT id, distance, xid FROM knn($1, $2, $3, $4, $5::" + typ + ")", append(args, keys)
}
