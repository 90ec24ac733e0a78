package indexer

import (
	"cmp"
	"context"
	"fmt"
	"math"
	"slices"
	"testing"
	"time"

	"github.com/vecside/vecside/indexer/calibrate"
	"github.com/vecside/vecside/indexer/dataset"
	"github.com/vecside/vecside/kernels"
)

// measuredRecall is the recall@10 of e's default searches for queries
// after an exact re-rank of the candidates, as a client does it.
func measuredRecall(t *testing.T, e *Entry, data, queries [][]float32, truth []dataset.Truth, opts SearchOptions) float64 {
	t.Helper()
	opts.Oversample = DefaultOversample(e.Spec())
	n, err := opts.Candidates(calibrate.K)
	if err != nil {
		t.Fatal(err)
	}
	hits := 0
	for i, q := range queries {
		cands, err := e.Search(context.Background(), q, n, opts)
		if err != nil {
			t.Fatal(err)
		}
		rows := make([]int, len(cands))
		for j, c := range cands {
			fmt.Sscan(c.Key, &rows[j])
		}
		slices.SortFunc(rows, func(a, b int) int {
			return cmp.Compare(kernels.L2.Distance(q, data[a]), kernels.L2.Distance(q, data[b]))
		})
		for _, r := range rows[:min(len(rows), calibrate.K)] {
			if kernels.L2.Distance(q, data[r]) <= truth[i].KthDistance() {
				hits++
			}
		}
	}
	return float64(hits) / float64(calibrate.K*len(queries))
}

// TestCalibrationMeetsTarget: after its copy, each tunable kind's index
// reports the recall its default searches reach, and reaches it on
// held-out queries; a per-query target asks for more; a checkpoint keeps
// the calibration; and enough changes recalibrate it.
func TestCalibrationMeetsTarget(t *testing.T) {
	data, queries := dataset.Clustered{Seed: 11, Rows: 4000, Queries: 200, Dims: 32, Clusters: 20, Spread: 0.3}.Generate()
	truth := dataset.GroundTruth(kernels.L2, data, queries, calibrate.K)
	for _, def := range []string{"e=t(v) key=id metric=l2 kind=hnsw m=8", "e=t(v) key=id metric=l2 kind=ivf lists=40"} {
		t.Run(def, func(t *testing.T) {
			e := textEntry(t, def)
			copyInto(t, e, data, 1)
			st := e.Status().Recall
			t.Logf("calibrated: %+v", st)
			if st.Setting == "" || st.Queries < calibrate.MinBases || st.Rows != len(data) || st.Target != 0.95 {
				t.Fatalf("status after the copy: %+v", st)
			}
			if st.Estimate < st.Target {
				t.Errorf("estimate %.3f below the target %.3f", st.Estimate, st.Target)
			}
			got := measuredRecall(t, e, data, queries, truth, DefaultSearchOptions())
			t.Logf("held-out recall@10 %.3f at %s=%.1f, estimated %.3f", got, st.Setting, st.Value, st.Estimate)
			if math.Abs(got-st.Estimate) > 0.03 {
				t.Errorf("held-out recall %.3f, estimated %.3f", got, st.Estimate)
			}

			high := DefaultSearchOptions()
			if err := high.Set("recall", "0.995"); err != nil {
				t.Fatal(err)
			}
			if hi := measuredRecall(t, e, data, queries, truth, high); hi < got || hi < 0.98 {
				t.Errorf("recall=0.995 measured %.3f, the default %.3f", hi, got)
			}
			// An explicit setting wins over the target.
			low := DefaultSearchOptions()
			if err := low.Set(st.Setting, "1"); err != nil {
				t.Fatal(err)
			}
			if lo := measuredRecall(t, e, data, queries, truth, low); lo >= got {
				t.Errorf("%s=1 measured %.3f, no less than the calibrated %.3f", st.Setting, lo, got)
			}

			dir := t.TempDir()
			if _, err := e.Durable().Checkpoint(dir, testSource); err != nil {
				t.Fatal(err)
			}
			loaded := textEntry(t, def)
			if _, err := loaded.Durable().LoadCheckpoint(dir, testSource, nil); err != nil {
				t.Fatal(err)
			}
			l := loaded.Status().Recall
			if l.Calibrated.Equal(st.Calibrated) {
				l.Calibrated = st.Calibrated // the same instant, in another location
			}
			if l != st {
				t.Fatalf("loaded calibration %+v, written %+v", l, st)
			}
			// Enough rows replaced: the index recalibrates itself.
			for i := range max(recalibrateMin, len(data)/10) {
				loaded.Stream().Upsert(fmt.Sprint(i), data[len(data)-1-i])
			}
			deadline := time.Now().Add(30 * time.Second)
			for loaded.Status().Recall.Calibrated.Equal(st.Calibrated) {
				if time.Now().After(deadline) {
					t.Fatal("no recalibration after a tenth of the rows changed")
				}
				time.Sleep(20 * time.Millisecond)
			}
			t.Logf("recalibrated: %+v", loaded.Status().Recall)
			dropped(loaded.c.index)
		})
	}
}

// TestCalibrationFollowsQueries: searches for near-duplicates of rows
// move the offset the recall is read at, and the estimate there matches
// what those searches get.
func TestCalibrationFollowsQueries(t *testing.T) {
	data, queries := dataset.Clustered{Seed: 12, Rows: 4000, Queries: 200, Dims: 32, Clusters: 20, Spread: 0.3, Perturb: 0.5}.Generate()
	truth := dataset.GroundTruth(kernels.L2, data, queries, calibrate.K)
	e := textEntry(t, "e=t(v) key=id metric=l2 kind=hnsw m=8")
	copyInto(t, e, data, 1)
	defer dropped(e.c.index)
	before := e.Status().Recall
	measuredRecall(t, e, data, queries, truth, DefaultSearchOptions()) // the searches the index learns from
	after := e.Status().Recall
	got := measuredRecall(t, e, data, queries, truth, DefaultSearchOptions())
	t.Logf("new items: %s=%.1f, estimated %.3f; near-duplicates: offset %.2f, %s=%.1f, estimated %.3f, measured %.3f",
		before.Setting, before.Value, before.Estimate, after.Offset, after.Setting, after.Value, after.Estimate, got)
	if after.Offset > 0.7 {
		t.Errorf("offset %.2f for queries a third of the rows' spacing off them", after.Offset)
	}
	if after.Value > before.Value {
		t.Errorf("near-duplicates get %s=%.1f, new items %.1f", after.Setting, after.Value, before.Value)
	}
	if math.Abs(got-after.Estimate) > 0.03 {
		t.Errorf("measured %.3f, estimated %.3f", got, after.Estimate)
	}
}
