//go:build cgo

package proxy

import (
	"encoding/binary"
	"math"
	"slices"
	"testing"

	"github.com/jackc/pgx/v5/pgproto3"
	"github.com/jackc/pgx/v5/pgtype"
)

// TestBindVector decodes a query vector bound in binary: pgvector's
// vector and halfvec by the OIDs the probe found for them in this
// database (golden bytes of vector_send and halfvec_send: dimensions, a
// zero, the elements, big-endian), and real[] by its built-in OID.
func TestBindVector(t *testing.T) {
	const vectorOID, halfvecOID = 16390, 16400
	types := pgvectorTypes{Vector: vectorOID, Halfvec: halfvecOID}
	want := []float32{1.5, -2, 0.25}
	halfvec := []byte{0, 3, 0, 0, 0x3e, 0x00, 0xc0, 0x00, 0x34, 0x00}
	pgvector := []byte{0, 3, 0, 0}
	float4Array := binary.BigEndian.AppendUint32(nil, 1) // dimensions
	float4Array = binary.BigEndian.AppendUint32(float4Array, 0)
	float4Array = binary.BigEndian.AppendUint32(float4Array, pgtype.Float4OID)
	float4Array = binary.BigEndian.AppendUint32(float4Array, 3)
	float4Array = binary.BigEndian.AppendUint32(float4Array, 1) // lower bound
	for _, f := range want {
		pgvector = binary.BigEndian.AppendUint32(pgvector, math.Float32bits(f))
		float4Array = binary.BigEndian.AppendUint32(binary.BigEndian.AppendUint32(float4Array, 4), math.Float32bits(f))
	}
	for _, c := range []struct {
		name     string
		typ      uint32
		raw      []byte
		pgvector pgvectorTypes
		want     []float32
		reason   string
	}{
		{"vector", vectorOID, pgvector, types, want, ""},
		{"vector, its OID not known", vectorOID, pgvector, pgvectorTypes{}, nil, "vector type"},
		{"another extension's type", vectorOID + 1, pgvector, types, nil, "vector type"},
		{"vector, one byte short", vectorOID, pgvector[:len(pgvector)-1], types, nil, "vector"},
		{"halfvec", halfvecOID, halfvec, types, want, ""},
		{"halfvec, read as vector", halfvecOID, halfvec, pgvectorTypes{Vector: halfvecOID}, nil, "vector"},
		{"real[]", pgtype.Float4ArrayOID, float4Array, types, want, ""},
	} {
		bind := &pgproto3.Bind{ParameterFormatCodes: []int16{1}, Parameters: [][]byte{c.raw}}
		got, reason := bindVector(bind, []uint32{c.typ}, 1, "", c.pgvector)
		if reason != c.reason || !slices.Equal(got, c.want) {
			t.Errorf("%s: %v, %q; want %v, %q", c.name, got, reason, c.want, c.reason)
		}
	}
}
