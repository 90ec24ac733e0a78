package chaos

import (
	"fmt"
	"sync"
	"time"

	"github.com/vecside/vecside/indexer"
)

// ledger is what the soak's writer committed, for checking answers: every
// deleted key with an LSN at or past its delete's commit, the highest key
// ever written, and the newest commit. Keys are never reused, so a key
// deleted once is gone for good.
//
// The LSN of a delete is pg_current_wal_lsn() read after its COMMIT
// returned, in the same round trip: at or past the end of the commit
// record. The sidecar applies transactions in commit order and moves its
// applied LSN only at commit boundaries, so an answer served at an
// applied LSN at or past it must not hold the key. The bound is late by
// at most a round trip, so the check can miss a violation in that moment,
// but never report one that is not.
type ledger struct {
	mu      sync.RWMutex
	deleted map[int64]indexer.LSN
	maxID   int64       // every key written is at most this
	last    indexer.LSN // of the newest commit
	lastAt  time.Time   // when that commit returned
	next    chan struct{}
}

func newLedger(initialRows int) *ledger {
	return &ledger{deleted: map[int64]indexer.LSN{}, maxID: int64(initialRows), next: make(chan struct{})}
}

// writing raises the highest key before a transaction that inserts id is
// sent: a key is known before anyone can see it.
func (l *ledger) writing(id int64) {
	l.mu.Lock()
	l.maxID = max(l.maxID, id)
	l.mu.Unlock()
}

// committed records a transaction that returned at at, with lsn read
// after its COMMIT, and the keys it deleted.
func (l *ledger) committed(at time.Time, lsn indexer.LSN, deleted []int64) {
	l.mu.Lock()
	for _, id := range deleted {
		l.deleted[id] = lsn
	}
	l.last, l.lastAt = lsn, at
	close(l.next)
	l.next = make(chan struct{})
	l.mu.Unlock()
}

// newest returns the newest commit's LSN and time, and a channel closed at
// the next commit.
func (l *ledger) newest() (indexer.LSN, time.Time, <-chan struct{}) {
	l.mu.RLock()
	defer l.mu.RUnlock()
	return l.last, l.lastAt, l.next
}

// check lists what is wrong with an answer served at applied LSN served
// or later: a key deleted at or before served, a key never written, a key
// twice.
func (l *ledger) check(keys []int64, served indexer.LSN) []string {
	var bad []string
	seen := make(map[int64]bool, len(keys))
	l.mu.RLock()
	defer l.mu.RUnlock()
	for _, k := range keys {
		if seen[k] {
			bad = append(bad, fmt.Sprintf("key %d twice", k))
		}
		seen[k] = true
		if k < 1 || k > l.maxID {
			bad = append(bad, fmt.Sprintf("key %d was never written (highest %d)", k, l.maxID))
		}
		if at, ok := l.deleted[k]; ok && at <= served {
			bad = append(bad, fmt.Sprintf("key %d deleted at %s returned by an answer served at %s", k, at, served))
		}
	}
	return bad
}

// deletedKeys is the number of keys deleted so far.
func (l *ledger) deletedKeys() int {
	l.mu.RLock()
	defer l.mu.RUnlock()
	return len(l.deleted)
}
