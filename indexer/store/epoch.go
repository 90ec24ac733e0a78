package store

import (
	"math"
	"runtime"
	"sync/atomic"
)

// Epochs tells a writer when no reader can still see what it removed, so
// that the space (a row id, and the list slot and codes it names) can be
// given to another row. A reader pins the current epoch for the length of
// its work; a writer that removes something tags it with the epoch it
// removed it in and advances the epoch; the thing may be reused once every
// pinned epoch is later than its tag. Readers therefore never see a row's
// key paired with another row's codes, and never need a lock.
//
// A reader that pinned epoch e read the global epoch after every removal
// tagged below e was published, so it sees those removals and never reads
// the removed rows; only readers pinned at or before a tag may still read
// what the tag covers.
type Epochs struct {
	global atomic.Uint64
	next   atomic.Uint32
	slots  [readerSlots]readerSlot
}

// readerSlots bounds the readers pinned at once (searches, snapshots being
// written, filters being built); a reader finding every slot taken waits
// for one. The indexer admits far fewer searches than this at once.
const readerSlots = 256

type readerSlot struct {
	epoch atomic.Uint64 // 0: free
	_     [56]byte      // own cache line: readers on different cores do not share one
}

// NewEpochs returns a clock at epoch 1.
func NewEpochs() *Epochs {
	e := &Epochs{}
	e.global.Store(1)
	return e
}

// Guard is a pinned epoch; Unpin ends it.
type Guard struct {
	slot *readerSlot
}

// Pin marks the caller as a reader of everything published so far, until
// Unpin.
func (e *Epochs) Pin() Guard {
	start := e.next.Add(1)
	for spins := 0; ; spins++ {
		for i := range uint32(readerSlots) {
			s := &e.slots[(start+i)%readerSlots]
			if s.epoch.Load() != 0 {
				continue
			}
			now := e.global.Load()
			if !s.epoch.CompareAndSwap(0, now) {
				continue
			}
			// A writer may have advanced between the load and the pin, and
			// scanned the slots before the pin was visible: pin the newer
			// epoch, which is after that writer's removal.
			for cur := e.global.Load(); cur != now; cur = e.global.Load() {
				now = cur
				s.epoch.Store(now)
			}
			return Guard{slot: s}
		}
		runtime.Gosched()
	}
}

// Unpin ends the guard's pin.
func (g Guard) Unpin() {
	if g.slot != nil {
		g.slot.epoch.Store(0)
	}
}

// Retire returns the tag of something removed now (after the removal was
// published) and advances the epoch past it.
func (e *Epochs) Retire() uint64 { return e.global.Add(1) - 1 }

// Oldest is the oldest pinned epoch, or MaxUint64 when nothing is pinned:
// whatever was retired with a tag below it may be reused.
func (e *Epochs) Oldest() uint64 {
	oldest := uint64(math.MaxUint64)
	for i := range e.slots {
		if v := e.slots[i].epoch.Load(); v != 0 && v < oldest {
			oldest = v
		}
	}
	return oldest
}
