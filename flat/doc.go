// Package flat is the exhaustive index: every query scans every stored
// vector. It is exact, needs no training, and is the best choice below about
// 100k vectors and for very selective filters.
//
// Vectors live in one contiguous float32 slab, row-major by slot; a map
// turns keys into slots. Deleting moves the last slot into the hole, so the
// slab stays dense and a scan touches no dead rows. For the cosine metric
// each slot's norm is kept beside it, so a query costs one dot product per
// row; a zero vector has no cosine distance and is stored but never
// returned.
//
// A scan calls the kernels package one block of rows at a time (see
// scanBlock): the SIMD kernels are not preemptible, and small calls keep
// garbage-collector pauses short.
//
// An Index is not safe for concurrent use: its owner (the indexer) holds a
// read lock while searching and a write lock while applying changes.
//
// Snapshot writes the body of a checkpoint: a count, then for each slot its key
// (uvarint length + bytes) and its vector (little-endian float32). The
// container around it (header, checksum, atomic replacement) belongs to the
// indexer.
package flat
