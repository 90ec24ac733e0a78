package kind

import (
	"context"
	"errors"
	"fmt"
	"io"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"

	"github.com/vecside/vecside/indexer/store"
)

// ErrInvalidArgument is what a bad build option or search setting wraps
// (the indexer's sentinel of the same name, SQLSTATE 22023).
var ErrInvalidArgument = errors.New("invalid argument")

// Kind describes one index kind to the indexer.
type Kind struct {
	// Name is what kind= takes.
	Name string
	// Options are the build options the kind takes besides store= and
	// bits=, which every kind takes; any other key is refused.
	Options []string
	// Store is what the kind keeps per row unless store= or bits= says
	// otherwise.
	Store store.Kind
	// Check validates the options (already known to use only the kind's
	// keys), returning errors that wrap ErrInvalidArgument; nil accepts
	// any value.
	Check func(o map[string]string) error
	// Sample is how many rows of a table of n rows of dims dimensions an
	// index made with cfg trains on before its copy; nil: none.
	Sample func(o map[string]string, cfg store.CodedConfig, n, dims int) int
	// New makes an empty index, trained on sample (rows of a table of
	// about tableRows rows; empty when the table is) where the kind
	// trains. The options were validated by Check.
	New func(o map[string]string, cfg store.CodedConfig, sample [][]float32, tableRows int) (Index, error)
	// Load reads what an index's Snapshot wrote.
	Load func(o map[string]string, cfg store.CodedConfig, r io.Reader) (Index, error)
	// Settings are the per-query settings the kind reads from
	// Query.Settings. A name may be shared by kinds that give it the same
	// meaning and bound.
	Settings []Setting
	// Sweep is what a benchmark varies to trade recall for speed.
	Sweep Sweep
	// Tuning is the setting the indexer tunes to meet a recall target
	// (see indexer/calibrate); the zero Tuning: none, and a target
	// changes nothing.
	Tuning Tuning
	// Figures are the numbers its indexes report about themselves beside
	// rows and bytes (see Figure). A name may be shared by kinds that
	// give it the same help and type.
	Figures []*Figure
}

// Setting is a per-query integer setting of a kind, from SET
// vecside.<name> or knn's options: 0 (the default) leaves the index's
// own choice, else 1 to Max.
type Setting struct {
	Name string
	Max  int
}

// Sweep names the setting a benchmark sweeps (empty: none), with a low
// and a high value of it for a short comparison.
type Sweep struct {
	Setting   string
	Low, High int
}

// Tuning names one of the kind's Settings that buys recall with time as
// it grows, and the least value worth trying.
type Tuning struct {
	Setting string
	From    int
}

// Settings holds per-query settings by name; a missing one is 0. A
// Settings may be shared between copies of a SearchOptions: change it
// only through With.
type Settings map[string]int

// With returns a copy of s with name set to v.
func (s Settings) With(name string, v int) Settings {
	c := make(Settings, len(s)+1)
	for k, x := range s {
		c[k] = x
	}
	c[name] = v
	return c
}

// Query is what a search asks of an index.
type Query struct {
	// K is how many nearest rows the caller wants; N ≥ K caps the
	// candidates returned (K × the oversampling factor).
	K, N int
	// Allow, if not nil, restricts the search to these keys; empty
	// allows nothing.
	Allow    []string
	Settings Settings
}

// Index is what every index kind provides. Each kind owns its
// concurrency: Search, Snapshot, Len, Stats and Each run beside the
// writers without waiting for them, and the writers (Insert, Delete,
// Rename, Clear) serialise among themselves inside the kind. A search
// sees every change that returned before it started, and returns no key
// deleted before it started.
type Index interface {
	Len() int
	ZeroVectors() int
	Has(key string) bool
	// Prepare does the work of storing vec that needs no lock (finding its
	// list, encoding it), for Insert; rows prepared by one index go into
	// that index only.
	Prepare(vec []float32) Row
	// Insert stores a prepared row under key, replacing any row of key.
	Insert(key string, row Row)
	Delete(key string) bool
	Rename(from, to string) bool
	// Vector returns a copy of key's float32 vector; kinds that keep only
	// codes have none and report false.
	Vector(key string) ([]float32, bool)
	// Each calls fn for every key held.
	Each(fn func(key string))
	Clear()
	// Search returns up to q.N candidates nearest to vec: for the
	// quantized kinds, the smallest set that holds the q.K nearest by
	// their error bounds. It gives up with ctx's error once ctx ends,
	// within about a millisecond of work.
	Search(ctx context.Context, vec []float32, q Query) ([]Hit, error)
	// Snapshot captures the index as it is now, pausing writers only for
	// as long as copying its set of live rows takes, and returns the
	// function that writes it (for Kind.Load); release must be called
	// once done.
	Snapshot() (write func(io.Writer) error, release func())
	// Stats reports size and shape, with a reading of each of the kind's
	// figures, for vecside_status(), metrics and the bench.
	Stats() Stats
	// NeedsRebuild reports whether the structure has drifted from the
	// data (lists trained for far fewer rows, a mean taken over too few),
	// so that the index should be built again from a copy of the table.
	// It is asked only once the index holds its table: after the copy
	// that fills it, or its load.
	NeedsRebuild() bool
	// Keys is the current rows' keys, under which the indexer records
	// each row's xid.
	Keys() *store.Keys
}

// Row is a row prepared by an Index for its Insert.
type Row any

// Hit is one candidate: a key and its distance under the index's metric.
type Hit = store.Hit

// Admitter is implemented by kinds whose Insert may do a backlog's work
// (hnsw links waiting rows when too many wait): Admit waits, before the
// apply lock is taken, until the Insert of a rebuild's prepared row will
// not have that work to do, so that the copy's rows never hold the
// serving index's stream back, and returns the row marked as the copy's.
type Admitter interface{ Admit(Row) Row }

// StreamFollower is implemented by kinds whose inserts may trade some
// quality for speed for the stream's rows, where lag counts (hnsw); they
// are told when the stream's lag starts to count on them.
type StreamFollower interface{ FollowStream() }

// Excluder is implemented by kinds whose structure a search for a row's
// own vector would find its way by (a graph walks to the row and reads
// its neighbours off its links): SearchWithout searches as if the row of
// key were not in the index, for the recall calibration's held-out
// queries. For the other kinds, leaving the row out of the answer is the
// same.
type Excluder interface {
	SearchWithout(ctx context.Context, vec []float32, q Query, key string) ([]Hit, error)
}

// Closer is implemented by kinds with background work of their own (hnsw's
// linking and repair), to be told the index was dropped.
type Closer interface{ Close() }

var registry struct {
	sync.RWMutex
	kinds map[string]Kind
}

// Register adds k to the kinds the indexer knows. It panics, as a
// broken build would, on a kind without a name, New or Load, a name
// registered twice, a tuning of a setting it does not declare, a setting
// that another kind bounds differently, or
// a figure named against Figure's rules, declared twice, or declared by
// another kind with another help or type.
func Register(k Kind) {
	if k.Name == "" || k.New == nil || k.Load == nil {
		panic(fmt.Sprintf("kind: %q registered without a name, New or Load", k.Name))
	}
	registry.Lock()
	defer registry.Unlock()
	if _, dup := registry.kinds[k.Name]; dup {
		panic(fmt.Sprintf("kind: %q registered twice", k.Name))
	}
	if t := k.Tuning; t.Setting != "" && !slices.ContainsFunc(k.Settings, func(s Setting) bool { return s.Name == t.Setting }) {
		panic(fmt.Sprintf("kind: %s tunes %s, which is none of its settings", k.Name, t.Setting))
	}
	for _, s := range k.Settings {
		if other, ok := setting(s.Name); ok && other != s {
			panic(fmt.Sprintf("kind: %s's setting %s bounded at %d, another kind's at %d", k.Name, s.Name, s.Max, other.Max))
		}
	}
	for i, f := range k.Figures {
		if err := checkFigure(f); err != nil {
			panic(fmt.Sprintf("kind: %s's figure %q: %v", k.Name, f.Name, err))
		}
		if slices.ContainsFunc(k.Figures[:i], func(g *Figure) bool { return g.Name == f.Name }) {
			panic(fmt.Sprintf("kind: %s declares figure %s twice", k.Name, f.Name))
		}
		if other, ok := figure(f.Name); ok && *other != *f {
			panic(fmt.Sprintf("kind: %s's figure %s differs from another kind's in help or type", k.Name, f.Name))
		}
	}
	if registry.kinds == nil {
		registry.kinds = map[string]Kind{}
	}
	registry.kinds[k.Name] = k
}

// Lookup returns the kind registered under name.
func Lookup(name string) (Kind, bool) {
	registry.RLock()
	defer registry.RUnlock()
	k, ok := registry.kinds[name]
	return k, ok
}

// Names lists the registered kinds, sorted.
func Names() []string {
	registry.RLock()
	defer registry.RUnlock()
	names := make([]string, 0, len(registry.kinds))
	for n := range registry.kinds {
		names = append(names, n)
	}
	slices.Sort(names)
	return names
}

// LookupSetting returns the per-query setting of that name, of whichever
// kind declares it.
func LookupSetting(name string) (Setting, bool) {
	registry.RLock()
	defer registry.RUnlock()
	return setting(name)
}

func setting(name string) (Setting, bool) {
	for _, k := range registry.kinds {
		for _, s := range k.Settings {
			if s.Name == name {
				return s, true
			}
		}
	}
	return Setting{}, false
}

// figureName is what Figure.Name may be.
var figureName = regexp.MustCompile(`^[a-z][a-z0-9_]*$`)

// checkFigure refuses a figure that breaks Figure's rules.
func checkFigure(f *Figure) error {
	switch {
	case !figureName.MatchString(f.Name):
		return errors.New("want lower-case letters, digits and underscores, from a letter")
	case f.Help == "":
		return errors.New("no help text")
	case f.Type > Memory:
		return fmt.Errorf("unknown type %d", f.Type)
	case (f.Type == Counter) != strings.HasSuffix(f.Name, "_total"):
		return errors.New("a counter's name, and only a counter's, ends in _total")
	}
	return nil
}

// figure is the figure called name that a registered kind declares; the
// caller holds the registry's lock.
func figure(name string) (*Figure, bool) {
	for _, k := range registry.kinds {
		for _, f := range k.Figures {
			if f.Name == name {
				return f, true
			}
		}
	}
	return nil, false
}

// Figures lists every kind's figures, one per name, sorted by name.
func Figures() []*Figure {
	registry.RLock()
	defer registry.RUnlock()
	var all []*Figure
	for _, k := range registry.kinds {
		for _, f := range k.Figures {
			if !slices.ContainsFunc(all, func(g *Figure) bool { return g.Name == f.Name }) {
				all = append(all, f)
			}
		}
	}
	slices.SortFunc(all, func(a, b *Figure) int { return strings.Compare(a.Name, b.Name) })
	return all
}

// SettingNames lists every kind's per-query settings, sorted.
func SettingNames() []string {
	registry.RLock()
	defer registry.RUnlock()
	var names []string
	for _, k := range registry.kinds {
		for _, s := range k.Settings {
			if !slices.Contains(names, s.Name) {
				names = append(names, s.Name)
			}
		}
	}
	slices.Sort(names)
	return names
}

// Validate refuses options k does not take and values it does not accept.
func (k Kind) Validate(o map[string]string) error {
	for key, v := range o {
		if !slices.Contains(common, key) && !slices.Contains(k.Options, key) {
			known := append(slices.Clone(common), k.Options...)
			return Invalid("unknown option %s=%s for kind=%s (known: %s)", key, v, k.Name, strings.Join(known, ", "))
		}
	}
	if _, err := k.StoreOf(o); err != nil {
		return err
	}
	if _, err := TargetRecall(o); err != nil {
		return err
	}
	if k.Check == nil {
		return nil
	}
	return k.Check(o)
}

// common are the build options every kind takes.
var common = []string{"store", "bits", "recall"}

// DefaultRecall is the recall@10 an index's searches aim for unless
// recall= says otherwise.
const DefaultRecall = 0.95

// TargetRecall is the recall@10 an index made with options o aims for:
// recall=, else DefaultRecall.
func TargetRecall(o map[string]string) (float64, error) {
	v, ok := o["recall"]
	if !ok {
		return DefaultRecall, nil
	}
	return ParseRecall("recall", v)
}

// ParseRecall reads a recall target, from 0.5 to 0.999.
func ParseRecall(key, v string) (float64, error) {
	r, err := strconv.ParseFloat(v, 64)
	if err != nil || !(r >= 0.5 && r <= 0.999) {
		return 0, Invalid("%s=%s: want a recall@10 target from 0.5 to 0.999", key, v)
	}
	return r, nil
}

// StoreOf is what an index of k made with options o keeps per row:
// store= (and bits=, which picks the extended code width), else k.Store.
func (k Kind) StoreOf(o map[string]string) (store.Kind, error) {
	s := k.Store
	if v, ok := o["store"]; ok {
		var err error
		if s, err = store.ParseKind(v); err != nil {
			return 0, Invalid("%v", err)
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
			return 0, Invalid("bits=%s: want 4, 6 or 8 (bits per dimension of the extended code)", v)
		}
		if _, given := o["store"]; given && s != b {
			return 0, Invalid("bits=%s contradicts store=%s", v, s)
		}
		s = b
	}
	return s, nil
}

// Invalid is an error wrapping ErrInvalidArgument.
func Invalid(format string, args ...any) error {
	return fmt.Errorf("%w: %s", ErrInvalidArgument, fmt.Sprintf(format, args...))
}

// Int reads an optional integer option in [least, most]; 0 if absent.
func Int(o map[string]string, key string, least, most int) (int, error) {
	v, ok := o[key]
	if !ok {
		return 0, nil
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < least || n > most {
		return 0, Invalid("%s=%s: want an integer from %d to %d", key, v, least, most)
	}
	return n, nil
}

// Restrict runs search with the set that allow makes of keys, released
// after, or with the zero set (no restriction) when keys is nil.
func Restrict[A any](keys []string, allow func([]string) (A, func()), search func(A) ([]Hit, error)) ([]Hit, error) {
	if keys == nil {
		var all A
		return search(all)
	}
	a, release := allow(keys)
	defer release()
	return search(a)
}

// Configured returns k with Check, New and Load filled for a kind whose
// package reads a configuration C from the options (config), and makes
// (newX) and loads (loadX) its index X from it, which wrap makes an
// Index.
func Configured[C, X any](k Kind, config func(o map[string]string, cfg store.CodedConfig) (C, error), newX func(c C, sample [][]float32, tableRows int) (X, error), loadX func(r io.Reader, c C) (X, error), wrap func(X) Index) Kind {
	k.Check = func(o map[string]string) error {
		_, err := config(o, store.CodedConfig{})
		return err
	}
	k.New = func(o map[string]string, cfg store.CodedConfig, sample [][]float32, tableRows int) (Index, error) {
		c, err := config(o, cfg)
		if err != nil {
			return nil, err
		}
		x, err := newX(c, sample, tableRows)
		if err != nil {
			return nil, err
		}
		return wrap(x), nil
	}
	k.Load = func(o map[string]string, cfg store.CodedConfig, r io.Reader) (Index, error) {
		c, err := config(o, cfg)
		if err != nil {
			return nil, err
		}
		x, err := loadX(r, c)
		if err != nil {
			return nil, err
		}
		return wrap(x), nil
	}
	return k
}
