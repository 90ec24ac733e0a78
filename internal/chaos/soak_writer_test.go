package chaos

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/vecside/vecside/indexer"
	"github.com/vecside/vecside/internal/pgvalue"
	"github.com/vecside/vecside/internal/workload"
)

// soakWriter writes the soak's changes: transactions of soakTxnRows rows,
// each an insert (30%), a vector update (40%) or a delete (30%), so that
// the table keeps its size. Inserted keys are new, never reused. Postgres
// is not restarted in a soak, so a failed transaction is an error; the
// model is mended (its deletes did not happen) and the writer goes on.
type soakWriter struct {
	dsn    string
	conn   *pgx.Conn
	rng    *rand.Rand
	live   []int64 // the table's keys
	next   int64   // the next new key
	ledger *ledger
}

func newSoakWriter(ctx context.Context, dsn string, rows int, l *ledger) (*soakWriter, error) {
	w := &soakWriter{dsn: dsn, rng: rand.New(rand.NewPCG(2, 0x77726974)), next: int64(rows) + 1, ledger: l}
	for id := int64(1); id <= int64(rows); id++ {
		w.live = append(w.live, id)
	}
	return w, nil
}

func (w *soakWriter) close() {
	if w.conn != nil {
		w.conn.Close(context.Background())
		w.conn = nil
	}
}

// take removes and returns a random live key.
func (w *soakWriter) take() int64 {
	i := w.rng.IntN(len(w.live))
	id := w.live[i]
	w.live[i] = w.live[len(w.live)-1]
	w.live = w.live[:len(w.live)-1]
	return id
}

// txn writes one transaction and records it in the ledger, in one round
// trip: the statements, COMMIT, then pg_current_wal_lsn(), which is past
// the commit record.
func (w *soakWriter) txn(ctx context.Context) error {
	var stmts []string
	var deleted []int64
	var touched []int64 // updated, back to live after the statement list is built
	for range soakTxnRows {
		v := "'" + workload.Vector(w.rng, soakDims) + "'"
		switch r := w.rng.IntN(10); {
		case r < 3 || len(w.live) < 100:
			id := w.next
			w.next++
			w.ledger.writing(id)
			stmts = append(stmts, fmt.Sprintf("INSERT INTO soak VALUES (%d, %d, %s)", id, w.rng.IntN(10), v))
			touched = append(touched, id)
		case r < 7:
			id := w.take()
			stmts = append(stmts, fmt.Sprintf("UPDATE soak SET embedding = %s, cat = %d WHERE id = %d", v, w.rng.IntN(10), id))
			touched = append(touched, id)
		default:
			id := w.take()
			stmts = append(stmts, fmt.Sprintf("DELETE FROM soak WHERE id = %d", id))
			deleted = append(deleted, id)
		}
	}
	lsn, err := w.exec(ctx, "BEGIN;\n"+strings.Join(stmts, ";\n")+";\nCOMMIT;\nSELECT pg_current_wal_lsn()::text")
	at := time.Now()
	w.live = append(w.live, touched...)
	if err != nil {
		// Nothing committed: the deleted keys are still there. (An insert's
		// key stays unused, which is allowed.)
		w.live = append(w.live, deleted...)
		return err
	}
	w.ledger.committed(at, lsn, deleted)
	return nil
}

func (w *soakWriter) exec(ctx context.Context, sql string) (indexer.LSN, error) {
	if w.conn == nil {
		conn, err := pgx.Connect(ctx, w.dsn)
		if err != nil {
			return 0, err
		}
		w.conn = conn
	}
	results, err := w.conn.PgConn().Exec(ctx, sql).ReadAll()
	if err != nil {
		w.close() // a failed statement leaves the transaction open and aborted
		return 0, err
	}
	last := results[len(results)-1]
	if len(last.Rows) != 1 {
		return 0, fmt.Errorf("soak writer: pg_current_wal_lsn() returned %d rows", len(last.Rows))
	}
	return indexer.ParseLSN(string(last.Rows[0][0]))
}

// tableKeys lists what a table's keys say against the ledger: a key it
// deleted, a key above any written.
func (l *ledger) tableKeys(ts tableState) []string {
	var bad []string
	l.mu.RLock()
	defer l.mu.RUnlock()
	for key := range ts.valid {
		id, err := strconv.ParseInt(pgvalue.KeyInt8.FormatKey(key), 10, 64)
		if err != nil {
			bad = append(bad, err.Error())
		} else if _, gone := l.deleted[id]; gone || id > l.maxID {
			bad = append(bad, fmt.Sprintf("the table holds key %d, deleted or never written", id))
		}
		if len(bad) == 10 {
			break
		}
	}
	return bad
}

// usage is the running sidecar's process id, resident set size in bytes
// and CPU time in clock ticks (user and system, /proc/PID/stat); zeros if
// it is not running.
func (s *soak) usage() (pid int, rss, ticks int64) {
	pid = s.proc.pid()
	if pid == 0 {
		return 0, 0, 0
	}
	status, err1 := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	stat, err2 := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err1 != nil || err2 != nil {
		return 0, 0, 0
	}
	for _, line := range strings.Split(string(status), "\n") {
		if rest, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			kb, _ := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(rest), "kB")), 10, 64)
			rss = kb << 10
		}
	}
	// Fields after the command's closing parenthesis: state is the first,
	// utime and stime the 12th and 13th.
	if f := strings.Fields(string(stat[strings.LastIndexByte(string(stat), ')')+1:])); len(f) > 12 {
		user, _ := strconv.ParseInt(f[11], 10, 64)
		system, _ := strconv.ParseInt(f[12], 10, 64)
		ticks = user + system
	}
	return pid, rss, ticks
}

// clockTicks is USER_HZ, the unit of /proc/PID/stat's times: 100 on
// Linux.
const clockTicks = 100

// load1 is the machine's one-minute load average.
func load1() float64 {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return 0
	}
	f, _ := strconv.ParseFloat(strings.Fields(string(b))[0], 64)
	return f
}
