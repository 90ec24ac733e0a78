package replicate

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pglogrepl"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgproto3"
	"github.com/vecside/vecside/indexer"
)

// stream runs START_REPLICATION from start and applies the stream until
// ctx ends or the connection fails.
func (r *Replicator) stream(ctx context.Context, repl *pgconn.PgConn, start indexer.LSN, dec *decoder, statusEvery time.Duration) error {
	pub := fmt.Sprintf("publication_names '%s'", r.cfg.Name)
	qctx, cancel := r.bounded(ctx)
	defer cancel()
	err := pglogrepl.StartReplication(qctx, repl, r.cfg.Name, start, pglogrepl.StartReplicationOptions{
		Mode:       pglogrepl.LogicalReplication,
		PluginArgs: []string{"proto_version '1'", pub, "binary 'true'", "messages 'true'"},
	})
	if err != nil {
		return fmt.Errorf("START_REPLICATION from %s: %w", start, err)
	}
	r.streamed.Store(true)
	r.log.Info("streaming", "slot", r.cfg.Name, "from", start.String())
	received := start
	nextStatus := time.Now()
	// heard is when the last message from the server was handled; pinged,
	// whether a status update has asked it to answer since.
	heard, pinged := time.Now(), false
	timeout := r.cfg.ReceiveTimeout
	for {
		now := time.Now()
		if now.Sub(heard) >= timeout {
			return fmt.Errorf("receiving from the slot: nothing from the server for %s, even when asked to answer (--receive-timeout): presuming the connection dead", timeout)
		}
		ping := !pinged && now.Sub(heard) >= timeout/2
		if ping || !now.Before(nextStatus) {
			if err := r.sendStatus(ctx, repl, received, ping); err != nil {
				return err
			}
			pinged = pinged || ping
			nextStatus = now.Add(statusEvery)
		}
		wake := heard.Add(timeout)
		if !pinged {
			wake = heard.Add(timeout / 2)
		}
		if nextStatus.Before(wake) {
			wake = nextStatus
		}
		rctx, cancel := context.WithDeadline(ctx, wake)
		msg, err := repl.ReceiveMessage(rctx)
		cancel()
		if err != nil {
			if ctx.Err() != nil {
				return ctx.Err()
			}
			if pgconn.Timeout(err) {
				continue
			}
			return fmt.Errorf("receiving from the slot: %w", err)
		}
		pinged = false
		switch msg := msg.(type) {
		case *pgproto3.CopyData:
			if len(msg.Data) == 0 {
				break
			}
			switch msg.Data[0] {
			case pglogrepl.PrimaryKeepaliveMessageByteID:
				ka, err := pglogrepl.ParsePrimaryKeepaliveMessage(msg.Data[1:])
				if err != nil {
					return fmt.Errorf("keepalive: %w", err)
				}
				end := ka.ServerWALEnd
				received = max(received, end)
				if !dec.inTx {
					// Everything before the sender's position has been sent:
					// with no transaction open, the indexes are current to it.
					dec.idle(end)
				}
				if ka.ReplyRequested {
					nextStatus = time.Time{}
				}
			case pglogrepl.XLogDataByteID:
				xld, err := pglogrepl.ParseXLogData(msg.Data[1:])
				if err != nil {
					return fmt.Errorf("XLogData: %w", err)
				}
				received = max(received, xld.WALStart+indexer.LSN(len(xld.WALData)))
				if err := dec.handle(ctx, xld.WALData); err != nil {
					return err
				}
			}
		case *pgproto3.ErrorResponse:
			return fmt.Errorf("replication stream: %w", pgconn.ErrorResponseToPgError(msg))
		case *pgproto3.CopyDone:
			return fmt.Errorf("replication stream ended by the server")
		}
		// After applying: time spent applying is no silence of the server's.
		heard = time.Now()
	}
}

// sendStatus reports positions to the walsender, asking it to answer at
// once if ping. write is what has been received; flush and apply are the
// covered LSN, never zero: pglogrepl replaces a zero with the write
// position, which would confirm changes that are not durable. An index in
// error or waiting holds nothing back: when every index is, what has been
// received is confirmed, or the slot would retain WAL for none of them.
func (r *Replicator) sendStatus(ctx context.Context, repl *pgconn.PgConn, received indexer.LSN, ping bool) error {
	covered := r.Covered()
	if r.noneFollows() {
		covered = max(covered, received)
	}
	err := pglogrepl.SendStandbyStatusUpdate(ctx, repl, pglogrepl.StandbyStatusUpdate{
		WALWritePosition: max(received, covered),
		WALFlushPosition: covered,
		WALApplyPosition: covered,
		ReplyRequested:   ping,
	})
	if err != nil {
		return fmt.Errorf("sending status update: %w", err)
	}
	r.stats.setConfirmed(covered)
	return nil
}

// noneFollows reports whether every index is in error or waiting.
func (r *Replicator) noneFollows() bool {
	for _, e := range r.entries() {
		if state, _ := e.State(); state.Follows() {
			return false
		}
	}
	return true
}

// idle advances every index to end: the stream has nothing pending.
func (d *decoder) idle(end indexer.LSN) {
	for _, t := range d.tables {
		for _, e := range t.entries {
			e.Stream().SetApplied(end)
		}
	}
}
