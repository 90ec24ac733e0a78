package loadgen

import (
	"errors"
	"math"
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

func TestPaced(t *testing.T) {
	const rate = 400.0
	var calls atomic.Int64
	w := Paced(4, rate, func(worker, i int) error {
		calls.Add(1)
		return nil
	})
	time.Sleep(250 * time.Millisecond)
	r := w.Stop()
	if r.Err != nil || len(r.Latencies) != int(calls.Load()) {
		t.Fatalf("got %d latencies after %d calls: %v", len(r.Latencies), calls.Load(), r.Err)
	}
	// Paced, not as fast as possible: about 100 calls in 250 ms.
	if n := calls.Load(); n < 50 || n > 110 {
		t.Fatalf("%d calls in 250 ms at %g/s", n, rate)
	}
	// A call that stalls delays the calls appointed behind it, and each
	// counts the delay from its own appointed time.
	stalled := Paced(1, 1000, func(worker, i int) error {
		if i == 0 {
			time.Sleep(30 * time.Millisecond)
		}
		return nil
	})
	time.Sleep(60 * time.Millisecond)
	r = stalled.Stop()
	late := 0
	for _, l := range r.Latencies {
		if l >= 10*time.Millisecond {
			late++
		}
	}
	if late < 10 {
		t.Fatalf("%d of %d calls behind a 30 ms stall at 1,000/s counted ≥ 10 ms, want ≥ 10", late, len(r.Latencies))
	}
}

// TestWindow: each window reports the calls that ended in it, once, and
// the pacing goes on across windows.
func TestWindow(t *testing.T) {
	var calls atomic.Int64
	w := Paced(2, 400, func(worker, i int) error {
		calls.Add(1)
		return nil
	})
	time.Sleep(100 * time.Millisecond)
	first := w.Window()
	time.Sleep(100 * time.Millisecond)
	second := w.Window()
	time.Sleep(50 * time.Millisecond)
	last := w.Stop()
	total := len(first.Latencies) + len(second.Latencies) + len(last.Latencies)
	if total != int(calls.Load()) {
		t.Fatalf("windows of %d, %d and %d calls, %d calls made", len(first.Latencies), len(second.Latencies), len(last.Latencies), calls.Load())
	}
	// About 40 calls per 100 ms at 400/s; the second window must not
	// count the first's again, nor restart the pacing.
	for _, r := range []Result{first, second} {
		if n := len(r.Latencies); n < 10 || n > 60 || r.PerSecond < 100 || r.PerSecond > 600 {
			t.Fatalf("a 100 ms window at 400/s: %d calls, %.0f/s", n, r.PerSecond)
		}
	}
}

func TestParseStat(t *testing.T) {
	stat := []byte("cpu  100 5 20 800 10 3 2 60 0 0\ncpu0 50 2 10 400 5 1 1 30 0 0\nintr 1 2 3\n")
	c, err := parseStat(stat)
	if err != nil {
		t.Fatal(err)
	}
	if c.busy != 130 || c.steal != 60 || c.all != 1000 {
		t.Fatalf("busy %d steal %d all %d, want 130, 60, 1000", c.busy, c.steal, c.all)
	}
	later, _ := parseStat([]byte("cpu  200 5 40 1580 10 3 2 160 0 0\n"))
	later.at = c.at.Add(time.Second)
	later.process = time.Second / 2
	use := later.Since(c)
	if math.Abs(use.Busy-0.12) > 1e-9 || math.Abs(use.Steal-0.1) > 1e-9 || math.Abs(use.Cores-0.5) > 1e-9 {
		t.Fatalf("use %+v, want busy 0.12, steal 0.1, cores 0.5", use)
	}
	for _, bad := range []string{"intr 1 2\n", "cpu 1 2 3\n", "cpu 1 2 3 x 5 6 7 8\n"} {
		if _, err := parseStat([]byte(bad)); err == nil {
			t.Errorf("%q: no error", bad)
		}
	}
}
