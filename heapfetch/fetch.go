package heapfetch

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/vecside/vecside/internal/pgvalue"
	"github.com/vecside/vecside/kernels"
)

// index says where an index's rows live in the heap.
type index struct {
	name               string
	table, key, column string // quoted identifiers
	metric             kernels.Metric
	vec                pgvalue.VectorType
	// vecFormat asks for the vector column in binary whatever its type's
	// OID (pgx asks for text for types it does not know, pgvector's).
	vecFormat pgx.QueryResultFormatsByOID
}

// float8 says the column is double precision[]: the sidecar holds its
// values rounded to float32, so it is fetched and measured unrounded.
func (ix *index) float8() bool { return ix.vec == pgvalue.VectorFloat8Array }

// index describes the named index, from vecside_status() and the heap's
// catalog, cached.
func (c *Client) index(ctx context.Context, name string) (*index, error) {
	if ix, ok := c.indexes.Get(name); ok {
		return ix, nil
	}
	type status struct{ Name, Table, Column, Key, Metric string }
	var all []status
	err := c.shards[0].ask(ctx, func(ctx context.Context, q Querier) error {
		rows, err := q.Query(ctx, "SELECT index_name, table_name, column_name, key_column, metric FROM vecside_status()")
		if err == nil {
			all, err = pgx.CollectRows(rows, pgx.RowToStructByPos[status])
		}
		return err
	})
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
		name:   name,
		table:  pgx.Identifier{schema, table}.Sanitize(),
		key:    pgx.Identifier{st.Key}.Sanitize(),
		column: pgx.Identifier{st.Column}.Sanitize(),
	}
	if ix.metric, err = kernels.ParseMetric(st.Metric); err != nil {
		return nil, fmt.Errorf("heapfetch: index %s: %w", name, err)
	}
	rows, err := c.heap.Query(ctx, `SELECT a.atttypid, t.typname FROM pg_attribute a JOIN pg_type t ON t.oid = a.atttypid
		WHERE a.attrelid = $1::regclass AND a.attname = $2`, ix.table, st.Column)
	if err == nil {
		type column struct {
			OID  uint32
			Name string
		}
		var col column
		if col, err = pgx.CollectExactlyOneRow(rows, pgx.RowToStructByPos[column]); err == nil {
			ix.vec, err = pgvalue.VectorTypeFor(col.OID, col.Name)
			ix.vecFormat = pgx.QueryResultFormatsByOID{col.OID: pgx.BinaryFormatCode}
		}
	}
	if err != nil {
		return nil, fmt.Errorf("heapfetch: index %s: column %s of %s in the heap: %w", name, ix.column, ix.table, err)
	}
	c.indexes.Add(name, ix)
	return ix, nil
}

// heapQuery is the statement that reads candidates back: their key, their
// vector and whether the sidecar's distance stands for it (see
// fastpath.go), then the caller's columns, for the keys bound after the
// caller's arguments, restricted by the caller's filter. Every read of
// candidates goes through it. Without the fast path every vector is read;
// with it, the statement binds the sidecar's xids and source after the
// keys, and reads a vector only where the row is not the version the
// sidecar measured.
func (ix *index) heapQuery(req *Request, fast bool) string {
	var cols []string
	for _, c := range req.Columns {
		cols = append(cols, pgx.Identifier{c}.Sanitize())
	}
	keys := len(req.Args) + 1
	where := fmt.Sprintf("%s = ANY($%d)", ix.key, keys)
	if req.Filter != "" {
		where += " AND (" + req.Filter + ")"
	}
	// The vector is read in its own type: Postgres sends a real[] an
	// element at a time, each through a function call and an allocation
	// (≈ 30 µs for 784 dimensions), and pgvector's cast to real[] costs as
	// much, where vector_send copies its floats.
	if !fast {
		return fmt.Sprintf("SELECT %s FROM %s WHERE %s", strings.Join(append([]string{ix.key, ix.column, "false"}, cols...), ", "), ix.table, where)
	}
	// OFFSET 0 keeps the subquery whole, so that hf_same is computed once
	// a row; the vector leaves it as a TOAST pointer, read only where it
	// is returned.
	inner := append([]string{ix.key + " AS hf_key", ix.column + " AS hf_vec", sameVersion(ix.key, keys) + " AS hf_same"}, cols...)
	outer := append([]string{"hf_key", "CASE WHEN hf_same THEN NULL ELSE hf_vec END", "hf_same"}, cols...)
	return fmt.Sprintf("SELECT %s FROM (SELECT %s FROM %s WHERE %s OFFSET 0) hf",
		strings.Join(outer, ", "), strings.Join(inner, ", "), ix.table, where)
}

// fetched is the number of leading columns of heapQuery that are not the
// caller's.
const fetched = 3

// fetch reads the candidates' rows through heapQuery, by the fast path
// where src is known and the sidecar gave xids (only exact distances come
// with one), scans each with fn and ranks them by exact distance; ties go
// to the smaller key. A heap role not allowed to read the server's
// identity (pg_control_system) gets the plain statement from then on.
func fetch[T any](ctx context.Context, heap Querier, ix *index, req *Request, cands []candidate, fn pgx.RowToFunc[T], src source, fp *fastPath) ([]Hit[T], error) {
	if len(cands) == 0 {
		return nil, nil
	}
	fast := src.SystemID != 0 && !fp.denied.Load() && slices.ContainsFunc(cands, func(cd candidate) bool { return cd.xid != 0 })
	keys := make([]any, len(cands))
	for i, cd := range cands {
		keys[i] = cd.key
	}
	args := append(slices.Clone(req.Args), typedKeys(keys))
	if fast {
		xids := make([]int64, len(cands))
		measured := make(map[any]float64, len(cands))
		for i, cd := range cands {
			xids[i] = cd.xid
			measured[mapKey(cd.key)] = cd.distance
		}
		hits, err := readHits(ctx, heap, ix, req, append(args, xids, src.SystemID, src.Timeline), measured, fn, fp)
		var pgErr *pgconn.PgError
		if !errors.As(err, &pgErr) || pgErr.Code != insufficientPrivilege {
			return hits, err
		}
		fp.denied.Store(true)
	}
	return readHits(ctx, heap, ix, req, args, nil, fn, fp)
}

// readHits runs heapQuery (its fast form when measured, the sidecar's
// distances by key, is not nil) and ranks the rows it reads.
func readHits[T any](ctx context.Context, heap Querier, ix *index, req *Request, args []any, measured map[any]float64, fn pgx.RowToFunc[T], fp *fastPath) ([]Hit[T], error) {
	rows, err := heap.Query(ctx, ix.heapQuery(req, measured != nil), append([]any{ix.vecFormat}, args...)...)
	if err != nil {
		return nil, fmt.Errorf("heapfetch: fetching candidates from %s: %w", ix.table, err)
	}
	defer rows.Close()
	var out []Hit[T]
	var read, vectors int64
	for rows.Next() {
		h, same, ok, err := scanHit(rows, ix, req.Vector, measured, fn)
		if err != nil {
			return nil, fmt.Errorf("heapfetch: reading %s: %w", ix.table, err)
		}
		read++
		if !same {
			vectors++
		}
		if ok {
			out = append(out, h)
		}
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("heapfetch: fetching candidates from %s: %w", ix.table, err)
	}
	fp.candidates.Add(read)
	fp.vectors.Add(vectors)
	slices.SortFunc(out, func(a, b Hit[T]) int {
		if c := cmp.Compare(a.Distance, b.Distance); c != 0 {
			return c
		}
		return compareKeys(a.Key, b.Key)
	})
	return out, nil
}

// scanHit reads a fetched row: its key, its exact distance to q (the
// sidecar's, where same says the row is the version it measured), and the
// caller's columns through fn. ok is false when the row's vector has
// changed, since the sidecar saw it, into one it does not index (NULL,
// malformed, another length, not finite): the row is left out as if it
// had been deleted, and the index will leave it out too once it has
// applied the change.
func scanHit[T any](rows pgx.Rows, ix *index, q []float32, measured map[any]float64, fn pgx.RowToFunc[T]) (h Hit[T], same, ok bool, err error) {
	dest := make([]any, len(rows.FieldDescriptions()))
	dest[0], dest[2] = &h.Key, &same
	if err := rows.Scan(dest...); err != nil {
		return h, false, false, err
	}
	// The vector is decoded here rather than by Scan: pgx's array codec
	// takes ≈ 10 µs for 784 elements, and does not know pgvector's type.
	format, raw := rows.FieldDescriptions()[1].Format, rows.RawValues()[1]
	switch {
	case same:
		h.Distance = measured[mapKey(h.Key)]
	case ix.float8():
		v, err := pgvalue.DecodeFloat64(format, raw)
		h.Distance = vectorDistance(ix.metric, q, v, err)
	default:
		v, err := ix.vec.Decode(format, raw)
		h.Distance = vectorDistance(ix.metric, q, v, err)
	}
	if math.IsNaN(h.Distance) {
		return h, same, false, nil
	}
	h.Row, err = fn(callerColumns{rows})
	return h, same, err == nil, err
}

// vectorDistance is the exact distance from q to a fetched vector v, NaN
// for a vector the index cannot hold: NULL, malformed (err), of another
// length, or not finite.
func vectorDistance[T float32 | float64](m kernels.Metric, q []float32, v []T, err error) float64 {
	if err != nil || len(v) != len(q) {
		return math.NaN()
	}
	d := kernels.ExactDistance(m, q, v)
	if math.IsInf(d, 0) {
		return math.NaN()
	}
	return d
}

// callerColumns shows a fetched row to the caller's scan function without
// the columns heapQuery added in front.
type callerColumns struct{ pgx.Rows }

func (r callerColumns) FieldDescriptions() []pgconn.FieldDescription {
	return r.Rows.FieldDescriptions()[fetched:]
}

func (r callerColumns) RawValues() [][]byte { return r.Rows.RawValues()[fetched:] }

func (r callerColumns) Values() ([]any, error) {
	v, err := r.Rows.Values()
	if err != nil {
		return nil, err
	}
	return v[fetched:], nil
}

// Scan skips the added columns: pgx skips a nil destination. A
// pgx.RowScanner (pgx.RowToMap's) is handed the caller's columns alone.
func (r callerColumns) Scan(dest ...any) error {
	if len(dest) == 1 {
		if rs, ok := dest[0].(pgx.RowScanner); ok {
			return rs.ScanRow(r)
		}
	}
	return r.Rows.Scan(append(make([]any, fetched, fetched+len(dest)), dest...)...)
}

// typedKeys turns keys as pgx decoded them into a slice pgx encodes as an
// array of their type, for "key = ANY($n)".
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

// allowArray is keys as knn's allow argument: bigint[] for integer keys,
// else text[] in the keys' text form, which every exec mode of pgx can
// send.
func allowArray(keys []any) (typ string, arg any) {
	if len(keys) > 0 {
		if _, ok := typedKeys(keys[:1]).([]int64); ok {
			return "bigint[]", typedKeys(keys)
		}
	}
	out := make([]string, len(keys))
	for i, k := range keys {
		out[i] = keyText(k)
	}
	return "text[]", out
}

// keyText is a key's text form, as Postgres prints it.
func keyText(k any) string {
	switch v := k.(type) {
	case int16, int32, int64:
		return strconv.FormatInt(toInt64(v), 10)
	case [16]byte:
		return fmt.Sprintf("%x-%x-%x-%x-%x", v[0:4], v[4:6], v[6:8], v[8:10], v[10:16])
	}
	return fmt.Sprint(k)
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
