// Package workload scripts the changes that tests apply to a table of
// TOASTed vectors, so that the replication tests and the end-to-end tests
// exercise the same cases: inserts; updates that change the vector and
// ones that touch only another column (the vector then arrives as
// unchanged-TOAST); two updates of one key in one transaction; key changes
// with and without a new vector; deletes; NULL, wrong-length and NaN
// vectors later fixed; a savepoint rolled back; and a TRUNCATE followed by
// new rows.
//
// The table is items(id bigint primary key, note text, embedding real[]).
package workload

import (
	"fmt"
	"math/rand/v2"
	"strings"
)

// CreateTable creates items and fills it with rows of incompressible
// random vectors of dims elements: real[] values above ~2 kB are then
// stored out of line (TOASTed).
func CreateTable(rows, dims int) string {
	return fmt.Sprintf(`CREATE TABLE items (id bigint PRIMARY KEY, note text, embedding real[]);
INSERT INTO items SELECT g, 'n', (SELECT array_agg(random()::real * 2 - 1) FROM generate_series(1, %d) WHERE g > 0)
FROM generate_series(1, %d) g`, dims, rows)
}

// Changes returns the change statements, one transaction each, in order.
// They expect the ids 1..200 to exist. After them, exactly the rows 8
// (two elements) and 30003 (NaN) hold vectors that cannot be indexed.
func Changes(rng *rand.Rand, dims int) []string {
	v := func() string { return Vector(rng, dims) }
	return []string{
		fmt.Sprintf(`INSERT INTO items VALUES (10001, 'a', '%s'), (10002, 'b', '%s')`, v(), v()),
		fmt.Sprintf(`UPDATE items SET embedding = '%s' WHERE id = 1`, v()),
		`UPDATE items SET note = 'touched' WHERE id BETWEEN 2 AND 50`,
		fmt.Sprintf(`BEGIN; UPDATE items SET embedding = '%s' WHERE id = 3; UPDATE items SET embedding = '%s', note = 'x' WHERE id = 3; COMMIT`, v(), v()),
		`UPDATE items SET id = 20004 WHERE id = 4`,
		fmt.Sprintf(`UPDATE items SET id = 20005, embedding = '%s' WHERE id = 5`, v()),
		`BEGIN; UPDATE items SET id = 50007 WHERE id = 7; UPDATE items SET note = 'moved' WHERE id = 50007; COMMIT`,
		`DELETE FROM items WHERE id BETWEEN 100 AND 199`,
		`INSERT INTO items VALUES (30001, 'null', NULL), (30002, 'short', '{1,2,3}'), (30003, 'nan', NULL)`,
		`UPDATE items SET embedding = '{1,2}' WHERE id = 8`,
		`UPDATE items SET note = 'still short' WHERE id = 30002`,
		fmt.Sprintf(`UPDATE items SET embedding = '%s' WHERE id = 30001`, v()),
		fmt.Sprintf(`UPDATE items SET embedding = '%s' WHERE id = 30002`, v()),
		fmt.Sprintf(`UPDATE items SET embedding = array_fill('NaN'::real, ARRAY[%d]) WHERE id = 30003`, dims),
		fmt.Sprintf(`BEGIN; INSERT INTO items VALUES (40001, 's', '%s'); SAVEPOINT s; DELETE FROM items WHERE id = 9; ROLLBACK TO s; COMMIT`, v()),
	}
}

// Refill truncates the table and inserts two rows, one with a NULL vector.
func Refill(rng *rand.Rand, dims int) []string {
	return []string{
		`TRUNCATE items`,
		fmt.Sprintf(`INSERT INTO items VALUES (1, 'again', '%s'), (2, 'again', NULL)`, Vector(rng, dims)),
	}
}

// Vector renders a random vector in [-1, 1)^dims as a real[] literal.
func Vector(rng *rand.Rand, dims int) string {
	var b strings.Builder
	b.WriteByte('{')
	for i := 0; i < dims; i++ {
		if i > 0 {
			b.WriteByte(',')
		}
		fmt.Fprintf(&b, "%g", rng.Float32()*2-1)
	}
	b.WriteByte('}')
	return b.String()
}
