package heapfetch_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/vecside/vecside/cmd/vecside/sidecar"
	"github.com/vecside/vecside/heapfetch"
	"github.com/vecside/vecside/internal/pgtest"
)

// loadRandom fills docs(id, v) with n random rows of dims dimensions.
func loadRandom(t testing.TB, db *pgx.Conn, n, dims int, seed uint64) {
	t.Helper()
	mustExec(t, db, `CREATE TABLE docs (id bigint PRIMARY KEY, v real[])`)
	rng := rand.New(rand.NewPCG(seed, 1))
	_, err := db.CopyFrom(context.Background(), pgx.Identifier{"docs"}, []string{"id", "v"},
		pgx.CopyFromSlice(n, func(i int) ([]any, error) { return []any{int64(i), randomVector(rng, dims)}, nil }))
	if err != nil {
		t.Fatal(err)
	}
}

func randomVector(rng *rand.Rand, dims int) []float32 {
	v := make([]float32, dims)
	for j := range v {
		v[j] = rng.Float32()*2 - 1
	}
	return v
}

// startHalves starts two sidecars of index def, one on the rows with an
// even id, one on the odd, waits for their copies, and returns them and a
// client searching both.
func startHalves(t *testing.T, dsn string, db *pgx.Conn, def string) (even, odd *sidecar.Sidecar, c *heapfetch.Client) {
	t.Helper()
	even, evenConn := startNamedSidecar(t, dsn, "vecside_even", def+" where='id % 2 = 0'")
	odd, oddConn := startNamedSidecar(t, dsn, "vecside_odd", def+" where='id % 2 = 1'")
	waitApplied(t, db, even)
	waitApplied(t, db, odd)
	c, err := heapfetch.NewClient(heapfetch.Config{Shards: [][]heapfetch.Querier{{evenConn}, {oddConn}}, Heap: db})
	if err != nil {
		t.Fatal(err)
	}
	return even, odd, c
}

// TestShards: two sidecars, each indexing half of a table through a row
// filter on its own publication, give the same top k as one sidecar on
// the whole table, after the copy and after changes that move rows between
// the halves (a key change), change vectors, insert and delete.
func TestShards(t *testing.T) {
	const rows, dims, k = 3000, 8, 10
	ctx := context.Background()
	dsn, db := newDatabase(t)
	loadRandom(t, db, rows, dims, 11)
	const def = "docs_v=public.docs(v) key=id metric=l2 kind=ivf lists=16 probes=16"
	even, odd, sharded := startHalves(t, dsn, db, def)
	whole, wholeConn := startNamedSidecar(t, dsn, "vecside_whole", def)
	waitApplied(t, db, whole)
	one := heapfetch.New(wholeConn, db)
	rng := rand.New(rand.NewPCG(12, 13))
	compare := func(stage string) {
		t.Helper()
		for _, sc := range []*sidecar.Sidecar{even, odd, whole} {
			waitApplied(t, db, sc)
		}
		var total int64
		for _, sc := range []*sidecar.Sidecar{even, odd} {
			total += int64(mustEntry(t, sc, "docs_v").Status().Rows)
		}
		var want int64
		if err := db.QueryRow(ctx, "SELECT count(*) FROM docs").Scan(&want); err != nil {
			t.Fatal(err)
		}
		if wholeRows := int64(mustEntry(t, whole, "docs_v").Status().Rows); total != want || wholeRows != want {
			t.Fatalf("%s: the halves hold %d rows, the whole %d, the table %d", stage, total, wholeRows, want)
		}
		for i := range 20 {
			q := randomVector(rng, dims)
			req := heapfetch.Request{Index: "docs_v", Vector: q, K: k}
			a, err := sharded.Search(ctx, req)
			if err != nil {
				t.Fatal(err)
			}
			b, err := one.Search(ctx, req)
			if err != nil {
				t.Fatal(err)
			}
			if fmt.Sprint(a) != fmt.Sprint(b) {
				t.Fatalf("%s, query %d: sharded %v\nwhole %v", stage, i, a, b)
			}
		}
	}
	compare("after the copy")
	mustExec(t, db, `UPDATE docs SET id = id + 100001 WHERE id < 300;          -- even ↔ odd
		UPDATE docs SET v = (SELECT array_agg(sin(id * g)::real) FROM generate_series(1, 8) g) WHERE id % 7 = 0;
		INSERT INTO docs SELECT i, (SELECT array_agg(cos(i * g)::real) FROM generate_series(1, 8) g) FROM generate_series(200000, 200400) i;
		DELETE FROM docs WHERE id % 11 = 0`)
	compare("after changes")
}

// TestRowFilterOutsideIdentity: a row filter that reads a column outside
// the replica identity, which would make the application's UPDATEs fail,
// is refused with a message that says so.
func TestRowFilterOutsideIdentity(t *testing.T) {
	dsn, db := newDatabase(t)
	loadRandom(t, db, 10, 2, 1)
	mustExec(t, db, "ALTER TABLE docs ADD COLUMN tenant int")
	sc, err := sidecar.Start(context.Background(), sidecar.Config{Source: dsn, Name: "vecside", Listen: "127.0.0.1:0", Auth: "trust",
		Indexes: []string{"docs_v=public.docs(v) key=id metric=l2 where='tenant = 1'"}, Logger: discard})
	if err == nil {
		err = sc.Wait()
	}
	if err == nil || !strings.Contains(err.Error(), "replica-identity") {
		t.Fatalf("got %v, want a refusal naming the replica identity", err)
	}
	mustExec(t, db, "UPDATE docs SET tenant = 2") // the application's writes still work
}

// TestFailover: searches spread over two sidecars of one index. One is
// cut off mid-run by a partition that lasts a while (its connections,
// and those made meanwhile, never answer), then the partition heals and
// the other is stopped; no search fails or returns a wrong answer, and
// only the search that met the partition waits for the sidecar timeout.
// Asking the cut sidecar in turn, as before its back-off, lost searches:
// the pool had filled with connections made during the partition.
func TestFailover(t *testing.T) {
	const rows, dims, k, searches = 2000, 8, 5, 300
	ctx := context.Background()
	dsn, db := newDatabase(t)
	loadRandom(t, db, rows, dims, 21)
	const def = "docs_v=public.docs(v) key=id metric=l2"
	a, _ := startNamedSidecar(t, dsn, "vecside_a", def)
	b, _ := startNamedSidecar(t, dsn, "vecside_b", def)
	waitApplied(t, db, a)
	waitApplied(t, db, b)
	proxy := pgtest.NewProxy(t, b.Addr.String())
	url := func(sc *sidecar.Sidecar) string {
		return "postgres://vecside@" + sc.Addr.String() + "/vecside?sslmode=disable"
	}
	pool := func(url string) *pgxpool.Pool {
		p, err := pgxpool.New(ctx, url)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(p.Close)
		return p
	}
	heap, err := pgxpool.New(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(heap.Close)
	client, err := heapfetch.NewClient(heapfetch.Config{Shards: [][]heapfetch.Querier{{pool(url(a)), pool(proxy.Via(t, url(b)))}},
		Heap: heap, SidecarTimeout: 500 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	rng := rand.New(rand.NewPCG(22, 23))
	qs := make([][]float32, 20)
	want := make([]string, len(qs))
	for i := range qs {
		qs[i] = randomVector(rng, dims)
		got, err := client.Search(ctx, heapfetch.Request{Index: "docs_v", Vector: qs[i], K: k})
		if err != nil {
			t.Fatal(err)
		}
		want[i] = fmt.Sprint(got)
	}
	var failed, wrong, slow int
	for i := range searches {
		switch i {
		case searches / 3: // a partition that lasts: new connections too are black holes
			proxy.Isolate(true)
			if proxy.Partition() == 0 {
				t.Fatal("no connection to the second sidecar to cut")
			}
		case 2 * searches / 3:
			proxy.Isolate(false)
			if err := a.Stop(); err != nil {
				t.Errorf("stopping a sidecar: %v", err)
			}
		}
		start := time.Now()
		got, err := client.Search(ctx, heapfetch.Request{Index: "docs_v", Vector: qs[i%len(qs)], K: k})
		if time.Since(start) > 250*time.Millisecond {
			slow++
		}
		switch {
		case err != nil:
			failed++
			t.Logf("search %d: %v", i, err)
		case fmt.Sprint(got) != want[i%len(qs)]:
			wrong++
		}
	}
	if failed+wrong > 0 {
		t.Fatalf("%d of %d searches failed and %d were wrong with one sidecar cut off, then the other stopped", failed, searches, wrong)
	}
	// The partition costs the one search that met it a timeout: the cut
	// sidecar is then asked last until its back-off ends.
	if slow > 2 {
		t.Errorf("%d searches took longer than half the sidecar timeout", slow)
	}
}

// TestShardsMoveToastedRows: a key change moves a row to the other shard
// with its vector stored out of line and unchanged, so the change does not
// carry it; the receiving sidecar reads it back under its row filter, and
// the moved rows are found at their new keys.
func TestShardsMoveToastedRows(t *testing.T) {
	const rows, dims = 200, 768
	ctx := context.Background()
	dsn, db := newDatabase(t)
	loadRandom(t, db, rows, dims, 31)
	const def = "docs_v=public.docs(v) key=id metric=l2"
	even, odd, client := startHalves(t, dsn, db, def)
	mustExec(t, db, "UPDATE docs SET id = id + 1001 WHERE id < 20") // even ↔ odd, vector untouched
	waitApplied(t, db, even)
	waitApplied(t, db, odd)
	if n := even.Replicator.Stats().Repairs.Load() + odd.Replicator.Stats().Repairs.Load(); n != 20 {
		t.Fatalf("%d rows read back, want 20: the changes did not leave the vectors out", n)
	}
	for _, sc := range []*sidecar.Sidecar{even, odd} {
		if n := mustEntry(t, sc, "docs_v").Status().Rows; n != rows/2 {
			t.Errorf("a shard holds %d rows, want %d", n, rows/2)
		}
	}
	for id := int64(1001); id < 1021; id++ {
		var v []float32
		if err := db.QueryRow(ctx, "SELECT v FROM docs WHERE id = $1", id).Scan(&v); err != nil {
			t.Fatal(err)
		}
		got, err := client.Search(ctx, heapfetch.Request{Index: "docs_v", Vector: v, K: 1})
		if err != nil || len(got) != 1 || got[0].Key != id || got[0].Distance != 0 {
			t.Fatalf("row moved to %d: got %v, %v", id, got, err)
		}
	}
}
