package pgvalue

import (
	"encoding/binary"
	"fmt"
	"strconv"
	"strings"

	"github.com/jackc/pgx/v5/pgtype"
)

// KeyType is the Postgres type of an index's key column. Keys are held as
// strings in a canonical binary form (see EncodeKey), so every index kind
// can use them as map keys without knowing the type.
type KeyType uint8

// The supported key types. Integers are held as 8-byte big-endian int64
// whatever their width, UUIDs as their 16 bytes, text as its UTF-8 bytes.
const (
	KeyInt2 KeyType = iota + 1
	KeyInt4
	KeyInt8
	KeyUUID
	KeyText
	KeyVarchar
)

// KeyTypeForOID maps a key column's type OID to a KeyType.
func KeyTypeForOID(oid uint32) (KeyType, error) {
	switch oid {
	case pgtype.Int2OID:
		return KeyInt2, nil
	case pgtype.Int4OID:
		return KeyInt4, nil
	case pgtype.Int8OID:
		return KeyInt8, nil
	case pgtype.UUIDOID:
		return KeyUUID, nil
	case pgtype.TextOID:
		return KeyText, nil
	case pgtype.VarcharOID:
		return KeyVarchar, nil
	}
	return 0, fmt.Errorf("key column type OID %d is not supported (use smallint, integer, bigint, uuid, text or varchar)", oid)
}

// OID is the type OID under which keys are returned to clients: the key
// column's own type.
func (t KeyType) OID() uint32 {
	switch t {
	case KeyInt2:
		return pgtype.Int2OID
	case KeyInt4:
		return pgtype.Int4OID
	case KeyInt8:
		return pgtype.Int8OID
	case KeyUUID:
		return pgtype.UUIDOID
	case KeyVarchar:
		return pgtype.VarcharOID
	}
	return pgtype.TextOID
}

// Size is the type's fixed binary width for RowDescription, -1 if variable.
func (t KeyType) Size() int16 {
	switch t {
	case KeyInt2:
		return 2
	case KeyInt4:
		return 4
	case KeyInt8:
		return 8
	case KeyUUID:
		return 16
	}
	return -1
}

func (t KeyType) String() string {
	switch t {
	case KeyInt2:
		return "smallint"
	case KeyInt4:
		return "integer"
	case KeyInt8:
		return "bigint"
	case KeyUUID:
		return "uuid"
	case KeyText:
		return "text"
	case KeyVarchar:
		return "varchar"
	}
	return fmt.Sprintf("keytype(%d)", uint8(t))
}

func (t KeyType) isInt() bool { return t == KeyInt2 || t == KeyInt4 || t == KeyInt8 }

func intKey(v int64) string {
	var b [8]byte
	binary.BigEndian.PutUint64(b[:], uint64(v))
	return string(b[:])
}

// DecodeBinary turns a key in Postgres's binary send format into its
// canonical form.
func (t KeyType) DecodeBinary(b []byte) (string, error) {
	switch t {
	case KeyInt2:
		if len(b) != 2 {
			return "", fmt.Errorf("smallint key: %d bytes, want 2", len(b))
		}
		return intKey(int64(int16(binary.BigEndian.Uint16(b)))), nil
	case KeyInt4:
		if len(b) != 4 {
			return "", fmt.Errorf("integer key: %d bytes, want 4", len(b))
		}
		return intKey(int64(int32(binary.BigEndian.Uint32(b)))), nil
	case KeyInt8:
		if len(b) != 8 {
			return "", fmt.Errorf("bigint key: %d bytes, want 8", len(b))
		}
		return string(b), nil
	case KeyUUID:
		if len(b) != 16 {
			return "", fmt.Errorf("uuid key: %d bytes, want 16", len(b))
		}
		return string(b), nil
	}
	return string(b), nil
}

// DecodeText parses a key in Postgres's text output format.
func (t KeyType) DecodeText(s string) (string, error) {
	switch {
	case t.isInt():
		v, err := strconv.ParseInt(strings.TrimSpace(s), 10, 64)
		if err != nil {
			return "", fmt.Errorf("%s key %q: %w", t, s, err)
		}
		return intKey(v), nil
	case t == KeyUUID:
		u, err := parseUUID(s)
		if err != nil {
			return "", err
		}
		return string(u[:]), nil
	}
	return s, nil
}

// AppendText appends the key's text output form.
func (t KeyType) AppendText(dst []byte, key string) []byte {
	switch {
	case t.isInt():
		return strconv.AppendInt(dst, int64(binary.BigEndian.Uint64([]byte(key))), 10)
	case t == KeyUUID:
		return appendUUID(dst, key)
	}
	return append(dst, key...)
}

// AppendBinary appends the key in its type's binary send format.
func (t KeyType) AppendBinary(dst []byte, key string) []byte {
	switch t {
	case KeyInt2:
		return binary.BigEndian.AppendUint16(dst, uint16(binary.BigEndian.Uint64([]byte(key))))
	case KeyInt4:
		return binary.BigEndian.AppendUint32(dst, uint32(binary.BigEndian.Uint64([]byte(key))))
	}
	return append(dst, key...)
}

// FormatKey renders a key for logs and error messages.
func (t KeyType) FormatKey(key string) string { return string(t.AppendText(nil, key)) }

func parseUUID(s string) ([16]byte, error) {
	var u [16]byte
	h := strings.ReplaceAll(strings.Trim(strings.TrimSpace(s), "{}"), "-", "")
	if len(h) != 32 {
		return u, fmt.Errorf("invalid uuid %q", s)
	}
	for i := range u {
		hi, ok1 := unhex(h[2*i])
		lo, ok2 := unhex(h[2*i+1])
		if !ok1 || !ok2 {
			return u, fmt.Errorf("invalid uuid %q", s)
		}
		u[i] = hi<<4 | lo
	}
	return u, nil
}

func unhex(c byte) (byte, bool) {
	switch {
	case '0' <= c && c <= '9':
		return c - '0', true
	case 'a' <= c && c <= 'f':
		return c - 'a' + 10, true
	case 'A' <= c && c <= 'F':
		return c - 'A' + 10, true
	}
	return 0, false
}

func appendUUID(dst []byte, key string) []byte {
	const digits = "0123456789abcdef"
	for i := 0; i < len(key); i++ {
		if i == 4 || i == 6 || i == 8 || i == 10 {
			dst = append(dst, '-')
		}
		dst = append(dst, digits[key[i]>>4], digits[key[i]&15])
	}
	return dst
}
