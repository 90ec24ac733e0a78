// Package flat holds the exhaustive indexes, where every query scans every
// stored vector, and the coded-list machinery the ivf package builds on.
// Flat indexes need no training and are the best choice below about 100k
// vectors and for very selective filters.
//
// # The float index (Index, kind=flat store=float)
//
// Vectors live in one contiguous float32 slab, row-major by slot; a map
// turns keys into slots. Deleting moves the last slot into the hole, so the
// slab stays dense and a scan touches no dead rows. For the cosine metric
// each slot's norm is kept beside it, so a query costs one dot product per
// row; a zero vector has no cosine distance and is stored but never
// returned. Distances are exact; Search returns the n nearest. A scan calls
// the kernels package one block of rows at a time (see scanBlock): the SIMD
// kernels are not preemptible, and small calls keep garbage-collector
// pauses short.
//
// Its Snapshot writes a count, then each slot's key (uvarint length +
// bytes), then the whole slab of vectors (little-endian float32), which a
// load reads back in one pass.
//
// # The coded index (Coded, kind=flat store=ext4|ext8)
//
// Vectors are RaBitQ-encoded relative to the mean of the data, computed
// by Finish from the rows of the initial copy, which wait as floats until
// then (or, if the copy had fewer than 1,024 rows, until that many have
// come). Finish encodes without holding its owner's lock, in rounds that
// catch up on the rows put meanwhile, and takes the lock only to list
// rows and to switch to the codes. Each row has a 1-bit code in 32-vector
// fast-scan blocks plus an extended 4- or 8-bit code, with 16 bytes of
// factors each. A search is two passes over
// one List: the fast scan estimates every vector with an error bound, and
// each vector whose lower bound can still beat the k-th smallest upper
// bound seen so far gets the extended code's tighter estimate. The answer
// (Searcher.Result) is the smallest set of candidates whose lower bounds do
// not exceed the final k-th upper bound, nearest estimate first, capped by
// the caller (k × oversample). At 128 dimensions ext8 takes 180 bytes per
// vector (0.35 of float32), ext4 116 (0.23).
//
// Ids equal list slots. Deletes leave tombstones (List.Kill); when they
// pass a quarter of the live rows the list is rebuilt without them (a copy
// of the codes under the owner's write lock). Because lists only grow
// between compactions, a snapshot freezes them instead of copying
// (List.Freeze).
//
// Coded's Snapshot writes "VSFC", version 1, the store, the codec state,
// the zero-vector keys, then either the pending rows (flag 0: key and
// float32 vector each) or the centroid and the live rows (flag 1: key,
// 1-bit code, factors, extended code, factors each), through BodyWriter.
//
// # Shared with ivf
//
// List (codes of one centroid's vectors in fast-scan blocks, tombstones,
// freezing), Searcher (the bound-based candidate set), Allow (a filter's
// bitmap of internal ids: blocks without an allowed row are skipped, and
// below DirectFraction of the rows the allowed rows are estimated one by
// one), Table (keys ↔ internal ids), Stats, and BodyWriter/BodyReader for
// checkpoint bodies.
//
// No index here is safe for concurrent use: its owner (the indexer) holds a
// read lock while searching and a write lock while applying changes, and
// hands Coded.Finish that lock to take when it needs it. The
// container around a snapshot (header, checksum, atomic replacement)
// belongs to the indexer.
package flat
