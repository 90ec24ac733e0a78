package indexer

import (
	"bufio"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"time"

	"github.com/vecside/vecside/indexer/store"
	"github.com/vecside/vecside/internal/pgvalue"
)

// Source identifies the replication stream an index follows; a checkpoint
// from another source is never loaded.
type Source struct {
	SystemID uint64
	Timeline uint32
	Slot     string
	// Database is the source database's name, as IDENTIFY_SYSTEM reports
	// it (current_database()). Checkpoints record it, but a checkpoint of
	// another name is not refused for it: the slot belongs to one
	// database and the table OID to one table, and a renamed database
	// keeps both.
	Database string
}

// Table is the table an index follows, as the replication layer resolved
// it from the catalog and as Relation messages name it since: its
// pg_class OID, which a rename keeps and a drop and re-create changes, and
// its current schema and name.
type Table struct {
	OID    uint32
	Schema string
	Name   string
}

// SetTable records the table the entry follows. Checkpoints record its
// OID, and one of another OID is never loaded; Status reports its OID and
// name. A caller that binds an entry holding rows to another OID empties
// it first (a first copy), or a checkpoint could record the old table's
// rows under the new OID.
func (e *Durability) SetTable(t Table) {
	e.c.mu.Lock()
	defer e.c.mu.Unlock()
	e.c.table = t
}

// CheckpointPath is where the entry's checkpoint lives in dir.
func (e *Durability) CheckpointPath(dir string) string {
	return filepath.Join(dir, e.c.spec.Name+".ckpt")
}

// Checkpoint writes the entry to its checkpoint file in dir, covering its
// applied LSN, and returns how long changes were held up: the apply path
// pauses while the index captures its live rows (see Index.Snapshot), and
// the file is written after, while changes and searches go on. An entry
// whose index does not exist yet (its table is empty, or every vector in
// it is NULL) writes a checkpoint without one, so that its position is
// covered like any other's.
//
// Changes of a transaction still being applied may be in the copy while
// the applied LSN is that of the previous commit: replaying from there
// applies them again, which is harmless since every change is an upsert or
// a delete by key.
func (e *Durability) Checkpoint(dir string, src Source) (pause time.Duration, err error) {
	began := time.Now()
	e.c.wmu.Lock()
	if state := e.c.serving.Load().state; state != StateReady {
		e.c.wmu.Unlock()
		return 0, nil
	}
	write, release := func(io.Writer) error { return nil }, func() {}
	var xids xidSnapshot
	calibration := snapshotCalibration(nil)
	if e.c.index != nil {
		write, release = e.c.index.Snapshot()
		xids = takeXIDs(e.c.index)
		calibration = snapshotCalibration(e.c.index)
	}
	defer release()
	skipped := make([]string, 0, len(e.c.skipped))
	for k := range e.c.skipped {
		skipped = append(skipped, k)
	}
	version := e.c.version.Load()
	e.c.mu.Lock()
	h := CheckpointHeader{
		Index:      e.c.spec.Name,
		Kind:       e.c.spec.Kind,
		Params:     e.c.spec.String(),
		Dims:       e.c.dims,
		HasIndex:   e.c.index != nil,
		Metric:     e.c.spec.Metric.String(),
		KeyType:    uint8(e.c.keyType),
		VectorType: uint8(e.c.vecType),
		LSN:        e.c.clock.Applied(),
		Version:    version,
		SystemID:   src.SystemID,
		Timeline:   src.Timeline,
		Slot:       src.Slot,
		Database:   src.Database,
		TableOID:   e.c.table.OID,
	}
	e.c.mu.Unlock()
	e.c.wmu.Unlock()
	pause = time.Since(began)
	slices.Sort(skipped)
	err = WriteCheckpoint(e.CheckpointPath(dir), h, func(w io.Writer) error {
		if err := writeKeys(w, skipped); err != nil {
			return err
		}
		if err := writeXIDs(w, xids); err != nil {
			return err
		}
		if h.HasIndex {
			if err := calibration(w); err != nil {
				return err
			}
		}
		return write(w)
	})
	if err != nil {
		return pause, err
	}
	e.setCovered(h.LSN, version)
	return pause, nil
}

func (e *Durability) recordCheckpoint(pause, took time.Duration) { e.c.coverage.written(pause, took) }

// recordCheckpointFailure counts a checkpoint that failed, for status and
// metrics; the next one clears the error.
func (e *Durability) recordCheckpointFailure(err error) { e.c.coverage.failed(err) }

func (e *Durability) setCovered(lsn LSN, version uint64) { e.c.coverage.advance(lsn, version) }

// Covered is the LSN that the entry's durable state reflects; 0 if none.
func (e *Durability) Covered() LSN {
	lsn, _ := e.c.coverage.get()
	return lsn
}

// Dirty reports how many changes have been applied since the last
// checkpoint.
func (e *Durability) Dirty() uint64 {
	_, version := e.c.coverage.get()
	return e.c.version.Load() - version
}

// idlePosition is the applied LSN if nothing has changed since the last
// checkpoint and it has moved past what is covered (keepalives, or
// transactions on other tables); ok is false otherwise.
func (e *Durability) idlePosition() (lsn LSN, version uint64, ok bool) {
	applied := e.c.clock.Applied()
	covered, version := e.c.coverage.get()
	if covered == 0 || e.c.version.Load() != version || applied <= covered {
		return 0, 0, false
	}
	return applied, version, true
}

// coverage is what an entry's durable state reflects (the LSN covered,
// and the change count then), and how its checkpoints went, for Status.
type coverage struct {
	mu        sync.Mutex
	lsn       LSN
	version   uint64
	count     int64
	lastPause time.Duration // changes held up by the last checkpoint
	lastWrite time.Duration // the last checkpoint's total time
	last      time.Time     // when the last checkpoint was written
	failures  int64
	lastError string // the last failure's, until a checkpoint succeeds
}

// advance covers lsn, reached at change count version, if it is past
// what is covered.
func (c *coverage) advance(lsn LSN, version uint64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if lsn > c.lsn {
		c.lsn, c.version = lsn, version
	}
}

// reset makes what is covered lsn at version, forward or back: a load,
// or a first copy, which starts from nothing (0, 0).
func (c *coverage) reset(lsn LSN, version uint64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.lsn, c.version = lsn, version
}

func (c *coverage) get() (LSN, uint64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.lsn, c.version
}

func (c *coverage) written(pause, took time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.count++
	c.lastPause, c.lastWrite, c.last = pause, took, time.Now()
	c.lastError = ""
}

func (c *coverage) failed(err error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.failures++
	c.lastError = err.Error()
}

// report fills st's durability fields.
func (c *coverage) report(st *Status) {
	c.mu.Lock()
	defer c.mu.Unlock()
	st.Covered = c.lsn
	st.Checkpoints, st.CheckpointPause, st.CheckpointTime, st.LastCheckpoint = c.count, c.lastPause, c.lastWrite, c.last
	st.CheckpointFailures, st.CheckpointError = c.failures, c.lastError
}

// LoadCheckpoint replaces the entry's contents with its checkpoint in dir,
// if that checkpoint was written for the same spec, source and table, and
// marks it ready and covered. An idle position in state (see
// SaveIdleState) for the same version extends what is covered. The entry
// is left untouched on any error.
//
// The table is the one SetTable recorded: a checkpoint of another table
// OID (the table was dropped and created again under its name) is
// refused. An entry that knows no table (a tool reading a checkpoint
// outside a sidecar) takes the checkpoint's word for it.
func (e *Durability) LoadCheckpoint(dir string, src Source, state IdleState) (LSN, error) {
	var loaded Index
	var skipped []string
	var xids []keyXID
	path := e.CheckpointPath(dir)
	// refused is a checkpoint sound in itself but not this index's: said
	// as it is, not as corruption.
	var refused error
	h, err := ReadCheckpoint(path, func(h CheckpointHeader, body io.Reader) error {
		if refused = e.refuse(h, src); refused != nil {
			return refused
		}
		// As large as a BodyReader's buffer, so that the kinds' readers
		// read through it rather than ahead of each other.
		br := bufio.NewReaderSize(body, store.BodyBuffer)
		var err error
		if skipped, err = readKeys(br); err != nil {
			return err
		}
		if xids, err = readXIDs(br); err != nil {
			return err
		}
		if h.HasIndex {
			loaded, err = loadIndex(e.c.spec, pgvalue.KeyType(h.KeyType), h.Dims, br, h.Format)
		}
		return err
	})
	if refused != nil {
		return 0, fmt.Errorf("%s: %w", path, refused)
	}
	if err != nil {
		return 0, err
	}
	lsn := h.LSN
	if idle, ok := state[e.c.spec.Name]; ok && idle.Version == h.Version && idle.LSN > lsn {
		lsn = idle.LSN
	}
	for _, kx := range xids {
		setXID(loaded, kx.key, kx.xid)
	}
	e.c.wmu.Lock()
	dropped(e.c.index)
	dropped(e.c.syncIndex())
	e.c.tx.forget()
	e.c.index, e.c.sync = loaded, nil
	serve(loaded)
	clear(e.c.skipped)
	for _, k := range skipped {
		e.c.skipped[k] = struct{}{}
	}
	e.c.version.Store(h.Version)
	e.c.mu.Lock()
	e.c.dims = h.Dims
	e.c.keyType, e.c.vecType = pgvalue.KeyType(h.KeyType), pgvalue.VectorType(h.VectorType)
	e.c.state, e.c.failure = StateReady, ""
	e.c.mu.Unlock()
	e.c.coverage.reset(lsn, h.Version)
	e.c.publish()
	e.c.wmu.Unlock()
	e.c.advance(lsn)
	return lsn, nil
}

// refuse says why a checkpoint with header h is not the entry's, or nil:
// it is of an older format, another definition, another source, or
// another table.
func (e *Durability) refuse(h CheckpointHeader, src Source) error {
	e.c.mu.Lock()
	table := e.c.table
	e.c.mu.Unlock()
	switch {
	case h.Format < tableOIDCheckpoint:
		return fmt.Errorf("checkpoint format %d, written by an older vecside, does not record the table's OID: the table may have been dropped and created again since, so it is not trusted", h.Format)
	case h.Params != e.c.spec.String():
		return fmt.Errorf("written for index %q, now defined as %q", h.Params, e.c.spec.String())
	case h.SystemID != src.SystemID || h.Timeline != src.Timeline || h.Slot != src.Slot:
		return fmt.Errorf("written for system %d timeline %d slot %q, now following system %d timeline %d slot %q",
			h.SystemID, h.Timeline, h.Slot, src.SystemID, src.Timeline, src.Slot)
	case table.OID != 0 && h.TableOID != table.OID:
		return fmt.Errorf("checkpoint is of table OID %d, the table %s is now OID %d (dropped and re-created)",
			h.TableOID, e.c.spec.QualifiedTable(), table.OID)
	}
	return nil
}

// writeKeys writes a count and length-prefixed keys.
func writeKeys(w io.Writer, keys []string) error {
	buf := binary.AppendUvarint(nil, uint64(len(keys)))
	for _, k := range keys {
		buf = binary.AppendUvarint(buf, uint64(len(k)))
		buf = append(buf, k...)
	}
	_, err := w.Write(buf)
	return err
}

func readKeys(r *bufio.Reader) ([]string, error) {
	n, err := binary.ReadUvarint(r)
	if err != nil {
		return nil, err
	}
	var keys []string
	for i := uint64(0); i < n; i++ {
		k, err := readKey(r)
		if err != nil {
			return nil, fmt.Errorf("skipped key %d: %w", i, err)
		}
		keys = append(keys, k)
	}
	return keys, nil
}

// readKey reads a key written with its length, at most 1 MiB.
func readKey(r *bufio.Reader) (string, error) {
	l, err := binary.ReadUvarint(r)
	if err != nil || l > 1<<20 {
		return "", fmt.Errorf("bad length (%v)", err)
	}
	k := make([]byte, l)
	if _, err := io.ReadFull(r, k); err != nil {
		return "", err
	}
	return string(k), nil
}

// writeXIDs writes the known xids of the rows a checkpoint holds: a
// count, then each key with its xid.
func writeXIDs(w io.Writer, xids xidSnapshot) error {
	var n uint64
	xids.each(func(string, uint32) { n++ })
	b := store.NewBodyWriter(w)
	b.Uvarint(n)
	xids.each(func(key string, xid uint32) {
		b.String(key)
		b.Uvarint(uint64(xid))
	})
	return b.Flush()
}

type keyXID struct {
	key string
	xid uint32
}

func readXIDs(r *bufio.Reader) ([]keyXID, error) {
	n, err := binary.ReadUvarint(r)
	if err != nil {
		return nil, err
	}
	if n > store.MaxRows {
		return nil, fmt.Errorf("%d xids", n)
	}
	var out []keyXID
	for i := uint64(0); i < n; i++ {
		k, err := readKey(r)
		if err != nil {
			return nil, fmt.Errorf("xid %d: key: %w", i, err)
		}
		xid, err := binary.ReadUvarint(r)
		if err != nil || xid > math.MaxUint32 {
			return nil, fmt.Errorf("xid %d: bad value (%v)", i, err)
		}
		out = append(out, keyXID{k, uint32(xid)})
	}
	return out, nil
}

// IdleState records, per index, a position reached without changes since
// its checkpoint of the same version: when only keepalives or other
// tables' transactions have moved the stream, rewriting a whole checkpoint
// to cover the new position would be waste.
type IdleState map[string]IdlePosition

// IdlePosition is one index's entry in the idle state file.
type IdlePosition struct {
	Version uint64 `json:"version"`
	LSN     LSN    `json:"lsn"`
}

const idleStateFile = "idle.json"

// ReadIdleState reads the idle state file of dir; a missing or unreadable
// one is empty (it only ever extends what checkpoints cover).
func ReadIdleState(dir string) IdleState {
	b, err := os.ReadFile(filepath.Join(dir, idleStateFile))
	state := IdleState{}
	if err == nil && json.Unmarshal(b, &state) == nil {
		return state
	}
	return IdleState{}
}

// writeIdleState writes the file atomically.
func writeIdleState(dir string, state IdleState) error {
	b, err := json.Marshal(state)
	if err != nil {
		return err
	}
	return writeFileAtomic(filepath.Join(dir, idleStateFile), func(w io.Writer) error {
		_, err := w.Write(b)
		return err
	})
}
