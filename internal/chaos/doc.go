// Package chaos is a test-only package: a chaos suite that runs the real
// vecside binary against a real PostgreSQL 15 while a random workload
// writes and faults strike at random moments, then checks the sidecar's
// invariants (DESIGN.md, Invariants 2 to 4); and a soak that runs it for a
// set time under steady searches, writes and restarts (see Soak).
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
// # Soak
//
// TestSoak (soak_test.go, soak_writer_test.go, ledger_test.go) runs one
// sidecar under a steady load for a set time, on a table soak(id, cat,
// 64-d real[]) with an hnsw index, checkpoints every 30 s:
//   - 64 clients at -chaos.soak.rate searches/s together (200), paced
//     (loadgen.Paced), so latency counts from each call's appointed time:
//     48 search through heapfetch with k of 1 to 100, unfiltered, with a
//     filter that post-filters (a tenth of the rows) or one that
//     pre-filters (a five-hundredth); 16 ask the sidecar alone and check
//     each answer, and every 50th of their requests is bad on purpose
//     (wrong dimension, unknown index, k = 0, NaN, bad option) and must
//     get its SQLSTATE;
//   - one writer at 500 rows/s, transactions of 10 rows: 30% inserts of
//     new keys (keys are never reused), 40% vector updates, 30% deletes;
//   - a restart every 3 minutes (15 s in the short version), SIGTERM and
//     SIGKILL in turn, none in the last 10 s.
//
// Deleted keys: the writer sends each transaction, COMMIT and
// pg_current_wal_lsn() in one round trip and records every key it
// deleted with that LSN, which is past its commit record (ledger_test.go).
// An answer served at an applied LSN at or past it must not hold the key.
// Half of the checking clients' searches carry min_lsn (the newest
// commit's LSN), the other half read vecside_status().applied_lsn first
// on the same connection, so the same process, whose applied LSN only
// grows; keys never written and keys given twice are violations too.
// heapfetch's answers must hold no key deleted before the search began.
//
// Lag is commit → visible: at each writer commit after the previous probe
// ended, the time from its COMMIT returning to the sidecar answering a
// search with min_lsn at its LSN. Every window (5 minutes; 15 s in the
// short version) logs heapfetch and sidecar-only search p50/p99, lag
// p50/p99/max, rows written per second, restarts and their time to
// ready, the sidecar's RSS and CPU (sampled every second), the one-minute
// load average and the machine's busy share, and failures by class.
//
// Failures: clients retry, for up to 2 minutes, while the sidecar is away
// (a lost or refused connection, 57P01, 55000 not ready). Such a failure
// belongs to a restart when it began between the signal and 5 s after the
// new process was ready; a 53300 refusal outside restarts (rpc's startup
// admission evicting a connection of a busy address) is counted and
// reported apart; anything else is an error. The test fails on an error,
// a violation, a key missing from or extra in the final checkpoint
// (compared with the table after the sidecar applied everything and
// stopped), vecside_status() rows differing from the table's, an exit
// nobody asked for, and, in runs of 15 minutes or more, an RSS at the end
// more than 10% from the one after the first window. Restarts reset the
// process, so the RSS check bounds growth within one process's life
// (3 minutes), not over the whole run.
//
//	go test ./internal/chaos -run TestSoak -v                      # short: 60 s, in CI
//	go test ./internal/chaos -run TestSoak -v -chaos.soak 30m -timeout 1h
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
