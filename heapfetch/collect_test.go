package heapfetch_test

import (
	"cmp"
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/vecside/vecside/heapfetch"
	"github.com/vecside/vecside/kernels"
)

type doc struct {
	Title  string
	Tenant int32
}

// TestCollect: the caller's columns scan into its struct by name, only
// rows that satisfy the filter come back, k of them, the same under every
// way of filtering, equal to the exact answer over the matching rows; in
// order-only mode the same rows come back in the same order, without
// distances.
func TestCollect(t *testing.T) {
	const rows, dims, k = 600, 8, 5
	ctx := context.Background()
	dsn, db := newDatabase(t)
	mustExec(t, db, `CREATE TABLE docs (id bigint PRIMARY KEY, tenant int, published bool, title text, v real[])`)
	rng := rand.New(rand.NewPCG(7, 8))
	vecs := make([][]float32, rows)
	for i := range vecs {
		vecs[i] = make([]float32, dims)
		for j := range vecs[i] {
			vecs[i][j] = rng.Float32()*2 - 1
		}
	}
	_, err := db.CopyFrom(ctx, pgx.Identifier{"docs"}, []string{"id", "tenant", "published", "title", "v"},
		pgx.CopyFromSlice(rows, func(i int) ([]any, error) {
			return []any{int64(i), int32(i % 10), i%3 != 0, fmt.Sprintf("doc %d", i), vecs[i]}, nil
		}))
	if err != nil {
		t.Fatal(err)
	}
	mustExec(t, db, "ANALYZE docs")
	sc, side := startSidecar(t, dsn, "docs_flat=public.docs(v) key=id metric=l2", "docs_ivf=public.docs(v) key=id metric=l2 kind=ivf lists=8 probes=8")
	waitApplied(t, db, sc)
	client := heapfetch.New(side, db)
	q := []float32{0.5, -0.5, 0.25, 0, 0, 0.1, -0.3, 0.9}

	// The exact answer: tenant 3, published.
	var want []heapfetch.Hit[doc]
	for i, v := range vecs {
		if i%10 == 3 && i%3 != 0 {
			want = append(want, heapfetch.Hit[doc]{Row: doc{fmt.Sprintf("doc %d", i), 3}, Key: int64(i), Distance: kernels.ExactDistance(kernels.L2, q, v)})
		}
	}
	slices.SortFunc(want, func(a, b heapfetch.Hit[doc]) int { return cmp.Compare(a.Distance, b.Distance) })
	want = want[:k]
	for _, index := range []string{"docs_flat", "docs_ivf"} {
		for _, how := range []heapfetch.Filtering{heapfetch.FilterAuto, heapfetch.PreFilter, heapfetch.PostFilter} {
			req := heapfetch.Request{Index: index, Vector: q, K: k, Columns: []string{"title", "tenant"},
				Filter: "tenant = $1 AND published", Args: []any{3}, Filtering: how}
			got, err := heapfetch.Collect(ctx, client, req, pgx.RowToStructByName[doc])
			if err != nil {
				t.Fatalf("%s, filtering %d: %v", index, how, err)
			}
			if fmt.Sprint(got) != fmt.Sprint(want) {
				t.Errorf("%s, filtering %d:\n got %v\nwant %v", index, how, got, want)
			}
			req.OrderOnly = true
			got, err = heapfetch.Collect(ctx, client, req, pgx.RowToStructByName[doc])
			if err != nil {
				t.Fatal(err)
			}
			for i := range got {
				if got[i].Key != want[i].Key || got[i].Row != want[i].Row || !math.IsNaN(got[i].Distance) {
					t.Fatalf("%s, order only: rank %d is %v, want %v without its distance", index, i+1, got[i], want[i])
				}
			}
		}
	}
	// A filter nothing satisfies returns nothing; a bad one says so.
	got, err := heapfetch.Collect(ctx, client, heapfetch.Request{Index: "docs_ivf", Vector: q, K: k, Filter: "tenant = 99"}, pgx.RowToMap)
	if err != nil || len(got) != 0 {
		t.Errorf("a filter matching nothing: %v, %v", got, err)
	}
	if _, err := client.Search(ctx, heapfetch.Request{Index: "docs_ivf", Vector: q, K: k, Filter: "no_such_column = 1"}); err == nil {
		t.Error("a filter on a missing column was accepted")
	}
	// RowToMap sees only the caller's columns.
	maps, err := heapfetch.Collect(ctx, client, heapfetch.Request{Index: "docs_ivf", Vector: q, K: 1, Columns: []string{"title"}}, pgx.RowToMap)
	if err != nil || len(maps) != 1 || len(maps[0].Row) != 1 || maps[0].Row["title"] == nil {
		t.Errorf("RowToMap: %v, %v", maps, err)
	}
}
