// Package heapfetch is the Go client of vecside. It asks the sidecar for
// candidates, fetches those rows from Postgres (the primary or a read
// replica), computes their exact distances from the fetched values, and
// returns the top k. The sidecar is only ever trusted for which keys to
// look at: every row returned exists in Postgres at fetch time, with its
// distance computed from the heap's value.
//
// A Client talks pgwire to both ends through anything that can run a
// query (a *pgx.Conn, a *pgxpool.Pool, a pgx.Tx), and imports nothing of
// the server. What it needs to know about an index (its table, key and
// vector columns, metric) it reads once from vecside_status() and the
// heap's catalog, and keeps in a small LRU cache.
//
// When rows have vanished between the sidecar's answer and the fetch
// (deleted meanwhile), fewer than k may remain; the client then asks again
// with twice the oversampling, a bounded number of times. A row whose
// vector has meanwhile become one the sidecar does not index (NULL, of
// another length, not finite) counts as vanished: the sidecar will drop
// it too once it has applied the change.
//
// Fetching only the vectors that are needed: a large vector is TOASTed,
// so reading it is most of a query's heap cost. Where the sidecar's
// distances are exact (store=float), it also returns, per candidate, the
// id of the transaction that wrote the row it measured, and the client
// fetches each row's xmin and, in the same statement, the vector only
// where the xmin differs; where it is the same, the heap's row is the one
// the sidecar measured and its distance stands. xids count only when the
// heap server's system identifier and timeline are the sidecar's source's:
// the heap statement checks its server's, and the sidecar returns xids
// only while it follows the source the client expects (xid_source). Rows written in a subtransaction, and
// every row after a table rewrite, have xmins the sidecar never records:
// correct, just fetched. Request.AlwaysFetch turns the fast path off, and
// Client.FastPathStats counts how often it spared a fetch (see
// fastpath.go). A column of double precision[] always takes the slow
// path: the sidecar holds its values rounded to float32.
//
// Measured by BenchmarkFastPath on Fashion-MNIST (60,000 × 784, vectors
// out of line in a real[] column with SET STORAGE EXTERNAL, IVF with
// store=float, k = 10, recall@10 0.99, 2 shared cores, medians of three
// runs, two sets): the sidecar alone 0.39 and 0.53 ms p50, the fast path
// 0.67 and 0.81 ms (+0.28 ms, one heap round trip) with no vector
// fetched, fetching every vector 1.33 and 1.41 ms; through a pgvector
// vector(784) column, 0.42, 0.75 and 1.31 ms. The fast path returns the
// same rows, order and distances as fetching every vector on every query.
// With the compact store (ext4) the sidecar's distances are estimates
// without a deterministic bound, so every candidate's vector is fetched:
// 14.5 a query.
//
// Distances follow pgvector's operators: Euclidean (<->), 1 − cosine
// similarity (<=>), negative inner product (<#>); ties are broken by key,
// so results are deterministic.
package heapfetch
