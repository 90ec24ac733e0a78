package indexer

import (
	"context"
	"log/slog"
	"os"
	"time"
)

// CheckpointPolicy says where and how often indexes are checkpointed.
type CheckpointPolicy struct {
	Dir string
	// Interval: an index with changes is checkpointed at least this often.
	// Default 5 minutes.
	Interval time.Duration
	// Changes: an index is checkpointed once this many changes have been
	// applied since its last checkpoint. Default 100,000.
	Changes uint64
	// Source is the stream being followed; checkpoints wait until it is
	// known (non-empty Slot).
	Source func() Source
	Logger *slog.Logger
}

// Covered is the position every healthy index's durable state reflects:
// the minimum of their covered LSNs, 0 while any of them has none. An
// index in error or waiting no longer holds the others back.
func (ix *Indexer) Covered() LSN {
	var covered LSN
	first := true
	for _, e := range ix.Entries() {
		if state, _ := e.State(); !state.Follows() {
			continue
		}
		c := e.Durable().Covered()
		if first || c < covered {
			covered, first = c, false
		}
	}
	return covered
}

// RunCheckpoints checkpoints the indexes by p until ctx ends, then once
// more for every index with changes (a clean shutdown leaves nothing to
// replay). It also records idle positions: see IdleState.
func (ix *Indexer) RunCheckpoints(ctx context.Context, p CheckpointPolicy) error {
	if p.Interval <= 0 {
		p.Interval = 5 * time.Minute
	}
	if p.Changes == 0 {
		p.Changes = 100000
	}
	if p.Logger == nil {
		p.Logger = slog.Default()
	}
	log := p.Logger.With("subsystem", "checkpoint")
	if err := os.MkdirAll(p.Dir, 0o700); err != nil {
		return err
	}
	last := map[*Entry]time.Time{}
	idle := ReadIdleState(p.Dir)
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	for {
		final := false
		select {
		case <-ctx.Done():
			final = true
		case <-tick.C:
		}
		src := p.Source()
		if src.Slot == "" {
			if final {
				return nil
			}
			continue
		}
		for _, e := range ix.Entries() {
			dirty := e.Durable().Dirty()
			if last[e].IsZero() {
				last[e] = time.Now()
			}
			// The first checkpoint after a copy is due at once: until it
			// exists, a restart means copying the table again.
			due := dirty >= p.Changes || (dirty > 0 && (final || e.Durable().Covered() == 0 || time.Since(last[e]) >= p.Interval))
			if !due {
				continue
			}
			began := time.Now()
			pause, err := e.Durable().Checkpoint(p.Dir, src)
			if err != nil {
				e.Durable().recordCheckpointFailure(err)
				log.Error("checkpoint failed; will retry", "index", e.c.spec.Name, "err", err)
				continue
			}
			last[e] = time.Now()
			e.Durable().recordCheckpoint(pause, time.Since(began))
			log.Debug("checkpoint written", "index", e.c.spec.Name, "changes", dirty, "lsn", e.Durable().Covered().String(),
				"pause", pause.String(), "took", time.Since(began).String())
		}
		if err := ix.recordIdle(p.Dir, idle); err != nil {
			log.Error("recording idle positions failed; will retry", "err", err)
		}
		if final {
			return nil
		}
	}
}

// recordIdle writes the idle positions that moved, then lets them count
// as covered: durable first, confirmed after.
func (ix *Indexer) recordIdle(dir string, state IdleState) error {
	type moved struct {
		e   *Entry
		pos IdlePosition
	}
	var updates []moved
	for _, e := range ix.Entries() {
		if lsn, version, ok := e.Durable().idlePosition(); ok {
			updates = append(updates, moved{e, IdlePosition{Version: version, LSN: lsn}})
			state[e.c.spec.Name] = IdlePosition{Version: version, LSN: lsn}
		}
	}
	if len(updates) == 0 {
		return nil
	}
	if err := writeIdleState(dir, state); err != nil {
		return err
	}
	for _, u := range updates {
		u.e.Durable().setCovered(u.pos.LSN, u.pos.Version)
	}
	return nil
}
