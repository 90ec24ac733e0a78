// Package declared finds the indexes a database itself declares for the
// sidecar to serve, so that no --index has to say again what SQL says:
//
//   - its pgvector indexes (access methods hnsw and ivfflat) on a column:
//     the metric comes from the operator class (vector_l2_ops → l2,
//     vector_cosine_ops → cosine, vector_ip_ops → ip, halfvec's alike),
//     the key from the table's replica identity (its primary key, or the
//     index REPLICA IDENTITY USING INDEX names), and an HNSW index's m and
//     ef_construction carry over; an index on column::halfvec(n), as
//     pgvector's README builds a half-precision index of a vector column,
//     declares the column's;
//   - its columns whose comment starts with "vecside:", followed by
//     options of the --index grammar (COMMENT ON COLUMN items.embedding IS
//     'vecside: metric=cosine kind=ivf'), for a column pgvector does not
//     index, or another kind.
//
// Every declared index is HNSW unless a comment says otherwise: it needs
// no training, so it holds its recall as the table grows and changes,
// and it is the kind the benchmarks measure against pgvector's HNSW
// (docs/benchmarks). A declaration that cannot be served (an index on
// another expression, an operator class with no metric here, a table with no
// single-column replica identity, a comment that does not parse) is
// reported as Skipped, with why, and never stops the others.
//
// Find reads the catalog in two queries and changes nothing; the sidecar
// calls it every few seconds, so that indexes created or dropped while it
// runs are served or let go without a restart. Polling the catalog needs
// no privilege beyond reading it, and sees DDL from any source, which an
// event trigger (superuser only) or the publication (which carries no
// DDL) would not.
package declared
