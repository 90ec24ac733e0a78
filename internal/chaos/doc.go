// Package chaos is a test-only package: a chaos suite that runs the real
// vecside binary against a real PostgreSQL 15 while a random workload
// writes and faults strike at random moments, then checks the sidecar's
// invariants (DESIGN.md, Invariants 2 to 4).
//
// # Design
//
// TestMain builds cmd/vecside once and starts a cluster of its own (the
// suite restarts Postgres, so it shares it with no other package), with
// wal_sender_timeout shortened to 6 s so that status updates come every
// 3 s. Each seed gets a fresh database, slot name, data directory and
// `vecside serve` child process on a fixed free port, with one of three
// checkpoint policies (every 300 ms or 2,000 changes; 1 s or 20,000; 4 s
// or never by count). Its log goes to a file whose tail is printed, and
// which is copied to $TMPDIR/vecside-chaos-seed-N.log, when the seed
// fails.
//
// A seed runs two writers for the run's duration (writers_test.go,
// workload_test.go). One writes random transactions to items, whose 600-d
// real[] vectors are TOASTed: inserts, vector-changing updates, updates of
// another column only (the vector arrives as unchanged-TOAST), several
// writes to one key in one transaction, savepoints rolled back, key
// changes with and without a new vector, deletes, insert-then-delete,
// NULL, short, NaN and infinite vectors and their later fixes, and the
// occasional TRUNCATE. The other writes set-based changes to bulk (128-d)
// and, at a random moment, one transaction of 100,000 rows (120,000 in
// long mode). Writers survive faults: a statement that fails because the
// server went away is run again on a new connection, and every
// transaction is valid whether or not an earlier attempt committed; the
// table, not a model, is the truth at the end.
//
// Meanwhile the injector (faults_test.go) fires a schedule of faults:
// SIGKILL of the sidecar followed by a restart, pg_terminate_backend on
// the slot's walsender, Postgres restarts in fast and in immediate mode,
// and a network partition: the sidecar reaches Postgres through a proxy
// (pgtest.Proxy) that can turn every open connection into a black hole,
// open but silent both ways, which the sidecar must notice by itself
// (--receive-timeout, 2 s here). Every kind fires once per seed, plus up to extraFaults more of
// random kinds, at least a second apart; a kind that cannot fire fails the
// seed. A sampler (invariants_test.go) reads the slot's
// confirmed_flush_lsn and then the sidecar's covered LSN (the lowest
// covered_lsn of vecside_status()) every 100 ms; a confirmed position
// above the covered one is a violation.
//
// After the run the suite waits, by polling vecside_status(), until the
// sidecar has applied pg_current_wal_lsn(), and checks:
//   - rows and skipped_rows equal the tables' valid and invalid rows;
//   - after writes to an unpublished table only, with CHECKPOINTs, the
//     slot's confirmed_flush_lsn passes those writes and its restart_lsn
//     moves;
//   - after SIGTERM, the checkpoints, loaded as a restarting sidecar would
//     (ReadCheckpoint, LoadCheckpoint with the idle state), hold exactly
//     the tables' valid rows, bit for bit, with no duplicate key, and
//     cover at least the slot's confirmed_flush_lsn;
//   - the sampler saw no violation and checked at least one sample;
//   - the sidecar never exited unless told to.
//
// # Modes and replay
//
//	go test ./internal/chaos                                  # fast: 4 seeds, ~20 s each
//	go test ./internal/chaos -v -chaos.seeds 60 -chaos.long -timeout 3h
//	go test ./internal/chaos -v -chaos.seed 17 [-chaos.long]  # replay seed 17
//
// The fast mode (CI) runs seeds 1 to -chaos.seeds (4) for 10 s of
// workload each, with 5 or 6 faults and the 100k-row transaction in every
// seed. The long mode (-chaos.long) runs 20 s of workload with 5 to 9
// faults per seed. A seed fixes the tables' initial contents, both
// writers' transactions, the large transaction's moment, the fault
// schedule and the checkpoint policy, so -chaos.seed replays them; how
// the real processes interleave with them is up to the machine, so a
// replay reproduces a failure often, not always.
package chaos
