package store

import (
	"math/bits"
	"slices"
	"sync/atomic"

	"github.com/vecside/vecside/kernels"
)

// List holds the 1-bit RaBitQ codes of the rows encoded against one
// centroid, in fast-scan blocks of 32, with each row's factors and id.
//
// Blocks are copy-on-write: a writer that fills a slot copies the block,
// writes the copy and publishes it with one atomic store, so a search
// reads every block whole and unchanging, without a lock. Which slots
// hold a live row is a separate atomic mask per block: a delete clears a
// bit and copies nothing. A slot whose row was removed is filled again
// only once its row id has been reclaimed (see Keys and Epochs): until
// then a search that saw the row live may still read it.
//
// A search must load a block's mask before the block: a row is written
// into the block before its bit is set.
type List struct {
	codeBytes int
	refs      atomic.Pointer[[]*blockRef]
	free      []uint32 // slots whose rows are gone for good
	live      atomic.Int64
}

type blockRef struct {
	mask atomic.Uint32
	b    atomic.Pointer[block]
}

type block struct {
	codes []byte // kernels.BlockBytes(codeBytes)
	fac   [kernels.BlockVectors]kernels.Factors
	ids   [kernels.BlockVectors]uint32
}

// NewList returns an empty list for codes of codeBytes bytes.
func NewList(codeBytes int) *List {
	l := &List{codeBytes: codeBytes}
	l.refs.Store(&[]*blockRef{})
	return l
}

// Len is the number of slots, free ones included.
func (l *List) Len() int { return kernels.BlockVectors * len(*l.refs.Load()) }

// Live is the number of live rows.
func (l *List) Live() int { return int(l.live.Load()) }

// Insert stores id's code and factors in a free slot and makes it live,
// returning the slot. Writers only.
func (l *List) Insert(id uint32, code []byte, f kernels.Factors) uint32 {
	var slot uint32
	refs := *l.refs.Load()
	if n := len(l.free); n > 0 {
		slot = l.free[n-1]
		l.free = l.free[:n-1]
	} else {
		// Every slot of every block is taken: open a block, whose other
		// 31 slots are free.
		b := uint32(len(refs))
		ref := &blockRef{}
		ref.b.Store(&block{codes: make([]byte, kernels.BlockBytes(l.codeBytes))})
		next := append(slices.Clip(refs), ref)
		l.refs.Store(&next)
		refs = next
		for v := kernels.BlockVectors - 1; v > 0; v-- {
			l.free = append(l.free, b*kernels.BlockVectors+uint32(v))
		}
		slot = b * kernels.BlockVectors
	}
	ref := refs[slot/kernels.BlockVectors]
	v := int(slot % kernels.BlockVectors)
	old := ref.b.Load()
	nb := &block{codes: slices.Clone(old.codes), fac: old.fac, ids: old.ids}
	kernels.SetBlockCode(nb.codes, v, code)
	nb.fac[v], nb.ids[v] = f, id
	ref.b.Store(nb)
	ref.mask.Or(1 << v)
	l.live.Add(1)
	return slot
}

// Kill makes slot's row dead: searches that start from now on skip it.
// The slot is not reused until Free.
func (l *List) Kill(slot uint32) {
	ref := (*l.refs.Load())[slot/kernels.BlockVectors]
	bit := uint32(1) << (slot % kernels.BlockVectors)
	if ref.mask.Load()&bit != 0 {
		ref.mask.And(^bit)
		l.live.Add(-1)
	}
}

// Free makes a dead slot available to Insert: its row id has been
// reclaimed, so no reader can still look at it.
func (l *List) Free(slot uint32) { l.free = append(l.free, slot) }

// Code copies slot's 1-bit code into code and returns its factors.
func (l *List) Code(slot uint32, code []byte) kernels.Factors {
	b := (*l.refs.Load())[slot/kernels.BlockVectors].b.Load()
	v := int(slot % kernels.BlockVectors)
	kernels.BlockCode(code, b.codes, v)
	return b.fac[v]
}

// Blocks is the number of blocks, for a scan.
func (l *List) Blocks() int { return len(*l.refs.Load()) }

// Bytes is the memory held by codes, factors, ids and masks.
func (l *List) Bytes() int64 {
	refs := *l.refs.Load()
	per := int64(kernels.BlockBytes(l.codeBytes)) + 16*kernels.BlockVectors + 4*kernels.BlockVectors + 48
	return int64(len(refs))*per + 8*int64(cap(refs)) + 4*int64(cap(l.free))
}

// Scan runs both passes of a search over the list for one query prepared
// against its centroid: the fast scan estimates every live (and allowed)
// row with an error bound, and each one whose lower bound can still beat
// the searcher's k-th upper bound gets its second estimate from second.
// It returns false, having stopped early, once stop reports true; stop is
// asked every few blocks.
func (l *List) Scan(s *Searcher, pq *kernels.Query, second Second, allow *Allow, stop func() bool) bool {
	refs := *l.refs.Load()
	for bi, ref := range refs {
		if bi%stopEvery == stopEvery-1 && stop() {
			return false
		}
		mask := ref.mask.Load()
		if mask == 0 {
			continue
		}
		b := ref.b.Load()
		if allow != nil {
			mask &= allow.block(&b.ids, mask)
			if mask == 0 {
				continue
			}
		}
		s.scanned += bits.OnesCount32(mask)
		s.rq.FastScan(pq, b.codes, &b.fac, &s.est, &s.bound)
		thr := s.Threshold()
		for m := mask; m != 0; m &= m - 1 {
			v := bits.TrailingZeros32(m)
			if s.est[v]-s.bound[v] > thr {
				continue
			}
			id := b.ids[v]
			est, bound := second(id, &b.fac[v])
			s.Offer(id, est, bound)
			thr = s.Threshold()
		}
	}
	return true
}

// stopEvery is how many blocks a scan reads between checks of its stop
// function: 32 blocks of 1,024 dimensions take well under a millisecond.
const stopEvery = 32

// ScanSlots gives the listed slots their second estimate directly, for a
// filter so selective that a fast scan would mostly read disallowed rows.
func (l *List) ScanSlots(s *Searcher, slots []uint32, second Second) {
	refs := *l.refs.Load()
	for _, slot := range slots {
		ref := refs[slot/kernels.BlockVectors]
		v := slot % kernels.BlockVectors
		if ref.mask.Load()&(1<<v) == 0 {
			continue
		}
		b := ref.b.Load()
		s.scanned++
		id := b.ids[v]
		est, bound := second(id, &b.fac[v])
		s.Offer(id, est, bound)
	}
}

// Second gives a row that survived the fast scan its precise estimate and
// bound: from its extended code, or exactly (bound 0). f is the row's
// 1-bit factors.
type Second func(id uint32, f *kernels.Factors) (est, bound float32)
