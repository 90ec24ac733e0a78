package rpc

import (
	"fmt"
	"strconv"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5/pgtype"

	"github.com/vecside/vecside/internal/pgvalue"
)

// TestAllowArgument: knn's fifth argument restricts the search to the
// keys it lists, sent as text[] or as the key's own array type, in every
// pgx exec mode; the answer is the brute force over those rows alone.
func TestAllowArgument(t *testing.T) {
	ix, data := newTestIndexer(t)
	_, addr := startServer(t, ix)
	q := []float32{0.1, -0.2, 0.3, 0.4, -0.5, 0.6, 0.7, -0.8}
	const k = 5
	for _, mode := range execModes {
		t.Run(mode.String(), func(t *testing.T) {
			conn := connect(t, addr, mode)
			for _, tk := range testKeyTypes {
				d := data[tk.index]
				// Every third row is allowed.
				sub := &testData{kt: d.kt}
				var texts []string
				var ints []int64
				var uuids []pgtype.UUID
				for i, key := range d.keys {
					if i%3 != 0 {
						continue
					}
					sub.keys, sub.vecs = append(sub.keys, key), append(sub.vecs, d.vecs[i])
					texts = append(texts, tk.key(i))
					n, _ := strconv.ParseInt(tk.key(i), 10, 64)
					ints = append(ints, n)
					u := pgtype.UUID{Valid: true}
					copy(u.Bytes[:], key)
					uuids = append(uuids, u)
				}
				want := sub.bruteForce(q, k)
				checkHits(t, queryHits(t, conn, "SELECT * FROM knn($1, $2, $3, '', $4::text[])", tk.index, q, k, texts), want)
				switch tk.kt {
				case pgvalue.KeyInt8, pgvalue.KeyInt4, pgvalue.KeyInt2:
					checkHits(t, queryHits(t, conn, "SELECT * FROM knn($1, $2, $3, '', $4::bigint[])", tk.index, q, k, ints), want)
				case pgvalue.KeyUUID:
					checkHits(t, queryHits(t, conn, "SELECT * FROM knn($1, $2, $3, '', $4::uuid[])", tk.index, q, k, uuids), want)
				}
				if got := queryHits(t, conn, "SELECT * FROM knn($1, $2, $3, '', $4::text[])", tk.index, q, k, []string{}); len(got) != 0 {
					t.Errorf("%s: an empty allow-set returned %v", tk.index, got)
				}
			}
		})
	}
}

// TestAllowArgumentErrors: a bad allow-set is refused with a SQLSTATE
// that says what is wrong, and the session goes on.
func TestAllowArgumentErrors(t *testing.T) {
	ix, _ := newTestIndexer(t)
	_, addr := startServer(t, ix)
	q := make([]float32, testDims)
	many := make([]int64, MaxAllowKeys+1)
	for _, mode := range execModes {
		conn := connect(t, addr, mode)
		for _, c := range []struct {
			sql  string
			arg  any
			want string
		}{
			{"SELECT * FROM knn('items_int8', $1, 3, '', $2::bigint[])", many, codeProgramLimitExceeded},
			{"SELECT * FROM knn('items_int8', $1, 3, '', $2::text[])", []*string{new("1"), nil}, codeNullValueNotAllowed},
			{"SELECT * FROM knn('items_int8', $1, 3, '', $2::text[])", []string{"one"}, codeInvalidTextRepresent},
			{"SELECT * FROM knn('items_uuid', $1, 3, '', $2::bigint[])", []int64{1}, codeInvalidTextRepresent},
			{"SELECT * FROM knn('items_int8', $1, 3, '', $2::real[])", []float32{1}, codeDatatypeMismatch},
		} {
			_, err := conn.Exec(testContext(t), c.sql, q, c.arg)
			if got := sqlstate(err); got != c.want {
				t.Errorf("%s: %s: got %v, want SQLSTATE %s", mode, c.sql, err, c.want)
			}
		}
		var n int
		if err := conn.QueryRow(testContext(t), "SELECT 1").Scan(&n); err != nil {
			t.Fatalf("%s: the session did not go on: %v", mode, err)
		}
	}
	// Simple protocol, literal forms.
	conn := connect(t, addr, execModes[len(execModes)-1])
	vec := "'" + strings.Repeat("0,", testDims-1) + "0'"
	vec = "'{" + vec[1:len(vec)-1] + "}'"
	if _, err := conn.Exec(testContext(t), fmt.Sprintf("SELECT * FROM knn('items_int8', %s, 3, '', '{1,{2}}')", vec)); sqlstate(err) != codeInvalidTextRepresent {
		t.Errorf("nested literal: got %v, want 22P02", err)
	}
	if _, err := conn.Exec(testContext(t), fmt.Sprintf("SELECT * FROM knn('items_int8', %s, 3, '', '{}', 'x')", vec)); sqlstate(err) != codeUndefinedFunction {
		t.Errorf("six arguments: got %v, want 42883", err)
	}
}
