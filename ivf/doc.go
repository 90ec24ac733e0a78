// Package ivf is the inverted-file index on RaBitQ codes: vectors are
// grouped into lists around k-means centroids, each list holds the codes
// of its vectors relative to its own centroid, and a query scans only the
// few lists whose centroids are nearest to it.
//
// # Philosophy
//
// Every candidate vecside returns costs the client a heap fetch, so the
// index spends its effort on returning few, right candidates: the 1-bit
// fast scan of a list gives every vector an estimate with an error bound,
// the survivors get a second, precise estimate (extended 4- or 8-bit
// codes, or the exact distance from the float store), and the answer is
// the smallest set whose lower bounds can still beat the k-th upper bound,
// capped at k × oversample (flat.Searcher). Probing few lists keeps a
// query to a few thousand codes; training keeps lists balanced so that
// "few lists" means "few codes".
//
// The index owns its data completely: it keeps every vector as float32 in
// a float store beside the codes (4·D bytes per row, the price of
// retraining and splitting without asking Postgres for the rows again; it
// could move to disk later, as it is read only by training, by
// store=float searches and by snapshots). With the float store resident,
// store=float (exact second pass, no extended codes) is the default: it
// is exact within the probed lists and needs less memory than ext8. The
// ext4/ext8 stores are there for when the float store leaves memory.
//
// # Workflows
//
// Initial copy: rows arrive one Put at a time and wait as pending rows
// (searched exactly if anyone asked). Finish (the indexer calls it when
// the copy is done) trains: k-means (Lloyd, 10 iterations) on a seeded
// sample of at most 256 rows per centroid, assignment of every row to its
// nearest centroid, then splitting of any list above ListCap × the mean
// list size by 2-means until none is, then encoding; assignment, k-means
// and encoding run on every core. It trains the way a retrain does (see
// below), so the stream keeps applying changes while it works. The
// number of lists follows ListsFor: n/(1000·sqrt(1+n/16e6)), about n/1000
// for small tables and 4·sqrt(n) for large ones, continuously. An index
// whose table was empty at Finish trains in the background once MinTrain
// rows have come.
//
// Streamed changes: a Put encodes the row against the nearest centroid
// and appends it to that list; a Delete makes its codes a tombstone. A
// retrain starts in the background when the data has drifted: rows grew
// past Growth × the rows at training, tombstones passed MaxDead of the
// slots, or a list outgrew its cap. It captures the current state under
// a short lock (a copy of the live bitmap; the key and float stores are
// append-only and shared), builds the next state from it without any
// lock — new centroids, lists, compacted ids, no tombstones — then
// catches up on the changes made meanwhile in up to four rounds, the last
// one under the lock, and swaps the new state in with an atomic pointer.
// Searches hold no lock of the index's: each loads the current state once
// and uses it to the end, and a state is never changed again once
// replaced. Writers and the retrain's captures and swap share one mutex.
//
// Search: the query is rotated once; the probes lists with the nearest
// centroids (by L2 in the rotated space) are prepared and scanned nearest
// first, so the k-th upper bound tightens early. For ip the lists rank by
// the largest inner product each can be expected to hold: the centroid's,
// plus the expected maximum of its rows' projections, from the spread of
// the list (see nearestLists). A filter (Filter) skips 32-vector blocks
// without an allowed row, widens probes by the inverse of its
// selectivity, and below flat.DirectFraction of the rows estimates the
// allowed rows one by one.
//
// Parallelism: one goroutine per query, and the server runs queries on
// every core. Splitting one query's probed lists over two goroutines was
// measured on this 2-core machine (BenchmarkIVFSearch, 100k × 128 cosine,
// medians of 5): store=ext8 probes=8 went from 113 to 203 µs at
// concurrency 1 and from 62 to 92 µs per query at concurrency 8, so it
// was dropped.
//
// # Key types
//
// Index holds the configuration, the codec and an atomic pointer to the
// current state. state is one generation: centroids (and their
// rotations), one flat.List per centroid, the flat.Table of keys, loc
// (id → list and slot), the live bitmap and the float store. Ids are
// dense uint32s given in arrival order and renumbered list by list at
// each retrain.
//
// # File format
//
// Snapshot writes the body of a checkpoint (the indexer's container adds
// the header, checksum and atomic replacement); all integers are uvarints
// or little-endian:
//
//	"VSIV" version=1 store           4+1+1 bytes
//	codec state                      uvarint length + kernels.RaBitQ.MarshalBinary
//	rows at training                 uvarint
//	zero vectors (cosine)            uvarint count, then length-prefixed keys
//	lists                            uvarint count, then count × dims float32 centroids
//	per list                         uvarint count, then per row: key, 1-bit code,
//	                                 4 float32 factors, [extended code, 4 float32
//	                                 factors,] dims float32 vector
//	pending rows                     uvarint count, then per row: key, dims float32
//
// Only live rows are written, so loading compacts. Taking a snapshot
// freezes each list (its full blocks are shared, the last partial block
// and the tombstones copied) and shares the append-only key and float
// stores, so it costs little more than a copy of the live bitmap under
// the owner's read lock.
//
// # Not done here
//
// The index does not split a list in place (an overfull list asks for a
// retrain instead), does not keep the float store on disk, and does not
// reassign rows between neighbouring lists as SPFresh does.
package ivf
