package flat

import (
	"fmt"
	"math/bits"

	"github.com/vecside/vecside/kernels"
)

// Store names what a coded index keeps for its second, precise pass over
// the vectors that survive the 1-bit fast scan.
type Store uint8

const (
	// StoreExt4 keeps a 4-bit extended RaBitQ code per vector.
	StoreExt4 Store = 4
	// StoreExt8 keeps an 8-bit extended RaBitQ code per vector.
	StoreExt8 Store = 8
	// StoreFloat keeps the float32 vectors: the second pass is exact.
	StoreFloat Store = 32
)

// ParseStore reads the store= option: ext4, ext8 or float.
func ParseStore(s string) (Store, error) {
	switch s {
	case "ext4":
		return StoreExt4, nil
	case "ext8":
		return StoreExt8, nil
	case "float":
		return StoreFloat, nil
	}
	return 0, fmt.Errorf("store=%s: want ext4, ext8 or float", s)
}

func (s Store) String() string {
	switch s {
	case StoreExt4:
		return "ext4"
	case StoreExt8:
		return "ext8"
	case StoreFloat:
		return "float"
	}
	return fmt.Sprintf("store(%d)", uint8(s))
}

// ExBits is the width of the extended code the store keeps, 0 for none.
func (s Store) ExBits() int {
	if s == StoreFloat {
		return 0
	}
	return int(s)
}

// Encoded is one vector's codes: the 1-bit code and its factors, and the
// extended code and its factors when the codec has one.
type Encoded struct {
	Code, Ext []byte
	F, XF     kernels.Factors
}

// NewEncoded returns buffers sized for rq's codes.
func NewEncoded(rq *kernels.RaBitQ) Encoded {
	return Encoded{Code: make([]byte, rq.CodeBytes()), Ext: make([]byte, rq.ExtBytes())}
}

// Encode fills e with vec's codes relative to centroid.
func (e *Encoded) Encode(rq *kernels.RaBitQ, vec, centroid []float32) {
	e.F, e.XF = rq.Encode(vec, centroid, e.Code, e.Ext)
}

// List holds RaBitQ codes of vectors relative to one centroid, in
// fast-scan blocks of 32, with the owner's id of each. It only grows:
// removing a vector sets its tombstone, and a compaction builds a new List.
// That makes a List cheap to freeze for a snapshot (see Freeze).
type List struct {
	codeBytes, extBytes int
	blocks              []byte            // kernels.BlockBytes(codeBytes) per block
	fac                 []kernels.Factors // per slot, padded to whole blocks
	gone                []uint32          // per block: bit v set if slot 32b+v is a tombstone
	ext                 []byte            // extBytes per slot
	extF                []kernels.Factors // per slot, with an extended code
	ids                 []uint32          // slot → owner's id
	dead                int
	// A frozen list (see Freeze) keeps its last, partial block here.
	tail    []byte
	tailFac []kernels.Factors
}

// NewList returns an empty list for rq's codes.
func NewList(rq *kernels.RaBitQ) *List {
	return &List{codeBytes: rq.CodeBytes(), extBytes: rq.ExtBytes()}
}

// Len is the number of slots, tombstones included.
func (l *List) Len() int { return len(l.ids) }

// Live is the number of slots that are not tombstones.
func (l *List) Live() int { return len(l.ids) - l.dead }

// ID is the owner's id in slot.
func (l *List) ID(slot uint32) uint32 { return l.ids[slot] }

// Alive reports whether slot holds a vector that was not removed.
func (l *List) Alive(slot uint32) bool { return l.gone[slot/32]&(1<<(slot%32)) == 0 }

// Bytes is the memory held by codes and factors.
func (l *List) Bytes() int64 {
	return int64(cap(l.blocks) + cap(l.ext) + 16*(cap(l.fac)+cap(l.extF)) + 4*(cap(l.ids)+cap(l.gone)))
}

// Append stores e under the owner's id and returns its slot.
func (l *List) Append(id uint32, e *Encoded) uint32 {
	slot := uint32(len(l.ids))
	if slot%kernels.BlockVectors == 0 {
		l.blocks = append(l.blocks, make([]byte, kernels.BlockBytes(l.codeBytes))...)
		l.fac = append(l.fac, make([]kernels.Factors, kernels.BlockVectors)...)
		l.gone = append(l.gone, 0)
	}
	bb := kernels.BlockBytes(l.codeBytes)
	b := int(slot / kernels.BlockVectors)
	kernels.SetBlockCode(l.blocks[b*bb:(b+1)*bb], int(slot%kernels.BlockVectors), e.Code)
	l.fac[slot] = e.F
	if l.extBytes > 0 {
		l.ext = append(l.ext, e.Ext...)
		l.extF = append(l.extF, e.XF)
	}
	l.ids = append(l.ids, id)
	return slot
}

// Get copies slot's codes into e (whose buffers must be sized by NewEncoded).
func (l *List) Get(slot uint32, e *Encoded) {
	bb := kernels.BlockBytes(l.codeBytes)
	b := int(slot / kernels.BlockVectors)
	if (b+1)*bb <= len(l.blocks) {
		kernels.BlockCode(e.Code, l.blocks[b*bb:(b+1)*bb], int(slot%kernels.BlockVectors))
		e.F = l.fac[slot]
	} else {
		kernels.BlockCode(e.Code, l.tail, int(slot%kernels.BlockVectors))
		e.F = l.tailFac[slot%kernels.BlockVectors]
	}
	if l.extBytes > 0 {
		copy(e.Ext, l.ext[int(slot)*l.extBytes:])
		e.XF = l.extF[slot]
	}
}

// Kill makes slot a tombstone.
func (l *List) Kill(slot uint32) {
	if l.Alive(slot) {
		l.gone[slot/32] |= 1 << (slot % 32)
		l.dead++
	}
}

// Dead is the number of tombstones.
func (l *List) Dead() int { return l.dead }

// Freeze returns a read-only view of l, for Get and Alive, that later
// appends and kills do not change: full blocks and per-slot arrays are
// shared (they are only ever appended to), the last partial block and the
// tombstones are copied. It costs a block plus one bit per slot.
func (l *List) Freeze() *List {
	f := *l
	n := len(l.ids)
	f.ids, f.ext, f.extF = l.ids[:n:n], l.ext[:len(l.ext):len(l.ext)], l.extF[:len(l.extF):len(l.extF)]
	f.gone = append([]uint32(nil), l.gone...)
	bb := kernels.BlockBytes(l.codeBytes)
	full := n / kernels.BlockVectors
	f.blocks = l.blocks[: full*bb : full*bb]
	f.fac = l.fac[: full*kernels.BlockVectors : full*kernels.BlockVectors]
	if n%kernels.BlockVectors != 0 {
		f.tail = append([]byte(nil), l.blocks[full*bb:(full+1)*bb]...)
		f.tailFac = append([]kernels.Factors(nil), l.fac[full*kernels.BlockVectors:(full+1)*kernels.BlockVectors]...)
	}
	return &f
}

// Scan runs both passes of a search over l for one query prepared against
// l's centroid: the fast scan estimates every live (and allowed) vector
// with an error bound, and each one whose lower bound can still beat s's
// current k-th upper bound gets its second estimate, from the extended
// code or, if exact is not nil, from exact(id) with no error.
func (l *List) Scan(s *Searcher, pq *kernels.Query, exact func(id uint32) float32, allow *Allow) {
	bb := kernels.BlockBytes(l.codeBytes)
	n := len(l.ids)
	for b := 0; b*kernels.BlockVectors < n; b++ {
		base := b * kernels.BlockVectors
		mask := ^l.gone[b]
		if rem := n - base; rem < kernels.BlockVectors {
			mask &= 1<<rem - 1
		}
		if allow != nil && mask != 0 {
			mask &= allow.block(l.ids[base:min(n, base+kernels.BlockVectors)])
		}
		if mask == 0 {
			continue
		}
		s.scanned += bits.OnesCount32(mask)
		s.rq.FastScan(pq, l.blocks[b*bb:(b+1)*bb], (*[kernels.BlockVectors]kernels.Factors)(l.fac[base:]), &s.est, &s.bound)
		thr := s.Threshold()
		for m := mask; m != 0; m &= m - 1 {
			v := bits.TrailingZeros32(m)
			if s.est[v]-s.bound[v] > thr {
				continue
			}
			s.Offer(l.second(pq, uint32(base+v), exact, s.rq))
			thr = s.Threshold()
		}
	}
}

// ScanSlots gives the second estimate directly to the listed slots, for a
// filter so selective that a fast scan would mostly read disallowed rows.
func (l *List) ScanSlots(s *Searcher, pq *kernels.Query, slots []uint32, exact func(id uint32) float32) {
	for _, slot := range slots {
		if l.Alive(slot) {
			s.scanned++
			s.Offer(l.second(pq, slot, exact, s.rq))
		}
	}
}

func (l *List) second(pq *kernels.Query, slot uint32, exact func(id uint32) float32, rq *kernels.RaBitQ) (uint32, float32, float32) {
	id := l.ids[slot]
	if exact != nil {
		return id, exact(id), 0
	}
	est, bound := rq.ExtEstimate(pq, l.ext[int(slot)*l.extBytes:int(slot+1)*l.extBytes], &l.extF[slot])
	return id, est, bound
}
