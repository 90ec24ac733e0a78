package indexer

import (
	"fmt"

	"github.com/vecside/vecside/internal/pgvalue"
)

// This file is the Applier, the part of an Entry that applies the
// stream's changes, and the routing of a change between the serving index
// and the one a copy builds (core's), which the copy's rows follow too.
// Transaction ids are in xid.go.

// indexable reports whether vec can go into an index of dims dimensions
// (0: not fixed yet). While the dimension is unknown, a row's length is
// bounded by MaxDims: the first row fixes the dimension, and a table's
// value must never fix one no index can be made with.
func indexable(vec []float32, dims int) bool {
	return len(vec) > 0 && len(vec) <= MaxDims && (dims == 0 || len(vec) == dims) && pgvalue.CheckFinite(vec) == nil
}

// Begin starts applying a transaction that commits at final, and reports
// whether the entry wants its changes: not if they are already reflected
// (see SkipBelow).
func (e *Applier) Begin(final LSN) bool {
	e.c.wmu.Lock()
	defer e.c.wmu.Unlock()
	e.c.txLSN = final
	return final >= e.c.skipBelowLocked()
}

// SkipBelow is the commit position below which the stream's transactions
// are already reflected in the entry: its applied LSN, or, after a copy,
// the copy's snapshot point if that is later. While a copy rebuilds a
// serving index, the serving index still wants everything after its
// applied LSN.
func (e *Applier) SkipBelow() LSN {
	e.c.wmu.Lock()
	defer e.c.wmu.Unlock()
	return e.c.skipBelowLocked()
}

func (e *core) skipBelowLocked() LSN {
	applied := e.clock.Applied()
	if e.sync != nil && e.sync.rebuild {
		return applied
	}
	if e.sync != nil {
		return max(applied, e.sync.point)
	}
	return max(applied, e.syncFrom)
}

// Upsert stores key's vector, or, if vec is not indexable (nil for NULL or
// undecodable, wrong dimension, NaN or infinite), removes key from the
// index and counts it as skipped until a later change fixes it. The
// encoding is done before the apply lock is taken, so that the copy's
// readers encode in parallel with the stream.
func (e *Applier) Upsert(key string, vec []float32) {
	dims := e.c.serving.Load().dims
	if !indexable(vec, dims) {
		e.Skip(key)
		return
	}
	main, shadow := e.c.targets()
	var mainRow, shadowRow Row
	if main != nil {
		mainRow = main.Prepare(vec)
	}
	if shadow != nil {
		shadowRow = shadow.Prepare(vec)
	}
	e.c.wmu.Lock()
	defer e.c.wmu.Unlock()
	e.c.changed()
	if toMain, toShadow := e.c.routes(key); toMain || toShadow {
		if toMain {
			e.c.insertLocked(&e.c.index, e.c.skipped, main, mainRow, key, vec)
			e.c.tx.wrote(e.c.index, key)
		}
		if toShadow {
			s := e.c.sync
			e.c.insertLocked(&s.index, s.skipped, shadow, shadowRow, key, vec)
			e.c.tx.wrote(s.index, key)
		}
	}
}

// targets returns the indexes a change is prepared for: the serving one,
// and the one a copy is building.
func (e *core) targets() (main, shadow Index) {
	e.wmu.Lock()
	defer e.wmu.Unlock()
	if e.sync != nil {
		shadow = e.sync.index
		if !e.sync.rebuild {
			return nil, shadow
		}
	}
	return e.index, shadow
}

// routes says where the change being applied to key goes, and records it
// against the copy: to the serving index unless a first copy is building
// it; to the index a copy builds unless the change is older than the
// copy's snapshot (which holds it already). Changes met before the
// snapshot point is known go to both and are sorted out when it is (see
// SetSyncPoint).
func (e *core) routes(key string) (toMain, toShadow bool) {
	e.tx.dropPending(key)
	toMain, toShadow = e.route()
	if toShadow {
		e.sync.touched[key] = e.txLSN
	}
	return toMain, toShadow
}

// route is routes for a change of no one key.
func (e *core) route() (toMain, toShadow bool) {
	s := e.sync
	if s == nil {
		return true, false
	}
	return s.rebuild, s.point == 0 || e.txLSN >= s.point
}

// insertLocked puts a prepared row into *slot's index, making the index
// first if it is the first valid row (the table was empty when it was
// made); x and row are what was prepared, and are redone if the index
// changed since.
func (e *core) insertLocked(slot *Index, skipped map[string]struct{}, x Index, row Row, key string, vec []float32) {
	// The dimension is settled here, under the apply lock: a row checked
	// before it against a dimension not yet known may not fit. It is
	// published only once an index of it exists.
	e.mu.Lock()
	dims := e.dims
	e.mu.Unlock()
	fixed := dims == 0
	if fixed {
		dims = len(vec)
	}
	if len(vec) != dims {
		e.skipIn(*slot, skipped, key)
		return
	}
	if *slot == nil {
		made, err := newIndex(e.spec, e.keyType, dims, nil, 0)
		if err != nil {
			// The stream goes on: the index is failed, not the slot.
			e.skipIn(nil, skipped, key)
			e.fail(fmt.Errorf("index %s: cannot make an index of %d dimensions: %w; restart vecside with dims= set to the column's dimension", e.spec.Name, dims, err))
			return
		}
		*slot = made
		if slot == &e.index {
			// Made serving, from its first row: it calibrates once it
			// has rows enough.
			serve(made)
		}
		if slot == &e.index && !fixed {
			defer e.publish()
		}
	}
	if fixed {
		e.mu.Lock()
		e.dims = dims
		e.mu.Unlock()
		defer e.publish()
	}
	if x != *slot || row == nil {
		row = (*slot).Prepare(vec)
	}
	(*slot).Insert(key, row)
	delete(skipped, key)
}

// Skip removes key from the index and counts it as skipped.
func (e *Applier) Skip(key string) {
	e.c.wmu.Lock()
	defer e.c.wmu.Unlock()
	e.c.changed()
	toMain, toShadow := e.c.routes(key)
	if toMain {
		e.c.skipIn(e.c.index, e.c.skipped, key)
	}
	if toShadow {
		e.c.skipIn(e.c.sync.index, e.c.sync.skipped, key)
	}
}

func (e *core) skipIn(x Index, skipped map[string]struct{}, key string) {
	if x != nil {
		x.Delete(key)
	}
	skipped[key] = struct{}{}
}

// Delete forgets key.
func (e *Applier) Delete(key string) {
	e.c.wmu.Lock()
	defer e.c.wmu.Unlock()
	e.c.changed()
	toMain, toShadow := e.c.routes(key)
	if toMain {
		deleteIn(e.c.index, e.c.skipped, key)
	}
	if toShadow {
		deleteIn(e.c.sync.index, e.c.sync.skipped, key)
	}
}

func deleteIn(x Index, skipped map[string]struct{}, key string) {
	if x != nil {
		x.Delete(key)
	}
	delete(skipped, key)
}

// Move gives key from's entry (indexed or skipped) to key to, for a key
// change whose vector did not change. It reports whether from was known
// to every index the change goes to; if not, the caller must read the row
// and Upsert it.
func (e *Applier) Move(from, to string) bool {
	e.c.wmu.Lock()
	defer e.c.wmu.Unlock()
	e.c.changed()
	e.c.routes(from)
	toMain, toShadow := e.c.routes(to)
	ok := true
	if toMain {
		ok = e.c.moveIn(e.c.index, e.c.skipped, from, to)
	}
	if toShadow {
		ok = e.c.moveIn(e.c.sync.index, e.c.sync.skipped, from, to) && ok
	}
	return ok
}

// moveIn moves from's row to to in x. The row keeps its vector, so the
// transaction's version of it has that vector if the row's xid was known
// or the transaction wrote it (see Unchanged).
func (e *core) moveIn(x Index, skipped map[string]struct{}, from, to string) bool {
	ours := e.tx.wroteBefore(x, from)
	keep := ours || xidOf(x, from) != 0
	if !moveIn(x, skipped, from, to) {
		return false
	}
	if keep {
		e.tx.wrote(x, to)
	}
	return true
}

func moveIn(x Index, skipped map[string]struct{}, from, to string) bool {
	if x != nil && x.Rename(from, to) {
		delete(skipped, to)
		return true
	}
	if _, ok := skipped[from]; ok {
		delete(skipped, from)
		if x != nil {
			x.Delete(to)
		}
		skipped[to] = struct{}{}
		return true
	}
	return false
}

// Known reports whether key is indexed or counted as skipped, in the
// serving index and in the one a copy builds.
//
// A copy under way knows a key that no change since its snapshot has
// touched: its snapshot holds the key's current vector, and the copy
// brings it if it has not yet.
func (e *Applier) Known(key string) bool {
	e.c.wmu.Lock()
	defer e.c.wmu.Unlock()
	known := func(x Index, skipped map[string]struct{}) bool {
		_, ok := skipped[key]
		return ok || x != nil && x.Has(key)
	}
	if s := e.c.sync; s != nil {
		if !known(s.index, s.skipped) && s.newer(key) {
			return false
		}
		if !s.rebuild {
			return true
		}
	}
	return known(e.c.index, e.c.skipped)
}

// Truncate forgets every key.
func (e *Applier) Truncate() {
	e.c.wmu.Lock()
	defer e.c.wmu.Unlock()
	e.c.changed()
	e.c.tx.forget()
	toMain, toShadow := e.c.route()
	if s := e.c.sync; s != nil {
		if toShadow {
			s.truncated = max(s.truncated, e.c.txLSN)
			if s.index != nil {
				s.index.Clear()
			}
			clear(s.skipped)
		}
	}
	if toMain {
		if e.c.index != nil {
			e.c.index.Clear()
		}
		clear(e.c.skipped)
	}
}

// changed counts a change.
func (e *core) changed() { e.version.Add(1) }

// SetApplied moves the applied LSN forward (never back) and wakes waiters.
// The replication layer calls it at each commit, and with a keepalive's
// WAL end when no transaction is open.
func (e *Applier) SetApplied(lsn LSN) { e.c.advance(lsn) }

// advance is SetApplied: it moves the clock, then records the xmins of
// the reads the new position has reached.
func (e *core) advance(lsn LSN) {
	if e.clock.advance(lsn) && e.tx.pendingN.Load() > 0 {
		e.settle(lsn)
	}
}
