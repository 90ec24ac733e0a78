package indexer

import (
	"fmt"
	"runtime/debug"
	"slices"

	"github.com/vecside/vecside/indexer/kind"
)

// syncState is a copy of the table under way, building a new index beside
// the serving one (a rebuild) or in place of none (the first copy).
//
// The copy reads the table under a snapshot taken at point, while the
// stream goes on. A change that commits at or after point wins over the
// copy's row for its key (touched records it); one that committed before
// point is in the snapshot already. Changes applied before the point is
// known (the snapshot is taken while the stream runs) go into the new
// index too, and SetSyncPoint takes back those that turn out older.
type syncState struct {
	index   Index // nil while the dimension is unknown
	skipped map[string]struct{}
	rebuild bool
	point   LSN            // 0 until SetSyncPoint
	touched map[string]LSN // key → commit LSN of its last change since BeginSync
	// truncated is the commit LSN of the last TRUNCATE since BeginSync: the
	// copy's rows are void if it is at or after point.
	truncated LSN
	copied    int64
}

// newer reports whether key was changed at or after the snapshot point
// (or at all, while it is unknown): the copy's row for it is stale.
func (s *syncState) newer(key string) bool {
	lsn, ok := s.touched[key]
	return ok && (s.point == 0 || lsn >= s.point)
}

// BeginSync starts a first copy of the entry's table (or one that replaces
// an index found stale or in error): it builds an empty index of the
// entry's kind from sample (rows of the table, for the kinds that train;
// tableRows is the table's size, or an estimate), and from now on applies
// the stream's changes to it. What the entry held is dropped, and it waits
// in StateBuilding until EndSync. Training runs before any lock is taken.
//
// Each BeginSync (or BeginRebuild) is followed by SetSyncPoint, the copy's
// rows through CopyUpsert, and EndSync, or by AbortSync.
func (e *Syncer) BeginSync(sample [][]float32, tableRows int) error {
	return e.beginSync(sample, tableRows, false)
}

// BeginRebuild is BeginSync for an entry that keeps serving: searches use
// the current index, which keeps following the stream, until EndSync swaps
// the new one in. An entry that is not ready gets a first copy instead.
func (e *Syncer) BeginRebuild(sample [][]float32, tableRows int) error {
	state := e.c.serving.Load().state
	return e.beginSync(sample, tableRows, state == StateReady)
}

func (e *Syncer) beginSync(sample [][]float32, tableRows int, rebuild bool) error {
	var x Index
	dims := e.c.serving.Load().dims
	if dims == 0 {
		// The first row that could be indexed fixes the dimension, as in
		// the stream (see insertLocked).
		if i := slices.IndexFunc(sample, func(v []float32) bool { return indexable(v, 0) }); i >= 0 {
			dims = len(sample[i])
		}
	}
	if dims > 0 {
		good := sample[:0:0]
		for _, v := range sample {
			if indexable(v, dims) {
				good = append(good, v)
			}
		}
		var err error
		if x, err = newIndex(e.c.spec, e.c.serving.Load().keyType, dims, good, tableRows); err != nil {
			return fmt.Errorf("index %s: %w", e.c.spec.Name, err)
		}
		if f, ok := x.(kind.StreamFollower); ok && rebuild {
			f.FollowStream() // beside the serving index, the stream's changes go into it from now on
		}
		e.c.mu.Lock()
		if e.c.dims == 0 {
			e.c.dims = dims
		}
		e.c.mu.Unlock()
	}
	e.c.wmu.Lock()
	defer e.c.wmu.Unlock()
	dropped(e.c.syncIndex())
	e.c.tx.forget()
	e.c.sync = &syncState{index: x, skipped: map[string]struct{}{}, rebuild: rebuild, touched: map[string]LSN{}}
	if !e.c.sync.rebuild {
		// A first copy (or one after an error) starts from nothing: what
		// the entry held is of no use, and searches wait for the copy.
		e.c.emptyLocked(StateBuilding, "")
	}
	return nil
}

// Wait empties the entry and puts it into StateWaiting: its table is not
// one it can copy yet (it was dropped, it does not exist, the publication
// does not include it, its columns changed type). why says what it
// waits for and what ends the wait; its next BeginSync does. The table
// it copies then may be of another dimension (created again, its column
// altered): the dimension is the definition's again, or learned anew.
func (e *Entry) Wait(why string) {
	held := e.Status().Rows
	e.c.wmu.Lock()
	dropped(e.c.syncIndex())
	e.c.sync = nil
	e.c.tx.forget()
	e.c.mu.Lock()
	e.c.dims = e.c.spec.Dims
	e.c.mu.Unlock()
	e.c.emptyLocked(StateWaiting, why)
	e.c.wmu.Unlock()
	if held >= bigCopy {
		// As after a big copy: what it held goes back to the system now,
		// before the copy of the table it waits for takes as much again.
		debug.FreeOSMemory()
	}
}

// emptyLocked drops what the entry holds and gives it state; the caller
// holds wmu.
func (e *core) emptyLocked(state State, why string) {
	dropped(e.index)
	e.index = nil
	clear(e.skipped)
	e.mu.Lock()
	e.state, e.failure = state, why
	e.mu.Unlock()
	e.coverage.reset(0, 0)
	e.version.Add(1)
	e.publish()
}

// SetSyncPoint tells the copy under way the LSN of its snapshot. Changes
// applied to the new index since BeginSync that committed before it are
// taken back: the copy holds them, in the state they had at the snapshot.
func (e *Syncer) SetSyncPoint(point LSN) {
	e.c.wmu.Lock()
	defer e.c.wmu.Unlock()
	s := e.c.sync
	if s == nil {
		return
	}
	s.point = point
	e.c.tx.forget()
	for key, lsn := range s.touched {
		if lsn < point {
			deleteIn(s.index, s.skipped, key)
			delete(s.touched, key)
		}
	}
	if s.truncated < point {
		s.truncated = 0
	}
}

// CopyUpsert stores a row read by the copy, with the xmin read with it
// (0: unknown), unless the stream has changed that key (or truncated the
// table) since the snapshot. The row is encoded before the apply lock is
// taken, and, in a rebuild, admitted by a kind that would otherwise do
// background work under the lock (see kind.Admitter).
func (e *Syncer) CopyUpsert(key string, vec []float32, xmin uint32) {
	e.c.wmu.Lock()
	s := e.c.sync
	var x Index
	if s != nil {
		x = s.index
	}
	e.c.wmu.Unlock()
	var row Row
	if x != nil && indexable(vec, e.c.serving.Load().dims) {
		row = x.Prepare(vec)
		if a, ok := x.(kind.Admitter); ok && s.rebuild {
			row = a.Admit(row)
		}
	}
	e.c.wmu.Lock()
	defer e.c.wmu.Unlock()
	if e.c.sync == nil || e.c.sync != s {
		return // aborted or replaced meanwhile
	}
	s.copied++
	if s.newer(key) || s.truncated != 0 {
		return
	}
	e.c.changed()
	if !indexable(vec, e.c.serving.Load().dims) {
		e.c.skipIn(s.index, s.skipped, key)
		return
	}
	e.c.insertLocked(&s.index, s.skipped, x, row, key, vec)
	if xmin != 0 {
		setXID(s.index, key, xmin)
	}
}

// EndSync ends the copy: the new index serves from now on, reflecting the
// snapshot and every change since. An entry that failed meanwhile stays
// in error. The entry's applied position moves to the snapshot point if
// the stream was behind it, and transactions that committed before it
// are skipped from now on.
func (e *Syncer) EndSync() {
	e.c.wmu.Lock()
	s := e.c.sync
	e.c.wmu.Unlock()
	if s == nil {
		return
	}
	// Calibrated before it serves, while the stream goes on into it.
	if c, ok := s.index.(*calibrated); ok {
		c.tune.calibrate()
	}
	e.c.wmu.Lock()
	if e.c.sync != s {
		e.c.wmu.Unlock()
		return // aborted or replaced meanwhile
	}
	e.c.sync = nil
	e.c.syncFrom = s.point
	e.c.tx.forget()
	if e.c.index != s.index {
		dropped(e.c.index)
	}
	e.c.index, e.c.skipped = s.index, s.skipped
	e.c.version.Add(1)
	e.c.mu.Lock()
	e.c.copied = s.copied
	if s.rebuild {
		e.c.rebuilds++
	}
	if e.c.state != StateError {
		e.c.state, e.c.failure = StateReady, ""
	}
	e.c.mu.Unlock()
	e.c.publish()
	e.c.wmu.Unlock()
	e.c.advance(s.point)
	if s.copied >= bigCopy {
		// The copy's garbage (buffers, the training sample, a replaced
		// index) is gone: give it back to the system now rather than over
		// minutes, so that the process's size is the index's.
		debug.FreeOSMemory()
	}
}

// bigCopy is the size of copy after which the memory it freed is handed
// back to the system at once.
const bigCopy = 100_000

// AbortSync drops a copy that failed (err says why; nil for a copy given
// up on purpose): a rebuild leaves the serving index as it was, and its
// failure shows in Status; a first copy leaves the entry building, for
// the next try.
func (e *Syncer) AbortSync(err error) {
	e.c.wmu.Lock()
	defer e.c.wmu.Unlock()
	if e.c.sync != nil && e.c.sync.rebuild && err != nil {
		e.c.mu.Lock()
		e.c.rebuildFailures++
		e.c.rebuildError = err.Error()
		e.c.mu.Unlock()
	}
	dropped(e.c.syncIndex())
	e.c.sync = nil
}

// Syncing reports whether a copy is under way.
func (e *Syncer) Syncing() bool {
	e.c.wmu.Lock()
	defer e.c.wmu.Unlock()
	return e.c.sync != nil
}

// WantsRebuild reports whether the serving index asks to be built again
// from the table (its structure has drifted from the data, see the kinds'
// NeedsRebuild), and no copy is under way.
func (e *Syncer) WantsRebuild() bool {
	s := e.c.serving.Load()
	return s.state == StateReady && s.index != nil && !e.Syncing() && s.index.NeedsRebuild()
}

// syncIndex is the index a copy under way builds, nil if none; the
// caller holds wmu.
func (e *core) syncIndex() Index {
	if e.sync == nil {
		return nil
	}
	return e.sync.index
}
