package pgvalue

import (
	"encoding/hex"
	"errors"
	"github.com/jackc/pgx/v5/pgtype"
	"math"
	"slices"
	"strings"
	"testing"
)

// Golden bytes of pgvector's binary send format for '[1,-2.5,0.125]':
// int16 dim = 3, int16 unused = 0, then big-endian float4.
const pgvectorGolden = "0003" + "0000" + "3f800000" + "c0200000" + "3e000000"

func TestDecodePgvectorGolden(t *testing.T) {
	b, _ := hex.DecodeString(pgvectorGolden)
	v, err := DecodePgvector(b)
	if err != nil {
		t.Fatal(err)
	}
	if want := []float32{1, -2.5, 0.125}; !slices.Equal(v, want) {
		t.Fatalf("got %v, want %v", v, want)
	}
	if got := hex.EncodeToString(AppendPgvector(nil, v)); got != pgvectorGolden {
		t.Fatalf("encode: got %s, want %s", got, pgvectorGolden)
	}
	for _, bad := range []string{"", "00", "0003000000000000", "0001000000000000ff"} {
		b, _ := hex.DecodeString(bad)
		if _, err := DecodePgvector(b); !errors.Is(err, ErrMalformedVector) {
			t.Errorf("%q: got %v, want ErrMalformedVector", bad, err)
		}
	}
}

func TestVectorTextForms(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want []float32
	}{
		{"[1,2,3]", []float32{1, 2, 3}},
		{" { 1.5 , -2e-3 } ", []float32{1.5, -2e-3}},
		{"[]", []float32{}},
		{"[NaN]", []float32{float32(math.NaN())}},
		{`{"0.5", "-1e-2" ,"2\5"}`, []float32{0.5, -1e-2, 25}},
	} {
		got, err := ParseVector(tc.in)
		if err != nil {
			t.Errorf("%q: %v", tc.in, err)
			continue
		}
		if len(got) != len(tc.want) {
			t.Errorf("%q: got %v, want %v", tc.in, got, tc.want)
			continue
		}
		for i := range got {
			if math.Float32bits(got[i]) != math.Float32bits(tc.want[i]) {
				t.Errorf("%q: got %v, want %v", tc.in, got, tc.want)
			}
		}
		if tc.in == "[1,2,3]" {
			if s := string(AppendVectorText(nil, got)); s != "[1,2,3]" {
				t.Errorf("format: got %s", s)
			}
		}
	}
	for _, bad := range []string{"", "1,2", "[1,2", "{1,{2}}", "[1,,2]", "[a]", "{NULL}", "[1e39]", `["1"]`, `{"1}`, `{"NULL"}`} {
		if _, err := ParseVector(bad); !errors.Is(err, ErrMalformedVector) {
			t.Errorf("%q: got %v, want ErrMalformedVector", bad, err)
		}
	}
	for _, bad := range []float32{float32(math.Inf(-1)), float32(math.Inf(1)), float32(math.NaN()), math.Float32frombits(0xffc00001)} {
		if err := CheckFinite([]float32{1, bad}); err == nil || !strings.Contains(err.Error(), "element 2") {
			t.Errorf("CheckFinite(%v): %v, want element 2 named", bad, err)
		}
	}
	if err := CheckFinite([]float32{0, -0, math.MaxFloat32, -math.MaxFloat32, math.SmallestNonzeroFloat32}); err != nil {
		t.Errorf("CheckFinite refused finite values: %v", err)
	}
}

func TestDecodeFloatArray(t *testing.T) {
	// '{1.5,-2}'::real[] in binary: ndim 1, no nulls, OID 700, 2 elements
	// from lower bound 1, each length-prefixed.
	f4, _ := hex.DecodeString("00000001" + "00000000" + "000002bc" + "00000002" + "00000001" +
		"00000004" + "3fc00000" + "00000004" + "c0000000")
	if v, err := DecodeFloatArray(f4); err != nil || !slices.Equal(v, []float32{1.5, -2}) {
		t.Fatalf("real[]: got %v, %v", v, err)
	}
	// '{0.1}'::float8[] rounds to the nearest float32.
	f8, _ := hex.DecodeString("00000001" + "00000000" + "000002bd" + "00000001" + "00000001" +
		"00000008" + "3fb999999999999a")
	if v, err := DecodeFloatArray(f8); err != nil || !slices.Equal(v, []float32{0.1}) {
		t.Fatalf("double precision[]: got %v, %v", v, err)
	}
	// DecodeFloat64 keeps it unrounded, in either format.
	if v, err := DecodeFloat64(pgtype.BinaryFormatCode, f8); err != nil || !slices.Equal(v, []float64{0.1}) {
		t.Fatalf("double precision[] unrounded: got %v, %v", v, err)
	}
	if v, err := DecodeFloat64(pgtype.TextFormatCode, []byte("{0.1,-2}")); err != nil || !slices.Equal(v, []float64{0.1, -2}) {
		t.Fatalf("double precision[] text unrounded: got %v, %v", v, err)
	}
	// Decode takes either format; NULL is nil.
	for _, c := range []struct {
		format int16
		raw    []byte
		want   []float32
	}{
		{pgtype.BinaryFormatCode, f4, []float32{1.5, -2}},
		{pgtype.TextFormatCode, []byte("{1.5,-2}"), []float32{1.5, -2}},
		{pgtype.BinaryFormatCode, nil, nil},
	} {
		if v, err := VectorFloat4Array.Decode(c.format, c.raw); err != nil || !slices.Equal(v, c.want) || (v == nil) != (c.want == nil) {
			t.Errorf("Decode(%d, %x): got %v, %v, want %v", c.format, c.raw, v, err, c.want)
		}
	}
	for name, bad := range map[string]string{
		"two dimensions": "00000002" + "00000000" + "000002bc" + "00000001" + "00000001" + "00000001" + "00000001" + "00000004" + "3fc00000",
		"NULL element":   "00000001" + "00000001" + "000002bc" + "00000001" + "00000001" + "ffffffff",
		"int4 elements":  "00000001" + "00000000" + "00000017" + "00000001" + "00000001" + "00000004" + "00000001",
		"truncated":      "00000001" + "00000000" + "000002bc" + "00000002" + "00000001" + "00000004" + "3fc00000",
	} {
		b, _ := hex.DecodeString(bad)
		if _, err := DecodeFloatArray(b); !errors.Is(err, ErrMalformedVector) {
			t.Errorf("%s: got %v, want ErrMalformedVector", name, err)
		}
	}
}

func TestKeyRoundTrips(t *testing.T) {
	for _, tc := range []struct {
		kt        KeyType
		text, bin string
	}{
		{KeyInt2, "-2", "fffe"},
		{KeyInt4, "70000", "00011170"},
		{KeyInt8, "-9223372036854775808", "8000000000000000"},
		{KeyUUID, "0f8fad5b-d9cb-469f-a165-70867728950e", "0f8fad5bd9cb469fa16570867728950e"},
		{KeyText, "héllo", hex.EncodeToString([]byte("héllo"))},
	} {
		fromText, err := tc.kt.DecodeText(tc.text)
		if err != nil {
			t.Fatalf("%s %q: %v", tc.kt, tc.text, err)
		}
		bin, _ := hex.DecodeString(tc.bin)
		fromBin, err := tc.kt.DecodeBinary(bin)
		if err != nil || fromBin != fromText {
			t.Errorf("%s: binary and text decode differ (%v)", tc.kt, err)
		}
		if got := string(tc.kt.AppendText(nil, fromText)); got != tc.text {
			t.Errorf("%s: text %q, want %q", tc.kt, got, tc.text)
		}
		if got := hex.EncodeToString(tc.kt.AppendBinary(nil, fromText)); got != tc.bin {
			t.Errorf("%s: binary %s, want %s", tc.kt, got, tc.bin)
		}
	}
	if _, err := KeyInt8.DecodeText("12x"); err == nil {
		t.Error("accepted a malformed bigint")
	}
	if _, err := KeyUUID.DecodeText("not-a-uuid"); err == nil {
		t.Error("accepted a malformed uuid")
	}
	if _, err := KeyTypeForOID(700); err == nil {
		t.Error("accepted real as a key type")
	}
}
