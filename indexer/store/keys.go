package store

import (
	"encoding/binary"
	"hash/maphash"
	"math/bits"
	"sync/atomic"
)

// Keys maps an index's keys to dense row ids and back. Keys are opaque
// strings (pgvalue's canonical forms): integer and uuid keys have a fixed
// width and are held in one flat byte slab, 8 or 16 bytes a row; text
// keys are held as strings. An open-addressed table of ids finds a key's
// id: 4 bytes a slot, at most three quarters full.
//
// Ids are reused: a removed id is tagged with the epoch of its removal
// and handed out again once no pinned reader can still see its old row
// (see Epochs). Until then its key, and whatever its owner stores under
// it, stay as they were.
//
// One writer at a time (the owner serialises Alloc, Publish and Remove);
// Lookup, Key, Live and High may run beside it.
type Keys struct {
	width int // bytes of a fixed-width key; 0 for variable
	fixed *Slab[byte]
	vari  *Slab[string]
	index atomic.Pointer[keyIndex]
	live  Bitmap
	xids  *Slab[atomic.Uint32] // id → the xid that wrote its row, 0 if unknown
	ep    *Epochs
	high  atomic.Uint32 // ids ever given out
	count atomic.Int64  // live keys
	used  int           // index slots taken, tombstones included
	held  int           // ids removed by Hold and not yet released
	text  atomic.Int64  // bytes of variable-width keys held (read by Bytes, beside the writer)

	limbo []retired // removed ids, oldest first
	// limboBytes is limbo's capacity in bytes, for Bytes: limbo is the
	// writer's, and Bytes runs beside it (a status query).
	limboBytes atomic.Int64
	head       int
	// reclaimed, if set, is told of each id handed out again, before its
	// new owner writes anything under it.
	reclaimed func(id uint32)
}

type retired struct {
	id    uint32
	epoch uint64
}

// keyIndex slots hold 0 (empty), 1 (removed) or id+2.
type keyIndex struct {
	slots []atomic.Uint32
	mask  uint32
}

const (
	slotEmpty   = 0
	slotRemoved = 1
)

// NewKeys returns an empty table for keys of width bytes (0: any length),
// whose ids are reused under ep.
func NewKeys(width int, ep *Epochs) *Keys {
	k := &Keys{width: width, live: NewBitmap(), xids: NewSlab[atomic.Uint32](1), ep: ep}
	if width > 0 {
		k.fixed = NewSlab[byte](width)
	} else {
		k.vari = NewSlab[string](1)
	}
	k.index.Store(newKeyIndex(16))
	return k
}

func newKeyIndex(n int) *keyIndex {
	return &keyIndex{slots: make([]atomic.Uint32, n), mask: uint32(n - 1)}
}

// OnReclaim sets the function told of every id handed out again.
func (k *Keys) OnReclaim(fn func(id uint32)) { k.reclaimed = fn }

var hashSeed = maphash.MakeSeed()

// hash spreads every bit of the key over the low bits the index uses:
// integer keys are big-endian, so their low-order bytes vary most, and
// a multiplication alone would leave the low bits of the hash constant.
func (k *Keys) hash(key string) uint32 {
	if len(key) == 8 {
		h := binary.BigEndian.Uint64([]byte(key)) // fmix64 of MurmurHash3
		h ^= h >> 33
		h *= 0xff51afd7ed558ccd
		h ^= h >> 33
		h *= 0xc4ceb9fe1a85ec53
		h ^= h >> 33
		return uint32(h)
	}
	return uint32(maphash.String(hashSeed, key))
}

// Key is the key of id.
func (k *Keys) Key(id uint32) string {
	if k.width > 0 {
		return string(k.fixed.Row(id))
	}
	return *k.vari.At(id)
}

func (k *Keys) keyIs(id uint32, key string) bool {
	if k.width > 0 {
		return string(k.fixed.Row(id)) == key
	}
	return *k.vari.At(id) == key
}

// Lookup returns key's id, live or being written.
func (k *Keys) Lookup(key string) (uint32, bool) {
	ix := k.index.Load()
	for i := k.hash(key) & ix.mask; ; i = (i + 1) & ix.mask {
		switch v := ix.slots[i].Load(); v {
		case slotEmpty:
			return 0, false
		case slotRemoved:
		default:
			if k.keyIs(v-2, key) {
				return v - 2, true
			}
		}
	}
}

// Live reports whether id holds a published key.
func (k *Keys) Live(id uint32) bool { return id < k.high.Load() && k.live.Has(id) }

// High is one more than the highest id ever given out: a scan over ids
// covers [0, High).
func (k *Keys) High() uint32 { return k.high.Load() }

// Len is the number of live keys.
func (k *Keys) Len() int { return int(k.count.Load()) }

// Alloc gives key an id, reusing a removed one whose readers are gone, and
// finds it under key from now on. The key must not be present. The id is
// not live until Publish: the caller writes what it stores under the id
// first.
func (k *Keys) Alloc(key string) uint32 {
	id, ok := k.reuse()
	if !ok {
		id = k.high.Load()
		if k.width > 0 {
			k.fixed.Grow(int(id) + 1)
		} else {
			k.vari.Grow(int(id) + 1)
		}
		k.live.Grow(int(id) + 1)
		k.xids.Grow(int(id) + 1)
	}
	k.xids.At(id).Store(0)
	if k.width > 0 {
		if len(key) != k.width {
			panic("store: key of the wrong width")
		}
		copy(k.fixed.Row(id), key)
	} else {
		k.text.Add(int64(len(key) - len(*k.vari.At(id))))
		*k.vari.At(id) = key
	}
	k.insert(key, id)
	if !ok {
		k.high.Store(id + 1)
	}
	return id
}

// reuse pops the oldest removed id if no reader pinned before its removal
// is left.
func (k *Keys) reuse() (uint32, bool) {
	if k.head == len(k.limbo) || k.limbo[k.head].epoch >= k.ep.Oldest() {
		return 0, false
	}
	r := k.limbo[k.head]
	k.head++
	if k.head == len(k.limbo) || k.head > 1024 && 2*k.head > len(k.limbo) {
		k.limbo = append(k.limbo[:0], k.limbo[k.head:]...)
		k.limboBytes.Store(int64(12 * cap(k.limbo)))
		k.head = 0
	}
	if k.reclaimed != nil {
		k.reclaimed(r.id)
	}
	return r.id, true
}

// SetXID records xid as the transaction that wrote id's row, as it is
// stored: only ever a transaction whose version of the row has exactly
// the row's vector (see the indexer), so that a reader who finds the
// same xid in the heap may trust the row. 0 means unknown.
func (k *Keys) SetXID(id uint32, xid uint32) { k.xids.At(id).Store(xid) }

// XID is what SetXID last recorded for id, 0 if nothing since Alloc.
func (k *Keys) XID(id uint32) uint32 { return k.xids.At(id).Load() }

// XIDCopy returns the xids of ids [0, High) as they are now, for a
// snapshot taken with LiveCopy.
func (k *Keys) XIDCopy() []uint32 {
	out := make([]uint32, k.High())
	for c, chunk := range k.xids.Chunks() {
		for i := range chunk {
			if id := c*chunkRows + i; id < len(out) {
				out[id] = chunk[i].Load()
			}
		}
	}
	return out
}

// Publish makes id live.
func (k *Keys) Publish(id uint32) {
	k.live.Set(id)
	k.count.Add(1)
}

// Remove forgets key, returning the id it had: it stops being live at
// once and is handed out again once no reader can see it.
func (k *Keys) Remove(key string) (uint32, bool) {
	id, ok := k.Hold(key)
	if ok {
		k.Release(id)
	}
	return id, ok
}

// Hold forgets key like Remove, but keeps its id from being handed out
// again until Release: for an owner whose own structures (a graph's
// edges) can still lead a reader to the id after the key is gone. Until
// Release the id's key and what the owner stores under it stay as they
// were; Live reports false for it from now on.
func (k *Keys) Hold(key string) (uint32, bool) {
	ix := k.index.Load()
	for i := k.hash(key) & ix.mask; ; i = (i + 1) & ix.mask {
		v := ix.slots[i].Load()
		if v == slotEmpty {
			return 0, false
		}
		if v != slotRemoved && k.keyIs(v-2, key) {
			id := v - 2
			ix.slots[i].Store(slotRemoved)
			if k.live.Has(id) {
				k.live.Clear(id)
				k.count.Add(-1)
			}
			k.held++
			return id, true
		}
	}
}

// Release lets an id removed by Hold be handed out again once every
// reader pinned now has unpinned. The owner calls it once nothing it
// publishes leads to the id any more: a reader that pins from now on
// cannot reach it, and one pinned before holds the id back.
func (k *Keys) Release(id uint32) {
	k.held--
	k.limbo = append(k.limbo, retired{id: id, epoch: k.ep.Retire()})
	k.limboBytes.Store(int64(12 * cap(k.limbo)))
}

// insert puts id under key in the index, growing or cleaning it first
// when it is three quarters taken.
func (k *Keys) insert(key string, id uint32) {
	ix := k.index.Load()
	if 4*(k.used+1) > 3*len(ix.slots) {
		// Keys allocated but not yet published count too.
		live := int(k.high.Load()) - (len(k.limbo) - k.head) - k.held + 1
		n := len(ix.slots)
		for 2*live > n { // at most half full after a rebuild
			n *= 2
		}
		ix = k.rebuild(ix, n)
	}
	k.put(ix, key, id)
	k.used++
}

func (k *Keys) put(ix *keyIndex, key string, id uint32) {
	i := k.hash(key) & ix.mask
	for v := ix.slots[i].Load(); v != slotEmpty && v != slotRemoved; v = ix.slots[i].Load() {
		i = (i + 1) & ix.mask
	}
	ix.slots[i].Store(id + 2)
}

// rebuild copies the index's entries into a new one of n slots, without
// the removed ones, and publishes it.
func (k *Keys) rebuild(old *keyIndex, n int) *keyIndex {
	ix := newKeyIndex(1 << bits.Len(uint(n-1)))
	k.used = 0
	for i := range old.slots {
		if v := old.slots[i].Load(); v > slotRemoved {
			k.put(ix, k.Key(v-2), v-2)
			k.used++
		}
	}
	k.index.Store(ix)
	return ix
}

// Each calls fn for every live id, in id order.
func (k *Keys) Each(fn func(id uint32)) {
	high := k.High()
	for w := uint32(0); 64*w < high; w++ {
		for word := k.live.Word(w); word != 0; word &= word - 1 {
			fn(64*w + uint32(bits.TrailingZeros64(word)))
		}
	}
}

// LiveCopy returns the live ids' bitmap as it is now, for a snapshot.
func (k *Keys) LiveCopy() []uint64 { return k.live.Copy(int(k.High())) }

// Bytes is the memory of the keys, the index and the live set.
func (k *Keys) Bytes() int64 {
	b := int64(4*len(k.index.Load().slots)) + k.live.Bytes() + k.xids.Bytes() + k.limboBytes.Load()
	if k.width > 0 {
		return b + k.fixed.Bytes()
	}
	return b + k.vari.Bytes() + k.text.Load()
}

// LiveWord returns the live bits of ids 64w … 64w+63, for a scan.
func (k *Keys) LiveWord(w uint32) uint64 { return k.live.Word(w) }
