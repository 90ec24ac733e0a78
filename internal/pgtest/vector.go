package pgtest

// StandInVector creates a type named vector whose type modifier is its
// dimension and whose binary form is pgvector's, as pgvector's vector(n)
// has, for tests that need a typmod without the pgvector extension.
// Values are written as that binary form in bytea's text syntax.
const StandInVector = `CREATE TYPE vector;
	CREATE FUNCTION vector_in(cstring) RETURNS vector IMMUTABLE STRICT LANGUAGE internal AS 'byteain';
	CREATE FUNCTION vector_out(vector) RETURNS cstring IMMUTABLE STRICT LANGUAGE internal AS 'byteaout';
	CREATE FUNCTION vector_recv(internal) RETURNS vector IMMUTABLE STRICT LANGUAGE internal AS 'bytearecv';
	CREATE FUNCTION vector_send(vector) RETURNS bytea IMMUTABLE STRICT LANGUAGE internal AS 'byteasend';
	CREATE TYPE vector (INPUT = vector_in, OUTPUT = vector_out, RECEIVE = vector_recv, SEND = vector_send,
		TYPMOD_IN = bittypmodin, INTERNALLENGTH = variable, STORAGE = extended);`

// StandInPgvectorIndexes creates access methods named as pgvector's (hnsw,
// ivfflat) with pgvector's operator class names for real[], so that
// tests can create indexes that the catalog shows as pgvector's without
// the extension. They are hash indexes underneath: built and kept up to
// date by PostgreSQL, and never used to answer anything.
const StandInPgvectorIndexes = `CREATE ACCESS METHOD hnsw TYPE INDEX HANDLER hashhandler;
	CREATE ACCESS METHOD ivfflat TYPE INDEX HANDLER hashhandler;
	CREATE OPERATOR CLASS vector_l2_ops FOR TYPE real[] USING hnsw AS OPERATOR 1 = (anyarray, anyarray), FUNCTION 1 hash_array(anyarray);
	CREATE OPERATOR CLASS vector_cosine_ops FOR TYPE real[] USING hnsw AS OPERATOR 1 = (anyarray, anyarray), FUNCTION 1 hash_array(anyarray);
	CREATE OPERATOR CLASS vector_l1_ops FOR TYPE real[] USING hnsw AS OPERATOR 1 = (anyarray, anyarray), FUNCTION 1 hash_array(anyarray);
	CREATE OPERATOR CLASS vector_ip_ops FOR TYPE real[] USING ivfflat AS OPERATOR 1 = (anyarray, anyarray), FUNCTION 1 hash_array(anyarray);
	CREATE OPERATOR CLASS vector_l2_ops FOR TYPE real[] USING ivfflat AS OPERATOR 1 = (anyarray, anyarray), FUNCTION 1 hash_array(anyarray);`
