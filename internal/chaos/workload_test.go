package chaos

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"

	"github.com/vecside/vecside/internal/workload"
)

// The tables of a seed. items holds 600-d real[] vectors: 2.4 kB of
// incompressible floats, stored out of line (TOASTed), so that updates
// that leave the vector alone send it as unchanged-TOAST. bulk holds
// 128-d vectors and receives the large transactions. other is not
// published: writes to it alone must still move the slot.
const (
	itemsDims = 600
	bulkDims  = 128
	setupSQL  = `
CREATE TABLE items (id bigint PRIMARY KEY, note text, embedding real[]);
CREATE TABLE bulk (id bigint PRIMARY KEY, embedding real[]);
CREATE TABLE other (id bigserial PRIMARY KEY, payload text);`
	// Bulk ids are a base id plus a band × bandSize: key changes move rows
	// to a new band, so they never collide.
	bandSize = 1_000_000_000
)

var indexDefs = []string{
	fmt.Sprintf("items_embedding=public.items(embedding) key=id metric=l2 dims=%d", itemsDims),
	fmt.Sprintf("bulk_embedding=public.bulk(embedding) key=id metric=l2 dims=%d", bulkDims),
}

// serverVector is a SQL expression for a random vector computed by
// Postgres, one per row of a statement over generate_series(…) g.
func serverVector(dims int) string {
	return fmt.Sprintf("(SELECT array_agg(random()::real * 2 - 1) FROM generate_series(1, %d) WHERE g > 0)", dims)
}

// initialSQL fills the tables before the sidecar first starts, so that
// its initial copy has work to do.
func initialSQL(rng *rand.Rand, items, bulk int) string {
	return fmt.Sprintf(`SELECT setseed(%g);
INSERT INTO items SELECT g, 'initial', %s FROM generate_series(1, %d) g;
INSERT INTO bulk SELECT g, %s FROM generate_series(1, %d) g;`,
		rng.Float64()*2-1, serverVector(itemsDims), items, serverVector(bulkDims), bulk)
}

// itemsGen generates the random transactions on items. Its model of the
// live keys is optimistic (a transaction lost to a fault is not undone in
// it): the statements are valid whatever the table holds, and the table,
// not the model, is the truth at the end.
type itemsGen struct {
	rng  *rand.Rand
	live []int64
	next int64
}

func newItemsGen(rng *rand.Rand, initial int) *itemsGen {
	g := &itemsGen{rng: rng, next: int64(initial) + 1}
	for id := int64(1); id <= int64(initial); id++ {
		g.live = append(g.live, id)
	}
	return g
}

func (g *itemsGen) fresh() int64 {
	id := g.next
	g.next++
	return id
}

// pick returns a live key, or a fresh one if none is left.
func (g *itemsGen) pick() int64 {
	if len(g.live) == 0 {
		return g.fresh()
	}
	return g.live[g.rng.IntN(len(g.live))]
}

func (g *itemsGen) forget(id int64) {
	if i := slices.Index(g.live, id); i >= 0 {
		g.live = slices.Delete(g.live, i, i+1)
	}
}

func (g *itemsGen) rename(from, to int64) {
	if i := slices.Index(g.live, from); i >= 0 {
		g.live[i] = to
	}
}

// vector is a valid vector literal most of the time, and sometimes one
// that cannot be indexed: NULL, the wrong length, NaN or infinite.
func (g *itemsGen) vector() string {
	switch r := g.rng.IntN(100); {
	case r < 6:
		return "NULL"
	case r < 9:
		return "'" + workload.Vector(g.rng, 3) + "'"
	case r < 11:
		return fmt.Sprintf("array_fill('NaN'::real, ARRAY[%d])", itemsDims)
	case r < 12:
		v := workload.Vector(g.rng, itemsDims)
		return "'{Infinity," + v[strings.IndexByte(v, ',')+1:] + "'"
	}
	return "'" + workload.Vector(g.rng, itemsDims) + "'"
}

func (g *itemsGen) valid() string { return "'" + workload.Vector(g.rng, itemsDims) + "'" }

// txn returns the next transaction (BEGIN … COMMIT) and the kind of
// change it exercises.
func (g *itemsGen) txn() (kind string, sql string) {
	var b []string
	add := func(format string, args ...any) { b = append(b, fmt.Sprintf(format, args...)) }
	switch r := g.rng.IntN(100); {
	case r < 22:
		kind = "insert"
		for range 1 + g.rng.IntN(6) {
			id := g.fresh()
			add("INSERT INTO items VALUES (%d, 'new', %s) ON CONFLICT (id) DO NOTHING", id, g.vector())
			g.live = append(g.live, id)
		}
	case r < 38:
		kind = "update_vector"
		for range 1 + g.rng.IntN(4) {
			add("UPDATE items SET embedding = %s WHERE id = %d", g.vector(), g.pick())
		}
	case r < 52:
		kind = "update_note" // the vector arrives as unchanged-TOAST
		for range 1 + g.rng.IntN(8) {
			add("UPDATE items SET note = 'n%d' WHERE id = %d", g.rng.IntN(1000), g.pick())
		}
	case r < 60:
		kind = "same_key_writes"
		id := g.pick()
		add("UPDATE items SET embedding = %s WHERE id = %d", g.vector(), id)
		add("UPDATE items SET note = 'twice' WHERE id = %d", id)
		add("UPDATE items SET embedding = %s WHERE id = %d", g.vector(), id)
		if g.rng.IntN(2) == 0 {
			add("DELETE FROM items WHERE id = %d", id)
			add("INSERT INTO items VALUES (%d, 'reborn', %s)", id, g.vector())
		}
	case r < 67:
		kind = "savepoint_rollback"
		id, gone := g.fresh(), g.pick()
		add("INSERT INTO items VALUES (%d, 'kept', %s)", id, g.vector())
		add("SAVEPOINT s")
		add("DELETE FROM items WHERE id = %d", gone)
		add("UPDATE items SET embedding = %s WHERE id = %d", g.vector(), id)
		add("INSERT INTO items VALUES (%d, 'rolled back', %s)", g.fresh(), g.vector())
		add("ROLLBACK TO s")
		add("UPDATE items SET note = 'after rollback' WHERE id = %d", id)
		g.live = append(g.live, id)
	case r < 79:
		kind = "key_change"
		from, to := g.pick(), g.fresh()
		switch g.rng.IntN(3) {
		case 0: // the vector stays: unchanged-TOAST under a new key
			add("UPDATE items SET id = %d WHERE id = %d", to, from)
		case 1:
			add("UPDATE items SET id = %d, embedding = %s WHERE id = %d", to, g.vector(), from)
		default:
			add("UPDATE items SET id = %d WHERE id = %d", to, from)
			add("UPDATE items SET note = 'moved' WHERE id = %d", to)
		}
		g.rename(from, to)
	case r < 89:
		kind = "delete"
		for range 1 + g.rng.IntN(4) {
			id := g.pick()
			add("DELETE FROM items WHERE id = %d", id)
			g.forget(id)
		}
	case r < 93:
		kind = "fix_vector"
		add("UPDATE items SET embedding = %s WHERE id = %d", g.valid(), g.pick())
	case r < 99 || g.rng.IntN(4) > 0: // TRUNCATE is rare: it hides what came before
		kind = "insert_then_delete"
		id := g.fresh()
		add("INSERT INTO items VALUES (%d, 'brief', %s)", id, g.vector())
		if g.rng.IntN(2) == 0 {
			add("DELETE FROM items WHERE id = %d", id)
		} else {
			to := g.fresh()
			add("UPDATE items SET id = %d WHERE id = %d", to, id)
			g.live = append(g.live, to)
		}
	default:
		kind = "truncate"
		add("TRUNCATE items")
		g.live = g.live[:0]
		for range 1 + g.rng.IntN(5) {
			id := g.fresh()
			add("INSERT INTO items VALUES (%d, 'after truncate', %s)", id, g.vector())
			g.live = append(g.live, id)
		}
	}
	return kind, "BEGIN;\n" + strings.Join(b, ";\n") + ";\nCOMMIT"
}

// bulkGen generates the transactions on bulk: one large insert of 128-d
// vectors (see big), and smaller set-based changes around it. Vectors are
// computed by Postgres from a seeded random().
type bulkGen struct {
	rng      *rand.Rand
	nextBase int64
	band     int64
}

func newBulkGen(rng *rand.Rand, initial int) *bulkGen {
	return &bulkGen{rng: rng, nextBase: int64(initial) + 1}
}

func (g *bulkGen) seed() string { return fmt.Sprintf("SELECT setseed(%g)", g.rng.Float64()*2-1) }

// big inserts rows new rows in one transaction.
func (g *bulkGen) big(rows int) string {
	from := g.nextBase
	g.nextBase += int64(rows)
	return fmt.Sprintf("BEGIN; %s; INSERT INTO bulk SELECT g, %s FROM generate_series(%d, %d) g ON CONFLICT (id) DO NOTHING; COMMIT",
		g.seed(), serverVector(bulkDims), from, g.nextBase-1)
}

func (g *bulkGen) txn() (kind string, sql string) {
	m := 20 + g.rng.IntN(200)
	r := g.rng.IntN(m)
	var body string
	switch x := g.rng.IntN(100); {
	case x < 30:
		kind = "bulk_insert"
		from := g.nextBase
		g.nextBase += int64(100 + g.rng.IntN(900))
		body = fmt.Sprintf("INSERT INTO bulk SELECT g, %s FROM generate_series(%d, %d) g ON CONFLICT (id) DO NOTHING",
			serverVector(bulkDims), from, g.nextBase-1)
	case x < 55:
		kind = "bulk_update"
		body = fmt.Sprintf("UPDATE bulk SET embedding = (SELECT array_agg(random()::real * 2 - 1) FROM generate_series(1, %d) WHERE id > 0) WHERE id %% %d = %d", bulkDims, m, r)
	case x < 70:
		kind = "bulk_key_change"
		g.band++
		body = fmt.Sprintf("UPDATE bulk SET id = id %% %d + %d WHERE id %% %d = %d", bandSize, g.band*bandSize, m, r)
	case x < 85:
		kind = "bulk_delete"
		body = fmt.Sprintf("DELETE FROM bulk WHERE id %% %d = %d", m, r)
	case x < 97:
		kind = "bulk_null"
		body = fmt.Sprintf("UPDATE bulk SET embedding = NULL WHERE id %% %d = %d", 10*m, r)
	default:
		kind = "bulk_truncate"
		from := g.nextBase
		g.nextBase += 500
		body = fmt.Sprintf("TRUNCATE bulk; INSERT INTO bulk SELECT g, %s FROM generate_series(%d, %d) g", serverVector(bulkDims), from, g.nextBase-1)
	}
	return kind, fmt.Sprintf("BEGIN; %s; %s; COMMIT", g.seed(), body)
}
