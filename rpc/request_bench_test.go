package rpc

import (
	"context"
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"testing"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgtype"

	"github.com/vecside/vecside/internal/pgvalue"
)

// BenchmarkKnnRequest measures what a knn call costs the server and the
// wire apart from the search: a flat index of a few 784-d rows, asked as
// the SQL helpers ask (a simple Query, the vector as a hex bytea literal,
// text results with xids) and as heapfetch asks (extended protocol, the
// vector and the results binary).
func BenchmarkKnnRequest(b *testing.B) {
	const dims, rows, k = 784, 64, 10
	ix := randomIndex(b, "bench=public.items(embedding) key=id metric=l2 kind=flat store=float", dims, rows, 3)
	_, addr := startServer(b, ix)
	conn, err := pgconn.Connect(context.Background(), connString(addr))
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { conn.Close(context.Background()) })
	q := make([]float32, dims)
	for j := range q {
		q[j] = float32(j%7) / 7
	}

	b.Run("helper", func(b *testing.B) {
		sql := fmt.Sprintf(`SELECT array_agg(id), array_agg(distance), array_agg(xid) FROM knn('bench', '\x%s'::bytea, %d, 'with_xid=true timeout=30000ms')`,
			hex.EncodeToString(pgvalue.AppendFloat4Array(nil, q)), k)
		for b.Loop() {
			res, err := conn.Exec(context.Background(), sql).ReadAll()
			if err != nil || len(res) != 1 || len(res[0].Rows) != 1 {
				b.Fatalf("%v %v", err, res)
			}
		}
	})
	oids := []uint32{pgtype.TextOID, pgtype.Float4ArrayOID, pgtype.Int4OID, pgtype.TextOID}
	if _, err := conn.Prepare(context.Background(), "knn", "SELECT id, distance, xid FROM knn($1, $2, $3, $4)", oids); err != nil {
		b.Fatal(err)
	}
	b.Run("heapfetch", func(b *testing.B) {
		params := [][]byte{[]byte("bench"), pgvalue.AppendFloat4Array(nil, q), binary.BigEndian.AppendUint32(nil, k), []byte("with_xid=true")}
		formats := []int16{0, 1, 1, 0}
		for b.Loop() {
			res := conn.ExecPrepared(context.Background(), "knn", params, formats, []int16{1}).Read()
			if res.Err != nil || len(res.Rows) != k {
				b.Fatalf("%v %d rows", res.Err, len(res.Rows))
			}
		}
	})
}
