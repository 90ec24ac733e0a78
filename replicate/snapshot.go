package replicate

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pglogrepl"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgtype"
	"github.com/vecside/vecside/indexer"
)

// createSlot creates a logical replication slot and exports a snapshot
// that shows exactly the table contents the slot's stream starts after.
// The snapshot lives only while repl stays idle: copy under it before
// sending anything else on repl. A temporary slot is dropped when repl
// closes: per-table syncs use one only for its snapshot.
func createSlot(ctx context.Context, repl *pgconn.PgConn, slot string, temporary bool, timeout time.Duration) (pglogrepl.CreateReplicationSlotResult, error) {
	// Slot creation waits for every running transaction to end: bound it.
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	res, err := pglogrepl.CreateReplicationSlot(ctx, repl, slot, "pgoutput",
		pglogrepl.CreateReplicationSlotOptions{Temporary: temporary, SnapshotAction: "EXPORT_SNAPSHOT", Mode: pglogrepl.LogicalReplication})
	if err != nil {
		return res, fmt.Errorf("creating replication slot %s (it waits for running transactions to finish; timeout %s): %w", slot, timeout, err)
	}
	return res, nil
}

// copyJob copies one table into some of its entries under an exported
// snapshot.
type copyJob struct {
	source   string // connection string: each reader opens its own
	snapshot string
	table    *table
	entries  []Index // the entries being synced; others on the table keep their state
	readers  int     // parallel ctid ranges for large tables
	progress func(phase Phase, rows, estimate int64)
	// stall is how long the copy may go without a row before its
	// connections are presumed dead (a network partition sends no error).
	stall time.Duration
}

// rangePages is the least number of heap pages (8 MB) worth a reader of
// its own.
const rangePages = 1024

// run copies the table and returns the rows read and the planner's
// estimate of them. Every reader imports the same snapshot; a large plain
// table is split into ctid ranges (TID range scans, PG14+), the last one
// open-ended so that pages added since the estimate are read too.
func (j copyJob) run(ctx context.Context) (rows, estimate int64, err error) {
	pctx, cancelPlan := context.WithTimeout(ctx, j.stall)
	ranges, estimate, err := j.plan(pctx)
	cancelPlan()
	if err != nil {
		return 0, 0, err
	}
	var copied atomic.Int64
	var wg sync.WaitGroup
	errs := make(chan error, len(ranges))
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	stop := make(chan struct{})
	watching := make(chan struct{})
	go func() {
		defer close(watching)
		j.watch(stop, &copied, estimate, cancel)
	}()
	for _, where := range ranges {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := j.copyRange(ctx, where, &copied); err != nil {
				errs <- err
				cancel(err)
			}
		}()
	}
	wg.Wait()
	close(stop)
	<-watching // no progress report may overlap the caller's next
	close(errs)
	if err := <-errs; err != nil {
		if cause := context.Cause(ctx); errors.Is(err, context.Canceled) && cause != nil {
			err = cause
		}
		return copied.Load(), estimate, fmt.Errorf("copying %s: %w", j.table.qualified(), err)
	}
	return copied.Load(), estimate, nil
}

// watch reports progress every second until stop closes, and cancels the
// copy when no row has come for j.stall.
func (j copyJob) watch(stop <-chan struct{}, copied *atomic.Int64, estimate int64, cancel context.CancelCauseFunc) {
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	last, moved := int64(0), time.Now()
	for {
		select {
		case <-stop:
			return
		case now := <-tick.C:
			n := copied.Load()
			if n != last {
				last, moved = n, now
			} else if now.Sub(moved) >= j.stall {
				cancel(fmt.Errorf("no row for %s (--receive-timeout): presuming a connection dead", j.stall))
				return
			}
			j.progress(PhaseCopying, n, estimate)
		}
	}
}

// plan splits the table into ctid ranges by its page count now (a table
// grown since its last ANALYZE would leave most of its pages to the last
// range).
func (j copyJob) plan(ctx context.Context) ([]string, int64, error) {
	conn, err := pgx.Connect(ctx, j.source)
	if err != nil {
		return nil, 0, err
	}
	defer conn.Close(context.Background())
	var pages, tuples int64
	if err := conn.QueryRow(ctx, sizeNow, j.table.oid).Scan(&pages, &tuples); err != nil {
		return nil, 0, err
	}
	n := min(int64(max(j.readers, 1)), pages/rangePages)
	if j.table.partitioned || n < 2 {
		return []string{""}, tuples, nil
	}
	ranges := make([]string, n)
	step := pages / n
	for i := range ranges {
		lo, hi := int64(i)*step, int64(i+1)*step
		ranges[i] = fmt.Sprintf(" WHERE ctid >= '(%d,0)'::tid", lo)
		if i < len(ranges)-1 {
			ranges[i] += fmt.Sprintf(" AND ctid < '(%d,0)'::tid", hi)
		}
	}
	return ranges, tuples, nil
}

// copyRange copies the rows matching where with a binary COPY of the key
// and vector columns, under the snapshot.
func (j copyJob) copyRange(ctx context.Context, where string, copied *atomic.Int64) error {
	conn, err := pgx.Connect(ctx, j.source)
	if err != nil {
		return err
	}
	defer conn.Close(context.Background())
	tx, err := conn.BeginTx(ctx, pgx.TxOptions{IsoLevel: pgx.RepeatableRead, AccessMode: pgx.ReadOnly})
	if err != nil {
		return err
	}
	defer tx.Rollback(ctx)
	if _, err := tx.Exec(ctx, "SET TRANSACTION SNAPSHOT '"+j.snapshot+"'"); err != nil {
		return fmt.Errorf("importing snapshot %s: %w", j.snapshot, err)
	}
	t := j.table
	cols := make([]string, len(t.columns))
	for i, c := range t.columns {
		cols[i] = indexer.QuoteIdent(c)
	}
	only := "ONLY "
	if t.partitioned {
		only = ""
	}
	// Each row's xmin comes last: the index records it as the xid that
	// wrote the row (see indexer's xid.go).
	sql := "COPY (SELECT " + strings.Join(cols, ", ") + ", xmin FROM " + only + t.qualified() + t.filter(where) + ") TO STDOUT (FORMAT binary)"
	pr, pw := io.Pipe()
	done := make(chan error, 1)
	go func() {
		_, err := conn.PgConn().CopyTo(ctx, pw, sql)
		pw.CloseWithError(err)
		done <- err
	}()
	decodeErr := j.load(pr, copied)
	pr.CloseWithError(fmt.Errorf("copy aborted"))
	if copyErr := <-done; copyErr != nil && decodeErr == nil {
		return copyErr
	}
	if decodeErr != nil {
		return decodeErr
	}
	return tx.Commit(ctx)
}

// load decodes a binary COPY of the table's published columns and xmin
// into the entries being synced.
func (j copyJob) load(r io.Reader, copied *atomic.Int64) error {
	cr, err := newCopyReader(r)
	if err != nil {
		return err
	}
	t := j.table
	pos := make([]int, len(j.entries))
	for i, e := range j.entries {
		pos[i] = t.columnIndex(e.Spec().Column)
	}
	for {
		ok, err := cr.next()
		if err != nil || !ok {
			return err
		}
		if len(cr.fields) != len(t.columns)+1 {
			return fmt.Errorf("COPY row has %d fields, want %d", len(cr.fields), len(t.columns)+1)
		}
		xmin, err := decodeXID(cr.fields[len(t.columns)])
		if err != nil {
			return err
		}
		key, err := t.keyType.DecodeBinary(cr.fields[0])
		if err != nil {
			return err
		}
		for i, e := range j.entries {
			e.Copies().CopyUpsert(key, decodeVector(e, cr.fields[pos[i]], true), xmin)
		}
		copied.Add(1)
	}
}

// decodeXID decodes an xid in binary form.
func decodeXID(raw []byte) (uint32, error) {
	if len(raw) != 4 {
		return 0, fmt.Errorf("xmin of %d bytes, want 4", len(raw))
	}
	return binary.BigEndian.Uint32(raw), nil
}

// decodeVector decodes a vector value, binary or text; nil means NULL or
// not decodable, which the entry counts as skipped.
func decodeVector(e Index, raw []byte, binary bool) []float32 {
	format := int16(pgtype.TextFormatCode)
	if binary {
		format = pgtype.BinaryFormatCode
	}
	v, err := e.VectorType().Decode(format, raw)
	if err != nil {
		return nil
	}
	return v
}
