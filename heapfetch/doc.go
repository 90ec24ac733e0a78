// Package heapfetch is the Go client of vecside. It asks the sidecar for
// candidates, fetches those rows from Postgres (the primary or a read
// replica), computes their exact distances from the fetched values, and
// returns the top k. The sidecar is only ever trusted for which keys to
// look at: every row returned exists in Postgres at fetch time, satisfies
// the caller's filter there, and carries the distance computed from the
// heap's value.
//
// Which rows come back is as good as the index's recall, and no better:
// a row the index does not propose is never seen. The rows returned are
// exact, current and in exact order; whether they are the true k nearest
// depends on the index and its settings (oversample, probes, ef_search),
// as measured in docs/benchmarks.
//
// # Use
//
// A Client is built from pgx pools or connections (anything with Query:
// *pgx.Conn, *pgxpool.Pool, pgx.Tx) for the sidecar(s) and for the heap,
// and imports nothing of the server:
//
//	c, err := heapfetch.NewClient(heapfetch.Config{Shards: [][]heapfetch.Querier{{sidecar}}, Heap: pool})
//	type doc struct{ Title string }
//	hits, err := heapfetch.Collect(ctx, c, heapfetch.Request{
//		Index: "docs_embedding", Vector: q, K: 10,
//		Columns: []string{"title"},
//		Filter:  "tenant_id = $1 AND published", Args: []any{tenant},
//		MinLSN:  lsnAfterMyWrite,
//	}, pgx.RowToStructByName[doc])
//	// hits[i].Row.Title, hits[i].Key, hits[i].Distance
//
// Connections to a sidecar should go through RegisterTypes (in the pool's
// AfterConnect), which sends the query vector in binary without boxing
// each element in an interface, as pgx's generic array encoder does
// (docs/benchmarks/heapfetch.md, "Encoding the query").
//
// Collect scans the caller's columns the way pgx.CollectRows does, with
// the key and exact distance alongside; OrderOnly leaves the distances
// out (NaN) for applications that want the order, not the numbers.
// Search is the short form returning keys and distances.
//
// Everything is read in one statement per round (heapQuery): key, vector
// and the caller's columns for the candidate keys, restricted by the
// filter. What that statement fetches is decided there alone.
//
// # Filters
//
// A filter is SQL pasted into the heap's queries (the application's, not
// an end user's text). Two ways to apply it, chosen per search:
//
//   - post-filter: ask for more candidates, twice k over the filter's
//     selectivity as the planner estimates it (EXPLAIN, no row read),
//     keep those the heap query lets through, and ask again for twice as
//     many while fewer than k remain, at most three times and at most the
//     sidecar's cap of 10,000 candidates;
//   - pre-filter: read the keys of the matching rows first (at most
//     MaxPreFilterKeys) and pass them to knn as its allow argument, a
//     typed array (bigint[] for integer keys, else text[]), in chunks of
//     at most 65,536 keys and 768 KiB so each call stays within the
//     sidecar's limits; each chunk's candidates are merged before the
//     fetch. Every index kind searches only the allowed rows: flat scans
//     them, ivf widens its probes by the inverse selectivity, hnsw walks
//     its graph or scans the allowed rows directly when few.
//
// FilterAuto post-filters while that needs at most PostFilterBudget
// candidates (2k / selectivity × oversample), else pre-filters; a
// post-filter that starves (a filter correlated with the query, a bad
// estimate) falls back to a pre-filter. So a search returns k rows
// whenever at least k rows match, up to MaxPreFilterKeys matching rows;
// past that a filter is post-filtered only. The caller can force either
// way (Request.Filtering).
//
// # Consistency
//
// Read-your-writes: pass the LSN after a write (pg_current_wal_lsn()) as
// Request.MinLSN. Each sidecar answers only once it has applied that far
// (its min_lsn option). When the heap is a read replica, the client also
// waits until the replica has replayed it, polling
// pg_last_wal_replay_lsn(), at most Request.ReplicaWait (DefaultReplicaWait)
// even when the caller's context has no deadline, then fails with
// ErrReplicaBehind; or, with Request.UsePrimary, reads the rows from
// Config.Primary when the replica is behind.
//
// # Several sidecars
//
// Config.Shards lists the sidecars. The sidecars of one shard serve the
// same index over the same rows: searches go to them in turn, and when one
// fails with a connection error, a shutdown, lack of resources or an index
// not ready, to the next (searches are read-only, so a retry is safe).
// Several shards each index a slice of the table, through a row filter on
// each sidecar's publication (--index … where='id % 2 = 0'): a search asks
// one sidecar of each, in parallel, and re-ranks the union of their
// candidates against the heap, which gives the same top k as one sidecar
// on the whole table.
//
// A sidecar that does not answer within Config.SidecarTimeout (10 s by
// default; a partition leaves a connection silent, not closed) is given
// up for the next one of its shard. A sidecar that failed is asked after
// the others of its shard for a back-off of 1 s, doubling with each
// failure in a row up to 30 s: a lasting partition costs one search a
// timeout per back-off, not every search sent that way.
//
// # Vanished rows, and the vectors fetched
//
// When rows have vanished between the sidecar's answer and the fetch
// (deleted meanwhile), fewer than k may remain; the client widens as for a
// filter. A row whose vector has meanwhile become one the sidecar does not
// index (NULL, of another length, not finite) counts as vanished: the
// sidecar will drop it too once it has applied the change.
//
// Fetching only the vectors that are needed: a large vector is TOASTed,
// so reading it is most of a query's heap cost. Where the sidecar's
// distances are exact (store=float), it also returns, per candidate, the
// id of the transaction that wrote the row it measured, and the client
// fetches each row's xmin and, in the same statement, the vector only
// where the xmin differs; where it is the same, the heap's row is the one
// the sidecar measured and its distance stands. xids count only when the
// heap server's system identifier and timeline are the sidecar's source's:
// the heap statement checks its server's (the system identifier read
// once per session and kept in the setting heapfetch.system_identifier,
// the timeline each time), and the sidecar returns xids
// only while it follows the source the client expects (xid_source). Rows written in a subtransaction, and
// every row after a table rewrite, have xmins the sidecar never records:
// correct, just fetched. Request.AlwaysFetch turns the fast path off, and
// Client.FastPathStats counts how often it spared a fetch (see
// fastpath.go). A column of double precision[] always takes the slow
// path: the sidecar holds its values rounded to float32.
//
// Each vector is read in its column's own type and decoded by the
// client from the raw bytes. What a fetched vector costs depends on that
// type: Postgres sends a real[] an element at a time, each through a
// function call and an allocation, where pgvector's vector_send copies
// its floats; reading a vector column through a cast to real[] costs as
// much as a real[]. BenchmarkFastPath measures, for both column types,
// what a search adds to the sidecar's answer when it fetches every
// vector and when it takes the fast path (docs/benchmarks/heapfetch.md,
// "The fast path and the column's type").
//
// The fast path returns the same rows, order and distances as fetching
// every vector on every query. The compact store's distances are
// estimates without a deterministic bound tight enough to spare a fetch
// (a bound that holds for every query exceeds the estimates' typical
// error about as many times as the square root of the dimension), so
// each candidate's vector is fetched; HNSW's 6-bit codes order
// candidates well enough that k of them (Oversample 1) suffice on
// Fashion-MNIST (docs/benchmarks/heapfetch.md, "HNSW at Oversample 1"),
// so at most k vectors are fetched, and OrderOnly costs the same.
//
// Distances follow pgvector's operators: Euclidean (<->), 1 − cosine
// similarity (<=>), negative inner product (<#>); ties are broken by key,
// so results are deterministic. Against a halfvec column the query is
// rounded to half precision first, as pgvector casts it to compare it
// with the column, and the fetched halves convert to float32 exactly:
// the distances are pgvector's on the same values (accumulated in double
// precision, where pgvector accumulates in single: they agree to about
// single precision's rounding).
//
// # Measured
//
// Figures, with the commands that made them, are in
// docs/benchmarks/heapfetch.md: filtered searches, and what the vectors
// fetched cost by the column's type and by the path taken.
package heapfetch
