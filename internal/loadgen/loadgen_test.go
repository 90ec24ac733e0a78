package loadgen

import (
	"errors"
	"sync/atomic"
	"testing"
	"time"
)

func TestMs(t *testing.T) {
	l := Latencies{4 * time.Millisecond, time.Millisecond, 3 * time.Millisecond, 2 * time.Millisecond}
	for _, c := range []struct{ q, want float64 }{{0, 1}, {0.5, 3}, {0.99, 4}} {
		if got := l.Ms(c.q); got != c.want {
			t.Errorf("Ms(%g) = %g, want %g", c.q, got, c.want)
		}
	}
	if got := Latencies(nil).Ms(0.5); got != 0 {
		t.Errorf("Ms of nothing = %g, want 0", got)
	}
}

func TestWorkers(t *testing.T) {
	var calls atomic.Int64
	w := Start(3, func(worker, i int) error {
		calls.Add(1)
		time.Sleep(time.Millisecond)
		return nil
	})
	time.Sleep(50 * time.Millisecond)
	r := w.Stop()
	if r.Err != nil || len(r.Latencies) != int(calls.Load()) || r.PerSecond <= 0 {
		t.Fatalf("got %d latencies, %g/s, %v after %d calls", len(r.Latencies), r.PerSecond, r.Err, calls.Load())
	}
	boom := errors.New("boom")
	failing := Start(2, func(worker, i int) error {
		if worker == 1 && i == 2 {
			return boom
		}
		time.Sleep(time.Millisecond)
		return nil
	})
	time.Sleep(20 * time.Millisecond)
	r = failing.Stop()
	if !errors.Is(r.Err, boom) {
		t.Fatalf("got %v, want the failed call's error", r.Err)
	}
}
