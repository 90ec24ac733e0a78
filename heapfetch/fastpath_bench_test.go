package heapfetch_test

import (
	"context"
	"fmt"
	"reflect"
	"slices"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/vecside/vecside/heapfetch"
	"github.com/vecside/vecside/indexer/dataset"
	"github.com/vecside/vecside/kernels"
)

// BenchmarkFastPath measures, on Fashion-MNIST (60,000 × 784, L2) with
// its vectors TOASTed out of line (a real[] column with SET STORAGE
// EXTERNAL: its mostly-zero arrays would otherwise compress inline), the
// end-to-end latency of a search for k = 10 three ways, side by side:
// the sidecar alone (knn, no heap), fetching every candidate's vector,
// and the fast path. Before timing, it checks on every query that the
// fast path returns the rows, order and distances of the path that
// fetches every vector, and reports recall@10 against exact ground
// truth. It does so for an IVF index with store=float, whose distances
// are exact, with the compact store (IVF, 4-bit codes) whose are not, and
// with the default HNSW (6-bit codes) asked for k candidates; and, where
// pgvector is installed, for store=float and HNSW over a vector(784)
// column stored out of line as well.
//
// Each path reports p50_ms (the median latency) and vectors/query (the
// vectors fetched from the heap per query).
func BenchmarkFastPath(b *testing.B) {
	const k, queries = 10, 200
	data, qs, err := dataset.FashionMNIST("")
	if err != nil {
		b.Skipf("fashion-mnist: %v", err)
	}
	qs = qs[:queries]
	ctx := context.Background()
	dsn, db := newDatabase(b)
	mustExec(b, db, `CREATE TABLE fmnist (id bigint PRIMARY KEY, v real[]);
		ALTER TABLE fmnist ALTER COLUMN v SET STORAGE EXTERNAL`)
	if _, err := db.CopyFrom(ctx, pgx.Identifier{"fmnist"}, []string{"id", "v"},
		pgx.CopyFromSlice(len(data), func(i int) ([]any, error) { return []any{int64(i), data[i]}, nil })); err != nil {
		b.Fatal(err)
	}
	// The compact HNSW index is asked for k candidates (oversample 1):
	// its 6-bit codes order them well enough that no more are needed for
	// recall ≥ 0.95, so at most k vectors are fetched.
	oversample := map[string]float64{"fmnist_hnsw": 1, "fmnist_vector_hnsw": 1}
	indexes := []string{"fmnist_float", "fmnist_ext4", "fmnist_hnsw"}
	defs := []string{
		"fmnist_float=public.fmnist(v) key=id metric=l2 kind=ivf store=float",
		"fmnist_ext4=public.fmnist(v) key=id metric=l2 kind=ivf",
		"fmnist_hnsw=public.fmnist(v) key=id metric=l2 kind=hnsw",
	}
	tables := []string{"fmnist"}
	// Where pgvector is installed, the same through a vector column.
	if _, err := db.Exec(ctx, `CREATE EXTENSION IF NOT EXISTS vector`); err == nil {
		mustExec(b, db, `CREATE TABLE fmnist_vector (id bigint PRIMARY KEY, v vector(784));
			ALTER TABLE fmnist_vector ALTER COLUMN v SET STORAGE EXTERNAL;
			INSERT INTO fmnist_vector SELECT id, v::vector FROM fmnist`)
		indexes = append(indexes, "fmnist_vector_float", "fmnist_vector_hnsw")
		defs = append(defs, "fmnist_vector_float=public.fmnist_vector(v) key=id metric=l2 kind=ivf store=float",
			"fmnist_vector_hnsw=public.fmnist_vector(v) key=id metric=l2 kind=hnsw")
		tables = append(tables, "fmnist_vector")
	} else {
		b.Logf("no pgvector (%v): measuring the real[] column only", err)
	}
	for _, table := range tables {
		mustExec(b, db, `VACUUM ANALYZE `+table)
		var toasted bool
		if err := db.QueryRow(ctx, `SELECT pg_relation_size(reltoastrelid) > 10 * pg_relation_size(oid) FROM pg_class WHERE relname = $1`, table).Scan(&toasted); err != nil || !toasted {
			b.Fatalf("the vectors of %s are not out of line (%v)", table, err)
		}
	}
	sc, side := startSidecar(b, dsn, defs...)
	waitApplied(b, db, sc)
	truth := dataset.GroundTruth(kernels.L2, data, qs, k)

	for _, index := range indexes {
		client := heapfetch.New(side, db)
		hits := 0
		for i, q := range qs {
			fast, err := client.Search(ctx, heapfetch.Request{Index: index, Vector: q, K: k, Oversample: oversample[index]})
			if err != nil {
				b.Fatal(err)
			}
			slow, err := client.Search(ctx, heapfetch.Request{Index: index, Vector: q, K: k, Oversample: oversample[index], AlwaysFetch: true})
			if err != nil {
				b.Fatal(err)
			}
			if !reflect.DeepEqual(fast, slow) {
				b.Fatalf("%s, query %d: fast path %v, fetching every vector %v", index, i, fast, slow)
			}
			for _, r := range fast {
				if r.Distance <= truth[i].KthDistance()*(1+1e-9) {
					hits++
				}
			}
		}
		recall := float64(hits) / float64(k*len(qs))
		b.Logf("%s: recall@10 %.4f over %d queries, fast path identical to fetching every vector", index, recall, len(qs))

		paths := []struct {
			name string
			run  func(q []float32) error
		}{
			{"sidecar-only", func(q []float32) error {
				rows, err := side.Query(ctx, "SELECT id, distance FROM knn($1, $2, $3, $4)", index, q, k, knnOptions(oversample[index]))
				if err == nil {
					rows.Close()
					err = rows.Err()
				}
				return err
			}},
			{"fetch-every-vector", func(q []float32) error {
				_, err := client.Search(ctx, heapfetch.Request{Index: index, Vector: q, K: k, Oversample: oversample[index], AlwaysFetch: true})
				return err
			}},
			{"fast-path", func(q []float32) error {
				_, err := client.Search(ctx, heapfetch.Request{Index: index, Vector: q, K: k, Oversample: oversample[index]})
				return err
			}},
		}
		for _, p := range paths {
			b.Run(index+"/"+p.name, func(b *testing.B) {
				took := make([]time.Duration, 0, b.N)
				before := client.FastPathStats()
				for i := 0; b.Loop(); i++ {
					start := time.Now()
					if err := p.run(qs[i%len(qs)]); err != nil {
						b.Fatal(err)
					}
					took = append(took, time.Since(start))
				}
				after := client.FastPathStats()
				slices.Sort(took)
				b.ReportMetric(float64(took[len(took)/2].Microseconds())/1000, "p50_ms")
				b.ReportMetric(float64(after.VectorsFetched-before.VectorsFetched)/float64(len(took)), "vectors/query")
				b.ReportMetric(recall, "recall@10")
			})
		}
	}
}

// knnOptions is knn's options argument asking for k × oversample
// candidates, or the index's default for 0.
func knnOptions(oversample float64) string {
	if oversample == 0 {
		return ""
	}
	return fmt.Sprintf("oversample=%g", oversample)
}
