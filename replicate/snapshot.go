package replicate

import (
	"context"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/jackc/pglogrepl"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/vecside/vecside/indexer"
)

// createSlot creates the logical replication slot and exports a snapshot
// that shows exactly the table contents the slot's stream starts after.
// The snapshot lives only while repl stays idle: copy under it before
// sending anything else on repl.
func createSlot(ctx context.Context, repl *pgconn.PgConn, slot string, timeout time.Duration) (pglogrepl.CreateReplicationSlotResult, error) {
	// Slot creation waits for every running transaction to end: bound it.
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	res, err := pglogrepl.CreateReplicationSlot(ctx, repl, slot, "pgoutput",
		pglogrepl.CreateReplicationSlotOptions{SnapshotAction: "EXPORT_SNAPSHOT", Mode: pglogrepl.LogicalReplication})
	if err != nil {
		return res, fmt.Errorf("creating replication slot %s (it waits for running transactions to finish; timeout %s): %w", slot, timeout, err)
	}
	return res, nil
}

// copyTable reads every row of t under the exported snapshot with a binary
// COPY of the key and vector columns, feeding each entry of t. progress is
// called every 100,000 rows and at the end with the rows copied so far.
func copyTable(ctx context.Context, conn *pgx.Conn, snapshot string, t *table, progress func(rows int64)) error {
	tx, err := conn.BeginTx(ctx, pgx.TxOptions{IsoLevel: pgx.RepeatableRead, AccessMode: pgx.ReadOnly})
	if err != nil {
		return err
	}
	defer tx.Rollback(ctx)
	if _, err := tx.Exec(ctx, "SET TRANSACTION SNAPSHOT '"+snapshot+"'"); err != nil {
		return fmt.Errorf("importing snapshot %s: %w", snapshot, err)
	}
	cols := make([]string, len(t.columns))
	for i, c := range t.columns {
		cols[i] = indexer.QuoteIdent(c)
	}
	sql := "COPY (SELECT " + strings.Join(cols, ", ") + " FROM ONLY " + t.qualified() + ") TO STDOUT (FORMAT binary)"
	if t.partitioned {
		sql = strings.Replace(sql, "FROM ONLY ", "FROM ", 1)
	}
	pr, pw := io.Pipe()
	done := make(chan error, 1)
	go func() {
		_, err := conn.PgConn().CopyTo(ctx, pw, sql)
		pw.CloseWithError(err)
		done <- err
	}()
	rows, decodeErr := t.loadCopy(pr, progress)
	pr.CloseWithError(fmt.Errorf("copy aborted"))
	copyErr := <-done
	if decodeErr != nil {
		return fmt.Errorf("copying %s: %w", t.qualified(), decodeErr)
	}
	if copyErr != nil {
		return fmt.Errorf("copying %s: %w", t.qualified(), copyErr)
	}
	progress(rows)
	return tx.Commit(ctx)
}

// loadCopy decodes a binary COPY of t's published columns into its entries.
func (t *table) loadCopy(r io.Reader, progress func(rows int64)) (int64, error) {
	cr, err := newCopyReader(r)
	if err != nil {
		return 0, err
	}
	var rows int64
	for {
		ok, err := cr.next()
		if err != nil || !ok {
			return rows, err
		}
		if len(cr.fields) != len(t.columns) {
			return rows, fmt.Errorf("COPY row has %d fields, want %d", len(cr.fields), len(t.columns))
		}
		key, err := t.keyType.DecodeBinary(cr.fields[0])
		if err != nil {
			return rows, err
		}
		for _, e := range t.entries {
			raw := cr.fields[t.columnIndex(e.Spec().Column)]
			e.Upsert(key, decodeVector(e, raw, true))
		}
		rows++
		if rows%100000 == 0 {
			progress(rows)
		}
	}
}

// columnIndex is the position of a published column in t.columns.
func (t *table) columnIndex(column string) int {
	for i, c := range t.columns {
		if c == column {
			return i
		}
	}
	panic("replicate: column " + column + " is not published")
}

// decodeVector decodes a vector value, binary or text; nil means NULL or
// not decodable, which the entry counts as skipped.
func decodeVector(e *indexer.Entry, raw []byte, binary bool) []float32 {
	if raw == nil {
		return nil
	}
	var v []float32
	var err error
	if binary {
		v, err = e.VectorType().DecodeBinary(raw)
	} else {
		v, err = e.VectorType().DecodeText(string(raw))
	}
	if err != nil {
		return nil
	}
	return v
}
