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
	"github.com/vecside/vecside/ivf"
)

// kind is one index kind: its build options, and how to make, load and
// search one.
type kind struct {
	// options validates the kind's build options (Spec.Options), returning
	// errors that wrap ErrInvalidArgument.
	options func(o Options) error
	new     func(spec Spec, dims int) (Index, error)
	load    func(spec Spec, dims int, r io.Reader) (Index, error)
}

// kinds is the registry of index kinds, by the name kind= takes.
var kinds = map[string]kind{
	"flat": {options: flatOptions, new: newFlat, load: loadFlat},
	"ivf":  {options: ivfOptions, new: newIVF, load: loadIVF},
}

// Kinds lists the index kinds this build knows.
var Kinds = []string{"flat", "ivf"}

// codecSeed seeds the random rotation of every quantized index: fixed,
// so that a checkpoint's codes stay valid across restarts.
const codecSeed = 0x7665637369646531

// newIndex builds an empty index of spec's kind. The spec's options were
// validated by ParseSpec.
func newIndex(spec Spec, dims int) Index {
	x, err := kinds[spec.Kind].new(spec, dims)
	if err != nil {
		panic(fmt.Sprintf("indexer: index %s: %v", spec.Name, err)) // options were checked by ParseSpec
	}
	return x
}

// loadIndex reads a checkpoint body of spec's kind.
func loadIndex(spec Spec, dims int, r io.Reader) (Index, error) {
	k, ok := kinds[spec.Kind]
	if !ok {
		return nil, fmt.Errorf("unknown index kind %q", spec.Kind)
	}
	return k.load(spec, dims, r)
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

// store reads store= (and bits=, which picks the extended code width), with
// def when neither is given.
func store(o Options, def flat.Store) (flat.Store, error) {
	s := def
	if v, ok := o["store"]; ok {
		var err error
		if s, err = flat.ParseStore(v); err != nil {
			return 0, invalid("%v", err)
		}
	}
	if v, ok := o["bits"]; ok {
		var b flat.Store
		switch v {
		case "4":
			b = flat.StoreExt4
		case "8":
			b = flat.StoreExt8
		default:
			return 0, invalid("bits=%s: want 4 or 8 (bits per dimension of the extended code)", v)
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

// flat: store=float (default: the exact float32 index) or store=ext4|ext8
// (1-bit fast scan plus extended codes).
func flatOptions(o Options) error {
	if err := checkKeys("flat", o, "store", "bits"); err != nil {
		return err
	}
	_, err := store(o, flat.StoreFloat)
	return err
}

func newFlat(spec Spec, dims int) (Index, error) {
	s, err := store(spec.Options, flat.StoreFloat)
	if err != nil {
		return nil, err
	}
	if s == flat.StoreFloat {
		return floatFlat{flat.New(spec.Metric, dims)}, nil
	}
	x, err := flat.NewCoded(flat.CodedConfig{Metric: spec.Metric, Dims: dims, Store: s, Seed: codecSeed})
	if err != nil {
		return nil, err
	}
	return codedFlat{x}, nil
}

func loadFlat(spec Spec, dims int, r io.Reader) (Index, error) {
	s, err := store(spec.Options, flat.StoreFloat)
	if err != nil {
		return nil, err
	}
	if s == flat.StoreFloat {
		x, err := flat.Load(r, spec.Metric, dims)
		if err != nil {
			return nil, err
		}
		return floatFlat{x}, nil
	}
	x, err := flat.LoadCoded(r, spec.Metric, dims)
	if err != nil {
		return nil, err
	}
	return codedFlat{x}, nil
}

// MaxLists bounds lists= and probes=.
const MaxLists = MaxProbes

// ivf: lists=N (default by ivf.ListsFor), probes=N (the default per
// query), store=float (default) or ext4|ext8, bits=4|8.
func ivfOptions(o Options) error {
	_, err := ivfConfig(o, 0)
	return err
}

func ivfConfig(o Options, dims int) (ivf.Config, error) {
	if err := checkKeys("ivf", o, "lists", "probes", "store", "bits"); err != nil {
		return ivf.Config{}, err
	}
	s, err := store(o, flat.StoreFloat)
	if err != nil {
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
	return ivf.Config{Dims: dims, Store: s, Lists: lists, Probes: probes, Seed: codecSeed}, nil
}

func newIVF(spec Spec, dims int) (Index, error) {
	cfg, err := ivfConfig(spec.Options, dims)
	if err != nil {
		return nil, err
	}
	cfg.Metric = spec.Metric
	x, err := ivf.New(cfg)
	if err != nil {
		return nil, err
	}
	return ivfIndex{x}, nil
}

func loadIVF(spec Spec, dims int, r io.Reader) (Index, error) {
	cfg, err := ivfConfig(spec.Options, dims)
	if err != nil {
		return nil, err
	}
	cfg.Metric = spec.Metric
	x, err := ivf.Load(r, cfg)
	if err != nil {
		return nil, err
	}
	return ivfIndex{x}, nil
}

// wanted splits n = ceil(k × oversample), what an Entry passes, back into
// k and the cap: with oversample ≥ 1, floor(n/oversample) = k exactly.
func wanted(n int, opts SearchOptions) (k int) {
	o := max(opts.Oversample, 1)
	return max(1, int(math.Floor(float64(n)/o+1e-9)))
}

// floatFlat is the exact float32 index; it returns k × oversample rows.
type floatFlat struct{ *flat.Index }

func (f floatFlat) Search(ctx context.Context, q []float32, n int, opts SearchOptions) ([]Hit, error) {
	if opts.Allow != nil {
		return nil, fmt.Errorf("%w: kind=flat store=float has no filtered search", ErrInvalidArgument)
	}
	return f.Index.Search(ctx, q, n)
}

type codedFlat struct{ *flat.Coded }

func (f codedFlat) Vector(string) ([]float32, bool) { return nil, false }

func (f codedFlat) Search(ctx context.Context, q []float32, n int, opts SearchOptions) ([]Hit, error) {
	var allow *flat.Allow
	if opts.Allow != nil {
		allow = f.AllowKeys(opts.Allow)
	}
	return f.Coded.Search(ctx, q, wanted(n, opts), n, allow)
}

type ivfIndex struct{ *ivf.Index }

func (x ivfIndex) Search(ctx context.Context, q []float32, n int, opts SearchOptions) ([]Hit, error) {
	var filter *ivf.Filter
	if opts.Allow != nil {
		filter = x.Filter(opts.Allow)
	}
	return x.Index.Search(ctx, q, wanted(n, opts), n, opts.Probes, filter)
}
