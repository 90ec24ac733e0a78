package pgvalue

import (
	"errors"
	"slices"
	"testing"

	"github.com/jackc/pgx/v5/pgtype"
)

// TestKeyArrays decodes arrays pgx encodes in the binary format, and their
// text forms, into the keys EncodeKey's canonical form would hold.
func TestKeyArrays(t *testing.T) {
	m := pgtype.NewMap()
	uuid := [16]byte{0x12, 0x34, 15: 0xff}
	for _, c := range []struct {
		kt    KeyType
		oid   uint32
		value any
		text  string
		want  []string
	}{
		{KeyInt8, pgtype.Int8ArrayOID, []int64{-1, 42}, "{-1, 42}", []string{intKey(-1), intKey(42)}},
		{KeyInt2, pgtype.Int4ArrayOID, []int32{7}, "{7}", []string{intKey(7)}},
		{KeyInt4, pgtype.Int2ArrayOID, []int16{-3, 3}, "{ -3 ,3 }", []string{intKey(-3), intKey(3)}},
		{KeyUUID, pgtype.UUIDArrayOID, [][16]byte{uuid}, "{12340000-0000-0000-0000-0000000000ff}", []string{string(uuid[:])}},
		{KeyText, pgtype.TextArrayOID, []string{"a b", `q"uo\te`, "NULL"}, `{"a b","q\"uo\\te","NULL"}`, []string{"a b", `q"uo\te`, "NULL"}},
		{KeyInt8, pgtype.TextArrayOID, []string{"5"}, `{"5"}`, []string{intKey(5)}},
		{KeyText, pgtype.TextArrayOID, []string{}, "{}", []string{}},
	} {
		b, err := m.Encode(c.oid, pgtype.BinaryFormatCode, c.value, nil)
		if err != nil {
			t.Fatal(err)
		}
		got, err := c.kt.DecodeBinaryArray(b)
		if err != nil || !slices.Equal(got, c.want) {
			t.Errorf("%s from binary %v: got %q, %v, want %q", c.kt, c.value, got, err, c.want)
		}
		got, err = c.kt.ParseArray(c.text)
		if err != nil || !slices.Equal(got, c.want) {
			t.Errorf("%s from %s: got %q, %v, want %q", c.kt, c.text, got, err, c.want)
		}
	}
}

func TestKeyArrayErrors(t *testing.T) {
	m := pgtype.NewMap()
	withNull, err := m.Encode(pgtype.Int8ArrayOID, pgtype.BinaryFormatCode, []*int64{nil}, nil)
	if err != nil {
		t.Fatal(err)
	}
	ints, _ := m.Encode(pgtype.Int8ArrayOID, pgtype.BinaryFormatCode, []int64{1, 2}, nil)
	for _, c := range []struct {
		name string
		kt   KeyType
		b    []byte
		want error
	}{
		{"null", KeyInt8, withNull, ErrNullKey},
		{"ints for text keys", KeyText, ints, ErrMalformedKeyArray},
		{"truncated", KeyInt8, ints[:len(ints)-1], ErrMalformedKeyArray},
		{"trailing bytes", KeyInt8, append(slices.Clone(ints), 0), ErrMalformedKeyArray},
		{"short header", KeyInt8, ints[:8], ErrMalformedKeyArray},
	} {
		if _, err := c.kt.DecodeBinaryArray(c.b); !errors.Is(err, c.want) {
			t.Errorf("%s: got %v, want %v", c.name, err, c.want)
		}
	}
	for _, c := range []struct {
		kt   KeyType
		s    string
		want error
	}{
		{KeyInt8, "{1,NULL}", ErrNullKey},
		{KeyInt8, "{1,x}", ErrMalformedKeyArray},
		{KeyInt8, "1,2", ErrMalformedKeyArray},
		{KeyText, `{"open}`, ErrMalformedKeyArray},
		{KeyText, "{{a}}", ErrMalformedKeyArray},
		{KeyText, "{a,,b}", ErrMalformedKeyArray},
		{KeyUUID, "{nope}", ErrMalformedKeyArray},
	} {
		if _, err := c.kt.ParseArray(c.s); !errors.Is(err, c.want) {
			t.Errorf("%s %s: got %v, want %v", c.kt, c.s, err, c.want)
		}
	}
}
