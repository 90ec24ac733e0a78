package pgvalue

import (
	"cmp"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"

	"github.com/jackc/pgx/v5/pgtype"
)

// VectorType is the Postgres type of an indexed column. Every type is
// held as float32: pgvector's vector natively, halfvec's half-precision
// elements exactly, real[] as is, double precision[] rounded to the
// nearest float32. The numbers are stored in checkpoints: types are only
// ever appended.
type VectorType uint8

const (
	// VectorPgvector is pgvector's vector(n): binary int16 dim, int16
	// unused, then dim big-endian float4; text [1,2,3].
	VectorPgvector VectorType = iota + 1
	// VectorFloat4Array is real[] (one dimension, no NULL elements).
	VectorFloat4Array
	// VectorFloat8Array is double precision[].
	VectorFloat8Array
	// VectorHalfvec is pgvector's halfvec(n): binary int16 dim, int16
	// unused, then dim big-endian IEEE 754 half-precision floats; text
	// [1,2,3].
	VectorHalfvec
)

// vectorType is what vecside knows of a vector column type. Everything
// that recognises a type, or depends on how it stores its elements,
// derives from vectorTypes: the replication catalog's dimension rule, the
// RPC's casts, the heap client's decoding and the SQL helpers' type check
// (deploy's tests hold helpers.sql to this table).
type vectorType struct {
	// name is the type as format_type shows it and as a cast writes it.
	name string
	// oid is the type's OID where Postgres fixes it; 0 for pgvector's
	// types, which are recognised by their name (pg_type.typname) since
	// the extension's types get their OIDs when it is created.
	oid uint32
	// typmodIsDims says the type modifier is the dimension: vector(n).
	typmodIsDims bool
	// width is the bytes an element takes in the binary format.
	width int
	// decodeBinary and decodeText decode the binary send and text output
	// formats.
	decodeBinary func([]byte) ([]float32, error)
	decodeText   func(string) ([]float32, error)
	// round gives a float32 as the type holds it (nil: as it is).
	round func(float32) (float32, error)
}

var vectorTypes = [...]vectorType{
	VectorPgvector: {name: "vector", typmodIsDims: true, width: 4,
		decodeBinary: DecodePgvector, decodeText: ParseVector},
	VectorHalfvec: {name: "halfvec", typmodIsDims: true, width: 2,
		decodeBinary: DecodeHalfvec, decodeText: parseHalfvec, round: roundHalf},
	VectorFloat4Array: {name: "real[]", oid: pgtype.Float4ArrayOID, width: 4,
		decodeBinary: DecodeFloatArray, decodeText: ParseVector},
	VectorFloat8Array: {name: "double precision[]", oid: pgtype.Float8ArrayOID, width: 8,
		decodeBinary: DecodeFloatArray, decodeText: ParseVector},
}

// VectorTypes lists the supported vector column types, pgvector's first.
func VectorTypes() []VectorType {
	var all []VectorType
	for t := range vectorTypes {
		if vectorTypes[t].name != "" {
			all = append(all, VectorType(t))
		}
	}
	slices.SortStableFunc(all, func(a, b VectorType) int { return cmp.Compare(a.info().oid, b.info().oid) })
	return all
}

func (t VectorType) info() *vectorType {
	if int(t) < len(vectorTypes) && vectorTypes[t].name != "" {
		return &vectorTypes[t]
	}
	return nil
}

// VectorTypeFor maps a column's type to a VectorType: by OID where
// Postgres fixes it, else by typeName (pg_type.typname).
func VectorTypeFor(oid uint32, typeName string) (VectorType, error) {
	for _, t := range VectorTypes() {
		if i := t.info(); i.oid == oid || i.oid == 0 && i.name == typeName {
			return t, nil
		}
	}
	return 0, fmt.Errorf("vector column type %s (OID %d) is not supported (use %s)", typeName, oid, VectorTypeList())
}

// VectorTypeNamed is the type a cast names: "vector", "halfvec",
// "real[]" or "double precision[]".
func VectorTypeNamed(name string) (VectorType, bool) {
	for _, t := range VectorTypes() {
		if t.info().name == name {
			return t, true
		}
	}
	return 0, false
}

// VectorTypeList names the supported types, for messages: "vector,
// halfvec, real[] or double precision[]".
func VectorTypeList() string {
	var names []string
	for _, t := range VectorTypes() {
		names = append(names, t.String())
	}
	return strings.Join(names[:len(names)-1], ", ") + " or " + names[len(names)-1]
}

func (t VectorType) String() string {
	if i := t.info(); i != nil {
		return i.name
	}
	return fmt.Sprintf("vectortype(%d)", uint8(t))
}

// OID is the type's OID where Postgres fixes it, 0 for pgvector's types,
// which have none (their values travel as text, or in their binary form
// as bytea).
func (t VectorType) OID() uint32 { return t.info().oid }

// Width is the bytes an element takes in the type's binary format.
func (t VectorType) Width() int { return t.info().width }

// TypmodDims is the dimension a column's type modifier fixes: n for
// vector(n) and halfvec(n), 0 for the arrays, which carry none, and for
// a column declared without one.
func (t VectorType) TypmodDims(typmod int32) int {
	if t.info().typmodIsDims && typmod > 0 {
		return int(typmod)
	}
	return 0
}

// Round gives q as a value of type t holds it: halfvec's elements rounded
// to the nearest half-precision float (ties to even), as pgvector's cast
// to halfvec rounds them, so that distances to q are those pgvector
// computes for ORDER BY column <-> q; a finite element beyond halfvec's
// range (±65,504) is an error, as it is in pgvector. Other types hold
// float32 as it is: q itself is returned.
func (t VectorType) Round(q []float32) ([]float32, error) {
	i := t.info()
	if i == nil || i.round == nil {
		return q, nil
	}
	return roundEach(q, i.round)
}

func roundEach(q []float32, round func(float32) (float32, error)) ([]float32, error) {
	out := make([]float32, len(q))
	for j, x := range q {
		var err error
		if out[j], err = round(x); err != nil {
			return nil, fmt.Errorf("element %d: %w", j+1, err)
		}
	}
	return out, nil
}

// ErrMalformedVector marks a value that is not a well-formed vector of its
// type: a multi-dimensional array, a NULL element, bad text or bytes.
var ErrMalformedVector = errors.New("malformed vector")

// DecodeBinary decodes a value in the type's binary send format (an
// array's for a VectorType not set yet).
func (t VectorType) DecodeBinary(b []byte) ([]float32, error) {
	if i := t.info(); i != nil {
		return i.decodeBinary(b)
	}
	return DecodeFloatArray(b)
}

// DecodeText decodes a value in the type's text output format (and the
// array form {1,2,3} for every type, see ParseVector).
func (t VectorType) DecodeText(s string) ([]float32, error) {
	if i := t.info(); i != nil {
		return i.decodeText(s)
	}
	return ParseVector(s)
}

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
	return decodePgvectorBinary(b, "vector", 4, func(b []byte) float32 { return math.Float32frombits(binary.BigEndian.Uint32(b)) })
}

// DecodeHalfvec decodes pgvector's binary halfvec format.
func DecodeHalfvec(b []byte) ([]float32, error) {
	return decodePgvectorBinary(b, "halfvec", 2, func(b []byte) float32 { return HalfToFloat32(binary.BigEndian.Uint16(b)) })
}

// decodePgvectorBinary decodes the binary format pgvector's types share:
// int16 dim, int16 unused, then dim elements of width bytes.
func decodePgvectorBinary(b []byte, typ string, width int, element func([]byte) float32) ([]float32, error) {
	if len(b) < 4 {
		return nil, fmt.Errorf("%w: %s of %d bytes has no header", ErrMalformedVector, typ, len(b))
	}
	dim := int(binary.BigEndian.Uint16(b))
	if len(b) != 4+width*dim {
		return nil, fmt.Errorf("%w: %s header says %d dimensions, body has %d bytes", ErrMalformedVector, typ, dim, len(b)-4)
	}
	v := make([]float32, dim)
	for j := range v {
		v[j] = element(b[4+width*j:])
	}
	return v, nil
}

// parseHalfvec parses a halfvec's text form, each element rounded to a
// half as halfvec_in rounds it.
func parseHalfvec(s string) ([]float32, error) {
	v, err := ParseVector(s)
	if err != nil {
		return nil, err
	}
	if v, err = roundEach(v, roundHalf); err != nil {
		return nil, fmt.Errorf("%w: halfvec: %v", ErrMalformedVector, err)
	}
	return v, nil
}

// DecodeSent decodes a vector in the binary format of any vector type
// (what array_send, vector_send or halfvec_send give, sent as bytea). The
// first four bytes tell arrays from pgvector's types: an array's
// dimension count is 0 or 1, where pgvector's d > 0 dimensions start
// with d << 16; the length tells vector from halfvec.
func DecodeSent(b []byte) ([]float32, error) {
	if len(b) < 4 || binary.BigEndian.Uint32(b) <= 1 {
		return DecodeFloatArray(b)
	}
	dim := int(binary.BigEndian.Uint16(b))
	for _, t := range VectorTypes() {
		if i := t.info(); i.oid == 0 && len(b) == 4+i.width*dim {
			return i.decodeBinary(b)
		}
	}
	return nil, fmt.Errorf("%w: %d bytes after a header of %d dimensions are neither a vector nor a halfvec", ErrMalformedVector, len(b)-4, dim)
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
