package pgvalue

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"

	"github.com/jackc/pgx/v5/pgtype"
)

// VectorType is the Postgres type of an indexed column. real[] and double
// precision[] are held as float32 like pgvector's vector: double precision
// values are rounded to the nearest float32.
type VectorType uint8

const (
	// VectorPgvector is pgvector's vector(n): binary int16 dim, int16
	// unused, then dim big-endian float4; text [1,2,3].
	VectorPgvector VectorType = iota + 1
	// VectorFloat4Array is real[] (one dimension, no NULL elements).
	VectorFloat4Array
	// VectorFloat8Array is double precision[].
	VectorFloat8Array
)

// VectorTypeFor maps a column's type to a VectorType: by OID for the
// arrays, by name for pgvector's vector.
func VectorTypeFor(oid uint32, typeName string) (VectorType, error) {
	switch {
	case oid == pgtype.Float4ArrayOID:
		return VectorFloat4Array, nil
	case oid == pgtype.Float8ArrayOID:
		return VectorFloat8Array, nil
	case typeName == "vector":
		return VectorPgvector, nil
	}
	return 0, fmt.Errorf("vector column type %s (OID %d) is not supported (use vector, real[] or double precision[])", typeName, oid)
}

func (t VectorType) String() string {
	switch t {
	case VectorPgvector:
		return "vector"
	case VectorFloat4Array:
		return "real[]"
	case VectorFloat8Array:
		return "double precision[]"
	}
	return fmt.Sprintf("vectortype(%d)", uint8(t))
}

// ErrMalformedVector marks a value that is not a well-formed vector of its
// type: a multi-dimensional array, a NULL element, bad text or bytes.
var ErrMalformedVector = errors.New("malformed vector")

// DecodeBinary decodes a value in the type's binary send format.
func (t VectorType) DecodeBinary(b []byte) ([]float32, error) {
	if t == VectorPgvector {
		return DecodePgvector(b)
	}
	return DecodeFloatArray(b)
}

// DecodeText decodes a value in the type's text output format.
func (t VectorType) DecodeText(s string) ([]float32, error) { return ParseVector(s) }

// Decode decodes a value in either format (pgx's format codes: 1 binary,
// 0 text); NULL (nil) is a nil vector.
func (t VectorType) Decode(format int16, raw []byte) ([]float32, error) {
	switch {
	case raw == nil:
		return nil, nil
	case format == pgtype.BinaryFormatCode:
		return t.DecodeBinary(raw)
	}
	return t.DecodeText(string(raw))
}

// DecodeFloat64 decodes a double precision[] value in either format
// without rounding it to float32; NULL is nil.
func DecodeFloat64(format int16, raw []byte) ([]float64, error) {
	switch {
	case raw == nil:
		return nil, nil
	case format == pgtype.BinaryFormatCode:
		return decodeFloatArray[float64](raw)
	}
	return parseVector[float64](string(raw))
}

// DecodePgvector decodes pgvector's binary vector format.
func DecodePgvector(b []byte) ([]float32, error) {
	if len(b) < 4 {
		return nil, fmt.Errorf("%w: vector of %d bytes has no header", ErrMalformedVector, len(b))
	}
	dim := int(binary.BigEndian.Uint16(b))
	if len(b) != 4+4*dim {
		return nil, fmt.Errorf("%w: vector header says %d dimensions, body has %d bytes", ErrMalformedVector, dim, len(b)-4)
	}
	v := make([]float32, dim)
	for i := range v {
		v[i] = math.Float32frombits(binary.BigEndian.Uint32(b[4+4*i:]))
	}
	return v, nil
}

// AppendPgvector encodes v in pgvector's binary format.
func AppendPgvector(dst []byte, v []float32) []byte {
	dst = binary.BigEndian.AppendUint16(dst, uint16(len(v)))
	dst = binary.BigEndian.AppendUint16(dst, 0)
	for _, x := range v {
		dst = binary.BigEndian.AppendUint32(dst, math.Float32bits(x))
	}
	return dst
}

// AppendFloat4Array encodes v as a one-dimensional float4[] in the array
// binary format (see DecodeFloatArray), as pgx does: one dimension even
// when v is empty.
func AppendFloat4Array(dst []byte, v []float32) []byte {
	for _, w := range [5]uint32{1, 0, pgtype.Float4OID, uint32(len(v)), 1} { // dimensions, no NULLs, element type, length, lower bound
		dst = binary.BigEndian.AppendUint32(dst, w)
	}
	dst = slices.Grow(dst, 8*len(v))
	for _, x := range v {
		dst = binary.BigEndian.AppendUint32(dst, 4)
		dst = binary.BigEndian.AppendUint32(dst, math.Float32bits(x))
	}
	return dst
}

// DecodeFloatArray decodes a one-dimensional float4[] or float8[] in the
// array binary format: ndim, has-null flag, element OID, then per
// dimension its length and lower bound, then each element length-prefixed.
func DecodeFloatArray(b []byte) ([]float32, error) { return decodeFloatArray[float32](b) }

func decodeFloatArray[T float32 | float64](b []byte) ([]T, error) {
	n, elem, body, err := arrayHeader(b)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrMalformedVector, err)
	}
	if n == 0 {
		return []T{}, nil
	}
	var width int
	switch elem {
	case pgtype.Float4OID:
		width = 4
	case pgtype.Float8OID:
		width = 8
	default:
		return nil, fmt.Errorf("%w: array element type OID %d, want real or double precision", ErrMalformedVector, elem)
	}
	if len(body) != n*(4+width) {
		return nil, fmt.Errorf("%w: array of %d elements has %d body bytes", ErrMalformedVector, n, len(body))
	}
	v := make([]T, n)
	for i := range v {
		l := int32(binary.BigEndian.Uint32(body))
		if l != int32(width) {
			if l == -1 {
				return nil, fmt.Errorf("%w: element %d is NULL", ErrMalformedVector, i+1)
			}
			return nil, fmt.Errorf("%w: element %d has %d bytes", ErrMalformedVector, i+1, l)
		}
		if width == 4 {
			v[i] = T(math.Float32frombits(binary.BigEndian.Uint32(body[4:])))
		} else {
			v[i] = T(math.Float64frombits(binary.BigEndian.Uint64(body[4:])))
		}
		body = body[4+width:]
	}
	return v, nil
}

// arrayHeader reads the header of a one-dimensional array in the binary
// format: the element count and type, and the elements' bytes. An empty
// array (no dimensions) has n = 0.
func arrayHeader(b []byte) (n int, elem uint32, body []byte, err error) {
	if len(b) < 12 {
		return 0, 0, nil, fmt.Errorf("array of %d bytes has no header", len(b))
	}
	ndim := int32(binary.BigEndian.Uint32(b))
	elem = binary.BigEndian.Uint32(b[8:])
	switch {
	case ndim == 0:
		return 0, elem, nil, nil
	case ndim != 1:
		return 0, 0, nil, fmt.Errorf("array has %d dimensions, want 1", ndim)
	case len(b) < 20:
		return 0, 0, nil, errors.New("truncated array header")
	}
	n = int(int32(binary.BigEndian.Uint32(b[12:])))
	body = b[20:]
	// Each element takes at least its 4-byte length: a count beyond that
	// is a lie that must not size an allocation.
	if n < 0 || n > len(body)/4 {
		return 0, 0, nil, fmt.Errorf("array of %d elements in %d bytes", n, len(body))
	}
	return n, elem, body, nil
}

// ParseVector parses a vector literal in pgvector's form [1,2,3] or the
// array form {1,2,3}, with optional spaces; in the array form an element
// may be double-quoted, as array_in reads it ({"1","2.5"}, which
// node-postgres sends for a JavaScript array). NULL elements, nested
// arrays and anything that is not a number are errors.
func ParseVector(s string) ([]float32, error) { return parseVector[float32](s) }

func parseVector[T float32 | float64](s string) ([]T, error) {
	bits := 32
	if _, wide := any(T(0)).(float64); wide {
		bits = 64
	}
	s = strings.TrimSpace(s)
	if len(s) < 2 || !(s[0] == '[' && s[len(s)-1] == ']' || s[0] == '{' && s[len(s)-1] == '}') {
		return nil, fmt.Errorf("%w: %s is neither [1,2,3] nor {1,2,3}", ErrMalformedVector, abbreviate(s))
	}
	body := strings.TrimSpace(s[1 : len(s)-1])
	if body == "" {
		return []T{}, nil
	}
	parts := strings.Split(body, ",")
	v := make([]T, len(parts))
	for i, p := range parts {
		p = strings.TrimSpace(p)
		if s[0] == '{' {
			p = unquoteElement(p)
		}
		f, err := strconv.ParseFloat(p, bits)
		if err != nil {
			return nil, fmt.Errorf("%w: element %d (%s) is not a number", ErrMalformedVector, i+1, abbreviate(p))
		}
		v[i] = T(f)
	}
	return v, nil
}

// unquoteElement is an array element as array_in reads it: between
// double quotes, a backslash takes the next character as it is.
func unquoteElement(p string) string {
	if len(p) < 2 || p[0] != '"' || p[len(p)-1] != '"' {
		return p
	}
	p = p[1 : len(p)-1]
	if !strings.Contains(p, `\`) {
		return p
	}
	var b strings.Builder
	for i := 0; i < len(p); i++ {
		if p[i] == '\\' && i+1 < len(p) {
			i++
		}
		b.WriteByte(p[i])
	}
	return b.String()
}

// AppendVectorText appends v as [1,2,3] with shortest round-trip floats.
func AppendVectorText(dst []byte, v []float32) []byte {
	dst = append(dst, '[')
	for i, x := range v {
		if i > 0 {
			dst = append(dst, ',')
		}
		dst = strconv.AppendFloat(dst, float64(x), 'g', -1, 32)
	}
	return append(dst, ']')
}

// CheckFinite returns an error naming the first NaN or infinite element.
// Every search checks its query: a float32 is NaN or infinite exactly
// when its exponent bits are all ones, which one mask and compare tell
// (converting each element to float64 for math.IsNaN and math.IsInf cost
// 4 µs at 784 dimensions).
func CheckFinite(v []float32) error {
	const exponent = 0x7f800000
	for i, x := range v {
		if math.Float32bits(x)&exponent == exponent {
			return fmt.Errorf("element %d is %v: vectors must be finite", i+1, x)
		}
	}
	return nil
}

func abbreviate(s string) string {
	if len(s) > 40 {
		return strconv.Quote(s[:40] + "…")
	}
	return strconv.Quote(s)
}
