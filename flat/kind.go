package flat

import (
	"context"
	"io"
	"slices"

	"github.com/vecside/vecside/indexer/kind"
	"github.com/vecside/vecside/indexer/store"
	"github.com/vecside/vecside/ivf/lists"
)

// kind=flat: store=float (default: the exact float32 Index) or
// store=ext4|ext6|ext8 (Coded: 1-bit fast scan plus extended codes).
func init() {
	kind.Register(kind.Kind{
		Name:  "flat",
		Store: store.Float,
		// The coded index takes the mean of this many rows; the float
		// index needs none.
		Sample: func(_ map[string]string, cfg store.CodedConfig, n, _ int) int {
			if cfg.Store == store.Float {
				return 0
			}
			return min(n, 2*MinMeanRows)
		},
		New: func(_ map[string]string, cfg store.CodedConfig, sample [][]float32, _ int) (kind.Index, error) {
			if cfg.Store == store.Float {
				return floatKind{New(cfg.Metric, cfg.Dims, cfg.KeyWidth)}, nil
			}
			x, err := NewCoded(cfg, sample)
			if err != nil {
				return nil, err
			}
			return codedKind{x}, nil
		},
		Load: func(_ map[string]string, cfg store.CodedConfig, r io.Reader) (kind.Index, error) {
			if cfg.Store == store.Float {
				x, err := Load(r, cfg.Metric, cfg.Dims, cfg.KeyWidth)
				if err != nil {
					return nil, err
				}
				return floatKind{x}, nil
			}
			x, err := LoadCoded(r, cfg)
			if err != nil {
				return nil, err
			}
			return codedKind{x}, nil
		},
	})
}

// floatKind is the float index as a kind.Index; it returns q.N rows.
type floatKind struct{ *Index }

func (f floatKind) Prepare(vec []float32) kind.Row  { return slices.Clone(vec) }
func (f floatKind) Insert(key string, row kind.Row) { f.Put(key, row.([]float32)) }
func (f floatKind) NeedsRebuild() bool              { return false }
func (f floatKind) Each(fn func(key string))        { f.Index.Each(func(k string, _ []float32) { fn(k) }) }

func (f floatKind) Search(ctx context.Context, vec []float32, q kind.Query) ([]Hit, error) {
	return kind.Restrict(q.Allow, f.Allow, func(allow *Allow) ([]Hit, error) {
		return f.Index.Search(ctx, vec, q.N, allow)
	})
}

// codedKind is the coded index as a kind.Index.
type codedKind struct{ *Coded }

func (c codedKind) Prepare(vec []float32) kind.Row  { return c.Coded.Prepare(vec) }
func (c codedKind) Insert(key string, row kind.Row) { c.Coded.Insert(key, row.(*lists.Prepared)) }

func (c codedKind) Search(ctx context.Context, vec []float32, q kind.Query) ([]Hit, error) {
	return kind.Restrict(q.Allow, c.Allow, func(allow *store.Allow) ([]Hit, error) {
		return c.Coded.Search(ctx, vec, q.K, q.N, allow)
	})
}
