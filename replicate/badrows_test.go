package replicate

import (
	"testing"

	"github.com/vecside/vecside/indexer"
)

// TestOversizedRowKeepsStreaming: a real[] column of an empty table, a
// quantized index with its dimension left to the first row (stored
// exactly here, so that convergence compares vectors bit for bit), and a first row
// of 70,000 elements, more than any index holds. The row is skipped, the
// stream goes on (it used to replay that transaction forever, holding the
// slot's WAL), and the rows after it fix the dimension and are indexed.
func TestOversizedRowKeepsStreaming(t *testing.T) {
	h := newHarness(t, `CREATE TABLE items (id bigint PRIMARY KEY, v real[])`)
	entries := []*indexer.Entry{
		h.add("items_ivf=items(v) key=id metric=l2 kind=ivf store=float"),
		h.add("items_hnsw=items(v) key=id metric=cosine kind=hnsw store=float"),
	}
	h.start(Config{})
	for _, e := range entries {
		waitReady(t, e)
	}
	h.exec(`INSERT INTO items SELECT 1, array_fill(0.5::real, ARRAY[70000])`)
	h.exec(`INSERT INTO items SELECT g, array_fill(g::real, ARRAY[4]) FROM generate_series(2, 50) g`)
	h.exec(`UPDATE items SET v = array_fill(1::real, ARRAY[4]) WHERE id = 1`)
	for _, e := range entries {
		h.assertConverged(e, 4)
		if st := e.Status(); st.State != indexer.StateReady || st.Rows != 50 || st.Skipped != 0 || st.Dims != 4 {
			t.Errorf("index %s: state %s (%s), rows %d, skipped %d, dims %d; want ready, 50, 0, 4", st.Name, st.State, st.Error, st.Rows, st.Skipped, st.Dims)
		}
	}
}
