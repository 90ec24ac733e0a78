package indexer

import (
	"testing"
	"time"
)

// TestLagSeconds: the lag is read from when the checks first saw the WAL
// past the applied position; caught up is 0.
func TestLagSeconds(t *testing.T) {
	ix := New()
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	for i, wal := range []LSN{100, 100, 200, 300} {
		ix.SetSourceHealth(SourceHealth{WAL: wal, CheckedAt: t0.Add(time.Duration(i) * 10 * time.Second)})
	}
	now := t0.Add(time.Minute)
	for _, c := range []struct {
		applied LSN
		want    float64
	}{{50, 60}, {100, 40}, {250, 30}, {300, 0}, {400, 0}} {
		if got := ix.health.lagSeconds(c.applied, now); got != c.want {
			t.Errorf("applied %d: lag %gs, want %gs", c.applied, got, c.want)
		}
	}
	for i := range walSamples + 10 {
		ix.SetSourceHealth(SourceHealth{WAL: LSN(1000 + i), CheckedAt: now})
	}
	if n := len(ix.health.seen); n != walSamples {
		t.Errorf("%d samples kept, want %d", n, walSamples)
	}
}
