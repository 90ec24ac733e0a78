package pgtest

import (
	"context"
	"testing"

	"github.com/jackc/pgx/v5"
)

func TestMain(m *testing.M) { Main(m) }

func TestClusterIsLogicalAndIsolated(t *testing.T) {
	c := Shared(t)
	ctx := context.Background()
	a, b := c.NewDatabase(t), c.NewDatabase(t)
	if a == b {
		t.Fatalf("two tests got the same database %s", a)
	}
	conn, err := pgx.Connect(ctx, a)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	var level string
	if err := conn.QueryRow(ctx, "SHOW wal_level").Scan(&level); err != nil {
		t.Fatal(err)
	}
	if level != "logical" {
		t.Fatalf("wal_level = %s, want logical", level)
	}
	var slots int
	if err := conn.QueryRow(ctx, "SELECT current_setting('max_replication_slots')::int").Scan(&slots); err != nil {
		t.Fatal(err)
	}
	if slots < 10 {
		t.Fatalf("max_replication_slots = %d, want ≥ 10", slots)
	}
}
