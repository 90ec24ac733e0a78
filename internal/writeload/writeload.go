package writeload

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"time"

	"github.com/jackc/pglogrepl"
	"github.com/jackc/pgx/v5"
	"github.com/vecside/vecside/internal/loadgen"
)

// Config is one steady write load.
type Config struct {
	DSN  string    // where pgbench connects
	Conn *pgx.Conn // on the same database: staging, WAL positions, counts
	// Table, Key and Vector name the table written to and its key (bigint)
	// and vector (real[]) columns, as SQL identifiers.
	Table, Key, Vector string
	Vectors            [][]float32 // the rows to insert, ids from FirstID on
	FirstID            int64
	Rate               int // rows per second
	Duration           time.Duration
	// WaitApplied returns once the index has applied lsn.
	WaitApplied func(ctx context.Context, lsn pglogrepl.LSN) error
	// Dir holds pgbench's script; a temporary directory if empty.
	Dir string
}

// Result is what the load did.
type Result struct {
	Lag       loadgen.Latencies
	PerSecond float64 // rows committed per second
}

// Run stages cfg.Vectors and inserts them at cfg.Rate for cfg.Duration,
// probing the lag. It leaves the staging table and sequence in place, to
// be replaced by the next run.
func Run(ctx context.Context, cfg Config) (Result, error) {
	pgbench, err := exec.LookPath("pgbench")
	if err != nil {
		pgbench = "/usr/lib/postgresql/15/bin/pgbench"
	}
	if need := int(float64(cfg.Rate) * cfg.Duration.Seconds()); len(cfg.Vectors) < need {
		return Result{}, fmt.Errorf("writeload: %d rows staged, %d needed for %d rows/s over %s", len(cfg.Vectors), need, cfg.Rate, cfg.Duration)
	}
	exec1 := func(sql string) error {
		if _, err := cfg.Conn.Exec(ctx, sql); err != nil {
			return fmt.Errorf("writeload: %s: %w", sql, err)
		}
		return nil
	}
	if err := exec1(`DROP TABLE IF EXISTS vecside_staged; CREATE TABLE vecside_staged (id bigint PRIMARY KEY, v real[]); DROP SEQUENCE IF EXISTS vecside_staged_next`); err != nil {
		return Result{}, err
	}
	if _, err := cfg.Conn.CopyFrom(ctx, pgx.Identifier{"vecside_staged"}, []string{"id", "v"},
		pgx.CopyFromSlice(len(cfg.Vectors), func(i int) ([]any, error) { return []any{cfg.FirstID + int64(i), cfg.Vectors[i]}, nil })); err != nil {
		return Result{}, fmt.Errorf("writeload: staging: %w", err)
	}
	if err := exec1(fmt.Sprintf(`CREATE SEQUENCE vecside_staged_next START %d`, cfg.FirstID)); err != nil {
		return Result{}, err
	}
	dir := cfg.Dir
	if dir == "" {
		if dir, err = os.MkdirTemp("", "writeload"); err != nil {
			return Result{}, err
		}
		defer os.RemoveAll(dir)
	}
	script := filepath.Join(dir, "insert.sql")
	if err := os.WriteFile(script, fmt.Appendf(nil,
		"WITH n AS MATERIALIZED (SELECT nextval('vecside_staged_next') AS id) INSERT INTO %s (%s, %s) SELECT s.id, s.v FROM vecside_staged s JOIN n USING (id);\n",
		cfg.Table, cfg.Key, cfg.Vector), 0o644); err != nil {
		return Result{}, err
	}
	count := func() (n int64, err error) {
		err = cfg.Conn.QueryRow(ctx, "SELECT count(*) FROM "+cfg.Table).Scan(&n)
		return n, err
	}
	before, err := count()
	if err != nil {
		return Result{}, err
	}
	cmd := exec.CommandContext(ctx, pgbench, "--no-vacuum", "--file", script, "--rate", fmt.Sprint(cfg.Rate),
		"--time", fmt.Sprint(max(1, int(cfg.Duration/time.Second))), "--client", "2", "--jobs", "2", cfg.DSN)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	began := time.Now()
	if err := cmd.Start(); err != nil {
		return Result{}, fmt.Errorf("writeload: %w", err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	var lags loadgen.Latencies
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	for ; ; <-tick.C {
		select {
		case err := <-done:
			if err != nil {
				return Result{}, fmt.Errorf("writeload: pgbench: %v\n%s", err, out.String())
			}
			after, err := count()
			return Result{Lag: lags, PerSecond: float64(after-before) / time.Since(began).Seconds()}, err
		default:
		}
		var lsn pglogrepl.LSN
		if err := cfg.Conn.QueryRow(ctx, `SELECT pg_current_wal_lsn()`).Scan(&lsn); err != nil {
			cmd.Process.Kill()
			<-done
			return Result{}, fmt.Errorf("writeload: %w", err)
		}
		at := time.Now()
		if err := cfg.WaitApplied(ctx, lsn); err != nil {
			cmd.Process.Kill()
			<-done
			return Result{}, fmt.Errorf("writeload: waiting for %s: %w", lsn, err)
		}
		lags = append(lags, time.Since(at))
	}
}
