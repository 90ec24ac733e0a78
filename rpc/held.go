package rpc

// held is a session's named prepared statements or portals, counted
// against Limits.MaxPrepared and Limits.MaxPreparedBytes together with
// the other kind through their shared usage.
type held[T any] struct {
	items map[string]T
	sizes map[string]int
	use   *usage
	what  string // "prepared statement" or "portal", for errors
}

// usage is what a session's statements and portals hold in all.
type usage struct {
	limits       *Limits
	count, bytes int
}

// heldOverhead is what a statement or portal costs beyond its text,
// parameters and rows: maps, structs, slices.
const heldOverhead = 256

func newHeld[T any](use *usage, what string) held[T] {
	return held[T]{items: map[string]T{}, sizes: map[string]int{}, use: use, what: what}
}

func (h *held[T]) get(name string) (T, bool) {
	v, ok := h.items[name]
	return v, ok
}

// put adds v of size bytes under name, replacing what was there, unless
// that would take the session past its limits (54000).
func (h *held[T]) put(name string, v T, size int) error {
	size += heldOverhead
	count, bytes := h.use.count+1, h.use.bytes+size
	if old, ok := h.sizes[name]; ok {
		count, bytes = count-1, bytes-old
	}
	if err := h.use.check(count, bytes, h.what); err != nil {
		return err
	}
	h.items[name], h.sizes[name] = v, size
	h.use.count, h.use.bytes = count, bytes
	return nil
}

// resize records that name now holds size bytes (plus the overhead), and
// fails if that takes the session past MaxPreparedBytes; it keeps the
// item either way.
func (h *held[T]) resize(name string, size int) error {
	size += heldOverhead
	h.use.bytes += size - h.sizes[name]
	h.sizes[name] = size
	return h.use.check(h.use.count, h.use.bytes, h.what)
}

func (h *held[T]) drop(name string) {
	if size, ok := h.sizes[name]; ok {
		h.use.count--
		h.use.bytes -= size
		delete(h.items, name)
		delete(h.sizes, name)
	}
}

func (h *held[T]) clear() {
	for name := range h.sizes {
		h.drop(name)
	}
}

func (u *usage) check(count, bytes int, what string) error {
	switch {
	case count > u.limits.MaxPrepared:
		return errorf(codeProgramLimitExceeded, "cannot create %s: the connection holds %d prepared statements and portals, the most allowed", what, u.limits.MaxPrepared).
			withHint("close unused ones (Close, DEALLOCATE), or ask the administrator to raise --max-prepared")
	case bytes > u.limits.MaxPreparedBytes:
		return errorf(codeProgramLimitExceeded, "cannot hold %s: the connection's prepared statements and portals would take %d bytes, more than the %d allowed", what, bytes, u.limits.MaxPreparedBytes).
			withHint("close unused ones (Close, DEALLOCATE), fetch suspended portals to the end, or ask the administrator to raise --max-prepared-bytes")
	}
	return nil
}
