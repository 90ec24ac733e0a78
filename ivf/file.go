package ivf

import (
	"fmt"
	"io"
	"slices"

	"github.com/vecside/vecside/flat"
	"github.com/vecside/vecside/kernels"
)

const (
	fileMagic   = "VSIV"
	fileVersion = 1
)

// Snapshot returns a function that writes the index as it is now (see the
// package doc for the format). Taking it freezes each list (sharing its
// codes), shares the append-only key and float stores and copies the
// live bitmap; the returned function may run without the owner's lock
// while the index changes or a retrain swaps in.
func (x *Index) Snapshot() func(io.Writer) error {
	st := x.cur.Load()
	v := st.capture()
	lists := make([]*flat.List, len(st.lists))
	for c, l := range st.lists {
		lists[c] = l.Freeze()
	}
	pending := slices.Clone(st.pending)
	zeros := make([]string, 0, len(x.zeros))
	for k := range x.zeros {
		zeros = append(zeros, k)
	}
	slices.Sort(zeros)
	state, _ := x.rq.MarshalBinary()
	centroids, trained, store := st.centroids, st.trained, x.cfg.Store
	ext := store != flat.StoreFloat
	return func(w io.Writer) error {
		b := flat.NewBodyWriter(w)
		b.Raw([]byte(fileMagic))
		b.Raw([]byte{fileVersion, byte(store)})
		b.String(string(state))
		b.Uvarint(uint64(trained))
		b.Uvarint(uint64(len(zeros)))
		for _, k := range zeros {
			b.String(k)
		}
		b.Uvarint(uint64(len(lists)))
		b.Floats(centroids)
		enc := flat.NewEncoded(x.rq)
		for _, l := range lists {
			b.Uvarint(uint64(l.Live()))
			for slot := range uint32(l.Len()) {
				if l.Alive(slot) {
					id := l.ID(slot)
					l.Get(slot, &enc)
					b.String(v.keys[id])
					b.Encoded(&enc, ext)
					b.Floats(v.floats.get(id))
				}
			}
		}
		var live []uint32
		for _, id := range pending {
			if v.alive(id) {
				live = append(live, id)
			}
		}
		b.Uvarint(uint64(len(live)))
		for _, id := range live {
			b.String(v.keys[id])
			b.Floats(v.floats.get(id))
		}
		return b.Flush()
	}
}

// Load reads a body written by Snapshot into a new, finished index. cfg
// supplies the retrain thresholds, lists and probes; the codec's state
// and the store come from the body and must match cfg's metric and
// dimension.
func Load(r io.Reader, cfg Config) (*Index, error) {
	br := flat.NewBodyReader(r)
	var head [6]byte
	br.Raw(head[:])
	if br.Err() == nil && (string(head[:4]) != fileMagic || head[4] != fileVersion) {
		return nil, fmt.Errorf("ivf: not an ivf body of version %d", fileVersion)
	}
	var rq kernels.RaBitQ
	if err := rq.UnmarshalBinary([]byte(br.String())); br.Err() == nil && err != nil {
		return nil, fmt.Errorf("ivf: %w", err)
	}
	if br.Err() != nil {
		return nil, fmt.Errorf("ivf: %w", br.Err())
	}
	cfg.Store = flat.Store(head[5])
	c := rq.Config()
	if c.Dim != cfg.Dims || c.Metric != cfg.Metric || c.ExBits != cfg.Store.ExBits() || c.Seed != cfg.Seed {
		return nil, fmt.Errorf("ivf: body holds a %d-d %s index (store %s, seed %d), want %d-d %s (seed %d)",
			c.Dim, c.Metric, cfg.Store, c.Seed, cfg.Dims, cfg.Metric, cfg.Seed)
	}
	x, err := New(cfg)
	if err != nil {
		return nil, err
	}
	x.finished = true
	trained := br.Count(flat.MaxRows)
	for range br.Count(flat.MaxRows) {
		x.zeros[br.String()] = struct{}{}
	}
	k := br.Count(flat.MaxRows / uint64(cfg.Dims))
	centroids := make([]float32, k*cfg.Dims)
	br.Floats(centroids)
	if br.Err() != nil {
		return nil, fmt.Errorf("ivf: %w", br.Err())
	}
	st := newState(x, centroids, trained)
	enc := flat.NewEncoded(x.rq)
	vec := make([]float32, cfg.Dims)
	ext := cfg.Store != flat.StoreFloat
	read := func(c uint32) error {
		key := br.String()
		if c != noList {
			br.Encoded(&enc, ext)
		}
		br.Floats(vec)
		if br.Err() != nil {
			return br.Err()
		}
		if _, dup := st.table.Lookup(key); dup {
			return fmt.Errorf("key %q stored twice", key)
		}
		st.append(key, vec, c, &enc)
		return nil
	}
	for c := range uint32(k) {
		for range br.Count(flat.MaxRows) {
			if err := read(c); err != nil {
				return nil, fmt.Errorf("ivf: list %d: %w", c, err)
			}
		}
	}
	for range br.Count(flat.MaxRows) {
		if err := read(noList); err != nil {
			return nil, fmt.Errorf("ivf: pending rows: %w", err)
		}
	}
	if br.Err() != nil {
		return nil, fmt.Errorf("ivf: %w", br.Err())
	}
	x.cur.Store(st)
	return x, nil
}

// Stats reports the index's size and shape.
func (x *Index) Stats() flat.Stats {
	st := x.cur.Load()
	s := flat.Stats{
		Rows:       st.table.Live() + len(x.zeros),
		Tombstones: st.dead,
		CodeBytes:  int64(4 * (len(st.centroids) + len(st.cRot))),
		FloatBytes: st.floats.bytes(),
		KeyBytes:   st.table.Bytes() + int64(8*cap(st.loc)+8*cap(st.live)),
		Pending:    len(st.pending),
		Retrains:   int(x.retrains.Load()),
		Retraining: x.retraining.Load(),
	}
	for _, l := range st.lists {
		s.CodeBytes += l.Bytes()
		s.Lists = append(s.Lists, l.Live())
	}
	return s
}
