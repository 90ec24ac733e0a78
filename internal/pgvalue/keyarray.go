package pgvalue

import (
	"encoding/binary"
	"errors"
	"fmt"
	"strings"

	"github.com/jackc/pgx/v5/pgtype"
)

// ErrMalformedKeyArray is wrapped by the errors of DecodeBinaryArray and
// ParseArray for input that is not a one-dimensional array of keys.
var ErrMalformedKeyArray = errors.New("malformed key array")

// ErrNullKey is wrapped when a key array holds a NULL.
var ErrNullKey = errors.New("key array holds a NULL")

// DecodeBinaryArray decodes a one-dimensional array in the array binary
// format (ndim, has-null flag, element OID, per dimension its length and
// lower bound, then each element length-prefixed) into canonical keys of
// type t. Integer elements of any width serve integer keys; text and
// varchar elements are parsed as keys' text form, so they serve any type.
func (t KeyType) DecodeBinaryArray(b []byte) ([]string, error) {
	n, elem, body, err := arrayHeader(b)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrMalformedKeyArray, err)
	}
	if n == 0 {
		return []string{}, nil
	}
	decode, err := t.elementDecoder(elem)
	if err != nil {
		return nil, err
	}
	keys := make([]string, n)
	for i := range keys {
		if len(body) < 4 {
			return nil, fmt.Errorf("%w: element %d is truncated", ErrMalformedKeyArray, i+1)
		}
		l := int32(binary.BigEndian.Uint32(body))
		if l == -1 {
			return nil, fmt.Errorf("%w: element %d", ErrNullKey, i+1)
		}
		if l < 0 || int(l) > len(body)-4 {
			return nil, fmt.Errorf("%w: element %d is truncated", ErrMalformedKeyArray, i+1)
		}
		if keys[i], err = decode(body[4 : 4+l]); err != nil {
			return nil, fmt.Errorf("%w: element %d: %v", ErrMalformedKeyArray, i+1, err)
		}
		body = body[4+l:]
	}
	if len(body) != 0 {
		return nil, fmt.Errorf("%w: %d bytes after the last element", ErrMalformedKeyArray, len(body))
	}
	return keys, nil
}

// elementDecoder turns one binary element of type OID elem into a key.
func (t KeyType) elementDecoder(elem uint32) (func([]byte) (string, error), error) {
	switch elem {
	case pgtype.TextOID, pgtype.VarcharOID:
		return func(b []byte) (string, error) { return t.DecodeText(string(b)) }, nil
	case pgtype.Int2OID, pgtype.Int4OID, pgtype.Int8OID:
		if t.isInt() {
			width := map[uint32]KeyType{pgtype.Int2OID: KeyInt2, pgtype.Int4OID: KeyInt4, pgtype.Int8OID: KeyInt8}[elem]
			return width.DecodeBinary, nil
		}
	case pgtype.UUIDOID:
		if t == KeyUUID {
			return t.DecodeBinary, nil
		}
	}
	return nil, fmt.Errorf("%w: elements of type OID %d cannot be %s keys", ErrMalformedKeyArray, elem, t)
}

// ParseArray parses an array literal in Postgres's text form, {1,2,3} or
// {"a b",c}, into canonical keys of type t: one dimension, elements
// optionally double-quoted with backslash escapes, NULL refused.
func (t KeyType) ParseArray(s string) ([]string, error) {
	s = strings.TrimSpace(s)
	if len(s) < 2 || s[0] != '{' || s[len(s)-1] != '}' {
		return nil, fmt.Errorf("%w: %s is not {a,b,...}", ErrMalformedKeyArray, abbreviate(s))
	}
	body := s[1 : len(s)-1]
	if strings.TrimSpace(body) == "" {
		return []string{}, nil
	}
	var keys []string
	for i := 0; ; i++ {
		var elem string
		var quoted bool
		var err error
		elem, quoted, body, err = nextElement(body)
		if err != nil {
			return nil, fmt.Errorf("%w: element %d: %v", ErrMalformedKeyArray, i+1, err)
		}
		if !quoted && strings.EqualFold(elem, "NULL") {
			return nil, fmt.Errorf("%w: element %d", ErrNullKey, i+1)
		}
		key, err := t.DecodeText(elem)
		if err != nil {
			return nil, fmt.Errorf("%w: element %d: %v", ErrMalformedKeyArray, i+1, err)
		}
		keys = append(keys, key)
		if body == "" {
			return keys, nil
		}
		body = body[1:] // the comma
	}
}

// nextElement splits the first element off an array literal's body: the
// element, whether it was quoted, and the rest from the comma on ("" at
// the end).
func nextElement(body string) (elem string, quoted bool, rest string, err error) {
	body = strings.TrimLeft(body, " \t\n")
	if strings.HasPrefix(body, "{") {
		return "", false, "", errors.New("nested arrays are not key arrays")
	}
	var b strings.Builder
	if strings.HasPrefix(body, `"`) {
		i := 1
		for ; i < len(body) && body[i] != '"'; i++ {
			if body[i] == '\\' {
				i++
				if i == len(body) {
					break
				}
			}
			b.WriteByte(body[i])
		}
		if i >= len(body) {
			return "", false, "", errors.New("unterminated quotes")
		}
		rest = strings.TrimLeft(body[i+1:], " \t\n")
		if rest != "" && rest[0] != ',' {
			return "", false, "", fmt.Errorf("junk after quotes: %s", abbreviate(rest))
		}
		return b.String(), true, rest, nil
	}
	end := strings.IndexByte(body, ',')
	if end < 0 {
		end = len(body)
	}
	elem = strings.TrimRight(body[:end], " \t\n")
	if elem == "" || strings.ContainsAny(elem, `"{}\`) {
		return "", false, "", fmt.Errorf("%s is not an element", abbreviate(elem))
	}
	return elem, false, body[end:], nil
}
