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
