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

// TestDroppedTableIsFollowed: after DROP TABLE, the index stops
// answering within about a health check, empty, and waits, saying the
// table was dropped (the log says so too); the other table's index serves
// on. A table created again under the name is copied and followed, under
// its new OID, with no restart.
func TestDroppedTableIsFollowed(t *testing.T) {
	var logged strings.Builder
	var mu sync.Mutex
	log := slog.New(slog.NewTextHandler(io.MultiWriter(testWriter{t}, lockedWriter{&mu, &logged}), nil))
	h, ea, eb := twoTables(t, 10, Config{Logger: log})
	oldOID := ea.Status().TableOID
	h.exec(`DROP TABLE a`)
	dropped := time.Now()
	msg := waitState(t, ea, indexer.StateWaiting, "was dropped")
	t.Logf("waiting %v after DROP TABLE: %s", time.Since(dropped), msg)
	assertMentions(t, msg, "a", "was dropped", "waiting")
	if _, err := ea.Search(h.ctx, []float32{1, 2}, 1, indexer.DefaultSearchOptions()); err == nil {
		t.Error("the dropped table's index still answers")
	}
	if rows := ea.Status().Rows; rows != 0 {
		t.Errorf("the waiting index holds %d rows of the dropped table", rows)
	}
	mu.Lock()
	if !strings.Contains(logged.String(), "was dropped") {
		t.Errorf("nothing logged about the dropped table: %q", logged.String())
	}
	mu.Unlock()
	h.exec(`INSERT INTO b VALUES (11, ARRAY[11, 2]::real[])`)
	h.assertConverged(eb, 2)

	h.exec(`CREATE TABLE a (id int PRIMARY KEY, v real[], note text);
		INSERT INTO a SELECT g, ARRAY[g, 5]::real[], 'new' FROM generate_series(1001, 1020) g`)
	waitCopied(t, ea, 20)
	h.exec(`INSERT INTO a VALUES (1021, '{1021,5}'); DELETE FROM a WHERE id = 1001`)
	h.assertConverged(ea, 2)
	assertOnlyKeysAbove(t, h.ix, ea, 1000)
	if st := ea.Status(); st.TableOID == oldOID || st.TableOID == 0 {
		t.Errorf("the index follows OID %d, want the new table's (the old was %d)", st.TableOID, oldOID)
	}
	select {
	case err := <-h.done:
		t.Fatalf("the replicator stopped: %v", err)
	default:
	}
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
