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
// vector by the OID the probe found for it in this database (golden
// bytes of vector_send: dimensions, a zero, the floats, big-endian), and
// real[] by its built-in OID.
func TestBindVector(t *testing.T) {
	const vectorOID = 16390
	want := []float32{1.5, -2, 0.25}
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
		name      string
		typ       uint32
		raw       []byte
		vectorOID uint32
		want      []float32
		reason    string
	}{
		{"vector", vectorOID, pgvector, vectorOID, want, ""},
		{"vector, its OID not known", vectorOID, pgvector, 0, nil, "vector type"},
		{"another extension's type", vectorOID + 1, pgvector, vectorOID, nil, "vector type"},
		{"vector, one byte short", vectorOID, pgvector[:len(pgvector)-1], vectorOID, nil, "vector"},
		{"real[]", pgtype.Float4ArrayOID, float4Array, vectorOID, want, ""},
	} {
		bind := &pgproto3.Bind{ParameterFormatCodes: []int16{1}, Parameters: [][]byte{c.raw}}
		got, reason := bindVector(bind, []uint32{c.typ}, 1, "", c.vectorOID)
		if reason != c.reason || !slices.Equal(got, c.want) {
			t.Errorf("%s: %v, %q; want %v, %q", c.name, got, reason, c.want, c.reason)
		}
	}
}
