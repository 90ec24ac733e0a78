// Package ivf is the inverted-file index on RaBitQ codes: vectors are
// grouped into lists around k-means centroids, each list holds the codes
// of its vectors relative to its own centroid, and a query scans only the
// few lists whose centroids are nearest to it.
//
// It is the index kind "ivf" (kind.go registers it with package
// indexer/kind): build options lists= and probes=, store ext4 by default,
// and the per-query setting probes.
//
// # Philosophy
//
// Every candidate vecside returns costs the client a heap fetch, so the
// index spends its effort on returning few, right candidates: the 1-bit
// fast scan of a list gives every vector an estimate with an error bound,
// the survivors get a second, precise estimate (extended 4- or 8-bit
// codes, or the exact distance from the float store), and the answer is
// the smallest set whose lower bounds can still beat the k-th upper bound,
// capped at k × oversample (store.Searcher). Probing few lists keeps a
// query to a few thousand codes; training keeps lists balanced so that
// "few lists" means "few codes".
//
// The index keeps codes only: the exact vectors live in Postgres, which
// is the truth anyway, and the client re-ranks the candidates against
// them. The compact store (store=ext4, the default: 1-bit codes plus
// 4-bit extended codes) takes about 0.19 × 4·D + 64 bytes per row in all;
// ext8 is tighter and larger; store=float keeps the float32 vectors for
// exact distances from the sidecar itself, and a 4-bit code beside each:
// in tight clusters most rows of a probed list survive the 1-bit scan,
// and the code rules most of them out before their vectors are read,
// which made such queries faster (docs/benchmarks/ivf.md, "The float
// store's 4-bit code").
//
// # Workflows
//
// Build: before its table is copied, the index is trained on a random
// sample of it (SampleFor: every row of a small table, else about a quarter
// of the index's size in vectors, 40 to 256 rows per list): k-means
// (Lloyd, 10 iterations, on
// both cores) for ListsFor(rows) lists, then any list above ListCap × the
// mean split by 2-means until none is. The copy then encodes each row as
// it arrives, against its nearest centroid. The number of lists follows
// ListsFor: n/(1000·sqrt(1+n/16e6)), about n/1000 for small tables and
// 4·sqrt(n) for large ones, continuously. A table that is empty when the
// copy starts gets one list around the origin.
//
// Streamed changes: a Put encodes the row against the nearest centroid
// and appends it to that list (filling a slot freed by an earlier row when
// there is one); a Delete clears the row's bit in its block's mask. The
// rows live in an lists.Coded, which serialises writers and lets searches
// run without a lock (see its doc).
//
// Rebuilds: the centroids of one index never change. When the data has
// drifted (NeedsRebuild: the rows outgrew Growth × the rows trained for, a
// list outgrew its cap, or an untrained index has MinTrain rows) the
// indexer builds a new index from a fresh sample and a new copy of the
// table, beside the serving one, and swaps it in; rows are encoded only
// from their exact vectors, never from a reconstruction of old codes.
//
// Search: the query is rotated once; lists are ranked by their centroid's
// distance to it and scanned nearest first, so the k-th upper bound
// tightens early, until the next list is unlikely to hold a nearer row
// (see Probing in search.go), or a fixed number of them with probes=N.
// For ip the lists rank by the largest inner product each can be expected
// to hold. A filter skips blocks without an allowed row, widens the probes
// by the inverse of its selectivity, and below lists.DirectFraction of
// the rows estimates the allowed rows one by one.
//
// Parallelism: one goroutine per query, and the server runs queries on
// every core. Splitting one query's probed lists over two goroutines
// made queries slower on a 2-core machine, one at a time as well as
// eight at once, so it was dropped (docs/benchmarks/ivf.md, "Splitting
// a query").
//
// # File format
//
// An index's checkpoint body is its lists.Coded's (see Coded.Snapshot):
// the codec state, the centroids, then every live row's key, list and
// codes. Loading rebuilds the lists row by row without retraining.
//
// # Not done here
//
// The index does not split a list in place (an overfull list asks for a
// rebuild), and does not reassign rows between neighbouring lists as
// SPFresh does.
package ivf
