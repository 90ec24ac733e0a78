package indexer

import (
	"context"
	"fmt"
	"io"
	"math"
	"slices"
	"strconv"
	"strings"

	"github.com/vecside/vecside/flat"
	"github.com/vecside/vecside/hnsw"
	"github.com/vecside/vecside/internal/ivflists"
	"github.com/vecside/vecside/internal/pgvalue"
	"github.com/vecside/vecside/internal/store"
	"github.com/vecside/vecside/ivf"
)

// kind is one index kind: its build options, and how to make and load
// one.
type kind struct {
	// options validates the kind's build options (Spec.Options), returning
	// errors that wrap ErrInvalidArgument.
	options func(o Options) error
	// new builds an empty index, trained on sample (rows of a table of
	// about tableRows rows; empty when the table is) where the kind trains.
	new  func(spec Spec, cfg store.CodedConfig, sample [][]float32, tableRows int) (Index, error)
	load func(spec Spec, cfg store.CodedConfig, r io.Reader) (Index, error)
	// sample is how many rows of a table of n rows an index of spec
	// trains on.
	sample func(spec Spec, n, dims int) int
}

// kinds is the registry of index kinds, by the name kind= takes.
var kinds = map[string]kind{
	"flat": {options: flatOptions, new: newFlat, load: loadFlat, sample: flatSample},
	"ivf":  {options: ivfOptions, new: newIVF, load: loadIVF, sample: func(_ Spec, n, dims int) int { return ivf.SampleFor(n, dims) }},
	"hnsw": {options: hnswOptions, new: newHNSW, load: loadHNSW, sample: func(_ Spec, n, dims int) int { return hnsw.SampleFor(n, dims) }},
}

// Kinds lists the index kinds this build knows.
var Kinds = []string{"flat", "ivf", "hnsw"}

// codecSeed seeds the random rotation of every quantized index: fixed,
// so that a checkpoint's codes stay valid across restarts.
const codecSeed = 0x7665637369646531

// codedConfig is what every kind is made with: the spec's metric, the
// dimension, the width of the key type's canonical form, the store.
func codedConfig(spec Spec, kt pgvalue.KeyType, dims int, s store.Kind) store.CodedConfig {
	width := 0
	switch kt {
	case pgvalue.KeyInt2, pgvalue.KeyInt4, pgvalue.KeyInt8:
		width = 8
	case pgvalue.KeyUUID:
		width = 16
	}
	return store.CodedConfig{Metric: spec.Metric, Dims: dims, Store: s, Seed: codecSeed, KeyWidth: width}
}

// newIndex builds an empty index of spec's kind (see kind.new). The
// spec's options were validated by ParseSpec.
func newIndex(spec Spec, kt pgvalue.KeyType, dims int, sample [][]float32, tableRows int) (Index, error) {
	k := kinds[spec.Kind]
	s, err := storeOf(spec)
	if err != nil {
		return nil, err
	}
	return k.new(spec, codedConfig(spec, kt, dims, s), sample, tableRows)
}

// loadIndex reads a checkpoint body of spec's kind.
func loadIndex(spec Spec, kt pgvalue.KeyType, dims int, r io.Reader) (Index, error) {
	k, ok := kinds[spec.Kind]
	if !ok {
		return nil, fmt.Errorf("unknown index kind %q", spec.Kind)
	}
	s, err := storeOf(spec)
	if err != nil {
		return nil, err
	}
	return k.load(spec, codedConfig(spec, kt, dims, s), r)
}

// SampleSize is how many rows of a table of about tableRows rows of dims
// dimensions the entry's kind trains on before its copy: read them, then
// BeginSync.
func (e *Entry) SampleSize(tableRows, dims int) int {
	return kinds[e.spec.Kind].sample(e.spec, tableRows, max(dims, 1))
}

func invalid(format string, args ...any) error {
	return fmt.Errorf("%w: %s", ErrInvalidArgument, fmt.Sprintf(format, args...))
}

// checkKeys refuses options the kind does not know.
func checkKeys(kind string, o Options, known ...string) error {
	for k := range o {
		if !slices.Contains(known, k) {
			return invalid("unknown option %s=%s for kind=%s (known: %s)", k, o[k], kind, strings.Join(known, ", "))
		}
	}
	return nil
}

// storeOf is the spec's store: store= (and bits=, which picks the
// extended code width), else the kind's default.
func storeOf(spec Spec) (store.Kind, error) {
	return storeOption(spec.Options, defaultStore(spec.Kind))
}

// defaultStore is what a kind keeps per row unless told: flat the exact
// vectors; ivf the compact 4-bit codes; hnsw 6-bit codes, whose top four
// bits its walk reads and whose whole code orders the rows it returns
// (see hnsw's doc: 4-bit codes alone cannot order near rows finely
// enough for recall 0.99 on Fashion-MNIST, and 6-bit ones fit its memory
// budget).
func defaultStore(kind string) store.Kind {
	switch kind {
	case "flat":
		return store.Float
	case "hnsw":
		return store.Ext6
	}
	return store.Ext4
}

// storeOption reads store= (and bits=, which picks the extended code
// width), with def when neither is given.
func storeOption(o Options, def store.Kind) (store.Kind, error) {
	s := def
	if v, ok := o["store"]; ok {
		var err error
		if s, err = store.ParseKind(v); err != nil {
			return 0, invalid("%v", err)
		}
	}
	if v, ok := o["bits"]; ok {
		var b store.Kind
		switch v {
		case "4":
			b = store.Ext4
		case "6":
			b = store.Ext6
		case "8":
			b = store.Ext8
		default:
			return 0, invalid("bits=%s: want 4, 6 or 8 (bits per dimension of the extended code)", v)
		}
		if _, given := o["store"]; given && s != b {
			return 0, invalid("bits=%s contradicts store=%s", v, s)
		}
		s = b
	}
	return s, nil
}

// positive reads an optional integer option in [1, limit]; 0 if absent.
func positive(o Options, key string, limit int) (int, error) {
	v, ok := o[key]
	if !ok {
		return 0, nil
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 1 || n > limit {
		return 0, invalid("%s=%s: want an integer from 1 to %d", key, v, limit)
	}
	return n, nil
}

// flat: store=float (default: the exact float32 index) or
// store=ext4|ext6|ext8 (1-bit fast scan plus extended codes).
func flatOptions(o Options) error {
	if err := checkKeys("flat", o, "store", "bits"); err != nil {
		return err
	}
	_, err := storeOption(o, store.Float)
	return err
}

// flatSample: the coded flat index takes the mean of this many rows; the
// float index needs none.
func flatSample(spec Spec, n, _ int) int {
	if s, _ := storeOf(spec); s == store.Float {
		return 0
	}
	return min(n, 2*flat.MinMeanRows)
}

func newFlat(_ Spec, cfg store.CodedConfig, sample [][]float32, _ int) (Index, error) {
	if cfg.Store == store.Float {
		return floatFlat{flat.New(cfg.Metric, cfg.Dims, cfg.KeyWidth)}, nil
	}
	x, err := flat.NewCoded(cfg, sample)
	if err != nil {
		return nil, err
	}
	return codedFlat{x}, nil
}

func loadFlat(_ Spec, cfg store.CodedConfig, r io.Reader) (Index, error) {
	if cfg.Store == store.Float {
		x, err := flat.Load(r, cfg.Metric, cfg.Dims, cfg.KeyWidth)
		if err != nil {
			return nil, err
		}
		return floatFlat{x}, nil
	}
	x, err := flat.LoadCoded(r, cfg)
	if err != nil {
		return nil, err
	}
	return codedFlat{x}, nil
}

// MaxLists bounds lists= and probes=.
const MaxLists = MaxProbes

// ivf: lists=N (default by ivf.ListsFor), probes=N (a fixed default per
// query; without it, adaptive), store=ext4 (default) or ext6|ext8|float,
// bits=4|6|8.
func ivfOptions(o Options) error {
	_, err := ivfConfig(o, store.CodedConfig{})
	return err
}

func ivfConfig(o Options, cfg store.CodedConfig) (ivf.Config, error) {
	if err := checkKeys("ivf", o, "lists", "probes", "store", "bits"); err != nil {
		return ivf.Config{}, err
	}
	if _, err := storeOption(o, store.Ext4); err != nil {
		return ivf.Config{}, err
	}
	lists, err := positive(o, "lists", MaxLists)
	if err != nil {
		return ivf.Config{}, err
	}
	probes, err := positive(o, "probes", MaxLists)
	if err != nil {
		return ivf.Config{}, err
	}
	return ivf.Config{CodedConfig: cfg, Lists: lists, Probes: probes}, nil
}

func newIVF(spec Spec, cfg store.CodedConfig, sample [][]float32, tableRows int) (Index, error) {
	c, err := ivfConfig(spec.Options, cfg)
	if err != nil {
		return nil, err
	}
	x, err := ivf.New(c, sample, tableRows)
	if err != nil {
		return nil, err
	}
	return ivfIndex{x}, nil
}

func loadIVF(spec Spec, cfg store.CodedConfig, r io.Reader) (Index, error) {
	c, err := ivfConfig(spec.Options, cfg)
	if err != nil {
		return nil, err
	}
	x, err := ivf.Load(r, c)
	if err != nil {
		return nil, err
	}
	return ivfIndex{x}, nil
}

// hnsw: m=N, ef_construction=N, ef_search=N (the default per query),
// store=ext6 (default) or ext4|ext8|float, bits=4|6|8.
func hnswOptions(o Options) error {
	_, err := hnswConfig(o, store.CodedConfig{})
	return err
}

func hnswConfig(o Options, cfg store.CodedConfig) (hnsw.Config, error) {
	if err := checkKeys("hnsw", o, "m", "ef_construction", "ef_search", "store", "bits"); err != nil {
		return hnsw.Config{}, err
	}
	if _, err := storeOption(o, store.Ext6); err != nil {
		return hnsw.Config{}, err
	}
	c := hnsw.Config{CodedConfig: cfg}
	for _, opt := range []struct {
		key       string
		dst       *int
		min, most int
	}{{"m", &c.M, 2, hnsw.MaxM}, {"ef_construction", &c.EfConstruction, 1, hnsw.MaxEf}, {"ef_search", &c.EfSearch, 1, hnsw.MaxEf}} {
		n, err := positive(o, opt.key, opt.most)
		if err != nil {
			return hnsw.Config{}, err
		}
		if n > 0 && n < opt.min {
			return hnsw.Config{}, invalid("%s=%d: want an integer from %d to %d", opt.key, n, opt.min, opt.most)
		}
		*opt.dst = n
	}
	return c, nil
}

func newHNSW(spec Spec, cfg store.CodedConfig, sample [][]float32, tableRows int) (Index, error) {
	c, err := hnswConfig(spec.Options, cfg)
	if err != nil {
		return nil, err
	}
	x, err := hnsw.New(c, sample, tableRows)
	if err != nil {
		return nil, err
	}
	return hnswIndex{x}, nil
}

func loadHNSW(spec Spec, cfg store.CodedConfig, r io.Reader) (Index, error) {
	c, err := hnswConfig(spec.Options, cfg)
	if err != nil {
		return nil, err
	}
	x, err := hnsw.Load(r, c)
	if err != nil {
		return nil, err
	}
	return hnswIndex{x}, nil
}

// DefaultOversample is the candidate cap, in multiples of k, of a spec's
// searches that do not set one: 1 where distances are exact (the float
// stores), else what the second-pass codes need for recall@10 after the
// heap re-rank to reach 0.95 on the clustered, text-like and Fashion-MNIST
// sets (see ivf's BenchmarkProbing): ext8's estimates order candidates
// almost exactly, ext4's coarser ones need three times k, ext6's twice.
func DefaultOversample(spec Spec) float64 {
	s, _ := storeOf(spec)
	switch s {
	case store.Ext4:
		return 3
	case store.Ext6, store.Ext8:
		return 2
	}
	return 1
}

// wanted splits n = ceil(k × oversample), what an Entry passes, back into
// k and the cap: with oversample ≥ 1, floor(n/oversample) = k exactly.
func wanted(n int, opts SearchOptions) (k int) {
	o := max(opts.Oversample, 1)
	return max(1, int(math.Floor(float64(n)/o+1e-9)))
}

// floatFlat is the exact float32 index; it returns k × oversample rows.
type floatFlat struct{ *flat.Index }

func (f floatFlat) Prepare(vec []float32) Row  { return slices.Clone(vec) }
func (f floatFlat) Insert(key string, row Row) { f.Put(key, row.([]float32)) }
func (f floatFlat) NeedsRebuild() bool         { return false }
func (f floatFlat) Each(fn func(key string))   { f.Index.Each(func(k string, _ []float32) { fn(k) }) }

func (f floatFlat) Search(ctx context.Context, q []float32, n int, opts SearchOptions) ([]Hit, error) {
	if opts.Allow == nil {
		return f.Index.Search(ctx, q, n, nil)
	}
	allow, release := f.Allow(opts.Allow)
	defer release()
	return f.Index.Search(ctx, q, n, allow)
}

// coded is what the coded kinds share: rows in an ivflists.Coded.
type coded struct{ *ivflists.Coded }

func (c coded) Prepare(vec []float32) Row  { return c.Coded.Prepare(vec) }
func (c coded) Insert(key string, row Row) { c.Coded.Insert(key, row.(*ivflists.Prepared)) }

// search runs fn with the allow-set of opts's keys, if any.
func (c coded) search(opts SearchOptions, fn func(allow *store.Allow) ([]Hit, error)) ([]Hit, error) {
	if opts.Allow == nil {
		return fn(nil)
	}
	allow, release := c.Allow(opts.Allow)
	defer release()
	return fn(allow)
}

type codedFlat struct{ *flat.Coded }

func (f codedFlat) Prepare(vec []float32) Row  { return coded{f.Coded.Coded}.Prepare(vec) }
func (f codedFlat) Insert(key string, row Row) { coded{f.Coded.Coded}.Insert(key, row) }

func (f codedFlat) Search(ctx context.Context, q []float32, n int, opts SearchOptions) ([]Hit, error) {
	return coded{f.Coded.Coded}.search(opts, func(allow *store.Allow) ([]Hit, error) {
		return f.Coded.Search(ctx, q, wanted(n, opts), n, allow)
	})
}

type ivfIndex struct{ *ivf.Index }

func (x ivfIndex) Prepare(vec []float32) Row  { return coded{x.Index.Coded}.Prepare(vec) }
func (x ivfIndex) Insert(key string, row Row) { coded{x.Index.Coded}.Insert(key, row) }

func (x ivfIndex) Search(ctx context.Context, q []float32, n int, opts SearchOptions) ([]Hit, error) {
	return coded{x.Index.Coded}.search(opts, func(allow *store.Allow) ([]Hit, error) {
		return x.Index.Search(ctx, q, wanted(n, opts), n, opts.Probes, allow)
	})
}

type hnswIndex struct{ *hnsw.Index }

// A rebuild's copy admits its rows to the graph before it takes the apply lock.
var _ admitter = hnswIndex{}

func (x hnswIndex) Prepare(vec []float32) Row  { return x.Index.Prepare(vec) }
func (x hnswIndex) Insert(key string, row Row) { x.Index.Insert(key, row.(hnsw.Prepared)) }
func (x hnswIndex) Admit(row Row) Row          { return x.Index.Admit(row.(hnsw.Prepared)) }

func (x hnswIndex) Search(ctx context.Context, q []float32, n int, opts SearchOptions) ([]Hit, error) {
	return x.Index.Search(ctx, q, wanted(n, opts), n, opts.EfSearch, opts.Allow)
}
