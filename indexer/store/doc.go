// Package store is the storage every index kind is built on: how rows are
// held in memory, how they are changed while searches read them, and how
// they are written to and read from a checkpoint body.
//
// # Rows and ids
//
// A row is a key and its vector's codes (or the vector). Keys map to dense
// uint32 row ids through Keys: fixed-width keys (integers, uuids: 8 or 16
// bytes, pgvalue's canonical forms) sit in one flat slab, text keys as
// strings, and an open-addressed table of 4-byte slots finds a key's id.
// Everything stored per row lives in Slabs indexed by id: arrays of
// fixed-size chunks that never move once allocated, so a reader can use a
// row while a writer grows the slab.
//
// # Concurrency: one writer, any number of readers, no lock between them
//
// Writers (the replication stream, a copy's readers) serialise on their
// index's mutex; searches take no lock at all. Three rules make that
// safe:
//
//   - Rows are immutable. A row is written completely under a fresh id
//     before it is published by an atomic store that readers load first (a
//     live bit, a block's mask). An update is a new row and the removal of
//     the old one; a search that runs across it sees the old row, the new
//     one or, at worst, both, and returns the key once (Hits).
//   - Blocks are copy-on-write. The 1-bit codes of 32 rows share a
//     fast-scan block whose bytes interleave them, so a writer filling a
//     slot copies the block, writes the copy and publishes it; a search
//     reads every block whole and unchanging. Which slots are live is a
//     separate atomic mask, cleared by a delete without a copy.
//   - Ids are reused only after every search that could still see the old
//     row has ended. A search pins the current epoch (Epochs) for its
//     length; a removal is tagged with the epoch it happened in and the
//     epoch advances; the id, and the list slot and codes stored under it,
//     go to a new row once no pinned epoch is at or before the tag. A
//     search therefore never pairs a key with another row's distance, and
//     never returns a key deleted before it started.
//
// A checkpoint uses the same pin: Snapshot copies the live set (a bit per
// row) under the writers' mutex, pins, and writes the rows of that set
// after releasing the mutex; the rows it writes cannot change until it
// unpins. Writers wait only for the copy of the live set.
//
// # Codes
//
// The codec's side of a row lives here too, for every kind that encodes:
// its configuration (CodedConfig, the store= option's Kind), a row's codes
// (Encoded), a List of 1-bit RaBitQ codes in fast-scan blocks, and the
// Searcher that turns estimates with error bounds into the smallest set
// of candidates that can still hold the true k nearest. k-means (KMeans)
// and the nearest centroid (Nearest) serve ivf's lists and hnsw's
// training alike. The engine that keeps one List per centroid and probes
// them, which ivf and the coded flat kind are built on, is
// ivf/lists.
//
// # Memory
//
// Per row of D dimensions with the compact store (Ext4): the 1-bit code
// (D/8 bytes, padded to 8) and its factors (16), its id in the block (4),
// the extended code (D/2) and its factors (16), the key (8 for bigint),
// its location (8), the key index (5 to 11 at its load factor), the xid
// that wrote the row (4, see Keys.SetXID) and live bits: about
// 0.19 × 4·D + 64 bytes. Stats counts every structure.
//
// # What this package does not do
//
// It does not choose or probe lists (ivf/lists), compact lists (freed slots are refilled by later rows of
// the same list, and a structural change is a rebuild from the table, see
// the indexer), keep anything on disk but through checkpoints, or know
// about Postgres types.
package store
