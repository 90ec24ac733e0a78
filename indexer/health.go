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

// SetSourceHealth records the latest health of the source.
func (ix *Indexer) SetSourceHealth(h SourceHealth) {
	ix.health.mu.Lock()
	defer ix.health.mu.Unlock()
	ix.health.h = h
}

// SourceHealth returns what SetSourceHealth last recorded.
func (ix *Indexer) SourceHealth() SourceHealth {
	ix.health.mu.Lock()
	defer ix.health.mu.Unlock()
	return ix.health.h
}
