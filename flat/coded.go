package flat

import (
	"context"
	"fmt"
	"io"

	"github.com/vecside/vecside/indexer/store"
	"github.com/vecside/vecside/ivf/lists"
)

// Coded is the flat index on RaBitQ codes: every row encoded against the
// mean of a sample of the table, in one list that every search scans
// whole (see lists.Coded).
type Coded struct {
	*lists.Coded
	// builtFrom is how many sample rows the mean was taken over.
	builtFrom int
}

// MinMeanRows is the fewest sample rows a mean is worth taking over: an
// index built from fewer (an empty or tiny table) asks to be rebuilt from
// the table once it holds this many rows.
const MinMeanRows = 1024

// NewCoded returns an empty coded index around the mean of sample (the
// origin if it is empty).
func NewCoded(cfg store.CodedConfig, sample [][]float32) (*Coded, error) {
	if cfg.Store == store.Float {
		return nil, fmt.Errorf("flat: coded index with store=%s (float is the float index)", cfg.Store)
	}
	x, err := lists.NewCoded(cfg, store.Mean(cfg.Metric, cfg.Dims, sample))
	if err != nil {
		return nil, fmt.Errorf("flat: %w", err)
	}
	return &Coded{Coded: x, builtFrom: len(sample)}, nil
}

// LoadCoded reads a body written by a Coded's Snapshot.
func LoadCoded(in io.Reader, cfg store.CodedConfig) (*Coded, error) {
	x, err := lists.LoadCoded(in, cfg)
	if err != nil {
		return nil, fmt.Errorf("flat: %w", err)
	}
	return &Coded{Coded: x, builtFrom: x.Len()}, nil
}

// NeedsRebuild reports whether the index was built from too few rows for a
// good mean and now holds enough.
func (x *Coded) NeedsRebuild() bool {
	return x.builtFrom < MinMeanRows && x.Len() >= MinMeanRows
}

// everyList scans the one list.
var everyList = lists.Probe{Order: func(_ []float32, dst []int) []int { return append(dst, 0) }}

// Search returns the smallest set of candidates that, with the codec's
// confidence, holds the k nearest to q (at most limit of them), nearest
// estimate first, with estimated distances. A non-nil allow restricts the
// search to those rows.
func (x *Coded) Search(ctx context.Context, q []float32, k, limit int, allow *store.Allow) ([]Hit, error) {
	return x.Coded.Search(ctx, q, k, limit, everyList, allow)
}
