// Package pgvalue holds the Postgres value formats vecside reads and
// writes: key columns (smallint, integer, bigint, uuid, text, varchar) and
// vector columns (pgvector's vector and halfvec, real[], double
// precision[]), in their binary send and text output forms.
//
// Keys are held everywhere as strings in a canonical binary form per
// KeyType (integers as 8-byte big-endian int64 whatever their width, UUIDs
// as their 16 bytes, text as itself), so the index kinds treat them as
// opaque bytes of a fixed or variable width. Vectors are float32:
// pgvector's vector natively, halfvec's half-precision elements exactly
// (every half is a float32), real[] as is, double precision[] rounded to
// float32.
//
// The vector types are one table (vectorTypes): each type's name, its
// OID where Postgres fixes one, whether its type modifier is the
// dimension, its element width and decoder, and how a query is rounded
// into it. The replication catalog (which types it accepts and the
// dimension a column fixes), the RPC (the casts knn accepts), the heap
// client (decoding fetched rows) and the SQL helpers' type check (held to
// the table by deploy's tests) all derive from it, so a type is added in
// one place. pgvector's types have no fixed OID: the extension's types get
// theirs when it is created, so they are recognised by their type name.
//
// halfvec: queries against a halfvec column are rounded to half precision
// (VectorType.Round), as pgvector rounds the query it compares a halfvec
// column with, so exact distances are the ones pgvector's operators
// compute on those values.
//
// The replication layer decodes with it (pgoutput tuples, binary COPY),
// the RPC layer decodes query vectors and encodes keys, and the indexer
// records each index's types.
package pgvalue
