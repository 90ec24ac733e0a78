package heapfetch_test

import (
	"context"
	"errors"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/vecside/vecside/heapfetch"
	"github.com/vecside/vecside/internal/pgtest"
)

// TestReadYourWritesOnStandby: rows are read from a streaming standby
// (pg_basebackup -R) while the sidecar follows the primary. A client that
// writes on the primary and searches with the LSN after its write finds
// its row 100 times out of 100, waiting for the standby; with UsePrimary
// it reads from the primary instead when the standby is behind. A standby
// whose replay is paused makes a search fail with ErrReplicaBehind after
// ReplicaWait, though the caller's context has no deadline.
func TestReadYourWritesOnStandby(t *testing.T) {
	const dims, rounds = 8, 100
	ctx := context.Background()
	dsn, db := newDatabase(t)
	mustExec(t, db, `CREATE TABLE docs (id bigint PRIMARY KEY, v real[]);
		INSERT INTO docs SELECT g, array_fill(g::real, ARRAY[8]) FROM generate_series(1, 1000) g`)
	sc, side := startSidecar(t, dsn, "docs_v=public.docs(v) key=id metric=l2")
	waitApplied(t, db, sc)
	cfg, err := pgx.ParseConfig(dsn)
	if err != nil {
		t.Fatal(err)
	}
	standby := pgtest.Shared(t).NewStandby(t)
	replica, err := pgx.Connect(ctx, standby.DSN(cfg.Database))
	if err != nil {
		t.Fatal(err)
	}
	defer replica.Close(ctx)
	client, err := heapfetch.NewClient(heapfetch.Config{Shards: [][]heapfetch.Querier{{side}}, Heap: replica, Primary: db})
	if err != nil {
		t.Fatal(err)
	}
	rng := rand.New(rand.NewPCG(9, 10))
	id := int64(100000)
	write := func() ([]float32, string) {
		id++
		return writeOwnRow(t, db, rng, id, dims)
	}
	for _, usePrimary := range []bool{false, true} {
		found := 0
		for i := 0; i < rounds; i++ {
			v, lsn := write()
			rows, err := client.Search(ctx, heapfetch.Request{Index: "docs_v", Vector: v, K: 1, MinLSN: lsn, UsePrimary: usePrimary})
			if err != nil {
				t.Fatalf("UsePrimary %v, round %d: %v", usePrimary, i, err)
			}
			if len(rows) == 1 && rows[0].Key == id && rows[0].Distance == 0 {
				found++
			}
		}
		if found != rounds {
			t.Errorf("UsePrimary %v: found the row just written %d times out of %d", usePrimary, found, rounds)
		}
	}

	mustExec(t, replica, "SELECT pg_wal_replay_pause()")
	defer mustExec(t, replica, "SELECT pg_wal_replay_resume()")
	v, lsn := write()
	start := time.Now()
	_, err = client.Search(ctx, heapfetch.Request{Index: "docs_v", Vector: v, K: 1, MinLSN: lsn, ReplicaWait: 200 * time.Millisecond})
	if !errors.Is(err, heapfetch.ErrReplicaBehind) || time.Since(start) > 5*time.Second {
		t.Fatalf("with replay paused: got %v after %s, want ErrReplicaBehind after about 200ms", err, time.Since(start))
	}
	rows, err := client.Search(ctx, heapfetch.Request{Index: "docs_v", Vector: v, K: 1, MinLSN: lsn, UsePrimary: true})
	if err != nil || len(rows) != 1 || rows[0].Key != id {
		t.Fatalf("with replay paused and UsePrimary: got %v, %v, want row %d", rows, err, id)
	}
}
