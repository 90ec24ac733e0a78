package indexer

import (
	"context"
	"io"
	"log"
	"math"
	"sync/atomic"
	"time"

	"github.com/vecside/vecside/indexer/calibrate"
	"github.com/vecside/vecside/indexer/kind"
	"github.com/vecside/vecside/indexer/store"
	"github.com/vecside/vecside/kernels"
)

// calibrated is an index with its recall calibration (package
// calibrate): every row the index takes or loses goes to the
// calibration's queries too, and searches that leave the kind's tuning
// setting unset get the value the last calibration measured for the
// recall they aim at, for queries as far off the rows as the index's
// latest ones.
type calibrated struct {
	Index
	tune *tuner
}

// tuner measures a calibrated index and chooses its searches' setting.
type tuner struct {
	x      Index // the kind's index, searched without the wrapper
	set    *calibrate.Set
	name   string
	metric kernels.Metric
	knob   calibrate.Knob
	target float64
	// oversample is the spec's default: the candidate cap calibrated for.
	oversample float64
	offsets    calibrate.Offsets
	// tuned is what searches at the index's own target get, read again
	// from the curve as it or the searches' offsets change.
	tuned atomic.Pointer[tuning]

	// live: the index serves (or is about to), and recalibrates itself
	// in the background as its rows change.
	live    atomic.Bool
	running atomic.Bool
	ctx     context.Context
	stop    context.CancelFunc
}

// tuning is a value of the tuning setting read off a curve.
type tuning struct {
	curve  *calibrate.Curve
	offset float64
	at     calibrate.Point
}

// calibratedRow is a row prepared by a calibrated index.
type calibratedRow struct {
	row Row
	vec []float32
	cal calibrate.Prepared
}

// knobOf is what an index of spec's kind k tunes: the kind's tuning
// setting, unless the spec fixes it; Setting "" for none.
func knobOf(spec Spec, k kind.Kind) calibrate.Knob {
	t := k.Tuning
	if _, fixed := spec.Options[t.Setting]; t.Setting == "" || fixed {
		return calibrate.Knob{}
	}
	s, _ := kind.LookupSetting(t.Setting)
	return calibrate.Knob{Setting: t.Setting, From: t.From, Max: s.Max}
}

// calibrating wraps x, an index of spec's kind k, with set (nil: one
// made for an empty index from sample), if it has a setting to tune.
func calibrating(spec Spec, k kind.Kind, x Index, set func() *calibrate.Set) Index {
	knob := knobOf(spec, k)
	if knob.Setting == "" {
		return x
	}
	target, _ := kind.TargetRecall(spec.Options) // validated with the spec
	t := &tuner{x: x, set: set(), name: spec.Name, metric: spec.Metric, knob: knob, target: target, oversample: DefaultOversample(spec)}
	t.ctx, t.stop = context.WithCancel(context.Background())
	t.retune()
	return &calibrated{Index: x, tune: t}
}

func (c *calibrated) Prepare(vec []float32) Row {
	return calibratedRow{c.Index.Prepare(vec), vec, c.tune.set.Prepare(vec)}
}

func (c *calibrated) Insert(key string, row Row) {
	r := row.(calibratedRow)
	c.Index.Insert(key, r.row)
	c.tune.set.Add(key, r.vec, r.cal)
	c.tune.drifted()
}

func (c *calibrated) Delete(key string) bool {
	found := c.Index.Delete(key)
	c.tune.set.Remove(key)
	c.tune.drifted()
	return found
}

func (c *calibrated) Rename(from, to string) bool {
	found := c.Index.Rename(from, to)
	c.tune.set.Rename(from, to)
	return found
}

func (c *calibrated) Clear() {
	c.Index.Clear()
	c.tune.set.Clear()
}

// snapshotCalibration captures x's calibration as it is now, and returns
// what writes it into a checkpoint ahead of the kind's body (format 4;
// an index without one writes that it has none).
func snapshotCalibration(x Index) func(io.Writer) error {
	write := calibrate.WriteNone
	if c, ok := x.(*calibrated); ok {
		write = c.tune.set.Snapshot()
	}
	return func(w io.Writer) error {
		b := store.NewBodyWriter(w)
		write(b)
		return b.Flush()
	}
}

// Admit admits the kind's row where the kind asks to (kind.Admitter).
func (c *calibrated) Admit(row Row) Row {
	if a, ok := c.Index.(kind.Admitter); ok {
		r := row.(calibratedRow)
		r.row = a.Admit(r.row)
		return r
	}
	return row
}

// FollowStream tells the kind, if it asks (kind.StreamFollower).
func (c *calibrated) FollowStream() {
	if f, ok := c.Index.(kind.StreamFollower); ok {
		f.FollowStream()
	}
}

// Close stops a calibration under way, and the kind's own background
// work (kind.Closer).
func (c *calibrated) Close() {
	c.tune.live.Store(false)
	c.tune.stop()
	if cl, ok := c.Index.(kind.Closer); ok {
		cl.Close()
	}
}

// settings returns s with the tuning setting filled for target (0: the
// index's own) for a search for vec, unless s sets it or nothing is
// calibrated.
func (c *tuner) settings(s kind.Settings, target float64, vec []float32) kind.Settings {
	t := c.tuned.Load()
	if t == nil || s[c.knob.Setting] != 0 {
		return s
	}
	p := t.at
	if target != 0 && target != c.target {
		p, _ = t.curve.For(target, t.offset)
	}
	return s.With(c.knob.Setting, p.PickFor(vec))
}

// observe records how far a search's nearest candidate lay, and retunes
// once the searches' offsets may have moved.
func (c *tuner) observe(hits []Hit) {
	t := c.tuned.Load()
	if t == nil || len(hits) == 0 || t.curve.Spacing == 0 {
		return
	}
	nearest := float64(hits[0].Distance)
	for _, h := range hits[1:] {
		nearest = min(nearest, float64(h.Distance))
	}
	if c.metric == kernels.Cosine {
		nearest = math.Sqrt(2 * max(nearest, 0)) // the chord of unit vectors
	}
	if c.offsets.Observe(nearest, t.curve.Spacing) {
		c.retune()
	}
}

// retune reads the value for the index's target off the current curve,
// at the latest searches' offset.
func (c *tuner) retune() {
	curve := c.set.Curve()
	if curve == nil || curve.Setting != c.knob.Setting {
		c.tuned.Store(nil)
		return
	}
	offset := c.offsets.Median()
	if c.metric == kernels.IP {
		offset = calibrate.NewItem // no spacing: the offsets are as made
	}
	p, ok := curve.For(c.target, offset)
	if !ok {
		c.tuned.Store(nil)
		return
	}
	c.tuned.Store(&tuning{curve: curve, offset: offset, at: p})
}

// serve marks x, if it is calibrated, as serving: from now on it
// recalibrates itself as its rows change (see tuner.drifted).
func serve(x Index) {
	if c, ok := x.(*calibrated); ok {
		c.tune.live.Store(true)
	}
}

// calibrate measures the index's curve now, and from then on keeps it
// current in the background.
func (c *tuner) calibrate() {
	c.measure()
	c.live.Store(true)
}

// measure runs one calibration; failures are logged, and the last curve
// stays.
func (c *tuner) measure() {
	began := time.Now()
	search := func(ctx context.Context, vec []float32, k, n, value int, without string) ([]string, error) {
		q := kind.Query{K: k, N: n, Settings: kind.Settings{c.knob.Setting: value}}
		var hits []Hit
		var err error
		if x, ok := c.x.(kind.Excluder); ok && without != "" {
			hits, err = x.SearchWithout(ctx, vec, q, without)
		} else {
			if without != "" {
				q.K, q.N = k+1, n+1 // the row is left out of the answer below
			}
			hits, err = c.x.Search(ctx, vec, q)
		}
		keys := make([]string, 0, len(hits))
		for _, h := range hits {
			if h.Key != without || without == "" {
				keys = append(keys, h.Key)
			}
		}
		return keys, err
	}
	curve, ok, err := c.set.Measure(c.ctx, search, c.knob, c.oversample, c.x.Len())
	switch {
	case err != nil:
		if c.ctx.Err() == nil {
			log.Printf("index %s: recall calibration failed: %v", c.name, err)
		}
	case ok:
		c.retune()
		t := c.tuned.Load()
		log.Printf("index %s: recall calibrated on %d searches over %d rows in %s: %s=%.1f for recall@10 %.3f at offset %.2f (estimated %.3f)",
			c.name, len(curve.Queries), curve.Rows, time.Since(began).Round(time.Millisecond), curve.Setting, t.at.Mean(), c.target, t.offset, t.at.Recall)
	}
}

// drifted recalibrates in the background once the rows changed since the
// last calibration reach a tenth of the index (at least recalibrateMin).
func (c *tuner) drifted() {
	if !c.live.Load() || c.running.Load() {
		return
	}
	if c.set.Changes() < max(recalibrateMin, int64(c.x.Len()/10)) || !c.running.CompareAndSwap(false, true) {
		return
	}
	go func() {
		defer c.running.Store(false)
		c.measure()
	}()
}

// recalibrateMin is the fewest changed rows that start a recalibration.
const recalibrateMin = 1000

// RecallStatus is what an index's calibration says, for Status.
type RecallStatus struct {
	Target float64 // the recall@10 the index's searches aim for
	// Setting and Value are what searches that set neither get, on
	// average (two neighbouring values mixed, see calibrate.Point);
	// Estimate is the recall@10 the calibration measured there, for
	// queries as far off the table's rows as Offset (see
	// calibrate.Measured.Offset: the latest searches',
	// calibrate.NewItem before any). Setting is "" for an index not
	// calibrated (yet).
	Setting  string
	Value    float64
	Estimate float64
	Offset   float64
	// Queries measured it, when the index held Rows rows.
	Queries    int
	Rows       int
	Calibrated time.Time
}

// recallOf reports x's calibration, if it has one.
func recallOf(x Index) RecallStatus {
	c, ok := x.(*calibrated)
	if !ok {
		return RecallStatus{}
	}
	st := RecallStatus{Target: c.tune.target}
	if t := c.tune.tuned.Load(); t != nil {
		st.Setting, st.Value, st.Estimate, st.Offset = t.curve.Setting, t.at.Mean(), t.at.Recall, t.offset
		st.Queries, st.Rows, st.Calibrated = len(t.curve.Queries), t.curve.Rows, t.curve.At
	}
	return st
}
