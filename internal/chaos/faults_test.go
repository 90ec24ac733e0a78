package chaos

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/vecside/vecside/internal/pgtest"
)

// faultKind is one of the faults the injector knows.
type faultKind int

const (
	sigkill     faultKind = iota // the sidecar process is killed and restarted
	walsender                    // pg_terminate_backend on the slot's walsender
	pgFast                       // Postgres restarted in fast mode
	pgImmediate                  // Postgres restarted in immediate mode (crash recovery)
	partition                    // the sidecar's connections go silent, as in a network partition
	numFaultKinds
)

var faultNames = [numFaultKinds]string{"sigkill", "walsender", "pg_fast", "pg_immediate", "partition"}

func (k faultKind) String() string { return faultNames[k] }

// fault is one scheduled fault, at an offset from the start of the run.
type fault struct {
	at   time.Duration
	kind faultKind
}

func (f fault) String() string { return fmt.Sprintf("%s@%.2fs", f.kind, f.at.Seconds()) }

// faultCounts counts the faults that fired, by kind.
type faultCounts [numFaultKinds]int

func (c faultCounts) String() string {
	var parts []string
	for k, n := range c {
		parts = append(parts, fmt.Sprintf("%s=%d", faultKind(k), n))
	}
	return strings.Join(parts, " ")
}

// schedule draws the faults of a run: every kind once, plus extra of
// random kinds, at random moments of [0, d), in a random order, at least
// gap apart.
func schedule(rng *rand.Rand, d time.Duration, extra int, gap time.Duration) []fault {
	var fs []fault
	for k := range numFaultKinds {
		fs = append(fs, fault{kind: k})
	}
	for range extra {
		fs = append(fs, fault{kind: faultKind(rng.IntN(int(numFaultKinds)))})
	}
	rng.Shuffle(len(fs), func(i, j int) { fs[i], fs[j] = fs[j], fs[i] })
	times := make([]time.Duration, len(fs))
	for i := range times {
		times[i] = time.Duration(rng.Int64N(int64(d)))
	}
	slices.Sort(times)
	for i := range fs {
		fs[i].at = times[i]
		if i > 0 && fs[i].at < fs[i-1].at+gap {
			fs[i].at = fs[i-1].at + gap
		}
	}
	return fs
}

// injector fires a schedule of faults at one seed's sidecar and cluster.
type injector struct {
	proc   *process
	proxy  *pgtest.Proxy // between the sidecar and Postgres
	slot   string
	counts faultCounts
	logf   func(format string, args ...any)
}

// run fires every fault of fs at its time after began. A fault that
// cannot be fired (no walsender to terminate within a minute, a failed
// restart) is an error: every kind must fire in every seed.
func (in *injector) run(ctx context.Context, began time.Time, fs []fault) error {
	for _, f := range fs {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(time.Until(began.Add(f.at))):
		}
		if err := in.fire(ctx, f.kind); err != nil {
			return fmt.Errorf("%s at %s: %w", f.kind, f.at, err)
		}
		in.counts[f.kind]++
		in.logf("%6.2fs fault %s", time.Since(began).Seconds(), f.kind)
	}
	return nil
}

func (in *injector) fire(ctx context.Context, k faultKind) error {
	switch k {
	case sigkill:
		if err := in.proc.kill(); err != nil {
			return err
		}
		return in.proc.start()
	case walsender:
		return in.terminateWalsender(ctx)
	case pgFast:
		return cluster.Restart("fast")
	case pgImmediate:
		return cluster.Restart("immediate")
	case partition:
		return in.partition(ctx)
	}
	return fmt.Errorf("unknown fault %d", k)
}

// partition waits, bounded, until the sidecar has a connection open, and
// cuts every one it has.
func (in *injector) partition(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	for in.proxy.Partition() == 0 {
		select {
		case <-ctx.Done():
			return fmt.Errorf("the sidecar never connected: %w", ctx.Err())
		case <-time.After(100 * time.Millisecond):
		}
	}
	return nil
}

// terminateWalsender waits, bounded, until the slot is in use, and
// terminates the walsender using it.
func (in *injector) terminateWalsender(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	db := &pgClient{dsn: cluster.DSN("postgres")}
	defer db.close()
	for {
		var done bool
		_, err := db.do(ctx, func(conn *pgx.Conn) error {
			return conn.QueryRow(ctx, `SELECT coalesce(bool_or(pg_terminate_backend(active_pid)), false)
FROM pg_replication_slots WHERE slot_name = $1 AND active_pid IS NOT NULL`, in.slot).Scan(&done)
		})
		if err != nil {
			return err
		}
		if done {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("slot %s was never in use: %w", in.slot, ctx.Err())
		case <-time.After(100 * time.Millisecond):
		}
	}
}
