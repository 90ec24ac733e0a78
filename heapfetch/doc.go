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
// Distances follow pgvector's operators: Euclidean (<->), 1 − cosine
// similarity (<=>), negative inner product (<#>); ties are broken by key,
// so results are deterministic.
package heapfetch
