package rpc

import (
	"context"
	"fmt"
	"math/rand/v2"
	"net"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/vecside/vecside/indexer"
	"github.com/vecside/vecside/internal/pgvalue"
	"github.com/vecside/vecside/kernels"
)

const testDims = 8

// testKeyTypes are the key types every end-to-end test covers, with the
// index named after each.
var testKeyTypes = []struct {
	index string
	kt    pgvalue.KeyType
	key   func(i int) string // text form of the i-th key
}{
	{"items_int8", pgvalue.KeyInt8, func(i int) string { return strconv.Itoa(i*1000003 - 5000000) }},
	{"items_int4", pgvalue.KeyInt4, func(i int) string { return strconv.Itoa(i*7 - 300) }},
	{"items_int2", pgvalue.KeyInt2, func(i int) string { return strconv.Itoa(i - 50) }},
	{"items_uuid", pgvalue.KeyUUID, func(i int) string { return fmt.Sprintf("0000abcd-0000-4000-8000-%012x", i*977) }},
	{"items_text", pgvalue.KeyText, func(i int) string { return fmt.Sprintf("doc-%d ü'\"", i) }},
}

// testData is what was inserted into one test index, for brute force.
type testData struct {
	kt   pgvalue.KeyType
	keys []string // canonical keys
	vecs [][]float32
}

// newTestIndexer builds ready indexes of 100 random vectors for each key
// type in testKeyTypes.
func newTestIndexer(t testing.TB) (*indexer.Indexer, map[string]*testData) {
	t.Helper()
	ix := indexer.New()
	data := map[string]*testData{}
	rng := rand.New(rand.NewPCG(1, 2))
	for _, tk := range testKeyTypes {
		d := &testData{kt: tk.kt}
		e := addIndex(t, ix, tk.index, tk.kt)
		for i := range 100 {
			key, err := tk.kt.DecodeText(tk.key(i))
			if err != nil {
				t.Fatal(err)
			}
			v := make([]float32, testDims)
			for j := range v {
				v[j] = rng.Float32()*2 - 1
			}
			e.Stream().Upsert(key, v)
			d.keys, d.vecs = append(d.keys, key), append(d.vecs, v)
		}
		e.SetReady()
		e.Stream().SetApplied(indexer.LSN(0x16_B374D848))
		data[tk.index] = d
	}
	return ix, data
}

// randomIndex is a ready index of def, with bigint keys 0 to rows-1 and
// vectors of dims uniform values in [0, 1) drawn from seed.
func randomIndex(t testing.TB, def string, dims, rows int, seed uint64) *indexer.Indexer {
	t.Helper()
	ix := indexer.New()
	e := addIndexDef(t, ix, def, pgvalue.KeyInt8, dims)
	rng := rand.New(rand.NewPCG(seed, seed+1))
	v := make([]float32, dims)
	for i := range rows {
		key, err := pgvalue.KeyInt8.DecodeText(strconv.Itoa(i))
		if err != nil {
			t.Fatal(err)
		}
		for j := range v {
			v[j] = rng.Float32()
		}
		e.Stream().Upsert(key, v)
	}
	e.SetReady()
	return ix
}

// addIndex adds the index name over public.items(embedding), l2.
func addIndex(t testing.TB, ix *indexer.Indexer, name string, kt pgvalue.KeyType) *indexer.Entry {
	t.Helper()
	return addIndexDef(t, ix, name+"=public.items(embedding) key=id metric=l2", kt, 0)
}

// addIndexDef adds an index of def to ix, configured for kt keys and
// real[] vectors of dims dimensions (0: those of its first row).
func addIndexDef(t testing.TB, ix *indexer.Indexer, def string, kt pgvalue.KeyType, dims int) *indexer.Entry {
	t.Helper()
	spec, err := indexer.ParseSpec(def)
	if err != nil {
		t.Fatal(err)
	}
	e, err := ix.Add(spec)
	if err != nil {
		t.Fatal(err)
	}
	if err := e.Configure(kt, pgvalue.VectorFloat4Array, dims); err != nil {
		t.Fatal(err)
	}
	return e
}

// hit is a result row in text form.
type hit struct {
	id       string
	distance float64
}

// bruteForce is the exact top k of q, ids in text form.
func (d *testData) bruteForce(q []float32, k int) []hit {
	all := make([]hit, len(d.keys))
	for i, key := range d.keys {
		all[i] = hit{d.kt.FormatKey(key), kernels.L2.Distance(q, d.vecs[i])}
	}
	slices.SortFunc(all, func(a, b hit) int {
		switch {
		case a.distance < b.distance:
			return -1
		case a.distance > b.distance:
			return 1
		}
		return 0
	})
	return all[:k]
}

// checkHits compares a search's answer with brute force: the same ids in
// the same order, distances within float32 rounding.
func checkHits(t *testing.T, got, want []hit) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("got %d rows %v, want %d %v", len(got), got, len(want), want)
	}
	for i := range want {
		if got[i].id != want[i].id || abs(got[i].distance-want[i].distance) > 1e-5 {
			t.Fatalf("row %d: got %v, want %v\n got %v\nwant %v", i, got[i], want[i], got, want)
		}
	}
}

func abs(f float64) float64 { return max(f, -f) }

// startServer serves cat on a loopback port until the test ends.
func startServer(t testing.TB, cat Catalog) (*Server, string) {
	// A slowCatalog ignores its context, as a prompt Catalog must not.
	_, slow := cat.(*slowCatalog)
	return startServerConfig(t, Config{Catalog: cat, PromptCatalog: !slow, Auth: "trust", Version: "test"})
}

// startServerConfig serves with cfg on a loopback port until the test
// ends, and fails the test if Serve returns before that.
func startServerConfig(t testing.TB, cfg Config) (*Server, string) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	return serveOn(t, cfg, ln), ln.Addr().String()
}

func serveOn(t testing.TB, cfg Config, ln net.Listener) *Server {
	t.Helper()
	srv, err := NewServer(cfg)
	if err != nil {
		t.Fatal(err)
	}
	alsoServe(t, srv, ln)
	return srv
}

// alsoServe serves ln with srv until the test ends.
func alsoServe(t testing.TB, srv *Server, ln net.Listener) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- srv.Serve(ctx, ln) }()
	t.Cleanup(func() {
		cancel()
		select {
		case err := <-done:
			if err != nil {
				t.Errorf("Serve: %v", err)
			}
		case <-time.After(5 * time.Second):
			t.Errorf("Serve did not return after its context ended")
		}
	})
}

func connString(addr string) string {
	host, port, _ := net.SplitHostPort(addr)
	return fmt.Sprintf("postgres://tester@%s:%s/db?sslmode=disable&connect_timeout=5", host, port)
}

// connect opens a pgx connection in the given mode.
func connect(t testing.TB, addr string, mode pgx.QueryExecMode) *pgx.Conn {
	t.Helper()
	cfg, err := pgx.ParseConfig(connString(addr))
	if err != nil {
		t.Fatal(err)
	}
	cfg.DefaultQueryExecMode = mode
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	conn, err := pgx.ConnectConfig(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close(context.Background()) })
	return conn
}

func vectorText(v []float32) string {
	b := []byte{'['}
	for i, x := range v {
		if i > 0 {
			b = append(b, ',')
		}
		b = strconv.AppendFloat(b, float64(x), 'g', -1, 32)
	}
	return string(append(b, ']'))
}

func testContext(t testing.TB) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	t.Cleanup(cancel)
	return ctx
}

func parseFloat(t testing.TB, s string) float64 {
	t.Helper()
	f, err := strconv.ParseFloat(s, 64)
	if err != nil {
		t.Fatal(err)
	}
	return f
}
