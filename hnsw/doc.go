// Package hnsw is the graph index on RaBitQ codes: a hierarchical
// navigable small-world graph (Malkov and Yashunin) whose nodes are the
// table's rows, walked by estimates from compact codes, changed in place
// by the replication stream while searches run, and saved and loaded
// whole through checkpoints.
//
// It is the index kind "hnsw" (kind.go registers it with package
// indexer/kind): build options m=, ef_construction= and ef_search=,
// store ext6 by default, and the per-query setting ef_search.
//
// # Philosophy
//
// It is the index for high recall at low latency on tables that change
// all day. Like flat and ivf it keeps codes, not vectors (Postgres holds
// those), spends its effort on returning few, right candidates (the
// smallest set that can still hold the true k nearest, capped at
// k × oversample, store.Searcher), and never lets a search hold a lock a
// writer waits for. What it adds is a graph: a query estimates a few
// hundred rows of a million instead of a few percent of them.
//
// # Rows and codes (codes.go, train.go)
//
// A row is a key (store.Keys: ids, the key index, live bits) and, by id,
// a row of one store.Slab: its extended RaBitQ code, three of its
// factors, κ and the number of its centroid, so that estimating a
// neighbour touches one or two cache lines, which the walk prefetches for
// every neighbour of a node before it estimates them, in the upper
// layers' greedy descent as in layer 0's beam; it prefetches the list of
// the nearest candidate left too, the next it is likely to expand. Each
// prefetch was kept for the searches it made faster, the descent's for
// builds too, since a link descends as well (docs/benchmarks/hnsw.md,
// "Prefetching"). The code is 6 bits a dimension by default (store=ext6),
// kept as two planes (kernels): a 4-bit code of its top bits, which is
// all the walk reads, and its low two bits, which refine adds to order
// the rows a search returns; the row also holds the top plane's scale and
// a second κ (124 bytes at 128 dimensions). store=ext4 (84 bytes) and
// store=ext8 keep one code that serves both; the 1-bit code is the
// extended code's top bit and is not kept apart. store=float keeps the
// float32 vector instead, and its distances are exact.
//
// Why 6 bits: what a search returns is ordered by its codes, and 4-bit
// codes cannot order near rows finely enough for the first 10 to hold
// 0.99 of the true 10 on Fashion-MNIST, whatever the walk: ranking the
// exact nearest rows of its queries by their codes, each bit more orders
// them better, and 6 bits are the fewest that reach it
// (docs/benchmarks/hnsw.md, "Code width"). 8-bit codes do not fit the
// memory budget (0.22·4·D + 8·M + 56 bytes a row: 874 at 784 dimensions,
// where 8-bit rows need about 1,060); 6-bit ones do (see Memory per row),
// and the walk over their top plane costs what a 4-bit walk does.
//
// Rows are encoded against the nearest of CentroidsFor(rows) centroids
// (one per RowsPerCentroid = 100 rows, at most 16,384), trained on the
// sample the indexer reads before the copy (SampleFor: 16 rows a
// centroid, at most 64 MiB) in two levels, √K top centroids by k-means
// and leaves by k-means within each, so that a row finds its centroid
// among about 2·√K. With one global centroid the codes ordered the rows
// near a query badly on clustered data, far worse than against a
// centroid per hundred rows (docs/benchmarks/hnsw.md, "Centroids"): the
// estimate's error grows with the residual's length, and a near centroid
// makes it short.
//
// A query is rotated and prepared once, against the sample's mean g. A
// row o with centroid c and residual r = o − c is estimated as
//
//	‖q−o‖² = ‖q−c‖² + ‖r‖² − 2(<r, q−g>~ + κ),  κ = <g−c, r>~
//
// where <r, v>~ is the code's own estimate of <r, v>: for q − g from the
// code and the prepared query (kernels.ExtInner), for g − c computed
// exactly at encoding (kernels.ExtInnerExact). The code's estimate is
// linear in v, so the sum is <r, q−c>~, the estimate a query prepared
// against c would give, as in an IVF list scan, whose error grows with
// ‖q−c‖·‖r‖; ‖q−c‖² is computed once per centroid a query meets. (With
// the exact <g−c, r> instead, the error grew with ‖q−g‖·‖r‖, several
// times more.) Cosine is half of it on the unit sphere, ip is
// −(<q,c> + <r,q>). The walk uses these. The ef nearest rows it ends with
// are estimated again (refine) from the whole 6-bit code, with the query
// quantized twice over so that its rounding adds nothing, and offered to
// the Searcher with the bound of a residual of norm ‖q−c‖.
//
// # Graph layout (graph.go)
//
// Layer 0 holds every node: by id, a row of 1 + 2M uint32 words in a
// store.Slab, a header (neighbour count, level, linked and lock bits) and
// up to 2M neighbour ids. A node of level L > 0 owns L consecutive rows of
// an upper slab (a count and up to M ids each), found through upOf. Node
// levels are drawn as floor(−ln U / ln M). Every slab is a short
// directory of fixed-size chunks of integers: the chunks hold no
// pointers, so the garbage collector never scans them, and never move,
// so a reader may use a row while a writer grows the slab.
//
// # Concurrency
//
// Writers (Insert, Delete, Rename, Clear) serialise on the index's mutex.
// Linkers (below) and the repair pass change lists under per-node locks,
// a bit of the node's header taken by compare-and-swap, never two at a
// time. Searches and snapshots take no lock at all: they pin an epoch
// (store.Epochs) for their length.
//
// Lists are updated atomically, word by word: every word is read and
// written with atomic operations; a writer holding the node's lock
// writes the new ids, then overwrites what the old list held past the new
// count with an invalid id, then stores the count. A search reads the
// count, then that many words; at each position it sees an id the list
// held before the write or after it, or the invalid id, never an older
// one. Such a mixed read may miss a neighbour or meet one twice (a search
// keeps a visited set), which costs that search a little recall and
// nothing else.
//
// Invariants:
//
//   - A row is written completely (codes, then the node's header, empty
//     lists) before its id is published (its live bit), and is not
//     changed until the id is reused.
//   - No list gains an edge to a row that is not live: every edge is
//     written under the lock of the list's node, after checking that its
//     target is live.
//   - An id is reused only once no list holds it, the entry point is not
//     it, and every search pinned before that was so has ended: Delete
//     only holds the id back (store.Keys.Hold: the key is gone, the row
//     stays), the repair pass takes it out of every list, and only then
//     releases it (Keys.Release), tagged with the epoch. A search can only
//     reach an id through a list, the entry point, a centroid's
//     representative or the rows waiting to be linked, so it never reads a
//     row being rewritten, and never pairs a key with another row's codes.
//   - The entry point is a live, linked node: Delete replaces it (by the
//     live linked node of the highest level) before it returns, and a
//     linker makes a node the entry point only if it is live, both under
//     epMu.
//   - A search sees every row inserted before it started (linked, or
//     waiting to be linked and estimated directly) and returns no key
//     deleted before it started (results must be live when estimated).
//
// # Inserts: linking in the background (link.go)
//
// Prepare encodes a row outside every lock (the copy's readers and the
// stream encode in parallel with the writers). Insert, under the mutex,
// allocates the id, writes the row and an empty node, publishes it and
// queues it in a ring of Pending (512) rows for linking, with the vector
// its linker searches with. Searches estimate the rows of the ring not
// linked yet one by one, so a row is found from the moment Insert
// returns. Linkers, up to Linkers (one per core) goroutines started as rows
// come and ended when none waits, link rows in order: a greedy descent
// from the entry point to the node's level, then on each layer a beam
// search of width EfConstruction (on layer 0 entered also through the
// representatives of the node's nearest centroids, see Search), the
// heuristic of the HNSW paper to choose M neighbours (a candidate is kept
// unless a kept node is nearer to it than the base is; distances between
// stored rows from their decoded codes, kernels.DecodeExt, or DecodeTop
// for 6-bit codes, each row decoded once per link), and an edge back from
// each neighbour. The heuristic's choice is filled back up to M with the
// nearest candidates it left out: inside a tight cluster all distances
// are nearly equal, the heuristic keeps almost nothing, and a row
// inserted late was left with few edges into its cluster; filling
// leaves almost no row that no search can reach (docs/benchmarks/hnsw.md,
// "Linking"). A neighbour's full list given the new edge drops one: of
// its few farthest, the farthest that a nearer one dominates (the
// heuristic's reason to leave a candidate out), else the farthest; the
// heuristic over the whole list, which would drop the same kind of edge,
// cost a link hundreds of distances per list (decoding and this made
// Fashion-MNIST's build faster at the same recall; see the same page). A
// writer that finds the ring full links rows itself until it is not: the
// stream and the copy are held back by as much as the graph cannot
// absorb, never by searches. Once the stream's lag counts on the index
// (FollowStream, called by the indexer when the index becomes ready, or
// when a rebuild's copy into it begins beside the serving index), a link
// of a stream's row narrows its beam while rows wait: half of
// EfConstruction with an eighth of the ring waiting, a quarter with half
// of it, never below 2·M (linkWidth), and searches yield their core at
// each of their checks (linkingBehind). Rows linked while the linkers
// catch up get edges chosen from fewer candidates, searches wait a
// little, and the stream keeps its lag. A copy's rows, which hold no
// one's writes back, link at full width. A rebuild's copy admits each one
// (Admit): before it takes the indexer's apply lock, which the stream's
// changes wait for too, it waits until the linkers have freed a quarter
// of the ring, and leaves that quarter to those changes. A copy that
// linked under the lock made the stream wait for its rows' linking, and a
// rebuild's new index that linked the stream's rows at full width fell
// behind them: both kept the stream's lag long while a rebuild ran
// (docs/benchmarks/hnsw.md, "Lag during a rebuild"; the figure
// insert_linked_rows_total counts the rows writers link). Admit links no
// row itself: a copy that linked beside the linkers took the processor
// the scheduler keeps for the network (internal/procs), and the searches
// served meanwhile waited for the network's poll. For the same reason the
// linkers of every index link in the process's slots (procs.Slot): a
// rebuild's and the serving index's together link no more rows at once
// than there are cores. A first copy, which no one's searches or lag wait
// for, does not admit its rows, so the build from the initial copy uses
// every core: the copy's reader encodes and links the backlog when the
// ring is full, the linkers link. A linker yields its core between rows,
// so that a search waits for at most a row's linking, not for the
// scheduler's time slice.
//
// # Deletes, repair and epochs (repair.go)
//
// Delete (and an update, which deletes the old row and inserts a new one,
// and Rename, which does the same with the same codes) clears the row's
// live bit: searches from then on never return it but still walk through
// it. Once RepairAfter (1%) of the rows (at least 64) wait, the index's
// maintenance goroutine runs a repair pass: it takes the deleted rows
// whose linking is over, pins an epoch, locks every node in turn, and
// where a node's list holds one of them rebuilds the list by the
// heuristic from the node's other neighbours and the deleted rows'
// neighbours (a deleted node's own lists just lose the ids); then it
// releases their ids. The pass never holds the writers' mutex but to
// take the rows and to release them, so it never blocks the stream; it
// stops when the index is closed (Close, called by the indexer when it
// drops or replaces the index) or cleared. After the build settles and
// after every pass, the maintenance goroutine counts the live rows that a
// walk of layer 0 from the entry point does not reach (the figure
// unreachable_rows).
//
// # Search (search.go)
//
// Search pins an epoch, prepares the query, estimates the rows waiting to
// be linked, descends greedily from the entry point to layer 1, and runs
// the beam search of width ef_search on layer 0 from where the descent
// ended and from the representatives of the repEntries (3) centroids
// nearest to the query: one live linked node per centroid, kept as nodes
// are linked and deleted. On a set of ten thousand tight clusters the
// descent alone often ended in the wrong cluster, and the
// representatives raise recall at every width measured
// (docs/benchmarks/hnsw.md, "Entry points"). Deleted and disallowed nodes
// are walked through but are never results. The ef nearest results are
// refined and offered to the Searcher. The context is checked every 128
// node expansions (and every 4,096 rows of a scan), so an abandoned
// search stops within about a millisecond of work.
//
// # Filters
//
// An allow-set (store.Allow, the keys turned into ids under the search's
// pin) is served one of two ways. An unfiltered walk estimates about
// visitsPerEf·ef nodes (6·ef), and a filtered one about that over the
// allowed share f, since its beam fills only with allowed rows; a scan
// estimates the n allowed rows, each about scanWeight (4) times cheaper
// (the measurements behind both constants are in docs/benchmarks/hnsw.md,
// "Filters"). So Search scans the allowed rows when n·f < 4·6·ef (at ef
// 64: below 3.9% of 1M rows, 16% of 60k), and otherwise walks the graph
// past disallowed nodes with a budget of n/4 estimates, the scan's cost:
// a walk that spends it, or ends with fewer than k allowed rows, gives
// way to the scan, so a search returns exactly k rows whenever k are
// allowed and never costs much more than twice the cheaper way. Turning
// the allowed keys into ids, as Search does for each query, costs more
// the more keys there are, and at large shares far more than the search:
// a filter of that size is better served by passing fewer keys.
// BenchmarkFilter measures both ways and the turning of keys into ids
// (the same page).
//
// # Checkpoints (snapshot.go)
//
// Snapshot takes, under the writers' mutex, only the live set (a bit a
// row) and the zero-vector keys, and pins an epoch; everything else is
// written after the mutex is released, while writers go on: the rows of
// the set cannot be reused until release. So a checkpoint holds exactly
// the rows at the LSN of its capture, and the apply path waits only for
// the copy of the live set. Lists may change after the capture; the
// writer keeps the edges between rows of the set and drops the others,
// and marks rows whose linking was not over. Load reads the graph back
// as it was written (ids renumbered 0…n−1 in id order), computing no
// distance but for the marked rows, which it queues for linking.
//
// # Memory per row
//
// A row's bytes, as Stats counts them, are its codes (the 124-byte row at
// 128 dimensions and its share of the centroids), its key (the 8-byte
// key, the key index, live bits) and its graph (layer 0's 1 + 2M words,
// upOf, upper layers, the ring), and the indexer adds its writer xid (4
// bytes). The budget is 0.22·4·D + 8·M + 56 bytes a row: 297 at 128
// dimensions and M = 16, 874 at 784. store=ext6 stays within it at both
// (docs/benchmarks/hnsw.md, "Memory per row", from BenchmarkBuild).
// store=ext4 rows are 40 bytes shorter; ext8's would be 32 bytes longer
// than ext6's, and SQ8 (D bytes and its factors, plus the 1-bit code the
// fast scan of a filter needs) about as long: neither fits.
//
// # Parameters and defaults
//
// m (M, default 16: layer 0's 2M ids are the 8·M bytes a row of the
// memory budget) and ef_construction (default 128) are build options of
// the index definition; ef_search (default 64, at least k) is a
// per-query option (knn's options, SET vecside.ef_search) and a default
// in the definition. On 1M × 128 clustered cosine rows, ef_construction
// 64 built faster, but its recall stopped short for any ef_search
// (neighbours in tight clusters left without edges from their own
// cluster); 128 did not. ef_search 64 is the lowest width whose
// recall@10 reached 0.98 there, and it passes 0.99 on 200,000 rows
// (docs/benchmarks/hnsw.md, "Parameters and defaults"). Pending (512)
// bounds what every search estimates one by one when linking falls
// behind; RepairAfter (1%) trades memory and walks through deleted rows
// against the cost of a pass, which reads every list.
//
// # Measured
//
// Figures, with the commands that made them, are in
// docs/benchmarks/hnsw.md.
//
// # Not done here
//
// The graph does not move a row's edges when its vector changes in place
// (an update is a new row), rebalance levels, or merge small clusters'
// centroids; a table that grows Growth (3) times past what its centroids
// were trained for asks for a rebuild from the table. The inner-product
// metric is served, but a graph over inner products leaves many rows
// unreachable (docs/benchmarks/hnsw.md, "Inner product"): prefer cosine
// or L2.
package hnsw
