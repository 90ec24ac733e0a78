package rpc

import (
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/vecside/vecside/indexer"
	"github.com/vecside/vecside/internal/pgvalue"
	"github.com/vecside/vecside/kernels"
)

// TestHalfvecIndexRoundsQueries: knn on the index of a halfvec column
// measures from the query rounded to half precision, as pgvector compares
// a halfvec column with its query, whatever form the query came in; a
// query beyond halfvec's range is 22023, as pgvector's cast refuses it.
func TestHalfvecIndexRoundsQueries(t *testing.T) {
	ix := indexer.New()
	spec, err := indexer.ParseSpec("h=public.items(embedding) key=id metric=l2 kind=flat store=float")
	if err != nil {
		t.Fatal(err)
	}
	e, err := ix.Add(spec)
	if err != nil {
		t.Fatal(err)
	}
	if err := e.Configure(pgvalue.KeyInt8, pgvalue.VectorHalfvec, 3); err != nil {
		t.Fatal(err)
	}
	v := []float32{1, 0.5, -2} // halves, as a halfvec column's values are
	key, _ := pgvalue.KeyInt8.DecodeText("1")
	e.Stream().Upsert(key, v)
	e.SetReady()
	_, addr := startServer(t, ix)
	conn := connect(t, addr, pgx.QueryExecModeExec)
	q := []float32{0.1, 0.2, 0.3}
	half, _ := pgvalue.VectorHalfvec.Round(q)
	want := kernels.ExactDistance(kernels.L2, half, v)
	if want == kernels.ExactDistance(kernels.L2, q, v) {
		t.Fatal("the test's query is a halfvec already")
	}
	for _, c := range []struct {
		sql string
		arg any
	}{
		{"SELECT distance FROM knn('h', $1, 1)", q},
		{"SELECT distance FROM knn('h', $1::vector, 1)", vectorText(q)},
		{"SELECT distance FROM knn('h', $1::bytea, 1)", pgvalue.AppendPgvector(nil, q)},
	} {
		var got float64
		if err := conn.QueryRow(testContext(t), c.sql, c.arg).Scan(&got); err != nil || got != want {
			t.Errorf("%s: %v, %v; want %v", c.sql, got, err, want)
		}
	}
	err = conn.QueryRow(testContext(t), "SELECT distance FROM knn('h', $1, 1)", []float32{1e5, 0, 0}).Scan(new(float64))
	if code := sqlstate(err); code != codeInvalidParameterValue {
		t.Errorf("a query beyond halfvec's range: %v, want 22023", err)
	}
}
