package deploy

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/vecside/vecside/internal/pgtest"
)

// waitReplayed waits until the standby has replayed what the primary has
// written so far.
func waitReplayed(t *testing.T, primary, standby *pgx.Conn) {
	t.Helper()
	ctx := context.Background()
	var lsn string
	if err := primary.QueryRow(ctx, "SELECT pg_current_wal_lsn()::text").Scan(&lsn); err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		var done bool
		if err := standby.QueryRow(ctx, "SELECT pg_last_wal_replay_lsn() >= $1::pg_lsn", lsn).Scan(&done); err != nil {
			t.Fatal(err)
		}
		if done {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("the standby has not replayed %s after 30s", lsn)
		}
	}
}

// backendCPU is the CPU time a PostgreSQL backend has used, from /proc.
func backendCPU(t *testing.T, conn *pgx.Conn) time.Duration {
	var pid int
	if err := conn.QueryRow(context.Background(), "SELECT pg_backend_pid()").Scan(&pid); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		t.Fatal(err)
	}
	fields := strings.Fields(string(b[strings.LastIndexByte(string(b), ')')+2:]))
	utime, _ := strconv.ParseInt(fields[11], 10, 64) // fields 14 and 15 of stat
	stime, _ := strconv.ParseInt(fields[12], 10, 64)
	return time.Duration(utime+stime) * (time.Second / 100) // USER_HZ
}

// TestStandbyOffload: the helpers installed on the primary work on a hot
// standby (pg_basebackup -R) against the sidecar that follows the primary.
func TestStandbyOffload(t *testing.T) {
	ctx := context.Background()
	e := newHelperEnv(t)
	e.role("reader", "GRANT vecside_user TO %s", "GRANT SELECT ON items TO %s")
	reader := func(port int) *pgx.Conn {
		cfg, err := pgx.ParseConfig(e.dsn)
		if err != nil {
			t.Fatal(err)
		}
		cfg.User, cfg.Port = e.prefix+"reader", uint16(port)
		conn, err := pgx.ConnectConfig(ctx, cfg)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { conn.Close(ctx) })
		return conn
	}
	standby := pgtest.Shared(t).NewStandby(t)
	onPrimary, onStandby := reader(pgtest.Shared(t).Port), reader(standby.Port)
	rng := rand.New(rand.NewPCG(5, 6))

	t.Run("same answers once the standby has caught up", func(t *testing.T) {
		waitReplayed(t, e.db, onStandby)
		for range 5 {
			q := randomQuery(rng)
			p, s := checkExact(t, onPrimary, q), checkExact(t, onStandby, q)
			if !slices.Equal(p, s) {
				t.Fatalf("primary %v\nstandby %v", p, s)
			}
		}
	})

	t.Run("under writes, rows match the standby's snapshot", func(t *testing.T) {
		stop := make(chan struct{})
		var wg sync.WaitGroup
		wg.Go(func() { writeWhile(t, e.dsn, stop) })
		defer func() { close(stop); wg.Wait() }()
		var hits, total int
		for range 30 {
			q := randomQuery(rng)
			tx, err := onStandby.BeginTx(ctx, pgx.TxOptions{IsoLevel: pgx.RepeatableRead, AccessMode: pgx.ReadOnly})
			if err != nil {
				t.Fatal(err)
			}
			got, err := collect(t, tx.Conn(), searchSQL, q)
			if err != nil {
				t.Fatal(err)
			}
			want, _ := collect(t, tx.Conn(), exactSQL, q)
			ids := make([]int64, len(got))
			for i, s := range got {
				ids[i] = s.id
			}
			now, _ := collect(t, tx.Conn(), "SELECT id, vecside.l2_distance(v, $1) FROM items WHERE id = ANY($2) ORDER BY 2, 1", q, ids)
			tx.Rollback(ctx)
			if !slices.Equal(now, got) {
				t.Fatalf("returned %v, but the standby's snapshot has %v", got, now)
			}
			for _, w := range want {
				hits += len(slices.DeleteFunc(slices.Clone(got), func(s scored) bool { return s.id != w.id }))
			}
			total += len(want)
		}
		t.Logf("recall@10 on the standby under writes: %.3f over 30 queries", float64(hits)/float64(total))
		if float64(hits) < 0.9*float64(total) {
			t.Errorf("recall %d/%d", hits, total)
		}
	})

	t.Run("CPU per query on the standby", func(t *testing.T) {
		const n = 40
		var cost [2]time.Duration
		for i, sql := range []string{searchSQL, exactSQL} {
			name := []string{"vecside.search", "exact SQL"}[i]
			before := backendCPU(t, onStandby)
			start := time.Now()
			for range n {
				if _, err := collect(t, onStandby, sql, randomQuery(rng)); err != nil {
					t.Fatal(err)
				}
			}
			cost[i] = (backendCPU(t, onStandby) - before) / n
			t.Logf("%s: %v of the standby backend's CPU a query, %v a query in all", name, cost[i], time.Since(start)/n)
		}
		t.Logf("standby CPU per query, %d rows of %d dimensions: vecside.search %v, exact SQL %v", helperRows, helperDims, cost[0], cost[1])
	})
}

// writeWhile updates, inserts and deletes rows of items until stop.
func writeWhile(t *testing.T, dsn string, stop <-chan struct{}) {
	ctx := context.Background()
	db, err := pgx.Connect(ctx, dsn)
	if err != nil {
		t.Error(err)
		return
	}
	defer db.Close(ctx)
	rng := rand.New(rand.NewPCG(7, 8))
	for next := int64(100_000); ; next++ {
		select {
		case <-stop:
			return
		default:
		}
		id := rng.Int64N(helperRows) + 1
		var err error
		switch rng.IntN(3) {
		case 0:
			_, err = db.Exec(ctx, "UPDATE items SET v = $2 WHERE id = $1", id, randomQuery(rng))
		case 1:
			_, err = db.Exec(ctx, "INSERT INTO items VALUES ($1, $2, 'new')", next, randomQuery(rng))
		case 2:
			_, err = db.Exec(ctx, "DELETE FROM items WHERE id = $1", id)
		}
		if err != nil {
			t.Error(err)
			return
		}
		time.Sleep(2 * time.Millisecond)
	}
}
