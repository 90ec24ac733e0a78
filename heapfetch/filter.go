package heapfetch

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"

	"github.com/jackc/pgx/v5"

	"github.com/vecside/vecside/internal/knnlimits"
)

// selectivity estimates the share of the table's rows the filter keeps,
// from the planner's row estimates (EXPLAIN: no row is read), at least
// one row's worth.
func (s *search[T]) selectivity(ctx context.Context) (float64, error) {
	filtered, err := s.planRows(ctx, "SELECT 1 FROM "+s.ix.table+" WHERE ("+s.req.Filter+")", s.req.Args)
	if err != nil {
		return 0, fmt.Errorf("heapfetch: estimating the filter's rows: %w", err)
	}
	all, err := s.planRows(ctx, "SELECT 1 FROM "+s.ix.table, nil)
	if err != nil {
		return 0, fmt.Errorf("heapfetch: estimating the table's rows: %w", err)
	}
	return min(1, max(filtered, 1)/max(all, 1)), nil
}

// planRows is the planner's estimate of the rows sql returns.
func (s *search[T]) planRows(ctx context.Context, sql string, args []any) (float64, error) {
	var plan []byte
	if err := queryRow(ctx, s.heap, "EXPLAIN (FORMAT JSON) "+sql, args, &plan); err != nil {
		return 0, err
	}
	var out []struct {
		Plan struct {
			Rows float64 `json:"Plan Rows"`
		}
	}
	if err := json.Unmarshal(plan, &out); err != nil || len(out) != 1 {
		return 0, fmt.Errorf("reading EXPLAIN's plan %.100q: %v", plan, err)
	}
	return out[0].Plan.Rows, nil
}

// preFiltered reads the keys of the rows the filter keeps and searches
// among those only.
func (s *search[T]) preFiltered(ctx context.Context) ([]Hit[T], error) {
	sql := fmt.Sprintf("SELECT %s FROM %s WHERE (%s) LIMIT %d", s.ix.key, s.ix.table, s.req.Filter, MaxPreFilterKeys+1)
	rows, err := s.heap.Query(ctx, sql, s.req.Args...)
	if err != nil {
		return nil, fmt.Errorf("heapfetch: reading the keys the filter keeps: %w", err)
	}
	keys, err := pgx.CollectRows(rows, pgx.RowTo[any])
	if err != nil {
		return nil, fmt.Errorf("heapfetch: reading the keys the filter keeps: %w", err)
	}
	if len(keys) > MaxPreFilterKeys {
		return nil, ErrTooManyMatches
	}
	if len(keys) == 0 {
		return nil, nil
	}
	hits, _, err := s.widening(ctx, s.req.K, chunks(keys))
	return hits, err
}

// maxAllowKeys and maxAllowBytes keep a knn call's allow argument within
// the sidecar's limits: 768 KiB of keys leave room for the vector in a
// message.
const (
	maxAllowKeys  = knnlimits.MaxAllowKeys
	maxAllowBytes = knnlimits.MaxMessageLen * 3 / 4
)

// chunks splits keys into allow-sets that each fit one knn call.
func chunks(keys []any) [][]any {
	var out [][]any
	for len(keys) > 0 {
		n, size := 0, 0
		for n < len(keys) && n < maxAllowKeys {
			size += 4 + keySize(keys[n])
			if size > maxAllowBytes {
				break
			}
			n++
		}
		out = append(out, slices.Clip(keys[:n]))
		keys = keys[n:]
	}
	return out
}

// keySize is the bytes of a key in knn's allow argument: bigint for
// integers, text otherwise (see allowArray).
func keySize(k any) int {
	switch v := k.(type) {
	case int16, int32, int64:
		return 8
	case string:
		return len(v)
	}
	return len(keyText(k))
}
