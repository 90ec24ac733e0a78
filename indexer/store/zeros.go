package store

import (
	"maps"
	"slices"
	"sync/atomic"
)

// Zeros holds the keys of an index's cosine zero vectors: rows of the
// table that have no cosine distance to anything, so are held (Has, Len,
// Each count them) but never returned by a search. Writers only, but for
// Len.
type Zeros struct {
	keys map[string]struct{}
	n    atomic.Int64
}

// NewZeros returns an empty set.
func NewZeros() *Zeros { return &Zeros{keys: map[string]struct{}{}} }

// Has reports whether key is a zero vector.
func (z *Zeros) Has(key string) bool {
	_, ok := z.keys[key]
	return ok
}

// Add records key as a zero vector.
func (z *Zeros) Add(key string) {
	if !z.Has(key) {
		z.keys[key] = struct{}{}
		z.n.Add(1)
	}
}

// Remove forgets key, reporting whether it was a zero vector.
func (z *Zeros) Remove(key string) bool {
	if !z.Has(key) {
		return false
	}
	delete(z.keys, key)
	z.n.Add(-1)
	return true
}

// Len is the number of zero vectors; it may run beside writers.
func (z *Zeros) Len() int { return int(z.n.Load()) }

// Sorted returns the keys in order, for a snapshot.
func (z *Zeros) Sorted() []string { return slices.Sorted(maps.Keys(z.keys)) }

// Held reports whether key is held: live or being written in keys, or a
// zero vector. The caller holds its index's writers' mutex.
func (z *Zeros) Held(keys *Keys, key string) bool {
	if z.Has(key) {
		return true
	}
	_, ok := keys.Lookup(key)
	return ok
}

// AllKeys returns every key held, live in keys or a zero vector, for an
// index's Each. The caller holds its index's writers' mutex.
func (z *Zeros) AllKeys(keys *Keys) []string {
	var out []string
	keys.Each(func(id uint32) { out = append(out, keys.Key(id)) })
	for k := range z.keys {
		out = append(out, k)
	}
	return out
}
