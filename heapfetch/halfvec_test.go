package heapfetch_test

import (
	"context"
	"encoding/hex"
	"fmt"
	"maps"
	"math"
	"net"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/vecside/vecside/cmd/vecside/sidecar"
	"github.com/vecside/vecside/deploy"
	"github.com/vecside/vecside/heapfetch"
	"github.com/vecside/vecside/indexer/dataset"
	"github.com/vecside/vecside/internal/pgtest"
	"github.com/vecside/vecside/internal/pgvalue"
	"github.com/vecside/vecside/rpc"
)

// halfvecColumn is how a test gets a halfvec type and writes its values,
// and the reference each search is checked against: every row's distance
// to a query, as pgvector computes it.
type halfvecColumn struct {
	create    string                 // SQL that makes the type halfvec exist
	literal   func([]float32) string // a value's text, as text::halfvec reads it
	reference func(t *testing.T, dsn, metric string, q []float32) map[int64]float64
	helpers   bool // pgvector's operators exist: vecside.search can run
}

// TestHalfvecStandIn runs the halfvec test without pgvector, on a type
// named halfvec whose type modifier is its dimension and whose binary
// form is pgvector's halfvec (a bytea underneath, written in hex), with
// the reference distances computed here as pgvector's halfvec.c does.
// Replication, the catalog's dimension, heapfetch's decoding and
// distances, and knn's halfvec query are all checked; vecside.search needs
// pgvector's operators (TestHalfvecPgvector).
func TestHalfvecStandIn(t *testing.T) {
	data, _ := halfvecData()
	testHalfvec(t, halfvecColumn{
		create:  strings.ReplaceAll(pgtest.StandInVector, "vector", "halfvec"),
		literal: func(v []float32) string { return `\x` + hex.EncodeToString(pgvalue.AppendHalfvec(nil, v)) },
		reference: func(t *testing.T, _, metric string, q []float32) map[int64]float64 {
			half, _ := pgvalue.VectorHalfvec.Round(q)
			all := map[int64]float64{}
			for i, v := range data {
				all[int64(i)] = pgvectorHalfDistance(metric, v, half)
			}
			return all
		},
	})
}

// TestHalfvecPgvector runs the halfvec test on pgvector's halfvec, with
// pgvector's own operators as the reference, vecside.search included. It
// runs where the pgvector extension is available to the test cluster.
func TestHalfvecPgvector(t *testing.T) {
	if dsn, _ := newDatabase(t); !pgtest.OffersPGVector(t, dsn) {
		t.Skip("pgvector is not installed for the test cluster (pg_available_extensions has no 'vector'): " +
			"halfvec is checked on a stand-in type and golden bytes only (TestHalfvecStandIn)")
	}
	testHalfvec(t, halfvecColumn{
		create:  "CREATE EXTENSION vector",
		literal: vectorLiteral,
		reference: func(t *testing.T, dsn, metric string, q []float32) map[int64]float64 {
			op := map[string]string{"l2": "<->", "cosine": "<=>"}[metric]
			conn, err := pgx.Connect(context.Background(), dsn)
			if err != nil {
				t.Fatal(err)
			}
			defer conn.Close(context.Background())
			all := map[int64]float64{}
			var id int64
			var d float64
			r, _ := conn.Query(context.Background(), fmt.Sprintf("SELECT id, embedding %s $1::text::halfvec FROM h", op), vectorLiteral(q))
			if _, err := pgx.ForEachRow(r, []any{&id, &d}, func() error { all[id] = d; return nil }); err != nil {
				t.Fatal(err)
			}
			return all
		},
		helpers: true,
	})
}

func vectorLiteral(v []float32) string { return string(pgvalue.AppendVectorText(nil, v)) }

const (
	halfvecDims    = 768
	halfvecRows    = 1000
	halfvecQueries = 20
	halfvecK       = 10
)

// halfvecIndexes are the indexes' names and options: every kind, and a
// float32 store, whose exact distances give the xid fast path.
var halfvecIndexes, halfvecMetrics = [][2]string{
	{"flat", "kind=flat"}, {"ivf", "kind=ivf recall=0.99"}, {"hnsw", "kind=hnsw recall=0.99"}, {"float", "kind=flat store=float"},
}, []string{"l2", "cosine"}

// halfvecData is the rows, as halves, and the queries, as they come.
func halfvecData() (data, queries [][]float32) {
	data, queries = dataset.Clustered{Seed: 16, Rows: halfvecRows, Queries: halfvecQueries, Dims: halfvecDims, Normalize: true}.Generate()
	for i := range data {
		data[i], _ = pgvalue.VectorHalfvec.Round(data[i])
	}
	return data, queries
}

// testHalfvec: a halfvec(768) column, half of it copied and half
// streamed, indexed by every kind (and a float32 store, whose exact
// distances take the xid fast path) under l2 and cosine; each index has the
// column's dimension and every row; heapfetch's top 10 for each query
// are the reference's rows with its distances, whether the query went
// as real[] or was rounded to halfvec before; knn answers a '…'::halfvec
// query as it answers the same float32 query (the sidecar rounds it);
// and where pgvector is installed vecside.search returns the reference's
// rows and distances too.
func testHalfvec(t *testing.T, col halfvecColumn) {
	ctx := context.Background()
	data, queries := halfvecData()
	dsn, db := newDatabase(t)
	mustExec(t, db, col.create)
	mustExec(t, db, fmt.Sprintf("CREATE TABLE h (id bigint PRIMARY KEY, embedding halfvec(%d))", halfvecDims))
	load := func(from, to int) {
		t.Helper()
		ids, values := make([]int64, 0, to-from), make([]string, 0, to-from)
		for i := from; i < to; i++ {
			ids, values = append(ids, int64(i)), append(values, col.literal(data[i]))
		}
		mustExecArgs(t, db, "INSERT INTO h SELECT i, v::halfvec FROM unnest($1::bigint[], $2::text[]) AS r(i, v)", ids, values)
	}
	load(0, halfvecRows/2)
	var defs []string
	for _, ix := range halfvecIndexes {
		for _, m := range halfvecMetrics {
			defs = append(defs, fmt.Sprintf("h_%s_%s=public.h(embedding) key=id metric=%s %s", ix[0], m, m, ix[1]))
		}
	}
	sc, side := startHalfvecSidecar(t, dsn, defs)
	load(halfvecRows/2, halfvecRows)
	waitApplied(t, db, sc)
	if col.helpers {
		installHelpers(t, db, side, sc)
	}
	client := heapfetch.New(side, db)
	for _, e := range sc.Indexer.Entries() {
		if st := e.Status(); st.Rows != halfvecRows || st.Dims != halfvecDims || e.VectorType() != pgvalue.VectorHalfvec {
			t.Fatalf("%s: %d rows of %d dimensions, type %s; want %d of %d, halfvec", st.Name, st.Rows, st.Dims, e.VectorType(), halfvecRows, halfvecDims)
		}
	}
	found := map[string]int{}
	for qi, q := range queries {
		half, _ := pgvalue.VectorHalfvec.Round(q)
		for _, m := range halfvecMetrics {
			ref := col.reference(t, dsn, m, q)
			kth := slices.Sorted(maps.Values(ref))[halfvecK-1]
			for _, ix := range halfvecIndexes {
				index := fmt.Sprintf("h_%s_%s", ix[0], m)
				for _, v := range [][]float32{q, half} {
					got, err := client.Search(ctx, heapfetch.Request{Index: index, Vector: v, K: halfvecK})
					if err != nil {
						t.Fatalf("%s, query %d: %v", index, qi, err)
					}
					checkHalfvecRows(t, fmt.Sprintf("%s, query %d: heapfetch", index, qi), got, ref)
					for _, r := range got {
						found[index] += count(ref[r.Key.(int64)] <= kth) // by pgvector's distance: no rounding in the way
					}
				}
				asFloats := knnRows(t, side, "SELECT id, distance FROM knn($1, $2, $3)", index, q, halfvecK)
				asHalfvec := knnRows(t, side, "SELECT id, distance FROM knn($1, $2::halfvec, $3)", index, vectorLiteral(q), halfvecK)
				if !slices.Equal(asFloats, asHalfvec) {
					t.Errorf("%s, query %d: knn with real[] %v, with halfvec %v", index, qi, asFloats, asHalfvec)
				}
				if col.helpers {
					got := knnRows(t, db, "SELECT id, distance FROM vecside.search($1, $2::real[], $3, NULL::bigint)", index, q, halfvecK)
					checkHalfvecRows(t, fmt.Sprintf("%s, query %d: vecside.search", index, qi), got, ref)
					if len(got) != halfvecK {
						t.Errorf("%s, query %d: vecside.search returned %d rows", index, qi, len(got))
					}
				}
			}
		}
	}
	if st := client.FastPathStats(); st.VectorsFetched >= st.Candidates {
		t.Errorf("the fast path spared no fetch: %+v", st)
	}
	for index, n := range found {
		recall := float64(n) / float64(2*halfvecK*halfvecQueries)
		t.Logf("%s: recall@10 %.3f", index, recall)
		if recall < 0.95 {
			t.Errorf("%s: recall@10 %.3f, want ≥ 0.95", index, recall)
		}
	}
}

// checkHalfvecRows checks that rows are in order and each has the
// reference's distance: equal within 2e-6 × max(1, distance), as pgvector
// accumulates in single precision and vecside in double (over 768
// products of unit vectors' elements, single precision's sums are off by
// about 1e-7).
func checkHalfvecRows(t *testing.T, what string, rows []heapfetch.Row, ref map[int64]float64) {
	t.Helper()
	for i, r := range rows {
		want, ok := ref[r.Key.(int64)]
		if !ok || math.Abs(r.Distance-want) > 2e-6*math.Max(1, want) {
			t.Errorf("%s: id %v at %.9g, pgvector's distance %.9g", what, r.Key, r.Distance, want)
		}
		if i > 0 && r.Distance < rows[i-1].Distance {
			t.Errorf("%s: rank %d nearer than rank %d", what, i+1, i)
		}
	}
}

// knnRows runs a statement that returns (id, distance) rows.
func knnRows(t *testing.T, conn *pgx.Conn, sql string, args ...any) []heapfetch.Row {
	t.Helper()
	r, err := conn.Query(context.Background(), sql, args...)
	if err != nil {
		t.Fatalf("%s: %v", sql, err)
	}
	out, err := pgx.CollectRows(r, func(row pgx.CollectableRow) (heapfetch.Row, error) {
		var id int64
		var d float64
		err := row.Scan(&id, &d)
		return heapfetch.Row{Key: id, Distance: d}, err
	})
	if err != nil {
		t.Fatalf("%s: %v", sql, err)
	}
	return out
}

// pgvectorHalfDistance is pgvector's distance between halfvecs a and b
// (halfvec.c, halfutils.c): float32 sums of float32 products of the
// halves, in element order, then the square root or cosine in double.
func pgvectorHalfDistance(metric string, a, b []float32) float64 {
	var l2, dot, na, nb float32
	for i := range a {
		d := a[i] - b[i]
		l2 += d * d
		dot += a[i] * b[i]
		na += a[i] * a[i]
		nb += b[i] * b[i]
	}
	if metric == "l2" {
		return math.Sqrt(float64(l2))
	}
	return 1 - max(-1, min(1, float64(dot)/math.Sqrt(float64(na)*float64(nb))))
}

const halfvecSidecarPassword = "halfvec test"

// startHalfvecSidecar starts a sidecar with SCRAM logins, which the SQL
// helpers' dblink connection needs, and connects to it.
func startHalfvecSidecar(t *testing.T, dsn string, defs []string) (*sidecar.Sidecar, *pgx.Conn) {
	v, err := rpc.NewVerifier(halfvecSidecarPassword, rpc.DefaultScramIterations)
	if err != nil {
		t.Fatal(err)
	}
	users, err := rpc.ParseUsers(strings.NewReader(rpc.UserLine("vecside", v)))
	if err != nil {
		t.Fatal(err)
	}
	sc, err := sidecar.Start(context.Background(), sidecar.Config{Source: dsn, Name: "vecside", Indexes: defs,
		Listen: "127.0.0.1:0", Auth: rpc.AuthSCRAM, Users: users, Logger: discard})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := sc.Stop(); err != nil {
			t.Errorf("sidecar: %v", err)
		}
	})
	side, err := pgx.Connect(context.Background(), fmt.Sprintf("postgres://vecside:%s@%s/vecside?sslmode=disable",
		strings.ReplaceAll(halfvecSidecarPassword, " ", "%20"), sc.Addr))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { side.Close(context.Background()) })
	return sc, side
}

// installHelpers installs the SQL helpers for the sidecar's indexes.
func installHelpers(t *testing.T, db, side *pgx.Conn, sc *sidecar.Sidecar) {
	ctx := context.Background()
	indexes, err := deploy.SidecarIndexes(ctx, side)
	if err != nil {
		t.Fatal(err)
	}
	host, port, _ := net.SplitHostPort(sc.Addr.String())
	p, _ := strconv.Atoi(port)
	if err := deploy.Install(ctx, db, deploy.Sidecar{Host: host, Port: p, User: "vecside", Password: halfvecSidecarPassword, SSLMode: "disable"}, indexes); err != nil {
		t.Fatal(err)
	}
}
