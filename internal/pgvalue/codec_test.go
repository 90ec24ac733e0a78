package pgvalue

import (
	"bytes"
	"testing"

	"github.com/jackc/pgx/v5/pgtype"
)

// With RegisterFloat4Array, []float32 real[] parameters encode to the same
// bytes as pgx's own encoder gives, without allocating; NULL stays NULL
// and other values still go through pgx's codec.
func TestRegisterFloat4Array(t *testing.T) {
	plain, fast := pgtype.NewMap(), pgtype.NewMap()
	RegisterFloat4Array(fast)
	RegisterFloat4Array(fast) // twice is once
	long := make([]float32, 784)
	for i := range long {
		long[i] = float32(i)/7 - 50
	}
	for _, v := range [][]float32{{}, {1, -2.5, 3e-7}, long} {
		want, err := plain.Encode(pgtype.Float4ArrayOID, pgtype.BinaryFormatCode, v, nil)
		if err != nil {
			t.Fatal(err)
		}
		got, err := fast.Encode(pgtype.Float4ArrayOID, pgtype.BinaryFormatCode, v, nil)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got, want) {
			t.Errorf("%d elements: encoded %x, pgx encodes %x", len(v), got, want)
		}
		back, err := DecodeFloatArray(got)
		if err != nil || len(back) != len(v) {
			t.Fatalf("%d elements: decoded back %d, %v", len(v), len(back), err)
		}
	}
	if got, err := fast.Encode(pgtype.Float4ArrayOID, pgtype.BinaryFormatCode, []float32(nil), nil); err != nil || got != nil {
		t.Errorf("nil slice: %x, %v; want NULL", got, err)
	}
	other := []float64{1, 2}
	want, _ := plain.Encode(pgtype.Float4ArrayOID, pgtype.BinaryFormatCode, other, nil)
	if got, err := fast.Encode(pgtype.Float4ArrayOID, pgtype.BinaryFormatCode, other, nil); err != nil || !bytes.Equal(got, want) {
		t.Errorf("[]float64: %x, %v; want pgx's %x", got, err, want)
	}
	buf := make([]byte, 0, 8*len(long)+64)
	var arg any = long // as a query's arguments hold it
	if n := testing.AllocsPerRun(100, func() {
		if _, err := fast.Encode(pgtype.Float4ArrayOID, pgtype.BinaryFormatCode, arg, buf[:0]); err != nil {
			t.Fatal(err)
		}
	}); n > 0 {
		t.Errorf("encoding 784 elements allocates %.0f times, want none", n)
	}
}
