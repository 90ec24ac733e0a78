package ivf

import (
	"context"
	"fmt"
	"io"
	"math"
	"sync"

	"github.com/vecside/vecside/indexer/kind"
	"github.com/vecside/vecside/indexer/store"
	"github.com/vecside/vecside/ivf/lists"
)

// Config configures an IVF index. Zero values take the defaults.
type Config struct {
	store.CodedConfig
	// Lists fixes the number of lists; 0 follows ListsFor of the table's
	// rows at each build.
	Lists int
	// Probes fixes how many lists a query scans by default; 0 probes
	// adaptively (see Probing).
	Probes int
	// Growth: ask for a rebuild once the rows held exceed Growth times the
	// rows the lists were trained for (default 1.5).
	Growth float64
	// ListCap: no list may hold more than ListCap times the mean list
	// size at training: bigger ones are split at training, and a list
	// that grows past it asks for a rebuild (default 3).
	ListCap float64
	// MinTrain is how many rows an index built without a sample (an
	// empty table) collects before it asks to be rebuilt with trained
	// lists (default 1000).
	MinTrain int
	// Margin fixes the stopping rule's margin of adaptive probing (see
	// Probing); 0 takes the margin learned at training, scaled by
	// MarginScale (0: DefaultMarginScale). MinProbes (0:
	// DefaultMinProbes) lists are always scanned.
	Margin      float64
	MarginScale float64
	MinProbes   int
}

func (c *Config) defaults() {
	if c.Growth == 0 {
		c.Growth = 1.5
	}
	if c.ListCap == 0 {
		c.ListCap = 3
	}
	if c.MinTrain == 0 {
		c.MinTrain = 1000
	}
	if c.MarginScale == 0 {
		c.MarginScale = DefaultMarginScale
	}
	if c.MinProbes == 0 {
		c.MinProbes = DefaultMinProbes
	}
}

// Index is an IVF index on RaBitQ codes; see the package doc. Its rows are
// an lists.Coded: writers serialise inside it, searches take no lock.
type Index struct {
	*lists.Coded
	cfg Config
	// trained is the table's rows the lists were trained for, 0 if they
	// were not (one list around the origin); listCap is the size over
	// which a list asks for a rebuild.
	trained, listCap int
	// learned are adaptive probing's margins, learned at training (see
	// learnMargin).
	learned margins
	// built is each list's live rows at the first NeedsRebuild.
	built   []int
	settled sync.Once
}

// New trains an empty index on sample, rows drawn from a table that holds
// about rows rows, on every core: k-means for ListsFor(rows) lists, with
// oversized lists split. An empty sample gives one list around the origin,
// which asks for a rebuild once MinTrain rows have come.
func New(cfg Config, sample [][]float32, rows int) (*Index, error) {
	cfg.defaults()
	rows = max(rows, len(sample))
	var centroids []float32
	var learned margins
	if len(sample) > 0 {
		k := cfg.Lists
		if k == 0 {
			k = ListsFor(rows)
		}
		centroids, learned = train(cfg.CodedConfig, sample, k, cfg.ListCap, rows, cfg.MinProbes, cfg.Seed^uint64(rows))
	} else {
		rows = 0
	}
	x, err := lists.NewCoded(cfg.CodedConfig, centroids)
	if err != nil {
		return nil, fmt.Errorf("ivf: %w", err)
	}
	x.SetParams(append([]float64{float64(rows)}, learned[:]...))
	return newIndex(x, cfg), nil
}

// newIndex wraps rows made or loaded with their parameters: the rows
// trained for, then the learned margins by depth (a checkpoint written
// before margins were learned by depth holds one, for every depth).
func newIndex(x *lists.Coded, cfg Config) *Index {
	params := x.Params()
	ix := &Index{Coded: x, cfg: cfg}
	if len(params) > 0 {
		ix.trained = int(params[0])
	}
	if learned := params[min(1, len(params)):]; len(learned) > 0 {
		for i := range ix.learned {
			ix.learned[i] = learned[min(i, len(learned)-1)]
		}
	}
	ix.listCap = int(math.Ceil(cfg.ListCap * float64(max(ix.trained, cfg.MinTrain)) / float64(x.Lists())))
	return ix
}

// Load reads a body written by an Index's Snapshot.
func Load(in io.Reader, cfg Config) (*Index, error) {
	cfg.defaults()
	x, err := lists.LoadCoded(in, cfg.CodedConfig)
	if err != nil {
		return nil, fmt.Errorf("ivf: %w", err)
	}
	return newIndex(x, cfg), nil
}

// NeedsRebuild reports whether the rows have drifted from what the lists
// were trained for, so that they should be trained again and every row
// encoded afresh from the table: an untrained index has MinTrain rows, the
// rows grew past Growth times the training's, or a list outgrew its cap.
//
// A list is measured against what it held at the first call, which its
// owner makes once the index holds its table (the copy is in, or it was
// loaded): lists trained on a sample may come out of the copy above the
// cap, and data that cannot be split (identical rows) stays so; only a
// list that has since doubled asks again, or a rebuild would follow every
// rebuild.
func (x *Index) NeedsRebuild() bool {
	n := x.Len()
	if x.trained == 0 {
		return n >= x.cfg.MinTrain
	}
	if float64(n) > x.cfg.Growth*float64(max(x.trained, x.cfg.MinTrain)) {
		return true
	}
	x.settled.Do(func() { x.built = x.Lives() })
	for c, live := range x.Lives() {
		if live > max(x.listCap, 2*x.built[c]) {
			return true
		}
	}
	return false
}

// Search returns the smallest set of candidates that, with the codec's
// confidence, holds the k nearest to q among the rows of the lists it
// probes (probes > 0 fixes their number; 0 takes the index's default), at
// most limit of them, nearest estimate first. A non-nil allow restricts
// the search to those rows (see lists.Coded.Allow); it widens the probes
// by the inverse of its selectivity, so that about as many allowed rows
// are seen as an unfiltered search would see.
func (x *Index) Search(ctx context.Context, q []float32, k, limit, fixed int, allow *store.Allow) ([]store.Hit, error) {
	if fixed <= 0 {
		fixed = x.cfg.Probes
	}
	widen := 1.0
	if allow != nil && allow.Len() > 0 {
		widen = float64(x.Len()) / float64(allow.Len())
	}
	p := x.probing(k, fixed, widen)
	defer probes.Put(p)
	return x.Coded.Search(ctx, q, k, limit, lists.Probe{Order: p.lists, More: p.more}, allow)
}

// Stats reports the index's size and, as its figures, the sizes of its
// lists.
func (x *Index) Stats() kind.Stats {
	st := x.Coded.Stats()
	st.Figures = listReadings(x.Lives())
	return st
}
