package deploy

import (
	"context"
	"math"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/vecside/vecside/internal/pgtest"
	"github.com/vecside/vecside/kernels"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

// TestDistanceSQL: the SQL distances over real[] equal pgvector's
// definitions as kernels computes them, and are NULL for arrays of
// different lengths; installing twice is harmless.
func TestDistanceSQL(t *testing.T) {
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, pgtest.Shared(t).NewDatabase(t))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	for i := 0; i < 2; i++ {
		if _, err := conn.Exec(ctx, DistanceSQL); err != nil {
			t.Fatal(err)
		}
	}
	a, b := []float32{1, 2, 3, -4}, []float32{0.5, -1, 2, 8}
	for fn, m := range map[string]kernels.Metric{
		"vecside.l2_distance": kernels.L2, "vecside.cosine_distance": kernels.Cosine, "vecside.negative_inner_product": kernels.IP,
	} {
		var got float64
		if err := conn.QueryRow(ctx, "SELECT "+fn+"($1, $2)", a, b).Scan(&got); err != nil {
			t.Fatal(err)
		}
		if want := m.Distance(a, b); math.Abs(got-want) > 1e-12*math.Max(1, math.Abs(want)) {
			t.Errorf("%s = %v, want %v", fn, got, want)
		}
		var null *float64
		if err := conn.QueryRow(ctx, "SELECT "+fn+"($1, $2)", a, b[:3]).Scan(&null); err != nil || null != nil {
			t.Errorf("%s of different lengths: %v, %v; want NULL", fn, null, err)
		}
	}
}
