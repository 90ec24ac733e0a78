package rpc

import (
	"cmp"
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/jackc/pgx/v5/pgtype"
	"github.com/vecside/vecside/internal/pgvalue"
)

// knnParam describes one of knn's arguments: the type a $n in its place
// gets when the client declares none, and the types it may be sent as.
type knnParam struct {
	name   string
	def    uint32
	accept []uint32
}

var knnParams = [...]knnParam{
	{"index", pgtype.TextOID, []uint32{pgtype.TextOID, pgtype.VarcharOID}},
	{"vector", pgtype.Float4ArrayOID, []uint32{pgtype.Float4ArrayOID, pgtype.Float8ArrayOID, pgtype.ByteaOID, pgtype.TextOID, pgtype.VarcharOID}},
	{"k", pgtype.Int4OID, []uint32{pgtype.Int4OID, pgtype.Int8OID, pgtype.Int2OID, pgtype.TextOID, pgtype.VarcharOID}},
	{"options", pgtype.TextOID, []uint32{pgtype.TextOID, pgtype.VarcharOID}},
	{"allow", pgtype.TextArrayOID, append(slices.Clone(keyArrayOIDs), pgtype.TextOID, pgtype.VarcharOID)},
}

// keyArrayOIDs are the array types knn's allow argument may be sent as:
// the key's own array type, or text[] whose elements are keys' text form.
var keyArrayOIDs = []uint32{pgtype.Int8ArrayOID, pgtype.Int4ArrayOID, pgtype.Int2ArrayOID,
	pgtype.UUIDArrayOID, pgtype.TextArrayOID, pgtype.VarcharArrayOID}

// keyArray is an allow argument as bound, decoded once the index's key
// type is known (see decodeAllow).
type keyArray struct {
	binary bool
	data   []byte
}

// castOIDs maps a cast's type to the type of the value it stands for:
// these, and every vector type of pgvalue's table (see vectorCasts).
var castOIDs = vectorCasts(map[string]uint32{
	"text": pgtype.TextOID, "varchar": pgtype.VarcharOID, "bytea": pgtype.ByteaOID,
	"integer": pgtype.Int4OID, "bigint": pgtype.Int8OID, "smallint": pgtype.Int2OID,
	"bigint[]": pgtype.Int8ArrayOID, "integer[]": pgtype.Int4ArrayOID, "smallint[]": pgtype.Int2ArrayOID,
	"uuid[]": pgtype.UUIDArrayOID, "text[]": pgtype.TextArrayOID, "varchar[]": pgtype.VarcharArrayOID,
})

// vectorCasts adds the vector types to casts: a type with a fixed OID
// stands for itself; pgvector's types have none, and their values travel
// as text (evalKNN decodes them as the cast's type).
func vectorCasts(casts map[string]uint32) map[string]uint32 {
	for _, t := range pgvalue.VectorTypes() {
		casts[t.String()] = cmp.Or(t.OID(), pgtype.TextOID)
	}
	return casts
}

var typeNames = map[uint32]string{
	pgtype.Int2OID: "smallint", pgtype.Int4OID: "integer", pgtype.Int8OID: "bigint", pgtype.TextOID: "text",
	pgtype.VarcharOID: "varchar", pgtype.ByteaOID: "bytea", pgtype.Float4ArrayOID: "real[]", pgtype.Float8ArrayOID: "double precision[]",
	pgtype.Int8ArrayOID: "bigint[]", pgtype.Int4ArrayOID: "integer[]", pgtype.Int2ArrayOID: "smallint[]",
	pgtype.UUIDArrayOID: "uuid[]", pgtype.TextArrayOID: "text[]", pgtype.VarcharArrayOID: "varchar[]",
}

func typeName(oid uint32) string {
	if n, ok := typeNames[oid]; ok {
		return n
	}
	return "type OID " + strconv.FormatUint(uint64(oid), 10)
}

// paramTypes resolves the type of every $n of s: the client's declared
// OID, else the cast's type, else the argument's default. Declared types
// past the last $n are kept, as PostgreSQL does.
func paramTypes(s statement, declared []uint32) ([]uint32, error) {
	n := len(declared)
	for _, a := range s.args {
		n = max(n, a.param)
	}
	types := make([]uint32, n)
	copy(types, declared)
	used := make([]bool, n)
	for i, a := range s.args {
		role := knnParams[i]
		var cast uint32
		if a.cast != "" {
			var ok bool
			if cast, ok = castOIDs[a.cast]; !ok || !slices.Contains(role.accept, cast) {
				return nil, errorf(codeDatatypeMismatch, "knn's %s argument cannot be cast to %s", role.name, a.cast)
			}
		}
		if a.param == 0 {
			continue
		}
		j := a.param - 1
		if used[j] {
			return nil, errorf(codeFeatureNotSupported, "parameter $%d is used twice: give each argument its own parameter", a.param)
		}
		used[j] = true
		switch {
		case types[j] != 0 && types[j] != pgtype.UnknownOID:
		case cast != 0:
			types[j] = cast
		default:
			types[j] = role.def
		}
		if !slices.Contains(role.accept, types[j]) {
			return nil, errorf(codeDatatypeMismatch, "knn's %s argument ($%d) cannot be sent as %s", role.name, a.param, typeName(types[j])).
				withHint("send it as one of %s", typeList(role.accept))
		}
	}
	for j, t := range types {
		if t == 0 || t == pgtype.UnknownOID && !used[j] {
			return nil, errorf(codeIndeterminateDatatype, "could not determine data type of parameter $%d", j+1)
		}
	}
	return types, nil
}

func typeList(oids []uint32) string {
	s := ""
	for i, o := range oids {
		if i > 0 {
			s += ", "
		}
		s += typeName(o)
	}
	return s
}

// decodeParams decodes a Bind message's parameters by their types into
// nil (NULL), string, []float32, int64 or keyArray.
func decodeParams(types []uint32, formatCodes []int16, values [][]byte) ([]any, error) {
	if len(values) != len(types) {
		return nil, protocolViolation("bind message supplies %d parameters, but prepared statement requires %d", len(values), len(types))
	}
	formats, err := expandFormats(formatCodes, len(values), "parameter")
	if err != nil {
		return nil, err
	}
	out := make([]any, len(values))
	for i, v := range values {
		if v == nil {
			continue
		}
		if out[i], err = decodeParam(types[i], formats[i], v); err != nil {
			return nil, err
		}
	}
	return out, nil
}

func decodeParam(oid uint32, format int16, v []byte) (any, error) {
	if slices.Contains(keyArrayOIDs, oid) {
		// A copy: the Bind message's buffer is reused by the next message.
		return keyArray{binary: format == formatBinary, data: slices.Clone(v)}, nil
	}
	switch oid {
	case pgtype.Float4ArrayOID, pgtype.Float8ArrayOID:
		if format == formatBinary {
			return pgvalue.DecodeFloatArray(v)
		}
		return pgvalue.ParseVector(string(v))
	case pgtype.ByteaOID:
		if format == formatBinary {
			return pgvalue.DecodeSent(v)
		}
		return decodeByteaVector(string(v))
	case pgtype.Int2OID, pgtype.Int4OID, pgtype.Int8OID:
		if format == formatText {
			return parseInt(string(v), typeName(oid))
		}
		switch {
		case oid == pgtype.Int2OID && len(v) == 2:
			return int64(int16(binary.BigEndian.Uint16(v))), nil
		case oid == pgtype.Int4OID && len(v) == 4:
			return int64(int32(binary.BigEndian.Uint32(v))), nil
		case oid == pgtype.Int8OID && len(v) == 8:
			return int64(binary.BigEndian.Uint64(v)), nil
		}
		return nil, errorf(codeInvalidBinaryRepresent, "incorrect binary data format: %d bytes for %s", len(v), typeName(oid))
	}
	// Text in either format: binary text is its UTF-8 bytes.
	return string(v), nil
}

// decodeByteaVector decodes a vector sent as bytea in its hex text form,
// '\x' then the bytes (see pgvalue.DecodeSent): what the SQL helpers send, since
// Postgres writes those bytes in hex far more cheaply than it prints each
// float as text, and they decode here without parsing a number.
func decodeByteaVector(s string) ([]float32, error) {
	h, ok := strings.CutPrefix(s, `\x`)
	if !ok {
		return nil, fmt.Errorf("%w: a bytea vector is written in hex: \\x, then the bytes of array_send(real[]) or of pgvector's vector_send or halfvec_send", pgvalue.ErrMalformedVector)
	}
	b, err := hex.DecodeString(h)
	if err != nil {
		return nil, fmt.Errorf("%w: bytea: %v", pgvalue.ErrMalformedVector, err)
	}
	return pgvalue.DecodeSent(b)
}

func parseInt(s, typ string) (int64, error) {
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil {
		return 0, errorf(codeInvalidTextRepresent, "invalid input syntax for type %s: %q", typ, s)
	}
	return n, nil
}
