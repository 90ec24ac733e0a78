package replicate

import (
	"io"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

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

// TestDroppedTableFailsItsIndex: after DROP TABLE, the index stops
// answering within about a health check (1 s by default), says the table
// was dropped, and the log says so too; the other table's index serves on.
func TestDroppedTableFailsItsIndex(t *testing.T) {
	var logged strings.Builder
	var mu sync.Mutex
	log := slog.New(slog.NewTextHandler(io.MultiWriter(testWriter{t}, lockedWriter{&mu, &logged}), nil))
	h, ea, eb := twoTables(t, 10, Config{Logger: log})
	h.exec(`DROP TABLE a`)
	dropped := time.Now()
	msg := waitFailed(t, ea, 5*time.Second)
	t.Logf("failed %v after DROP TABLE: %s", time.Since(dropped), msg)
	assertMentions(t, msg, "a", "was dropped")
	if _, err := ea.Search(h.ctx, []float32{1, 2}, 1, indexer.DefaultSearchOptions()); err == nil {
		t.Error("the dropped table's index still answers")
	}
	mu.Lock()
	if !strings.Contains(logged.String(), "was dropped") {
		t.Errorf("nothing logged about the dropped table: %q", logged.String())
	}
	mu.Unlock()
	h.exec(`INSERT INTO b VALUES (11, ARRAY[11, 2]::real[])`)
	h.assertConverged(eb, 2)
}

type lockedWriter struct {
	mu *sync.Mutex
	w  io.Writer
}

func (l lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}
