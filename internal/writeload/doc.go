// Package writeload writes to a table at a steady rate from pgbench while
// something else runs, and measures the replication lag meanwhile: how
// stale a search begun at any moment could be.
//
// The rows are staged first in a table of their own; pgbench then inserts
// them one row per transaction, at the rate asked for, each client taking
// the next id from a sequence. pgbench is a process of its own, as an
// application's writes are, so that whatever the caller loads in its own
// process (searches) cannot slow the writer down.
//
// The lag is probed every 10 ms: take the source's WAL position, then
// time how long the index takes to apply that far. The caller says how
// to wait (the indexer's Entry.WaitApplied in process). Probes do not
// overlap, so under a lag longer than 10 ms they are fewer, never queued.
package writeload
