package indexer

import (
	"context"
	"fmt"
	"sync/atomic"

	"github.com/vecside/vecside/internal/procs"
)

// Limits bound the searches a sidecar runs at once. Searches are pure CPU
// work: beyond one per core, running more only makes each slower and
// takes the cores the stream's apply path needs, so the rest wait in a
// short queue, and beyond that are turned away with ErrOverloaded (a
// client retries after a pause) rather than piling up without end.
type Limits struct {
	// Running is how many searches run at once; 0 means one per core
	// (procs.Cores).
	Running int
	// Queued is how many more wait for a turn; 0 means 64 per running
	// search. A search waits at most until its own deadline.
	Queued int
}

// admission is a semaphore with a bounded queue.
type admission struct {
	slots   chan struct{}
	waiting atomic.Int64
	queued  int64
	// Turned away and admitted searches, for metrics.
	rejected, admitted atomic.Int64
}

func newAdmission(l Limits) *admission {
	if l.Running <= 0 {
		l.Running = procs.Cores()
	}
	if l.Queued <= 0 {
		l.Queued = 64 * l.Running
	}
	return &admission{slots: make(chan struct{}, l.Running), queued: int64(l.Queued)}
}

// enter waits for a turn and returns the function that ends it.
func (a *admission) enter(ctx context.Context) (done func(), err error) {
	select {
	case a.slots <- struct{}{}:
		a.admitted.Add(1)
		return a.leave, nil
	default:
	}
	if a.waiting.Add(1) > a.queued {
		a.waiting.Add(-1)
		a.rejected.Add(1)
		return nil, fmt.Errorf("%w: %d running and %d waiting", ErrOverloaded, cap(a.slots), a.queued)
	}
	defer a.waiting.Add(-1)
	select {
	case a.slots <- struct{}{}:
		a.admitted.Add(1)
		return a.leave, nil
	case <-ctx.Done():
		return nil, fmt.Errorf("%w: waited for a turn to search until the deadline (%v)", ErrTimeout, ctx.Err())
	}
}

func (a *admission) leave() { <-a.slots }

// SearchLoad is what the admission of searches has seen, for metrics.
type SearchLoad struct {
	Running, Waiting   int
	Admitted, Rejected int64
}

// SearchLoad reports the searches running and waiting now, and the
// searches admitted and turned away since start.
func (ix *Indexer) SearchLoad() SearchLoad {
	a := ix.admit
	return SearchLoad{Running: len(a.slots), Waiting: int(a.waiting.Load()), Admitted: a.admitted.Load(), Rejected: a.rejected.Load()}
}
