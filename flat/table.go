package flat

// Table maps keys to an index's internal ids (uint32, dense, in order of
// arrival) and back. Ids are never reused: replacing or removing a key
// retires its id, and only a compaction, which builds a new Table,
// reclaims them. The id → key slice is only ever appended to, so a
// snapshot can share it (see Keys).
type Table struct {
	keys []string          // id → key
	ids  map[string]uint32 // live keys only
	// keyBytes sums the lengths of all keys in keys, for Bytes.
	keyBytes int64
}

// NewTable returns an empty table.
func NewTable() *Table { return &Table{ids: map[string]uint32{}} }

// Add gives key a new id. The caller has retired any earlier id of key.
func (t *Table) Add(key string) uint32 {
	id := uint32(len(t.keys))
	t.keys = append(t.keys, key)
	t.ids[key] = id
	t.keyBytes += int64(len(key))
	return id
}

// Lookup returns key's live id.
func (t *Table) Lookup(key string) (uint32, bool) {
	id, ok := t.ids[key]
	return id, ok
}

// Retire forgets key's id.
func (t *Table) Retire(key string) { delete(t.ids, key) }

// Key is the key that id was given to.
func (t *Table) Key(id uint32) string { return t.keys[id] }

// Live is the number of keys with a live id.
func (t *Table) Live() int { return len(t.ids) }

// Slots is the number of ids given out, retired ones included.
func (t *Table) Slots() int { return len(t.keys) }

// Keys returns the id → key slice as it is now; later Adds do not change
// what it holds.
func (t *Table) Keys() []string { return t.keys[:len(t.keys):len(t.keys)] }

// Bytes estimates the memory of the key map: the key strings and their
// headers, and about 48 bytes per map entry (Go's swiss tables, with
// their slack).
func (t *Table) Bytes() int64 {
	return t.keyBytes + 16*int64(cap(t.keys)) + 48*int64(len(t.ids))
}
