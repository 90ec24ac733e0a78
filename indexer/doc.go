// Package indexer owns the set of live indexes of a sidecar and the
// vocabulary the other layers share: index definitions (Spec), key and
// vector types and their Postgres wire formats, search options, LSNs, and
// the checkpoint container.
//
// # Entries
//
// Each index is an Entry: a Spec, an index kind holding the vectors (flat
// or ivf, registered in kinds.go), the set of table rows left out because their vector
// cannot be indexed (NULL, wrong dimension, NaN or infinite: counted,
// never fatal, indexed again as soon as a change fixes them), a lifecycle
// State (building → ready, or error), and the applied LSN.
//
// The replication layer feeds an Entry row by row (Upsert, Delete, Move,
// Truncate) and moves its applied LSN at commit boundaries only, or to a
// keepalive's WAL end when no transaction is open, so that a client
// waiting for an LSN (WaitApplied) never sees half a transaction. Searches
// take the entry's read lock; changes take its write lock one row at a
// time, so a large transaction never stalls searches for long.
//
// Kinds that build from the whole copy (IVF trains its lists, coded flat
// encodes against the mean) do so when the copy ends (Finisher), without
// holding the entry's lock through the build: during a table sync the
// stream keeps applying changes to the entry, and the kind catches up on
// them before it switches. An index made after the copy, because the
// table was empty, or loaded from a checkpoint is finished as it is made,
// and builds once enough rows have come.
//
// # Keys and vectors
//
// Keys are strings in a canonical binary form per pgvalue.KeyType (integers as
// 8-byte big-endian, UUIDs as 16 bytes, text as itself), so index kinds
// treat them as opaque. Vectors are float32: pgvector's vector natively,
// real[] as is, double precision[] rounded to float32.
//
// # Options
//
// One grammar everywhere: white-space separated key=value pairs, used by
// --index definitions, knn's options argument and SET vecside.<key>.
// SearchOptions holds the per-query vocabulary; unknown keys are errors.
//
// # Checkpoints
//
// WriteCheckpoint and ReadCheckpoint frame any kind's body with a header
// (index, kind, parameters, dimension, metric, the LSN covered, the
// source's system identifier, timeline and slot) and a CRC-32C trailer,
// written atomically. A file that fails any check is refused whole.
//
// RunCheckpoints writes them by time and by change count. Taking one
// freezes the index under its read lock (the kinds share their storage
// copy-on-write) and writes the file after. Each entry's covered LSN is
// what its last checkpoint reflects, or a later idle position recorded in
// a small state file when nothing changed since; Indexer.Covered, the
// minimum over healthy entries, is all the replication layer may confirm
// to Postgres.
//
// Errors a client can cause wrap one of the sentinels in errors.go, which
// the RPC layer maps to SQLSTATEs.
package indexer
