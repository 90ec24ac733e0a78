package deploy

import (
	"context"
	"math"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/vecside/vecside/internal/pgtest"
	"github.com/vecside/vecside/internal/pgvalue"
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

// TestHelpersKnowTheVectorTypes holds register_index's type check to
// pgvalue's table of vector types: the arrays it names, pgvector's types
// it matches by name, and the types its message lists are those vecside
// replicates, no more and no fewer.
func TestHelpersKnowTheVectorTypes(t *testing.T) {
	check := regexp.MustCompile(`IF vt::text NOT IN \(([^)]*)\) AND pg_catalog\.format_type\(vt, NULL\) !~ '\(\^\|\\\.\)\(([^)]*)\)\$' THEN\s+RAISE EXCEPTION 'column %\.% is %, not ([^']*)'`).
		FindStringSubmatch(HelpersSQL)
	if check == nil {
		t.Fatal("helpers.sql: register_index's check of the vector column's type not found")
	}
	var arrays, named, all []string
	for _, vt := range pgvalue.VectorTypes() {
		if vt.OID() != 0 {
			arrays = append(arrays, "'"+vt.String()+"'")
		} else {
			named = append(named, vt.String())
		}
		all = append(all, vt.String())
	}
	sameSet := func(what string, got, want []string) {
		if !slices.Equal(slices.Sorted(slices.Values(got)), slices.Sorted(slices.Values(want))) {
			t.Errorf("helpers.sql: register_index %s %v, pgvalue's table has %v", what, got, want)
		}
	}
	sameSet("accepts the arrays", strings.Split(check[1], ", "), arrays)
	sameSet("matches pgvector's types", strings.Split(check[2], "|"), named)
	sameSet("names", strings.Split(strings.Replace(check[3], " or ", ", ", 1), ", "), all)
}
