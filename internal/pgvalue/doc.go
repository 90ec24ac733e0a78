// Package pgvalue holds the Postgres value formats vecside reads and
// writes: key columns (smallint, integer, bigint, uuid, text, varchar) and
// vector columns (pgvector's vector, real[], double precision[]), in their
// binary send and text output forms.
//
// Keys are held everywhere as strings in a canonical binary form per
// KeyType (integers as 8-byte big-endian int64 whatever their width, UUIDs
// as their 16 bytes, text as itself), so the index kinds treat them as
// opaque bytes of a fixed or variable width. Vectors are float32:
// pgvector's vector natively, real[] as is, double precision[] rounded to
// float32.
//
// The replication layer decodes with it (pgoutput tuples, binary COPY),
// the RPC layer decodes query vectors and encodes keys, and the indexer
// records each index's types. Type OIDs come from pgx's pgtype; pgvector's
// vector has no fixed OID and is recognised by its type name.
package pgvalue
