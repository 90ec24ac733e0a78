// Package flat holds the exhaustive indexes, where every query scans every
// stored row. They need no lists and are the best choice below about 100k
// rows and for very selective filters.
//
// It is the index kind "flat" (kind.go registers it with package
// indexer/kind): store=float, its default, is the float index; a coded
// store is the coded index.
//
// # The float index (Index, kind=flat store=float)
//
// Vectors are held as float32 by row id in a store.Slab, with keys in a
// store.Keys; for the cosine metric each row's norm is kept beside it, so
// a query costs one dot product per row; a zero vector has no cosine
// distance and is stored but never returned. Distances are exact; Search
// returns the k nearest. A scan walks the ids 64 at a time: a run whose
// ids are all live goes through the SIMD block kernel in one call, others
// row by row, so a row being written under a reclaimed id is never read.
// Every 1,024 rows it yields to other goroutines and checks its context.
//
// Rows are never overwritten: an update writes the vector under a new id
// and removes the old one, whose id is reused once no search that started
// before the removal is left (see store.Epochs). Searches therefore take
// no lock and writers never wait for them.
//
// Its Snapshot writes a count, then each key (uvarint length + bytes),
// then every vector (little-endian float32), which a load reads back in
// one pass.
//
// # The coded index (Coded, kind=flat store=ext4|ext8)
//
// Rows are RaBitQ-encoded relative to the mean of a sample of the table,
// taken before the copy, in one lists.Coded list: a 1-bit code in
// 32-vector fast-scan blocks plus an extended 4- or 8-bit code per row. A
// search is two passes over the list: the fast scan estimates every row
// with an error bound, and each row whose lower bound can still beat the
// k-th smallest upper bound seen so far gets the extended code's tighter
// estimate; the answer is the smallest set of candidates whose lower
// bounds do not exceed the final k-th upper bound, nearest estimate
// first, capped by the caller (k × oversample). An index made from fewer
// than MinMeanRows sample rows (an empty table) asks for a rebuild once
// it holds that many.
//
// At 128 dimensions ext4 takes about 140 bytes per row in all, ext8
// about 200.
package flat
