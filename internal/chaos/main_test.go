package chaos

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/vecside/vecside/internal/pgtest"
)

var (
	flagSeeds = flag.Int("chaos.seeds", 4, "number of seeds to run (seeds F..F+N-1, F from -chaos.from)")
	flagFrom  = flag.Int("chaos.from", 1, "first seed of a -chaos.seeds run, to continue a long run")
	flagSeed  = flag.Int64("chaos.seed", 0, "run only this seed (replay); 0 runs -chaos.seeds seeds")
	flagLong  = flag.Bool("chaos.long", false, "long mode: longer runs with more faults")
)

// The suite's own cluster and binary: it restarts Postgres, so it never
// shares a cluster with other tests.
var (
	cluster    *pgtest.Cluster
	vecsideBin string
)

func TestMain(m *testing.M) {
	flag.Parse()
	os.Exit(run(m))
}

func run(m *testing.M) int {
	tmp, err := os.MkdirTemp("", "vecside-chaos")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer os.RemoveAll(tmp)
	vecsideBin = filepath.Join(tmp, "vecside")
	build := exec.Command("go", "build", "-o", vecsideBin, "github.com/vecside/vecside/cmd/vecside")
	if out, err := build.CombinedOutput(); err != nil {
		fmt.Fprintf(os.Stderr, "chaos: building vecside: %v\n%s", err, out)
		return 1
	}
	if cluster, err = pgtest.Start(); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer cluster.Stop()
	if err := configureCluster(); err != nil {
		fmt.Fprintln(os.Stderr, "chaos:", err)
		return 1
	}
	return m.Run()
}

// configureCluster shortens wal_sender_timeout, so that the sidecar sends
// status updates (and confirms idle positions) every few seconds instead
// of every ten.
func configureCluster() error {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, cluster.DSN("postgres"))
	if err != nil {
		return err
	}
	defer conn.Close(ctx)
	for _, sql := range []string{`ALTER SYSTEM SET wal_sender_timeout = '6s'`, `SELECT pg_reload_conf()`} {
		if _, err := conn.Exec(ctx, sql); err != nil {
			return fmt.Errorf("%s: %w", sql, err)
		}
	}
	return nil
}
