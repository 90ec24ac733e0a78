package indexer

import (
	"sync"
	"time"
)

// SourceHealth is what the replication layer last learned about its slot
// and the source database, for status and metrics.
type SourceHealth struct {
	// SlotState is the slot's wal_status (reserved, extended, unreserved,
	// lost), or "missing"; empty until first checked.
	SlotState string
	// WAL is the source's current WAL insert position.
	WAL LSN
	// Confirmed is the slot's confirmed_flush_lsn.
	Confirmed LSN
	// RetainedBytes is the WAL the slot holds back (WAL − restart_lsn).
	RetainedBytes int64
	// SafeWALBytes is how much more WAL may be written before the slot is
	// invalidated; -1 when max_slot_wal_keep_size is unlimited.
	SafeWALBytes int64
	// CatalogXminAge is the age in transactions of the slot's
	// catalog_xmin: how far it holds back vacuum of the system catalogs.
	CatalogXminAge int64
	CheckedAt      time.Time
}

type healthBox struct {
	mu  sync.Mutex
	h   SourceHealth
	src Source
	// seen holds each WAL position the checks saw, with when it was
	// first seen, oldest first: what lag in seconds is read from.
	seen []walSample
}

// SetSource records the system, timeline and slot the replication layer
// follows, for status: a client trusts the rows' xids only against a
// heap server of the same system and timeline.
func (ix *Indexer) SetSource(src Source) {
	ix.health.mu.Lock()
	defer ix.health.mu.Unlock()
	ix.health.src = src
}

// Source returns what SetSource last recorded.
func (ix *Indexer) Source() Source {
	ix.health.mu.Lock()
	defer ix.health.mu.Unlock()
	return ix.health.src
}

type walSample struct {
	wal LSN
	at  time.Time
}

// walSamples bounds how far back lag in seconds can see: 256 health
// checks with a new WAL position, about 40 minutes at the default
// interval of 10 s; an older lag shows as that.
const walSamples = 256

// SetSourceHealth records the latest health of the source.
func (ix *Indexer) SetSourceHealth(h SourceHealth) {
	ix.health.mu.Lock()
	defer ix.health.mu.Unlock()
	ix.health.h = h
	seen := ix.health.seen
	if h.WAL != 0 && (len(seen) == 0 || seen[len(seen)-1].wal < h.WAL) {
		if len(seen) == walSamples {
			seen = append(seen[:0], seen[1:]...)
		}
		ix.health.seen = append(seen, walSample{h.WAL, h.CheckedAt})
	}
}

// lagSeconds is how long ago, as of now, the source's WAL was first seen
// past applied: everything written before then is not applied yet, so
// the lag is at least that, and at most one health-check interval more.
func (b *healthBox) lagSeconds(applied LSN, now time.Time) float64 {
	b.mu.Lock()
	defer b.mu.Unlock()
	for _, s := range b.seen {
		if s.wal > applied {
			return max(0, now.Sub(s.at).Seconds())
		}
	}
	return 0
}

// SourceHealth returns what SetSourceHealth last recorded.
func (ix *Indexer) SourceHealth() SourceHealth {
	ix.health.mu.Lock()
	defer ix.health.mu.Unlock()
	return ix.health.h
}
