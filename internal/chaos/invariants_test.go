package chaos

import (
	"context"
	"fmt"
	"io"
	"math"
	"strconv"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/vecside/vecside/indexer"
	"github.com/vecside/vecside/internal/pgvalue"
)

// slotPosition reads the slot's confirmed_flush_lsn and restart_lsn.
func slotPosition(ctx context.Context, db *pgClient, slot string) (confirmed, restart indexer.LSN, err error) {
	_, err = db.do(ctx, func(conn *pgx.Conn) error {
		var c, r string
		err := conn.QueryRow(ctx, `SELECT confirmed_flush_lsn::text, restart_lsn::text FROM pg_replication_slots WHERE slot_name = $1`, slot).Scan(&c, &r)
		if err != nil {
			return err
		}
		if confirmed, err = indexer.ParseLSN(c); err != nil {
			return err
		}
		restart, err = indexer.ParseLSN(r)
		return err
	})
	return confirmed, restart, err
}

func currentLSN(ctx context.Context, db *pgClient) (indexer.LSN, error) {
	var lsn indexer.LSN
	_, err := db.do(ctx, func(conn *pgx.Conn) error {
		var s string
		if err := conn.QueryRow(ctx, `SELECT pg_current_wal_lsn()::text`).Scan(&s); err != nil {
			return err
		}
		var err error
		lsn, err = indexer.ParseLSN(s)
		return err
	})
	return lsn, err
}

// allReady returns the lowest applied and covered LSNs when each of the
// process's indexes is ready; ok is false otherwise.
func (p *process) allReady(st []indexStatus) (applied, covered indexer.LSN, ok bool) {
	if len(st) != p.indexes {
		return 0, 0, false
	}
	applied, covered = math.MaxUint64, math.MaxUint64
	for _, s := range st {
		if s.state != "ready" {
			return 0, 0, false
		}
		applied, covered = min(applied, s.applied), min(covered, s.covered)
	}
	return applied, covered, true
}

// sampler checks, while the run goes on, that the slot never confirmed
// more than the sidecar's durable state covers: it reads the slot's
// confirmed_flush_lsn, then the sidecar's covered LSN (the lowest
// covered_lsn of its indexes). Covered only grows, also across a SIGKILL
// (the new process starts from what the old one made durable), so a
// confirmed position read first and above it is a violation. Samples
// where the sidecar is unreachable, copying, or has nothing durable yet
// are not counted.
type sampler struct {
	proc *process
	db   *pgClient
	slot string

	mu         sync.Mutex
	samples    int
	checked    int
	violations []string
}

func (s *sampler) run(ctx context.Context) {
	for ctx.Err() == nil {
		s.sample(ctx)
		select {
		case <-ctx.Done():
		case <-time.After(100 * time.Millisecond):
		}
	}
}

func (s *sampler) sample(ctx context.Context) {
	qctx, cancel := context.WithTimeout(ctx, 3*time.Second)
	defer cancel()
	confirmed, _, err := slotPosition(qctx, s.db, s.slot)
	if err != nil {
		return // Postgres restarting, or no slot yet
	}
	st, err := s.proc.status(qctx)
	s.mu.Lock()
	defer s.mu.Unlock()
	s.samples++
	if err != nil {
		return
	}
	_, covered, ok := s.proc.allReady(st)
	if !ok || covered == 0 {
		return
	}
	s.checked++
	if confirmed > covered {
		s.violations = append(s.violations, fmt.Sprintf("confirmed_flush_lsn %s > covered %s (%+v)", confirmed, covered, st))
	}
}

func (s *sampler) result() (samples, checked int, violations []string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.samples, s.checked, append([]string(nil), s.violations...)
}

// waitApplied polls the sidecar, bounded, until every index is ready and
// has applied lsn.
func waitApplied(ctx context.Context, proc *process, lsn indexer.LSN, limit time.Duration) ([]indexStatus, error) {
	ctx, cancel := context.WithTimeout(ctx, limit)
	defer cancel()
	var last []indexStatus
	var lastErr error
	for {
		st, err := proc.status(ctx)
		if err == nil {
			last = st
			if applied, _, ok := proc.allReady(st); ok && applied >= lsn {
				return st, nil
			}
		} else {
			lastErr = err
		}
		select {
		case <-ctx.Done():
			return nil, fmt.Errorf("the sidecar did not apply %s within %s: last status %+v, last error %v", lsn, limit, last, lastErr)
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// caughtUp waits, bounded, until the sidecar has applied everything
// written so far.
func caughtUp(ctx context.Context, db *pgClient, proc *process, limit time.Duration) ([]indexStatus, error) {
	end, err := currentLSN(ctx, db)
	if err != nil {
		return nil, err
	}
	return waitApplied(ctx, proc, end, limit)
}

// tableState is what a table holds: valid vectors by canonical key, and
// the number of rows whose vector cannot be indexed.
type tableState struct {
	valid   map[string][]float32
	invalid int
}

// readTable reads every row of table and sorts it by the sidecar's
// rules: a vector is indexable when it is not NULL, has dims elements,
// and all of them are finite.
func readTable(ctx context.Context, db *pgClient, table string, dims int) (tableState, error) {
	var ts tableState
	_, err := db.do(ctx, func(conn *pgx.Conn) error {
		ts = tableState{valid: map[string][]float32{}}
		rows, err := conn.Query(ctx, "SELECT id, embedding FROM "+table)
		if err != nil {
			return err
		}
		defer rows.Close()
		for rows.Next() {
			var id int64
			var vec []float32
			if err := rows.Scan(&id, &vec); err != nil {
				return err
			}
			key, err := pgvalue.KeyInt8.DecodeText(strconv.FormatInt(id, 10))
			if err != nil {
				return err
			}
			if _, dup := ts.valid[key]; dup {
				return fmt.Errorf("%s: key %d twice", table, id)
			}
			if vec == nil || len(vec) != dims || pgvalue.CheckFinite(vec) != nil {
				ts.invalid++
				continue
			}
			ts.valid[key] = vec
		}
		return rows.Err()
	})
	return ts, err
}

// loadCheckpoint loads an index from the checkpoint a sidecar left in
// dir, as a restarting sidecar would, and returns it with the LSN it
// covers.
func loadCheckpoint(dir, def string) (*indexer.Entry, indexer.LSN, error) {
	spec, err := indexer.ParseSpec(def)
	if err != nil {
		return nil, 0, err
	}
	e, err := indexer.New().Add(spec)
	if err != nil {
		return nil, 0, err
	}
	h, err := indexer.ReadCheckpoint(e.Durable().CheckpointPath(dir), func(_ indexer.CheckpointHeader, body io.Reader) error {
		_, err := io.Copy(io.Discard, body)
		return err
	})
	if err != nil {
		return nil, 0, err
	}
	lsn, err := e.Durable().LoadCheckpoint(dir, indexer.Source{SystemID: h.SystemID, Timeline: h.Timeline, Slot: h.Slot}, indexer.ReadIdleState(dir))
	return e, lsn, err
}

// compareIndex lists how e differs from the table: missing, extra or
// different keys (vectors compared bit for bit where the index keeps
// them), duplicate keys, and the count of rows left out.
func compareIndex(e *indexer.Entry, want tableState) []string {
	var diffs []string
	report := func(format string, args ...any) {
		if len(diffs) < 10 {
			diffs = append(diffs, fmt.Sprintf(format, args...))
		}
	}
	// Vectors are compared where the index keeps them (store=float): then
	// every key must have one.
	got := map[string][]float32{}
	seen, withVector := 0, 0
	e.Keys(func(key string) {
		seen++
		v, ok := e.Vector(key)
		if ok {
			withVector++
		}
		got[key] = v
	})
	if seen != len(got) {
		report("index holds %d entries for %d distinct keys", seen, len(got))
	}
	if withVector > 0 && withVector != seen {
		report("%d of %d entries have a vector", withVector, seen)
	}
	name := func(key string) string { return pgvalue.KeyInt8.FormatKey(key) }
	for key, w := range want.valid {
		g, ok := got[key]
		switch {
		case !ok:
			report("key %s missing", name(key))
		case withVector > 0 && !bitEqual(g, w):
			report("key %s: vector differs (first elements %v, want %v)", name(key), g[:min(3, len(g))], w[:3])
		}
	}
	for key := range got {
		if _, ok := want.valid[key]; !ok {
			report("key %s should not be there", name(key))
		}
	}
	if st := e.Status(); st.Rows != len(want.valid) || st.Skipped != want.invalid {
		report("rows %d skipped %d, table has %d valid and %d invalid", st.Rows, st.Skipped, len(want.valid), want.invalid)
	}
	return diffs
}

func bitEqual(a, b []float32) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if math.Float32bits(a[i]) != math.Float32bits(b[i]) {
			return false
		}
	}
	return true
}

// idleAdvance writes to the unpublished table only, with CHECKPOINTs
// (PG15 moves restart_lsn only after a running-transactions record), and
// waits, bounded, until the slot has confirmed past those writes and its
// restart_lsn has moved.
func idleAdvance(ctx context.Context, db *pgClient, slot string, limit time.Duration) error {
	ctx, cancel := context.WithTimeout(ctx, limit)
	defer cancel()
	confirmed0, restart0, err := slotPosition(ctx, db, slot)
	if err != nil {
		return err
	}
	var target indexer.LSN
	for {
		for _, sql := range []string{`INSERT INTO other (payload) SELECT repeat('x', 200) FROM generate_series(1, 50)`, `CHECKPOINT`} {
			if _, err := db.exec(ctx, sql); err != nil {
				return err
			}
		}
		if target == 0 {
			if target, err = currentLSN(ctx, db); err != nil {
				return err
			}
		}
		confirmed, restart, err := slotPosition(ctx, db, slot)
		if err != nil {
			return err
		}
		if confirmed >= target && restart > restart0 {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("after writes to another table only, the slot stayed at confirmed_flush_lsn %s restart_lsn %s (from %s and %s; wanted confirmed ≥ %s and restart_lsn moved)",
				confirmed, restart, confirmed0, restart0, target)
		case <-time.After(250 * time.Millisecond):
		}
	}
}
