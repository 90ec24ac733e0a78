package indexer

import (
	"math/bits"
	"sync/atomic"

	"github.com/vecside/vecside/indexer/store"
)

// Per row, an index records the transaction id that wrote the version of
// the row whose vector it holds (store.Keys.SetXID), so that a client
// that finds the same xmin in the heap may trust the sidecar's vector
// instead of fetching it. The one rule: an xid is recorded on a row only
// when that transaction's version of the row has exactly the row's
// vector. Hence:
//
//   - A streamed transaction's rows carry no xid until its Commit is
//     applied (Commit): until then a search may see some of its changes
//     and not others, and a heap row written twice by it holds only the
//     last vector.
//   - An UPDATE that leaves the vector alone (unchanged TOAST) passes the
//     transaction's xid on only to a row whose xid was known: that row's
//     vector is then the one the update kept (Unchanged).
//   - The copy's rows carry the xmin the copy read (CopyUpsert): a copy's
//     index serves only from its EndSync, when the applied position is at
//     least the copy's snapshot point.
//   - A by-key read (UpsertRead) is ahead of the stream: its xmin waits
//     until the applied position passes the read's, and is dropped if a
//     change reaches the key first (an older change would otherwise pair
//     its xid with the newer vector).
//   - Rows written in a subtransaction have the subtransaction's xmin, not
//     the streamed (top-level) xid, and a table rewrite gives every row a
//     new xmin: neither ever matches, and the client fetches.
//   - What waits to be recorded is dropped when the indexes change under
//     it (a copy's point or end, a load, a truncation: txBook.forget), and
//     every xid is forgotten when the source becomes another system or
//     timeline, whose xids name other writes (ForgetAllXIDs).
//
// Checkpoints keep the xids of the rows they write (see Checkpoint).

// txBook is what the apply path keeps of transaction ids until they may
// be recorded: the transaction being applied and the rows it wrote, and
// the reads ahead of the stream waiting for the applied position. The
// entry's apply lock guards it, but for pendingN.
type txBook struct {
	// xid is the id of the transaction being applied (0: unknown), and
	// writes the rows it wrote, which carry it once it commits. writes is
	// made anew for each transaction that writes, not cleared: a cleared
	// map keeps its buckets, and one bulk UPDATE would pin memory in
	// proportion to its rows for the life of the process.
	xid    uint32
	writes map[written]struct{}
	// pending holds the xmins of rows read ahead of the stream, by key,
	// until the applied position reaches them; pendingN is its size, for
	// SetApplied to read without the lock.
	pending  map[string]pendingRead
	pendingN atomic.Int64
}

// begin starts a transaction of id xid (0: unknown).
func (b *txBook) begin(xid uint32) {
	b.xid = xid
	b.writes = nil
}

// wrote notes that the transaction being applied wrote key's row in x.
func (b *txBook) wrote(x Index, key string) {
	if b.xid != 0 && x != nil {
		if b.writes == nil {
			b.writes = map[written]struct{}{}
		}
		b.writes[written{x, key}] = struct{}{}
	}
}

// wroteBefore reports whether the transaction being applied wrote key's
// row in x already.
func (b *txBook) wroteBefore(x Index, key string) bool {
	_, ok := b.writes[written{x, key}]
	return ok
}

// read waits to record xmin on key's row in targets once the applied
// position reaches at; the row is the read's, not the transaction's.
func (b *txBook) read(key string, xmin uint32, at LSN, targets []Index) {
	for _, x := range targets {
		delete(b.writes, written{x, key})
	}
	if xmin != 0 && len(targets) > 0 {
		b.pending[key] = pendingRead{xid: xmin, at: at, targets: targets}
		b.pendingN.Store(int64(len(b.pending)))
	}
}

// dropPending forgets a read's xmin for key: a change has reached it.
func (b *txBook) dropPending(key string) {
	if _, ok := b.pending[key]; ok {
		delete(b.pending, key)
		b.pendingN.Store(int64(len(b.pending)))
	}
}

// forget drops what waits to be recorded, when the indexes change under
// it (a copy's point, its end, a load, a truncation): a transaction or a
// read that spans such a change records nothing.
func (b *txBook) forget() {
	b.writes = nil
	clear(b.pending)
	b.pendingN.Store(0)
}

// settle records the xmins of the reads applied has reached, on those of
// their indexes that current still reports.
func (b *txBook) settle(applied LSN, current func(Index) bool) {
	for key, p := range b.pending {
		if p.at > applied {
			continue
		}
		for _, x := range p.targets {
			if current(x) {
				setXID(x, key, p.xid)
			}
		}
		delete(b.pending, key)
	}
	b.pendingN.Store(int64(len(b.pending)))
}

// written is a row written by the transaction being applied, in one
// index.
type written struct {
	x   Index
	key string
}

// pendingRead is the xmin of a row read by key ahead of the stream, for
// the indexes the read went to, waiting for the stream to reach at.
type pendingRead struct {
	xid     uint32
	at      LSN
	targets []Index
}

// BeginTx is Begin for a transaction of id xid (0: none known), whose
// rows carry it once Commit is applied.
func (e *Applier) BeginTx(final LSN, xid uint32) bool {
	e.c.wmu.Lock()
	e.c.tx.begin(xid)
	e.c.wmu.Unlock()
	return e.Begin(final)
}

// Commit ends the transaction being applied: the rows it wrote carry its
// xid from now on, and the applied position moves to end.
func (e *Applier) Commit(end LSN) {
	e.c.wmu.Lock()
	if e.c.tx.xid != 0 {
		toMain, toShadow := e.c.route()
		for w := range e.c.tx.writes {
			if toMain && w.x == e.c.index || toShadow && w.x == e.c.sync.index {
				setXID(w.x, w.key, e.c.tx.xid)
			}
		}
	}
	e.c.tx.begin(0)
	e.c.wmu.Unlock()
	e.c.advance(end)
}

// setXID records xid on key's current row in x, if it has one.
func setXID(x Index, key string, xid uint32) {
	if x == nil {
		return
	}
	keys := x.Keys()
	if id, ok := keys.Lookup(key); ok {
		keys.SetXID(id, xid)
	}
}

// xidOf is the xid recorded on key's current row in x, 0 if none.
func xidOf(x Index, key string) uint32 {
	if x == nil {
		return 0
	}
	keys := x.Keys()
	if id, ok := keys.Lookup(key); ok {
		return keys.XID(id)
	}
	return 0
}

// Unchanged applies an UPDATE of key that left its vector as it was (an
// unchanged TOAST value): the row's vector is the transaction's too, if
// the row's xid is known or the transaction wrote it earlier.
func (e *Applier) Unchanged(key string) {
	e.c.wmu.Lock()
	defer e.c.wmu.Unlock()
	toMain, toShadow := e.c.route()
	e.c.tx.dropPending(key)
	keep := func(x Index) {
		if !e.c.tx.wroteBefore(x, key) && xidOf(x, key) != 0 {
			e.c.tx.wrote(x, key)
		}
	}
	if toMain {
		keep(e.c.index)
	}
	if toShadow {
		keep(e.c.sync.index)
	}
}

// UpsertRead is Upsert for a row read by key from the table, ahead of the
// stream: at is an LSN at or past every commit the read could see, and
// xmin the row's. The transaction being applied did not write that
// version, and the xmin is recorded only once the applied position has
// reached at with no change to the key meanwhile.
func (e *Applier) UpsertRead(key string, vec []float32, xmin uint32, at LSN) {
	e.Upsert(key, vec)
	e.c.wmu.Lock()
	defer e.c.wmu.Unlock()
	var targets []Index
	for _, x := range []Index{e.c.index, e.c.syncIndex()} {
		if x != nil {
			targets = append(targets, x)
		}
	}
	e.c.tx.read(key, xmin, at, targets)
}

// settle records the xmins of reads the applied position has reached.
func (e *core) settle(applied LSN) {
	e.wmu.Lock()
	defer e.wmu.Unlock()
	e.tx.settle(applied, func(x Index) bool { return x == e.index || x == e.syncIndex() })
}

// ForgetAllXIDs forgets the xid of every row: the replication layer
// follows another system or timeline, whose xids mean other writes.
func (e *Applier) ForgetAllXIDs() {
	e.c.wmu.Lock()
	defer e.c.wmu.Unlock()
	e.c.tx.forget()
	for _, x := range []Index{e.c.index, e.c.syncIndex()} {
		if x != nil {
			keys := x.Keys()
			for id := range keys.High() {
				keys.SetXID(id, 0)
			}
		}
	}
}

// sameSystem reports whether a and b are the same system and timeline.
func sameSystem(a, b Source) bool { return a.SystemID == b.SystemID && a.Timeline == b.Timeline }

// xidSnapshot is what a checkpoint keeps of the xids: those of the live
// rows, captured with the index's snapshot while changes wait.
type xidSnapshot struct {
	keys *store.Keys
	live []uint64
	xids []uint32
}

func takeXIDs(x Index) xidSnapshot {
	keys := x.Keys()
	return xidSnapshot{keys: keys, live: keys.LiveCopy(), xids: keys.XIDCopy()}
}

// each calls fn for every live row with a known xid; the rows must be
// pinned by the index's snapshot.
func (s xidSnapshot) each(fn func(key string, xid uint32)) {
	for w, word := range s.live {
		for ; word != 0; word &= word - 1 {
			id := uint32(64*w) + uint32(bits.TrailingZeros64(word))
			if int(id) < len(s.xids) && s.xids[id] != 0 {
				fn(s.keys.Key(id), s.xids[id])
			}
		}
	}
}
