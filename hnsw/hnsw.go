package hnsw

import (
	"fmt"
	"math"
	"math/rand/v2"
	"sync"
	"sync/atomic"

	"github.com/vecside/vecside/indexer/kind"
	"github.com/vecside/vecside/indexer/store"
	"github.com/vecside/vecside/internal/procs"
	"github.com/vecside/vecside/kernels"
)

// Config configures an index. Zero values take the defaults.
type Config struct {
	store.CodedConfig
	// M is the most neighbours of a node on the layers above 0, and half
	// the most on layer 0 (default DefaultM).
	M int
	// EfConstruction is the beam width of the search that finds a new
	// node's neighbours (default DefaultEfConstruction).
	EfConstruction int
	// EfSearch is the beam width of a query that does not set one
	// (default DefaultEfSearch); at least k is used.
	EfSearch int
	// Linkers is the most goroutines linking new rows into the graph at
	// once (default: one per core, procs.Cores).
	Linkers int
	// Pending bounds the rows inserted but not linked yet, which every
	// search estimates one by one (default DefaultPending).
	Pending int
	// RepairAfter is the share of the rows deleted but still in the graph
	// after which a repair pass starts (default DefaultRepairAfter).
	RepairAfter float64
}

// Defaults; see the package doc for how they were chosen.
const (
	DefaultM              = 16
	DefaultEfConstruction = 128
	DefaultEfSearch       = 64
	DefaultPending        = 512
	DefaultRepairAfter    = 0.01
	// MaxM bounds M: a layer-0 list of 2·M ids and its count fit a
	// header byte.
	MaxM = 64
	// MaxEf bounds EfConstruction and EfSearch.
	MaxEf = 10000
	// minRepair is the fewest deleted rows a repair pass is started for.
	minRepair = 64
)

func (c *Config) defaults() {
	if c.M == 0 {
		c.M = DefaultM
	}
	if c.EfConstruction == 0 {
		c.EfConstruction = DefaultEfConstruction
	}
	if c.EfSearch == 0 {
		c.EfSearch = DefaultEfSearch
	}
	if c.Linkers == 0 {
		c.Linkers = procs.Cores()
	}
	if c.Pending == 0 {
		c.Pending = DefaultPending
	}
	if c.RepairAfter == 0 {
		c.RepairAfter = DefaultRepairAfter
	}
}

func (c *Config) check() error {
	switch {
	case c.M < 2 || c.M > MaxM:
		return fmt.Errorf("hnsw: m=%d, want 2 to %d", c.M, MaxM)
	case c.EfConstruction < 1 || c.EfConstruction > MaxEf:
		return fmt.Errorf("hnsw: ef_construction=%d, want 1 to %d", c.EfConstruction, MaxEf)
	case c.EfSearch < 1 || c.EfSearch > MaxEf:
		return fmt.Errorf("hnsw: ef_search=%d, want 1 to %d", c.EfSearch, MaxEf)
	}
	return nil
}

// Index is a graph index over compact codes; see the package doc.
// Writers (Insert, Delete, Rename, Clear) serialise on its mutex;
// searches and snapshots take no lock.
type Index struct {
	cfg   Config
	rq    *kernels.RaBitQ
	cents *centroids
	// sampled is how many sample rows the centroids were trained on, for
	// a table of trainedFor rows.
	sampled, trainedFor int
	// cur is the rows and their graph; Clear replaces them whole, and a
	// search keeps the ones it loaded.
	cur atomic.Pointer[gen]

	mu       sync.Mutex // writers
	repairMu sync.Mutex // one repair pass at a time
	scratch  sync.Pool  // *scratch
	// following: the stream's lag counts on the index (see FollowStream).
	following atomic.Bool
	// insertLinked counts the rows Insert linked itself, under its
	// caller's locks, because Config.Pending rows were waiting.
	insertLinked atomic.Int64
}

// FollowStream tells the index that the stream's changes are applied to
// it from now on: while rows wait, a link of a row that is not a copy's
// (see Admit) narrows its beam (linkWidth) and searches yield their core
// (linkingBehind), so that the stream is never held back by the graph
// for long. The indexer calls it when the index becomes ready, and when a
// rebuild's copy into it begins.
func (x *Index) FollowStream() { x.following.Store(true) }

// gen is one generation of an index's rows: keys, codes, graph, the
// rows waiting to be linked, the deleted rows waiting for repair, and the
// goroutines that link and repair them.
type gen struct {
	x     *Index
	ep    *store.Epochs
	keys  *store.Keys
	codes *codes
	g     *graph
	ring  *ring
	zeros *store.Zeros

	// Writers only: deleted rows not yet released (see repair), and the
	// level generator. reused is set by keys when an Alloc reclaims an id.
	tombs  []uint32
	rng    *rand.Rand
	reused bool
	ntombs atomic.Int64

	// reps holds, per centroid, a live linked node encoded against it (or
	// none): searches enter layer 0 through the nodes of the centroids
	// nearest to them as well as from the top (see search).
	reps []atomic.Uint32

	epMu        sync.Mutex // changes of the entry point
	closed      atomic.Bool
	linkers     atomic.Int32
	maintaining atomic.Bool
	// unreachable counts live rows a search from the entry point cannot
	// reach, when last counted (-1: never); changes counts the rows
	// linked or deleted since.
	unreachable atomic.Int64
	changes     atomic.Int64
}

// New returns an empty index for a table of about rows rows, whose
// codes are taken against centroids trained on sample (rows of the table,
// SampleFor(rows) of them; one centroid, the origin, if it is empty).
func New(cfg Config, sample [][]float32, rows int) (*Index, error) {
	cfg.defaults()
	if err := cfg.check(); err != nil {
		return nil, err
	}
	rq, err := cfg.Codec()
	if err != nil {
		return nil, fmt.Errorf("hnsw: %w", err)
	}
	var cents *centroids
	if cfg.Store != store.Float {
		cents = train(rq, cfg.Dims, sample, rows, cfg.Seed^uint64(rows))
	}
	x := newIndex(cfg, rq, cents)
	x.sampled, x.trainedFor = len(sample), max(rows, len(sample))
	return x, nil
}

func newIndex(cfg Config, rq *kernels.RaBitQ, cents *centroids) *Index {
	x := &Index{cfg: cfg, rq: rq, cents: cents}
	x.cur.Store(x.newGen(newCodes(cfg.CodedConfig, rq, cents)))
	return x
}

func (x *Index) newGen(c *codes) *gen {
	ep := store.NewEpochs()
	r := &gen{
		x: x, ep: ep, keys: store.NewKeys(x.cfg.KeyWidth, ep), codes: c,
		g: newGraph(x.cfg.M), ring: newRing(x.cfg.Pending, x.cfg.Dims),
		zeros: store.NewZeros(), rng: rand.New(rand.NewPCG(x.cfg.Seed, 0x686e7377)),
	}
	r.keys.OnReclaim(func(uint32) { r.reused = true })
	if c.cents != nil {
		r.reps = make([]atomic.Uint32, c.cents.len())
		for i := range r.reps {
			r.reps[i].Store(none)
		}
	}
	r.unreachable.Store(-1)
	return r
}

// Config is the configuration the index was made with, defaults filled.
func (x *Index) Config() Config { return x.cfg }

// Keys is the current rows' keys, for the xids the owner records
// under them (Keys.SetXID).
func (x *Index) Keys() *store.Keys { return x.cur.Load().keys }

// Len is the number of keys held, zero vectors included.
func (x *Index) Len() int {
	r := x.cur.Load()
	return r.keys.Len() + r.zeros.Len()
}

// ZeroVectors counts held vectors that have no cosine distance.
func (x *Index) ZeroVectors() int { return x.cur.Load().zeros.Len() }

// Has reports whether key is held.
func (x *Index) Has(key string) bool {
	x.mu.Lock()
	defer x.mu.Unlock()
	r := x.cur.Load()
	return r.zeros.Held(r.keys, key)
}

// Each calls fn for every key held when it was called.
func (x *Index) Each(fn func(key string)) {
	x.mu.Lock()
	r := x.cur.Load()
	keys := r.zeros.AllKeys(r.keys)
	x.mu.Unlock()
	for _, k := range keys {
		fn(k)
	}
}

// Vector returns a copy of key's float32 vector (store=float only).
func (x *Index) Vector(key string) ([]float32, bool) {
	x.mu.Lock()
	defer x.mu.Unlock()
	r := x.cur.Load()
	if r.codes.floats == nil {
		return nil, false
	}
	if r.zeros.Has(key) {
		return make([]float32, x.cfg.Dims), true
	}
	id, ok := r.keys.Lookup(key)
	if !ok {
		return nil, false
	}
	return append([]float32(nil), r.codes.floats.Row(id)...), true
}

// Prepared is a row encoded for Insert, outside the writers' lock.
type Prepared struct {
	p    *prepared
	bulk bool // a copy's row, admitted (Admit): linked at full width
}

// Prepare encodes vec (Dims elements; not kept) for Insert.
func (x *Index) Prepare(vec []float32) Prepared {
	if len(vec) != x.cfg.Dims {
		panic(fmt.Sprintf("hnsw: put of %d-d vector into %d-d index", len(vec), x.cfg.Dims))
	}
	return Prepared{p: x.cur.Load().codes.prepare(vec)}
}

// Put inserts key or replaces its vector.
func (x *Index) Put(key string, vec []float32) { x.Insert(key, x.Prepare(vec)) }

// Insert stores a prepared row under key, replacing any row of key. The
// row is searchable when Insert returns; it is linked into the graph in
// the background (see the package doc), and Insert waits only when
// Config.Pending rows are waiting already.
func (x *Index) Insert(key string, p Prepared) {
	x.mu.Lock()
	defer x.mu.Unlock()
	r := x.cur.Load()
	r.delete(key)
	if p.p.zero {
		r.zeros.Add(key)
		return
	}
	r.add(key, p.p.vec, p.p.near, p.bulk, func(id uint32) { r.codes.put(id, p.p) })
}

// add allocates an id for key, has write fill its codes, makes it a
// node, publishes it and queues it for linking with vec (in the search
// space) and the centroids nearest it, if known (near; see enqueue);
// bulk marks a copy's row. Writers only.
func (r *gen) add(key string, vec []float32, near []uint32, bulk bool, write func(id uint32)) {
	r.reused = false
	id := r.keys.Alloc(key)
	r.codes.grow(int(id) + 1)
	r.g.grow(int(id) + 1)
	write(id)
	r.g.init(id, r.randomLevel(), r.reused)
	r.keys.Publish(id)
	r.enqueue(id, vec, near, bulk)
}

// randomLevel draws a new node's top layer: floor(−ln U / ln M), the
// distribution that makes each layer about M times smaller than the one
// below.
func (r *gen) randomLevel() int {
	u := 1 - r.rng.Float64() // (0, 1]
	return min(maxLevel, int(-math.Log(u)/math.Log(float64(r.x.cfg.M))))
}

// Delete removes key, reporting whether it was present.
func (x *Index) Delete(key string) bool {
	x.mu.Lock()
	defer x.mu.Unlock()
	return x.cur.Load().delete(key)
}

// delete removes key: its row stops being live (searches from now on do
// not return it) but stays in the graph, which searches may still walk
// through, until a repair pass has taken it out of every list (see
// repair). Writers only.
func (r *gen) delete(key string) bool {
	if r.zeros.Remove(key) {
		return true
	}
	id, ok := r.keys.Hold(key)
	if !ok {
		return false
	}
	r.tombs = append(r.tombs, id)
	r.ntombs.Add(1)
	r.changes.Add(1)
	if r.reps != nil {
		r.reps[r.codes.centroidOf(id)].CompareAndSwap(id, none)
	}
	r.epMu.Lock()
	if e, _, ok := r.g.entryPoint(); ok && e == id {
		r.replaceEntry()
	}
	r.epMu.Unlock()
	if n := r.ntombs.Load(); n >= minRepair && float64(n) >= r.x.cfg.RepairAfter*float64(r.keys.Len()) {
		r.maintain()
	}
	return true
}

// replaceEntry makes the live, linked node of the highest level the
// entry point; failing that, a live node still being linked (rows linked
// meanwhile hang off it, and with no entry point at all the next row
// linked would start a graph of its own, cut off from them); failing
// that, it leaves the graph without one. The caller holds the writers'
// mutex and epMu.
func (r *gen) replaceEntry() {
	g := r.g
	best, bestLevel := none, -1
	g.compactUppers(r.keys.Live)
	for _, linked := range []bool{true, false} {
		for _, id := range g.uppers {
			if h := g.header(id).Load(); (h&hdrLinked != 0 || !linked) && level(h) > bestLevel {
				best, bestLevel = id, level(h)
			}
		}
		if best == none {
			for id := range r.keys.High() {
				if r.keys.Live(id) && (g.linked(id) || !linked) {
					best, bestLevel = id, level(g.header(id).Load())
					break
				}
			}
		}
		if best != none {
			g.setEntry(best, bestLevel)
			return
		}
	}
	g.entry.Store(0)
}

// Rename gives the row of from the key to, replacing any row of to, and
// reports whether from was present. The row gets a new id and is linked
// again: ids never change key while searches may read them.
func (x *Index) Rename(from, to string) bool {
	x.mu.Lock()
	defer x.mu.Unlock()
	r := x.cur.Load()
	if r.zeros.Remove(from) {
		r.delete(to)
		r.zeros.Add(to)
		return true
	}
	old, ok := r.keys.Lookup(from)
	if !ok {
		return false
	}
	if from == to {
		return true
	}
	r.delete(to)
	vec := make([]float32, x.cfg.Dims)
	r.codes.decode(vec, old)
	r.delete(from) // its row stays as it is until released
	r.add(to, vec, nil, false, func(id uint32) { r.codes.copyRow(id, old) })
	return true
}

// Clear removes every row; the centroids stay. Searches under way finish
// on the rows they started with; the old rows' linkers and repairs stop.
func (x *Index) Clear() {
	x.mu.Lock()
	defer x.mu.Unlock()
	old := x.cur.Load()
	old.closed.Store(true)
	x.cur.Store(x.newGen(old.codes.fresh()))
}

// Close stops the index's background work (linking, repair); call it
// when the index is dropped. Searches keep working; rows inserted after
// Close are linked by Insert itself.
func (x *Index) Close() { x.cur.Load().closed.Store(true) }

// Stats reports the index's size and, as its figures (graphFigures), its
// graph's.
func (x *Index) Stats() kind.Stats {
	r := x.cur.Load()
	return kind.Stats{
		Rows:      x.Len(),
		CodeBytes: r.codes.bytes(),
		KeyBytes:  r.keys.Bytes(),
		Figures: []kind.Reading{
			{Figure: graphBytes, Value: float64(r.g.bytes() + r.ring.bytes())},
			{Figure: unrepairedRows, Value: float64(r.ntombs.Load())},
			{Figure: unreachableRows, Value: float64(r.unreachable.Load())},
			{Figure: insertLinkedRows, Value: float64(x.insertLinked.Load())},
		},
	}
}

// NeedsRebuild reports whether the centroids have drifted from the rows:
// trained on fewer than MinTrain sample rows (an empty or tiny table) when
// the index now holds MinTrain, or for a table Growth times smaller than
// the index is now. A rebuild trains them again and encodes every row
// afresh from the table.
func (x *Index) NeedsRebuild() bool {
	if x.cfg.Store == store.Float {
		return false
	}
	n := x.Len()
	return x.sampled < MinTrain && n >= MinTrain || n > Growth*max(x.trainedFor, MinTrain)
}

const (
	// MinTrain is the fewest sample rows centroids are worth training on.
	MinTrain = 1024
	// Growth is how much a table may grow past the size its centroids
	// were trained for before the index asks to be rebuilt: a centroid
	// then covers Growth times the rows it was made for.
	Growth = 3
)
