package indexer

import (
	"bufio"
	"fmt"
	"math"

	"github.com/vecside/vecside/indexer/calibrate"
	"github.com/vecside/vecside/indexer/kind"
	"github.com/vecside/vecside/indexer/store"
	"github.com/vecside/vecside/internal/pgvalue"

	// The built-in kinds, registered by their init: a new kind is one
	// more line here.
	_ "github.com/vecside/vecside/flat"
	_ "github.com/vecside/vecside/hnsw"
	_ "github.com/vecside/vecside/ivf"
)

// Kinds lists the index kinds this build knows, sorted.
func Kinds() []string { return kind.Names() }

// kindOf is spec's kind: registered, if the spec came from ParseSpec.
func kindOf(spec Spec) (kind.Kind, error) {
	k, ok := kind.Lookup(spec.Kind)
	if !ok {
		return kind.Kind{}, fmt.Errorf("unknown index kind %q", spec.Kind)
	}
	return k, nil
}

// codecSeed seeds the random rotation of every quantized index: fixed,
// so that a checkpoint's codes stay valid across restarts.
const codecSeed = 0x7665637369646531

// codedConfig is what every kind is made with: the spec's metric, the
// dimension, the width of the key type's canonical form, the store
// (store= and bits=, else the kind's default).
func codedConfig(spec Spec, k kind.Kind, kt pgvalue.KeyType, dims int) (store.CodedConfig, error) {
	s, err := k.StoreOf(spec.Options)
	if err != nil {
		return store.CodedConfig{}, err
	}
	width := 0
	switch kt {
	case pgvalue.KeyInt2, pgvalue.KeyInt4, pgvalue.KeyInt8:
		width = 8
	case pgvalue.KeyUUID:
		width = 16
	}
	return store.CodedConfig{Metric: spec.Metric, Dims: dims, Store: s, Seed: codecSeed, KeyWidth: width}, nil
}

// newIndex builds an empty index of spec's kind (see kind.Kind.New).
func newIndex(spec Spec, kt pgvalue.KeyType, dims int, sample [][]float32, tableRows int) (Index, error) {
	k, err := kindOf(spec)
	if err != nil {
		return nil, err
	}
	cfg, err := codedConfig(spec, k, kt, dims)
	if err != nil {
		return nil, err
	}
	x, err := k.New(spec.Options, cfg, sample, tableRows)
	if err != nil {
		return nil, err
	}
	// The index is empty: its calibration sees every row from the first.
	return calibrating(spec, k, x, func() *calibrate.Set { return calibrate.New(spec.Metric, dims, sample, codecSeed) }), nil
}

// loadIndex reads a checkpoint body of spec's kind, in checkpoint format
// format: from format 4, the calibration comes first (see calibrated).
func loadIndex(spec Spec, kt pgvalue.KeyType, dims int, r *bufio.Reader, format uint16) (Index, error) {
	k, err := kindOf(spec)
	if err != nil {
		return nil, err
	}
	cfg, err := codedConfig(spec, k, kt, dims)
	if err != nil {
		return nil, err
	}
	var set *calibrate.Set
	if format >= 4 {
		// r is the checkpoint's reader, which a BodyReader of the same
		// buffer size reads through without buffering ahead of the kind.
		if set, err = calibrate.Load(store.NewBodyReader(r), spec.Metric, dims); err != nil {
			return nil, fmt.Errorf("recall calibration: %w", err)
		}
	}
	x, err := k.Load(spec.Options, cfg, r)
	if err != nil {
		return nil, err
	}
	return calibrating(spec, k, x, func() *calibrate.Set {
		if set == nil {
			// An older checkpoint has none, and one cannot start from rows
			// it has not seen: the next rebuild calibrates the index.
			return calibrate.Unknown(spec.Metric, dims)
		}
		return set
	}), nil
}

// SampleSize is how many rows of a table of about tableRows rows of dims
// dimensions the entry's kind trains on before its copy: read them, then
// BeginSync.
func (e *Syncer) SampleSize(tableRows, dims int) int {
	k, err := kindOf(e.c.spec)
	if err != nil || k.Sample == nil {
		return 0
	}
	cfg, err := codedConfig(e.c.spec, k, e.c.serving.Load().keyType, max(dims, 1))
	if err != nil {
		return 0
	}
	return k.Sample(e.c.spec.Options, cfg, tableRows, max(dims, 1))
}

// DefaultOversample is the candidate cap, in multiples of k, of a spec's
// searches that do not set one: 1 where distances are exact (the float
// stores), else what the second-pass codes need for recall@10 after the
// heap re-rank to reach 0.95 on the clustered, text-like and Fashion-MNIST
// sets (see ivf's BenchmarkProbing): ext8's estimates order candidates
// almost exactly, ext4's coarser ones need three times k, ext6's twice.
func DefaultOversample(spec Spec) float64 {
	k, err := kindOf(spec)
	if err != nil {
		return 1
	}
	s, _ := k.StoreOf(spec.Options)
	switch s {
	case store.Ext4:
		return 3
	case store.Ext6, store.Ext8:
		return 2
	}
	return 1
}

// wanted splits n = ceil(k × oversample), what an Entry is asked for,
// back into k and the cap: with oversample ≥ 1, floor(n/oversample) = k
// exactly.
func wanted(n int, opts SearchOptions) (k int) {
	o := max(opts.Oversample, 1)
	return max(1, int(math.Floor(float64(n)/o+1e-9)))
}
