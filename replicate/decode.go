package replicate

import (
	"context"
	"fmt"
	"log/slog"

	"github.com/jackc/pglogrepl"
	"github.com/vecside/vecside/indexer"
)

// relation is what a Relation message told us about one of our tables:
// where the key and each index's vector sit in its tuples. Postgres sends
// one before the first change of a relation on each connection, and again
// after its schema changes; the cache is reset on every reconnect.
type relation struct {
	table  *table
	keyPos int             // -1: the key cannot be read
	vecPos map[Index]int   // entries still valid, by column position
	broken map[Index]error // entries it cannot feed, failed once a change reaches them
}

// decoder applies one connection's pgoutput stream to the indexes.
type decoder struct {
	tables []*table
	rels   map[uint32]*relation
	names  map[*column]string // as last seen in a Relation message
	tnames map[*table]string  // schema.table, as last seen in a Relation message
	repair func(ctx context.Context, t *table, e Index, key string, xid uint32) error
	// copyAgain is given an index that can no longer read its table's
	// changes as the table was resolved, and why.
	copyAgain func(e Index, why string)
	log       *slog.Logger
	stats     *Stats
	inTx      bool
	begin     pglogrepl.BeginMessage
	applyTo   map[Index]bool // entries not yet past this transaction
	before    func(typ byte) // see Config.BeforeMessage
}

func newDecoder(tables []*table, repair func(context.Context, *table, Index, string, uint32) error, copyAgain func(Index, string), log *slog.Logger, stats *Stats) *decoder {
	return &decoder{tables: tables, rels: map[uint32]*relation{}, names: map[*column]string{}, tnames: map[*table]string{}, repair: repair, copyAgain: copyAgain, log: log, stats: stats, applyTo: map[Index]bool{}}
}

// handle applies one pgoutput message. A message it cannot parse is
// logged and counted, never fatal: a message that crash-loops the stream
// would hold the slot, and with it the primary's WAL, forever.
func (d *decoder) handle(ctx context.Context, data []byte) (err error) {
	defer func() {
		if p := recover(); p != nil {
			err = fmt.Errorf("replicate: decoding message %q: %v", data[:1], p)
		}
	}()
	if d.before != nil && len(data) > 0 {
		d.before(data[0])
	}
	msg, err := pglogrepl.Parse(data)
	if err != nil {
		d.stats.UnknownMessages.Add(1)
		d.log.Warn("skipping a pgoutput message that does not parse", "type", string(data[:1]), "err", err)
		return nil
	}
	switch m := msg.(type) {
	case *pglogrepl.BeginMessage:
		d.inTx, d.begin = true, *m
		clear(d.applyTo)
		for _, t := range d.tables {
			for _, e := range t.entries {
				// A reconnect replays from the confirmed position, and a
				// table sync's copy holds what committed before its
				// snapshot: either is skipped.
				d.applyTo[e] = e.Stream().BeginTx(m.FinalLSN, m.Xid)
			}
		}
	case *pglogrepl.CommitMessage:
		if !d.inTx {
			return fmt.Errorf("replicate: Commit at %s without Begin", m.CommitLSN)
		}
		if m.CommitLSN != d.begin.FinalLSN {
			return fmt.Errorf("replicate: Commit LSN %s differs from Begin's final LSN %s", m.CommitLSN, d.begin.FinalLSN)
		}
		d.inTx = false
		for _, t := range d.tables {
			for _, e := range t.entries {
				e.Stream().Commit(m.TransactionEndLSN)
			}
		}
		d.stats.Transactions.Add(1)
	case *pglogrepl.RelationMessage:
		d.relation(m)
	case *pglogrepl.InsertMessage:
		if r := d.rel(m.RelationID); r != nil {
			return d.upsert(ctx, r, nil, m.Tuple)
		}
	case *pglogrepl.UpdateMessage:
		if r := d.rel(m.RelationID); r != nil {
			return d.upsert(ctx, r, m.OldTuple, m.NewTuple)
		}
	case *pglogrepl.DeleteMessage:
		if r := d.rel(m.RelationID); r != nil {
			key, ok := d.key(r, m.OldTuple)
			if !ok {
				return nil
			}
			for e := range r.vecPos {
				if d.applyTo[e] {
					d.guard(e, func() error { e.Stream().Delete(key); return nil })
				}
			}
			d.stats.Changes.Add(1)
		}
	case *pglogrepl.TruncateMessage:
		for _, id := range m.RelationIDs {
			if r := d.rel(id); r != nil {
				for e := range r.vecPos {
					if d.applyTo[e] {
						d.guard(e, func() error { e.Stream().Truncate(); return nil })
					}
				}
			}
		}
	case *pglogrepl.TypeMessage, *pglogrepl.OriginMessage, *pglogrepl.LogicalDecodingMessage:
		// Nothing to do: types are checked by name in Relation messages,
		// origins and application messages do not change rows.
	}
	return nil
}

// rel returns the cached relation if it feeds an index. A change has
// come: the indexes that the relation can no longer feed and that this
// transaction reaches are copied again. Those it does not reach
// (a table sync's copy holds it, or they applied it before a reconnect)
// are left alone: the schema may have changed back by the time a change
// reaches them.
func (d *decoder) rel(id uint32) *relation {
	r := d.rels[id]
	if r == nil || r.table == nil {
		return nil
	}
	for e, err := range r.broken {
		if d.applyTo[e] {
			delete(r.broken, e)
			d.copyAgain(e, err.Error())
		}
	}
	if len(r.vecPos) == 0 {
		return nil
	}
	return r
}

// relation caches a Relation message and checks that every index on the
// table can still read it. A key or vector column that is no longer
// published, or whose type changed, breaks the indexes that read it,
// which are copied again (see rel); the others go on. Renamed columns
// are followed.
func (d *decoder) relation(m *pglogrepl.RelationMessage) {
	var t *table
	for _, cand := range d.tables {
		if cand.oid == m.RelationID {
			t = cand
		}
	}
	r := &relation{table: t, keyPos: -1, vecPos: map[Index]int{}, broken: map[Index]error{}}
	d.rels[m.RelationID] = r
	if t == nil {
		return
	}
	d.rename(t, m)
	pos := d.locate(t, m.Columns)
	keyErr := d.fits(t, t.key, m.Columns, pos[t.key])
	if keyErr == nil {
		r.keyPos = pos[t.key]
	}
	for _, e := range t.entries {
		if state, _ := e.State(); state == indexer.StateError {
			continue
		}
		c := t.vectors[e.Spec().Column]
		err := keyErr
		if err == nil {
			err = d.fits(t, c, m.Columns, pos[c])
		}
		if err != nil {
			r.broken[e] = err
			continue
		}
		r.vecPos[e] = pos[c]
	}
}

// rename follows a new name of the table (its OID is the same): the
// status of its indexes names it so from now on. SQL issued later (a
// repair read, a rebuild's copy) still names the table as it was
// resolved, and a restart looks it up by the name the definitions give.
func (d *decoder) rename(t *table, m *pglogrepl.RelationMessage) {
	was, ok := d.tnames[t]
	if !ok {
		was = t.schema + "." + t.name
	}
	now := m.Namespace + "." + m.RelationName
	if now == was {
		return
	}
	d.tnames[t] = now
	d.log.Info("following a renamed table", "oid", t.oid, "was", was, "now", now)
	for _, e := range t.entries {
		e.Durable().SetTable(indexer.Table{OID: t.oid, Schema: m.Namespace, Name: m.RelationName})
	}
}

// locate finds the table's published columns in a Relation message, which
// lists the published columns in attribute-number order, without their
// numbers. While it lists as many as the table publishes, a column's place
// is its rank among their attribute numbers, whatever it is called now. A
// list of another length means that the publication's column list changed:
// then columns are found by the names they were last seen under. -1: not
// in the message.
func (d *decoder) locate(t *table, cols []*pglogrepl.RelationMessageColumn) map[*column]int {
	pos := make(map[*column]int, len(t.published))
	for i, c := range t.published {
		pos[c] = -1
		if len(cols) == len(t.published) {
			pos[c] = i
			continue
		}
		for j, mc := range cols {
			if mc.Name == d.name(c) {
				pos[c] = j
			}
		}
	}
	return pos
}

// name is what c was called in the last Relation message.
func (d *decoder) name(c *column) string {
	if n, ok := d.names[c]; ok {
		return n
	}
	return c.name
}

// fits reports whether the column at pos of a Relation message can still
// be read as c, and if not, what changed and how to recover. A new name is
// logged and followed.
func (d *decoder) fits(t *table, c *column, cols []*pglogrepl.RelationMessageColumn, pos int) error {
	what := "column"
	if c == t.key {
		what = "key column"
	}
	if pos < 0 {
		return fmt.Errorf("%s %s of %s is no longer published (was the publication's column list changed?); publishing it again and copying the table",
			what, indexer.QuoteIdent(d.name(c)), t.qualified())
	}
	mc := cols[pos]
	// A key's modifier (varchar(n)) does not change how it is read.
	if mc.DataType != c.typ.oid || (c != t.key && mc.TypeModifier != c.typ.typmod) {
		return fmt.Errorf("%s %s of %s changed type (type OID %d, typmod %d; was %s, typmod %d); copying the table again with the new type",
			what, indexer.QuoteIdent(mc.Name), t.qualified(), mc.DataType, mc.TypeModifier, c.typ.name, c.typ.typmod)
	}
	if was := d.name(c); mc.Name != was {
		d.log.Info("following a renamed column", "table", t.qualified(), "attnum", c.attnum, "was", was, "now", mc.Name)
		d.names[c] = mc.Name
	}
	return nil
}

// key decodes the key column of a tuple; ok is false (and the change is
// counted as dropped) when it cannot be read.
func (d *decoder) key(r *relation, tuple *pglogrepl.TupleData) (string, bool) {
	if tuple == nil || r.keyPos < 0 || r.keyPos >= len(tuple.Columns) {
		d.stats.BadKeys.Add(1)
		return "", false
	}
	c := tuple.Columns[r.keyPos]
	var key string
	var err error
	switch c.DataType {
	case pglogrepl.TupleDataTypeBinary:
		key, err = r.table.keyType.DecodeBinary(c.Data)
	case pglogrepl.TupleDataTypeText:
		key, err = r.table.keyType.DecodeText(string(c.Data))
	default:
		err = fmt.Errorf("key sent as %q", c.DataType)
	}
	if err != nil {
		d.stats.BadKeys.Add(1)
		d.log.Warn("dropping a change whose key cannot be read", "table", r.table.qualified(), "err", err)
		return "", false
	}
	return key, true
}

// upsert applies an INSERT (old == nil) or UPDATE. For an UPDATE that
// changed the key, old holds the old key ('K' tuple: other columns are
// 'n', meaning "not part of the identity", not NULL).
func (d *decoder) upsert(ctx context.Context, r *relation, old, new *pglogrepl.TupleData) error {
	key, ok := d.key(r, new)
	if !ok {
		return nil
	}
	oldKey := key
	if old != nil {
		if oldKey, ok = d.key(r, old); !ok {
			return nil
		}
	}
	d.stats.Changes.Add(1)
	for e, pos := range r.vecPos {
		if !d.applyTo[e] {
			continue
		}
		if err := d.guard(e, func() error { return d.upsertOne(ctx, r, e, pos, oldKey, key, new) }); err != nil {
			return err
		}
	}
	return nil
}

// upsertOne applies an INSERT or UPDATE to one index, whose vector is
// column pos of the new tuple.
func (d *decoder) upsertOne(ctx context.Context, r *relation, e Index, pos int, oldKey, key string, new *pglogrepl.TupleData) error {
	if pos >= len(new.Columns) {
		e.Stream().Skip(key)
		return nil
	}
	c := new.Columns[pos]
	if c.DataType == pglogrepl.TupleDataTypeToast {
		// The vector did not change and was not sent. Keep it (moving it
		// to the new key), or read it if this index never had it: an
		// INSERT through a row filter, or a row the index lost.
		if oldKey != key && e.Stream().Move(oldKey, key) {
			return nil
		}
		if oldKey == key && e.Stream().Known(key) {
			e.Stream().Unchanged(key)
			return nil
		}
		return d.repair(ctx, r.table, e, key, d.begin.Xid)
	}
	if oldKey != key {
		e.Stream().Delete(oldKey)
	}
	var vec []float32
	switch c.DataType {
	case pglogrepl.TupleDataTypeBinary:
		vec = decodeVector(e, c.Data, true)
	case pglogrepl.TupleDataTypeText:
		vec = decodeVector(e, c.Data, false)
	}
	e.Stream().Upsert(key, vec)
	return nil
}

// guard applies a change to one index. A panic there is a broken
// invariant of that index, not of the stream: were it the stream's error,
// the stream would reconnect and replay the same change forever while the
// slot held the primary's WAL. The index is failed instead, and the other
// indexes and the slot go on.
func (d *decoder) guard(e Index, apply func() error) (err error) {
	defer func() {
		if p := recover(); p != nil {
			d.applyTo[e] = false
			failOnly(d.log, e, fmt.Errorf("index %s: applying a change failed (%v); restart vecside to copy the table again", e.Spec().Name, p))
		}
	}()
	return apply()
}
