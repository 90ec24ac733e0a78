package store

import (
	"encoding/binary"
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/vecside/vecside/kernels"
)

func intKey(i int) string { return string(binary.BigEndian.AppendUint64(nil, uint64(i))) }

// A removed id is not handed out again while a reader pinned before its
// removal is still pinned; once it unpins, it is.
func TestEpochsHoldRemovedIDs(t *testing.T) {
	ep := NewEpochs()
	k := NewKeys(8, ep)
	a := k.Alloc(intKey(1))
	k.Publish(a)
	g := ep.Pin()
	if _, ok := k.Remove(intKey(1)); !ok {
		t.Fatal("remove")
	}
	if b := k.Alloc(intKey(2)); b == a {
		t.Fatalf("id %d reused while a reader that saw it is pinned", a)
	}
	late := ep.Pin() // pinned after the removal: it cannot see the old row
	g.Unpin()
	if c := k.Alloc(intKey(3)); c != a {
		t.Fatalf("id %d not reused once its readers left (got %d)", a, c)
	}
	late.Unpin()
	if k.Key(a) != intKey(3) || k.Len() != 0 {
		t.Fatalf("key of the reused id %x, %d live", k.Key(a), k.Len())
	}
}

// Keys of both widths: lookups after many inserts and removals (which
// rebuild the open-addressed index), reuse of ids, and their live bits.
func TestKeys(t *testing.T) {
	for _, width := range []int{8, 0} {
		k := NewKeys(width, NewEpochs())
		name := func(i int) string {
			if width == 8 {
				return intKey(i)
			}
			return fmt.Sprint("key-", i)
		}
		live := map[string]uint32{}
		rng := rand.New(rand.NewPCG(1, uint64(width)))
		for range 50000 {
			i := rng.IntN(5000)
			if id, ok := live[name(i)]; ok {
				got, removed := k.Remove(name(i))
				if !removed || got != id {
					t.Fatalf("width %d: remove %d: %d %v, want %d", width, i, got, removed, id)
				}
				delete(live, name(i))
				continue
			}
			id := k.Alloc(name(i))
			k.Publish(id)
			live[name(i)] = id
		}
		if k.Len() != len(live) {
			t.Fatalf("width %d: len %d, want %d", width, k.Len(), len(live))
		}
		seen := map[uint32]bool{}
		for key, id := range live {
			got, ok := k.Lookup(key)
			if !ok || got != id || !k.Live(id) || k.Key(id) != key || seen[id] {
				t.Fatalf("width %d: lookup %q: %d %v, want %d", width, key, got, ok, id)
			}
			seen[id] = true
		}
		if int(k.High()) > 2*5000 {
			t.Fatalf("width %d: %d ids given out for at most 5000 keys: ids are not reused", width, k.High())
		}
		if _, ok := k.Lookup(name(99999)); ok {
			t.Fatal("found a key never added")
		}
	}
}

// A list's blocks are copied on write: a block a reader holds never
// changes, masks say which slots are live, and freed slots are refilled.
func TestListCopyOnWrite(t *testing.T) {
	l := NewList(8)
	code := make([]byte, 8)
	for i := range 40 {
		code[0] = byte(i)
		if slot := l.Insert(uint32(i), code, kernels.Factors{NormSq: float32(i)}); slot != uint32(i) {
			t.Fatalf("insert %d went to slot %d", i, slot)
		}
	}
	held := (*l.refs.Load())[0].b.Load()
	l.Kill(3)
	l.Free(3)
	code[0] = 99
	if slot := l.Insert(100, code, kernels.Factors{}); slot != 3 {
		t.Fatalf("a freed slot was not refilled: %d", slot)
	}
	got := make([]byte, 8)
	if f := l.Code(3, got); got[0] != 99 || f.NormSq != 0 {
		t.Fatalf("slot 3 holds %d", got[0])
	}
	kernels.BlockCode(got, held.codes, 3)
	if got[0] != 3 || held.ids[3] != 3 {
		t.Fatal("a block a reader held changed under it")
	}
	if l.Live() != 40 || l.Len() != 64 {
		t.Fatalf("live %d, slots %d", l.Live(), l.Len())
	}
}

// Sequential integer keys, the common case, spread over the index: no
// probe sequence grows long (a hash that left the low bits constant made
// every lookup walk the whole table).
func TestKeysSpreadSequentialIntegers(t *testing.T) {
	k := NewKeys(8, NewEpochs())
	for i := range 100000 {
		k.Publish(k.Alloc(intKey(i)))
	}
	ix := k.index.Load()
	longest, run := 0, 0
	for i := range 2 * len(ix.slots) { // runs may wrap around
		if ix.slots[i%len(ix.slots)].Load() == slotEmpty {
			run = 0
			continue
		}
		run++
		longest = max(longest, run)
	}
	if longest > 64 {
		t.Fatalf("a run of %d taken slots in an index of %d for %d keys", longest, len(ix.slots), k.Len())
	}
}

// Keys allocated but not yet published still grow the key index, and
// ids held back by Hold are reused only after Release and the epochs.
func TestKeysAllocBeforePublishAndHold(t *testing.T) {
	ep := NewEpochs()
	k := NewKeys(8, ep)
	for i := range 5000 {
		if _, ok := k.Lookup(intKey(i)); ok {
			t.Fatalf("key %d found before it was added", i)
		}
		if id := k.Alloc(intKey(i)); id != uint32(i) {
			t.Fatalf("key %d got id %d", i, id)
		}
	}
	for i := range 5000 {
		k.Publish(uint32(i))
	}
	id, ok := k.Hold(intKey(10))
	if !ok || k.Live(id) || k.Len() != 4999 {
		t.Fatalf("hold: %d %v, live %v, %d keys", id, ok, k.Live(id), k.Len())
	}
	if got := k.Alloc(intKey(9000)); got == id {
		t.Fatal("an id held back was reused before its release")
	}
	k.Release(id)
	if got := k.Alloc(intKey(9001)); got != id {
		t.Fatalf("a released id with no reader pinned was not reused: got %d, want %d", got, id)
	}
}
