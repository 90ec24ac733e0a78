package rpc

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"math"
	"slices"
	"strconv"

	"github.com/jackc/pgx/v5/pgproto3"
	"github.com/jackc/pgx/v5/pgtype"

	"github.com/vecside/vecside/indexer"
	"github.com/vecside/vecside/internal/pgvalue"
)

// Format codes of parameters and result columns.
const (
	formatText   int16 = 0
	formatBinary int16 = 1
)

// column describes one result column. Values of a column are nil (NULL),
// int64 (int2/int4/int8, and oid, which is 4 bytes unsigned), float64
// (float8), bool, indexer.LSN (pg_lsn), string: text, or a key in the
// canonical form of keyType, or for an array column []any of its
// element's values.
type column struct {
	name    string
	oid     uint32
	size    int16 // fixed binary width, -1 if variable
	keyType pgvalue.KeyType
	elem    *column // an array's element, nil for a scalar
}

// arrayOIDs are the array types of the element types columns have.
var arrayOIDs = map[uint32]uint32{
	pgtype.Int2OID: pgtype.Int2ArrayOID, pgtype.Int4OID: pgtype.Int4ArrayOID, pgtype.Int8OID: pgtype.Int8ArrayOID,
	pgtype.Float8OID: pgtype.Float8ArrayOID, pgtype.BoolOID: pgtype.BoolArrayOID, pgtype.TextOID: pgtype.TextArrayOID,
	pgtype.VarcharOID: pgtype.VarcharArrayOID, pgtype.UUIDOID: pgtype.UUIDArrayOID, oidPgLSN: oidPgLSNArray,
	pgtype.OIDOID: pgtype.OIDArrayOID,
}

// arrayOf is array_agg(c)'s column, named as PostgreSQL names it.
func arrayOf(c column) column {
	elem := c
	return column{name: aggArray, oid: arrayOIDs[c.oid], size: -1, keyType: c.keyType, elem: &elem}
}

func textColumn(name string) column { return column{name: name, oid: pgtype.TextOID, size: -1} }

// keyColumn is a column of index keys, typed as the key column.
func keyColumn(name string, kt pgvalue.KeyType) column {
	return column{name: name, oid: kt.OID(), size: kt.Size(), keyType: kt}
}

// rowDescription describes cols, with formats nil for Describe of a
// statement (formats are not known yet) or one per column.
func rowDescription(cols []column, formats []int16) *pgproto3.RowDescription {
	fields := make([]pgproto3.FieldDescription, len(cols))
	for i, c := range cols {
		fields[i] = pgproto3.FieldDescription{
			Name:         []byte(c.name),
			DataTypeOID:  c.oid,
			DataTypeSize: c.size,
			TypeModifier: -1,
		}
		if formats != nil {
			fields[i].Format = formats[i]
		}
	}
	return &pgproto3.RowDescription{Fields: fields}
}

// expandFormats expands a Bind message's format codes (none: all text;
// one: for all n values; else one per value) to one per value. what names
// the values in the error: "parameter" or "result".
func expandFormats(codes []int16, n int, what string) ([]int16, error) {
	out := make([]int16, n)
	switch len(codes) {
	case 0:
	case 1:
		for i := range out {
			out[i] = codes[0]
		}
	case n:
		copy(out, codes)
	default:
		return nil, protocolViolation("bind message has %d %s formats for %d %ss", len(codes), what, n, what)
	}
	for _, f := range out {
		if f != formatText && f != formatBinary {
			return nil, errorf(codeInvalidParameterValue, "unsupported %s format code %d: want 0 for text or 1 for binary", what, f)
		}
	}
	return out, nil
}

// rowEncoder turns rows into DataRow messages, reusing one buffer.
type rowEncoder struct {
	cols    []column
	formats []int16
	buf     []byte
	ends    []int
	msg     pgproto3.DataRow
}

// encode returns row as a DataRow, valid until the next call.
func (e *rowEncoder) encode(row []any) *pgproto3.DataRow {
	if e.buf == nil {
		e.buf = make([]byte, 0, 256) // never nil: a nil value means NULL
	}
	e.buf, e.ends = e.buf[:0], e.ends[:0]
	for i, v := range row {
		if v == nil {
			e.ends = append(e.ends, -1)
			continue
		}
		e.buf = appendValue(e.buf, e.cols[i], v, e.formats[i] == formatBinary)
		e.ends = append(e.ends, len(e.buf))
	}
	// Slice only now: appends above may have moved the buffer.
	e.msg.Values = e.msg.Values[:0]
	start := 0
	for _, end := range e.ends {
		if end < 0 {
			e.msg.Values = append(e.msg.Values, nil)
			continue
		}
		e.msg.Values = append(e.msg.Values, e.buf[start:end:end])
		start = end
	}
	return &e.msg
}

// appendValue appends v in col's text or binary format.
func appendValue(dst []byte, col column, v any, binaryFormat bool) []byte {
	switch v := v.(type) {
	case []any:
		if binaryFormat {
			return appendArrayBinary(dst, *col.elem, v)
		}
		return appendArrayText(dst, *col.elem, v)
	case string:
		if col.keyType == 0 {
			return append(dst, v...)
		}
		if binaryFormat {
			return col.keyType.AppendBinary(dst, v)
		}
		return col.keyType.AppendText(dst, v)
	case int64:
		if !binaryFormat {
			return strconv.AppendInt(dst, v, 10)
		}
		switch col.size {
		case 2:
			return binary.BigEndian.AppendUint16(dst, uint16(v))
		case 4:
			return binary.BigEndian.AppendUint32(dst, uint32(v))
		}
		return binary.BigEndian.AppendUint64(dst, uint64(v))
	case float64:
		if binaryFormat {
			return binary.BigEndian.AppendUint64(dst, math.Float64bits(v))
		}
		return appendFloat8(dst, v)
	case indexer.LSN:
		if binaryFormat {
			return binary.BigEndian.AppendUint64(dst, uint64(v))
		}
		return append(dst, v.String()...)
	case bool:
		switch {
		case binaryFormat && v:
			return append(dst, 1)
		case binaryFormat:
			return append(dst, 0)
		case v:
			return append(dst, 't')
		}
		return append(dst, 'f')
	}
	panic(fmt.Sprintf("rpc: column %s cannot hold a %T", col.name, v))
}

// appendFloat8 writes float8's text output: the shortest text that reads
// back to the same value, with PostgreSQL's spelling of the specials.
func appendFloat8(dst []byte, f float64) []byte {
	switch {
	case math.IsNaN(f):
		return append(dst, "NaN"...)
	case math.IsInf(f, 1):
		return append(dst, "Infinity"...)
	case math.IsInf(f, -1):
		return append(dst, "-Infinity"...)
	}
	return strconv.AppendFloat(dst, f, 'g', -1, 64)
}

// appendArrayText writes a one-dimensional array as array_out does:
// {a,b,NULL}, an element in double quotes where array_in would otherwise
// read it differently.
func appendArrayText(dst []byte, elem column, vs []any) []byte {
	dst = append(dst, '{')
	for i, v := range vs {
		if i > 0 {
			dst = append(dst, ',')
		}
		if v == nil {
			dst = append(dst, "NULL"...)
			continue
		}
		start := len(dst)
		dst = appendValue(dst, elem, v, false)
		if needsArrayQuotes(dst[start:]) {
			raw := string(dst[start:]) // a copy: it is written again in place
			dst = append(dst[:start], '"')
			for i := range len(raw) {
				if raw[i] == '"' || raw[i] == '\\' {
					dst = append(dst, '\\')
				}
				dst = append(dst, raw[i])
			}
			dst = append(dst, '"')
		}
	}
	return append(dst, '}')
}

// needsArrayQuotes reports whether array_in would not read text back as
// the element it is: empty, NULL in any case, or holding a delimiter,
// brace, quote, backslash or white space.
func needsArrayQuotes(text []byte) bool {
	return len(text) == 0 || bytes.EqualFold(text, []byte("NULL")) || bytes.ContainsAny(text, "{},\"\\ \t\n\r\v\f")
}

// appendArrayBinary writes a one-dimensional array as array_send does:
// dimensions, a NULL flag, the element type, the length and lower bound
// (1), then each element's length (-1 for NULL) and binary value.
func appendArrayBinary(dst []byte, elem column, vs []any) []byte {
	hasNull := uint32(0)
	if slices.Contains(vs, nil) {
		hasNull = 1
	}
	dst = binary.BigEndian.AppendUint32(dst, 1)
	dst = binary.BigEndian.AppendUint32(dst, hasNull)
	dst = binary.BigEndian.AppendUint32(dst, elem.oid)
	dst = binary.BigEndian.AppendUint32(dst, uint32(len(vs)))
	dst = binary.BigEndian.AppendUint32(dst, 1)
	for _, v := range vs {
		if v == nil {
			dst = binary.BigEndian.AppendUint32(dst, math.MaxUint32) // -1
			continue
		}
		at := len(dst)
		dst = appendValue(append(dst, 0, 0, 0, 0), elem, v, true)
		binary.BigEndian.PutUint32(dst[at:], uint32(len(dst)-at-4))
	}
	return dst
}

// oidPgLSN is pg_lsn's type OID, which pgtype has no constant for, and
// oidPgLSNArray its array's.
const (
	oidPgLSN      = 3220
	oidPgLSNArray = 3221
)
