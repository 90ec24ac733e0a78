package pgtest

import (
	"context"
	"fmt"
	"os"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/vecside/vecside/internal/pgcluster"
)

// Cluster is a running throwaway PostgreSQL that hands out a database per
// test.
type Cluster struct {
	*pgcluster.Cluster
	dbs atomic.Int64
}

// DefaultBinDir is where Debian installs PostgreSQL 15's server binaries.
const DefaultBinDir = pgcluster.DefaultBinDir

// Start initialises and starts a new cluster. Stop removes it.
func Start() (*Cluster, error) {
	c, err := pgcluster.Start()
	if err != nil {
		return nil, err
	}
	return &Cluster{Cluster: c}, nil
}

// FreePort is a TCP port of 127.0.0.1 that nothing listens on now, for
// a server a test starts.
func FreePort(t testing.TB) int {
	t.Helper()
	p, err := pgcluster.FreePort()
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// NewDatabase creates a fresh database for one test and returns its DSN.
// It is dropped when the test ends, together with any replication slot
// left in it.
func (c *Cluster) NewDatabase(t testing.TB) string {
	t.Helper()
	name := fmt.Sprintf("t%d_%s", c.dbs.Add(1), sanitize(t.Name()))
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, c.DSN("postgres"))
	if err != nil {
		t.Fatalf("pgtest: %v", err)
	}
	defer conn.Close(ctx)
	if _, err := conn.Exec(ctx, "CREATE DATABASE "+pgx.Identifier{name}.Sanitize()); err != nil {
		t.Fatalf("pgtest: %v", err)
	}
	t.Cleanup(func() { c.dropDatabase(name) })
	return c.DSN(name)
}

// Connect opens a connection to dsn for one test, closed when it ends.
func Connect(t testing.TB, dsn string) *pgx.Conn {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		t.Fatalf("pgtest: %v", err)
	}
	t.Cleanup(func() { conn.Close(context.Background()) })
	return conn
}

// OffersPGVector says whether pgvector's extension is installed where
// the server at dsn can create it (pg_available_extensions lists vector).
func OffersPGVector(t testing.TB, dsn string) bool {
	t.Helper()
	var offered bool
	if err := Connect(t, dsn).QueryRow(context.Background(),
		"SELECT EXISTS (SELECT FROM pg_available_extensions WHERE name = 'vector')").Scan(&offered); err != nil {
		t.Fatalf("pgtest: %v", err)
	}
	return offered
}

func (c *Cluster) dropDatabase(name string) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, c.DSN("postgres"))
	if err != nil {
		return
	}
	defer conn.Close(ctx)
	// A walsender outlives its client for a moment; its slot must go
	// with the database, or the next test's sidecar of the same name
	// finds a slot of another database (which it refuses to touch).
	for ctx.Err() == nil {
		conn.Exec(ctx, `SELECT pg_terminate_backend(active_pid) FROM pg_replication_slots WHERE database = $1 AND active`, name)
		conn.Exec(ctx, `SELECT pg_drop_replication_slot(slot_name) FROM pg_replication_slots WHERE database = $1 AND NOT active`, name)
		var left int
		if err := conn.QueryRow(ctx, `SELECT count(*) FROM pg_replication_slots WHERE database = $1`, name).Scan(&left); err == nil && left == 0 {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	conn.Exec(ctx, "DROP DATABASE IF EXISTS "+pgx.Identifier{name}.Sanitize()+" WITH (FORCE)")
}

func sanitize(s string) string {
	var b strings.Builder
	for _, r := range strings.ToLower(s) {
		if r >= 'a' && r <= 'z' || r >= '0' && r <= '9' {
			b.WriteRune(r)
		} else {
			b.WriteByte('_')
		}
		if b.Len() >= 40 {
			break
		}
	}
	return b.String()
}

var shared *Cluster

// Main runs a test binary's tests against one cluster started for it, and
// removes the cluster afterwards. Call it from TestMain.
func Main(m *testing.M) {
	c, err := Start()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	shared = c
	code := m.Run()
	c.Stop()
	os.Exit(code)
}

// Shared is the cluster started by Main.
func Shared(t testing.TB) *Cluster {
	if shared == nil {
		t.Fatal("pgtest: call pgtest.Main from TestMain first")
	}
	return shared
}

// NewStandby makes a hot standby of c, streaming from it, as
// pg_basebackup -R makes one, starts it on a port of its own, and stops
// and removes it when the test ends. Its databases are c's.
func (c *Cluster) NewStandby(t testing.TB) *Cluster {
	t.Helper()
	s, err := c.StartStandby()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Stop)
	return &Cluster{Cluster: s}
}
