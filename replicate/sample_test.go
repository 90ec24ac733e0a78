package replicate

import (
	"context"
	"testing"
	"time"
)

// TestSampleFollowsRowFilter: an index of a shard (where=) trains on rows
// of its shard only, and sizes itself by their number, not the table's.
func TestSampleFollowsRowFilter(t *testing.T) {
	h := newHarness(t, `CREATE TABLE items (id bigint PRIMARY KEY, v real[]);
		INSERT INTO items SELECT g, array_fill(g::real, ARRAY[4]) FROM generate_series(1, 20000) g;
		ANALYZE items`)
	e := h.add("items_v=public.items(v) key=id metric=l2 kind=ivf where='id % 4 = 0'")
	var oid uint32
	if err := h.conn.QueryRow(h.ctx, "SELECT 'public.items'::regclass::oid").Scan(&oid); err != nil {
		t.Fatal(err)
	}
	tb := &table{schema: "public", name: "items", oid: oid, where: e.Spec().Where, vectors: map[string]*column{"v": {name: "v"}}}
	r := &Replicator{cfg: Config{Source: h.dsn, ReceiveTimeout: time.Minute}, log: testLogger(t)}
	samples, rows, err := r.sample(context.Background(), tb, []Index{entry{e}})
	if err != nil {
		t.Fatal(err)
	}
	if rows != 5000 {
		t.Errorf("the shard holds 5,000 rows, sample says %d", rows)
	}
	if len(samples[0]) == 0 {
		t.Fatal("empty sample")
	}
	for _, v := range samples[0] {
		if int(v[0])%4 != 0 {
			t.Fatalf("sampled row %v is outside the shard", v[0])
		}
	}
	t.Logf("%d rows sampled of %d", len(samples[0]), rows)
}

// TestSampleSizesGrownTable: a table that has tripled since its last
// ANALYZE is sized as it is now, not as the planner's reltuples left it;
// an index trained for the old size would be rebuilt again as soon as its
// rebuild's copy ended.
func TestSampleSizesGrownTable(t *testing.T) {
	h := newHarness(t, `CREATE TABLE items (id bigint PRIMARY KEY, v real[]) WITH (autovacuum_enabled = false);
		INSERT INTO items SELECT g, array_fill(g::real, ARRAY[4]) FROM generate_series(1, 20000) g;
		ANALYZE items;
		INSERT INTO items SELECT g, array_fill(g::real, ARRAY[4]) FROM generate_series(20001, 60000) g`)
	e := h.add("items_v=public.items(v) key=id metric=l2 kind=ivf")
	var oid uint32
	if err := h.conn.QueryRow(h.ctx, "SELECT 'public.items'::regclass::oid").Scan(&oid); err != nil {
		t.Fatal(err)
	}
	tb := &table{schema: "public", name: "items", oid: oid, vectors: map[string]*column{"v": {name: "v"}}}
	r := &Replicator{cfg: Config{Source: h.dsn, ReceiveTimeout: time.Minute}, log: testLogger(t)}
	_, rows, err := r.sample(context.Background(), tb, []Index{entry{e}})
	if err != nil {
		t.Fatal(err)
	}
	if rows < 54000 || rows > 66000 {
		t.Errorf("the table holds 60,000 rows (20,000 at its last ANALYZE), sample says %d", rows)
	}
}
