// Package resident measures this process's resident memory for tests
// and benchmarks that bound what a workload costs it: now (MiB), and the
// highest it reaches while the workload runs (Peak).
package resident

import (
	"fmt"
	"os"
	"testing"
	"time"
)

// MiB is the process's resident memory, from /proc/self/statm; a test
// on a system without it is skipped.
func MiB(tb testing.TB) float64 {
	tb.Helper()
	v, err := read()
	if err != nil {
		tb.Skip(err)
	}
	return v
}

func read() (float64, error) {
	statm, err := os.ReadFile("/proc/self/statm")
	if err != nil {
		return 0, fmt.Errorf("no /proc/self/statm: %w", err)
	}
	var size, pages int64
	if _, err := fmt.Sscan(string(statm), &size, &pages); err != nil {
		return 0, fmt.Errorf("/proc/self/statm: %w", err)
	}
	return float64(pages*int64(os.Getpagesize())) / (1 << 20), nil
}

// Peak samples the resident memory every interval from now until stop,
// which returns the highest seen, its own reading included.
func Peak(tb testing.TB, every time.Duration) (stop func() float64) {
	tb.Helper()
	high := MiB(tb)
	done, peak := make(chan struct{}), make(chan float64)
	go func() {
		tick := time.NewTicker(every)
		defer tick.Stop()
		for {
			v, err := read()
			if err == nil {
				high = max(high, v)
			}
			select {
			case <-tick.C:
			case <-done:
				peak <- high
				return
			}
		}
	}()
	return func() float64 { close(done); return <-peak }
}
