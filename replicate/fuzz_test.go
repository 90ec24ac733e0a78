package replicate

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math"
	"slices"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5/pgtype"
	"github.com/vecside/vecside/indexer"
	"github.com/vecside/vecside/internal/pgvalue"
)

var (
	fuzzKeyTypes = []pgvalue.KeyType{pgvalue.KeyInt2, pgvalue.KeyInt4, pgvalue.KeyInt8, pgvalue.KeyUUID, pgvalue.KeyText, pgvalue.KeyVarchar}
	// A vector column's type OID and name as a Relation message and the
	// catalog give them; pgvector's OID is the extension's, any will do.
	fuzzVectorTypes = []struct {
		vt   pgvalue.VectorType
		oid  uint32
		name string
	}{
		{pgvalue.VectorPgvector, 90001, "vector"},
		{pgvalue.VectorFloat4Array, pgtype.Float4ArrayOID, "_float4"},
		{pgvalue.VectorFloat8Array, pgtype.Float8ArrayOID, "_float8"},
		{pgvalue.VectorHalfvec, 90002, "halfvec"},
	}
)

// fuzzDefinitions is every kind, the metrics taken in turn, and the coded
// flat index, with the dimension left to the first row, as for a real[]
// column without dims= on a table empty at copy time.
func fuzzDefinitions() []string {
	metrics := []string{"l2", "ip", "cosine"}
	var defs []string
	for i, k := range indexer.Kinds() {
		defs = append(defs, fmt.Sprintf("%s=public.items(v) key=id metric=%s kind=%s", k, metrics[i%len(metrics)], k))
	}
	return append(defs, "flat_coded=public.items(v) key=id metric=cosine kind=flat store=ext4")
}

// FuzzDecodeRow feeds row values of every supported key and vector type,
// in text and binary, through the decoder and every index kind: two
// INSERTs (the first valid vector fixes the dimension), an UPDATE and a
// DELETE, each in its own transaction. No value may stop the stream (a
// message that errors is replayed forever, holding the slot) or fail an
// index; each row is indexed exactly when its vector is one, and skipped
// otherwise.
func FuzzDecodeRow(f *testing.F) {
	three := pgvalue.AppendFloat4Array(nil, []float32{1, 2, 3})
	f.Add(uint8(2), uint8(1), byte('b'), []byte{0, 0, 0, 0, 0, 0, 0, 7}, three, three)
	f.Add(uint8(2), uint8(1), byte('b'), []byte{0, 0, 0, 0, 0, 0, 0, 7}, pgvalue.AppendFloat4Array(nil, make([]float32, 70000)), three)
	f.Add(uint8(1), uint8(0), byte('t'), []byte("42"), []byte("[1,2,3]"), []byte("[1,2]"))
	f.Add(uint8(0), uint8(0), byte('b'), []byte{0, 9}, pgvalue.AppendPgvector(nil, []float32{1, float32(math.NaN())}), pgvalue.AppendPgvector(nil, []float32{1, 2}))
	f.Add(uint8(2), uint8(3), byte('b'), []byte{0, 0, 0, 0, 0, 0, 0, 7}, pgvalue.AppendHalfvec(nil, []float32{1, 2, 65504}), pgvalue.AppendHalfvec(nil, []float32{1, 2, 65520}))
	f.Add(uint8(1), uint8(3), byte('t'), []byte("42"), []byte("[1,2,3]"), []byte("[1,2,70000]"))
	f.Add(uint8(4), uint8(2), byte('t'), []byte("k"), []byte("{1e39,2}"), []byte("{1,2}"))
	f.Add(uint8(3), uint8(1), byte('u'), []byte("00000000-0000-0000-0000-000000000001"), []byte("{}"), []byte("{1,NULL}"))
	f.Add(uint8(5), uint8(1), byte('n'), []byte("v"), []byte(nil), []byte("{{1,2},{3,4}}"))
	f.Fuzz(func(t *testing.T, keyKind, vecKind uint8, format byte, keyData, first, second []byte) {
		if !strings.ContainsRune("btnu", rune(format)) {
			format = "btnu"[format%4]
		}
		kt := fuzzKeyTypes[int(keyKind)%len(fuzzKeyTypes)]
		vtype := fuzzVectorTypes[int(vecKind)%len(fuzzVectorTypes)]
		h := newFuzzHarness(t, kt, vtype.vt, vtype.oid, vtype.name)
		// What a row leaves in every index: indexed, skipped, or, for an
		// unchanged TOAST value the index never had, nothing (it is read
		// back from the table). The first indexable vector fixes the
		// dimension.
		dims := 0
		outcome := func(raw []byte) (rows, skipped int) {
			if format == 'u' {
				return 0, 0
			}
			v, ok := fuzzVector(vtype.vt, format, raw)
			if !ok || dims != 0 && len(v) != dims {
				return 0, 1
			}
			dims = len(v)
			return 1, 0
		}
		otherKey := append(append([]byte(nil), keyData...), '1')
		h.apply(t, 100, h.insert(format, keyData, first))
		h.apply(t, 200, h.insert(format, otherKey, second))
		key, keyErr := decodeKey(kt, format, keyData)
		other, otherErr := decodeKey(kt, format, otherKey)
		var rows, skipped, rows2, skipped2 int
		if keyErr == nil {
			rows, skipped = outcome(first)
		}
		if otherErr == nil && (keyErr != nil || other != key) {
			rows2, skipped2 = outcome(second)
		}
		if bad := count(keyErr != nil) + count(otherErr != nil); h.stats.BadKeys.Load() != int64(bad) {
			t.Fatalf("%d changes dropped for their keys, want %d (%q: %v, %q: %v)", h.stats.BadKeys.Load(), bad, keyData, keyErr, otherKey, otherErr)
		}
		h.check(t, rows+rows2, skipped+skipped2)
		if keyErr != nil {
			return
		}
		// The first row takes the second's vector, then goes.
		h.apply(t, 300, h.update(format, keyData, second))
		h.apply(t, 400, h.delete(format, keyData))
		h.check(t, rows2, skipped2)
	})
}

func count(b bool) int {
	if b {
		return 1
	}
	return 0
}

// decodeKey is the key a tuple column of that format holds, as the
// decoder reads it.
func decodeKey(kt pgvalue.KeyType, format byte, raw []byte) (string, error) {
	if format == 'b' {
		return kt.DecodeBinary(raw)
	}
	return kt.DecodeText(string(raw))
}

// fuzzVector is the vector a tuple column holds, and whether an index can
// hold it.
func fuzzVector(vt pgvalue.VectorType, format byte, raw []byte) ([]float32, bool) {
	var v []float32
	var err error
	switch format {
	case 'b':
		v, err = vt.Decode(pgtype.BinaryFormatCode, raw)
	case 't':
		v, err = vt.Decode(pgtype.TextFormatCode, raw)
	default:
		return nil, false // NULL; an unchanged TOAST value of a row the index lacks is read back (see repair)
	}
	return v, err == nil && len(v) > 0 && len(v) <= indexer.MaxDims && pgvalue.CheckFinite(v) == nil
}

type fuzzHarness struct {
	dec     *decoder
	stats   *Stats
	entries []Index
	oid     uint32
}

func newFuzzHarness(t *testing.T, kt pgvalue.KeyType, vt pgvalue.VectorType, vecOID uint32, vecName string) *fuzzHarness {
	ix := indexer.New()
	key := &column{attnum: 1, name: "id", typ: columnType{oid: kt.OID(), name: kt.String(), typmod: -1}}
	vec := &column{attnum: 2, name: "v", typ: columnType{oid: vecOID, name: vecName, typmod: -1}, vt: vt}
	tb := &table{schema: "public", name: "items", oid: 16400, key: key, keyType: kt,
		vectors: map[string]*column{"v": vec}, published: []*column{key, vec}}
	for _, def := range fuzzDefinitions() {
		spec, err := indexer.ParseSpec(def)
		if err != nil {
			t.Fatal(err)
		}
		e, err := ix.Add(spec)
		if err != nil {
			t.Fatal(err)
		}
		if err := tb.configure(entry{e}); err != nil {
			t.Fatal(err)
		}
		// The table was empty when it was copied.
		if err := e.Copies().BeginSync(nil, 0); err != nil {
			t.Fatal(err)
		}
		e.Copies().SetSyncPoint(1)
		e.Copies().EndSync()
		tb.entries = append(tb.entries, entry{e})
	}
	stats := &Stats{}
	// A row whose vector is an unchanged TOAST value that the index lacks
	// would be read back from the table: none to read here.
	repair := func(context.Context, *table, Index, string, uint32) error { return nil }
	h := &fuzzHarness{dec: newDecoder([]*table{tb}, repair, func(e Index, why string) { e.Fail(errors.New(why)) }, slog.New(slog.NewTextHandler(io.Discard, nil)), stats), stats: stats, entries: tb.entries, oid: tb.oid}
	h.handle(t, relationMessage(tb))
	return h
}

// apply runs one change in a transaction that commits at lsn.
func (h *fuzzHarness) apply(t *testing.T, lsn uint64, change []byte) {
	t.Helper()
	h.handle(t, beginMessage(lsn, uint32(lsn)))
	h.handle(t, change)
	h.handle(t, commitMessage(lsn))
	for _, e := range h.entries {
		if state, why := e.State(); state != indexer.StateReady {
			t.Fatalf("index %s is %s after a change: %s", e.Spec().Name, state, why)
		}
	}
}

func (h *fuzzHarness) handle(t *testing.T, msg []byte) {
	t.Helper()
	if err := h.dec.handle(context.Background(), msg); err != nil {
		t.Fatalf("message %q stopped the stream: %v", msg[:1], err)
	}
}

func (h *fuzzHarness) check(t *testing.T, rows, skipped int) {
	t.Helper()
	for _, e := range h.entries {
		st := e.Status()
		if st.Rows != rows || st.Skipped != skipped {
			t.Fatalf("index %s holds %d rows and skipped %d, want %d and %d", st.Name, st.Rows, st.Skipped, rows, skipped)
		}
	}
}

func (h *fuzzHarness) insert(format byte, key, vec []byte) []byte {
	msg := binary.BigEndian.AppendUint32([]byte{'I'}, h.oid)
	return appendTuple(append(msg, 'N'), format, key, vec)
}

func (h *fuzzHarness) update(format byte, key, vec []byte) []byte {
	msg := binary.BigEndian.AppendUint32([]byte{'U'}, h.oid)
	return appendTuple(append(msg, 'N'), format, key, vec)
}

// delete is a DELETE: its 'K' tuple holds the key, and 'n' (not part of
// the identity) for the vector.
func (h *fuzzHarness) delete(format byte, key []byte) []byte {
	msg := binary.BigEndian.AppendUint32([]byte{'D'}, h.oid)
	if format != 'b' {
		format = 't'
	}
	msg = appendColumn(binary.BigEndian.AppendUint16(append(msg, 'K'), 2), format, key)
	return append(msg, 'n')
}

// appendTuple appends pgoutput's TupleData of (key, vector) with the
// vector in format ('b', 't', 'n' NULL, 'u' unchanged TOAST); the key is
// sent in binary with a binary vector, else as text.
func appendTuple(dst []byte, format byte, key, vec []byte) []byte {
	dst = binary.BigEndian.AppendUint16(dst, 2)
	keyFormat := format
	if format != 'b' {
		keyFormat = 't'
	}
	dst = appendColumn(dst, keyFormat, key)
	return appendColumn(dst, format, vec)
}

func appendColumn(dst []byte, format byte, data []byte) []byte {
	dst = append(dst, format)
	if format != 't' && format != 'b' {
		return dst
	}
	dst = binary.BigEndian.AppendUint32(dst, uint32(len(data)))
	return append(dst, data...)
}

func relationMessage(tb *table) []byte {
	msg := binary.BigEndian.AppendUint32([]byte{'R'}, tb.oid)
	msg = append(append(msg, tb.schema...), 0)
	msg = append(append(msg, tb.name...), 0)
	msg = append(msg, 'd')
	msg = binary.BigEndian.AppendUint16(msg, uint16(len(tb.published)))
	for i, c := range tb.published {
		flags := byte(0)
		if i == 0 {
			flags = 1 // part of the key
		}
		msg = append(append(append(msg, flags), c.name...), 0)
		msg = binary.BigEndian.AppendUint32(msg, c.typ.oid)
		msg = binary.BigEndian.AppendUint32(msg, uint32(c.typ.typmod))
	}
	return msg
}

func beginMessage(final uint64, xid uint32) []byte {
	msg := binary.BigEndian.AppendUint64([]byte{'B'}, final)
	msg = binary.BigEndian.AppendUint64(msg, 0)
	return binary.BigEndian.AppendUint32(msg, xid)
}

func commitMessage(lsn uint64) []byte {
	msg := binary.BigEndian.AppendUint64([]byte{'C', 0}, lsn)
	msg = binary.BigEndian.AppendUint64(msg, lsn+1)
	return binary.BigEndian.AppendUint64(msg, 0)
}

// TestDecodeHalfvec: a halfvec column's values, in pgoutput's binary and
// text forms (golden bytes written from pgvector's format: int16 dim,
// int16 unused, big-endian halves), reach every index as the float32 of
// each half; one beyond halfvec's range is skipped, not fatal.
func TestDecodeHalfvec(t *testing.T) {
	want := []float32{1, -2.5, 0.125, 1.0 / (1 << 24)}
	golden := []byte{0, 4, 0, 0, 0x3c, 0x00, 0xc1, 0x00, 0x30, 0x00, 0x00, 0x01}
	for _, c := range []struct {
		format byte
		key    []byte
		vec    []byte
	}{
		{'b', []byte{0, 0, 0, 0, 0, 0, 0, 7}, golden},
		{'t', []byte("7"), []byte("[1,-2.5,0.125,6e-08]")},
	} {
		h := newFuzzHarness(t, pgvalue.KeyInt8, pgvalue.VectorHalfvec, 90002, "halfvec")
		h.apply(t, 100, h.insert(c.format, c.key, c.vec))
		h.apply(t, 200, h.insert('t', []byte("8"), []byte("[1,2,3,70000]")))
		h.check(t, 1, 1)
		held := 0
		for _, e := range h.entries {
			key, _ := decodeKey(pgvalue.KeyInt8, c.format, c.key)
			got, ok := e.(entry).Vector(key)
			if ok && !slices.Equal(got, want) {
				t.Errorf("%c: index %s holds %v, want %v", c.format, e.Spec().Name, got, want)
			}
			held += count(ok)
		}
		if held == 0 {
			t.Errorf("%c: no index keeps its vectors to compare", c.format)
		}
	}
}
