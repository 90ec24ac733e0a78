package indexer

import (
	"context"
	"fmt"
	"sync"
)

// Clock is an entry's applied LSN: how far the stream has been applied,
// moved at commit boundaries (or to an idle keepalive's WAL end) only, so
// that a client waiting for an LSN (read-your-writes) never sees half a
// transaction.
type Clock struct {
	name     string // the entry's, for errors
	lsnMu    sync.Mutex
	applied  LSN
	advanced chan struct{} // closed and replaced whenever applied moves
}

func newClock(index string) *Clock {
	return &Clock{name: index, advanced: make(chan struct{})}
}

// Applied is the LSN up to which the stream has been applied.
func (c *Clock) Applied() LSN {
	c.lsnMu.Lock()
	defer c.lsnMu.Unlock()
	return c.applied
}

// advance moves the applied LSN to lsn if that is forward, waking
// waiters, and reports whether it moved.
func (c *Clock) advance(lsn LSN) bool {
	c.lsnMu.Lock()
	defer c.lsnMu.Unlock()
	if lsn <= c.applied {
		return false
	}
	c.applied = lsn
	close(c.advanced)
	c.advanced = make(chan struct{})
	return true
}

// WaitApplied blocks until the applied LSN reaches lsn or ctx ends.
func (c *Clock) WaitApplied(ctx context.Context, lsn LSN) error {
	for {
		c.lsnMu.Lock()
		applied, ch := c.applied, c.advanced
		c.lsnMu.Unlock()
		if applied >= lsn {
			return nil
		}
		select {
		case <-ch:
		case <-ctx.Done():
			return fmt.Errorf("%w: index %s has applied up to %s, waiting for %s", ErrTimeout, c.name, applied, lsn)
		}
	}
}
